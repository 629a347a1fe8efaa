"""obstacles: the filters on synthetic point sets with known answers, and the whole stereo -> obstacles
chain on rendered PyBullet scenes against their ground truth.

Accuracy rule for rendered objects: a camera above the table sees the top face and the faces turned towards
it, and the support-plane removal drops everything within ``plane_margin`` of the table. The detected box
is therefore compared with the solid's footprint (x, y: full extent, since the whole top face is visible)
from z = plane_margin up to its top (``SceneObject.expected_center``), and with the axis-aligned box of the
ground-truth visible surface (depth buffer + segmentation mask, ``SceneObject.visible_center``). Both must
be within 3 cm of the detected centre.
"""
import math
import re

import cv2
import numpy as np
import pytest

from manip_perception.obstacles import (LEVEL_CAMERA_XYZW, ObstacleError, ObstacleParams, camera_pose_matrix,
                                        crop_box, dbscan_labels, describe_clusters, detect_obstacles,
                                        quaternion_xyzw_to_matrix, transform_points,
                                        voxel_downsample)
from manip_perception.stereo import DisparityMatcher, SgbmParams, back_project, disparity_to_depth

TOL = 0.03


def camera_points(rendered, matcher=None):
    """Stereo points (left optical frame) of a rendered pair, as the node computes them."""
    cam = rendered.camera
    g = [cv2.cvtColor(x, cv2.COLOR_RGB2GRAY) for x in (rendered.left, rendered.right)]
    disp = (matcher or DisparityMatcher()).compute(*g)
    return back_project(disparity_to_depth(disp, cam.fx, cam.baseline), cam.fx, cam.fy, cam.cx, cam.cy,
                        max_depth=3.0)


def params_for(camera, **kw):
    return ObstacleParams(camera_position=tuple(camera.position),
                          camera_orientation_xyzw=tuple(camera.orientation_xyzw), **kw)


def match(obstacles, objects, plane_margin):
    """For each true object the nearest detection (by expected centre) and the errors (m)."""
    out = []
    for o in objects:
        exp = o.expected_center(plane_margin)
        det = min(obstacles, key=lambda d: np.linalg.norm(d.center - exp))
        out.append((o, det, np.linalg.norm(det.center - exp), np.linalg.norm(det.center - o.visible_center(
            plane_margin))))
    return out


# ------------------------------------------------------------------------------------------ synthetic
def test_quaternion_and_camera_pose(camera):
    np.testing.assert_allclose(quaternion_xyzw_to_matrix([0, 0, 0, 1]), np.eye(3))
    Rz = quaternion_xyzw_to_matrix([0, 0, math.sin(math.pi / 4), math.cos(math.pi / 4)])
    np.testing.assert_allclose(Rz @ [1, 0, 0], [0, 1, 0], atol=1e-12)
    # stereo_camera.yaml: the optical axis looks along +y, 38 degrees down; x stays +x.
    R = quaternion_xyzw_to_matrix(camera.orientation_xyzw)
    down = math.radians(38)
    np.testing.assert_allclose(R[:, 2], [0, math.cos(down), -math.sin(down)], atol=1e-4)
    np.testing.assert_allclose(R[:, 0], [1, 0, 0], atol=1e-4)
    T = camera_pose_matrix(camera.position, camera.orientation_xyzw)
    np.testing.assert_allclose(transform_points([[0, 0, 0], [0, 0, 1]], T),
                               [camera.position, camera.position + R[:, 2]], atol=1e-6)
    with pytest.raises(ObstacleError, match='zero'):
        quaternion_xyzw_to_matrix([0, 0, 0, 0])
    with pytest.raises(ObstacleError, match='finite'):
        camera_pose_matrix([0, math.nan, 0], [0, 0, 0, 1])


def test_crop_and_voxels():
    pts = np.array([[0, 0, 0], [1, 1, 1], [1.0001, 0, 0], [-0.5, 0.5, 0.5]])
    assert crop_box(pts, [-0.5, 0, 0], [1, 1, 1]).tolist() == [True, True, False, True]
    with pytest.raises(ObstacleError, match='lower < upper'):
        crop_box(pts, [0, 0, 0], [1, 0, 1])
    pts = np.array([[0.001, 0.001, 0.001], [0.009, 0.009, 0.009], [0.015, 0.0, 0.0], [-0.005, 0.0, 0.0]])
    out, counts = voxel_downsample(pts, 0.01)
    order = np.argsort(out[:, 0])
    np.testing.assert_allclose(out[order], [[-0.005, 0, 0], [0.005, 0.005, 0.005], [0.015, 0, 0]], atol=1e-7)
    assert counts[order].tolist() == [1, 2, 1]
    out, counts = voxel_downsample(pts, 0.01, min_points=2)
    np.testing.assert_allclose(out, [[0.005, 0.005, 0.005]], atol=1e-7)
    assert voxel_downsample(np.zeros((0, 3)), 0.01)[0].shape == (0, 3)


def test_clusters_and_bounds():
    rng = np.random.default_rng(1)
    a = rng.uniform([0, 0, 0], [0.1, 0.2, 0.3], (400, 3))
    b = rng.uniform([0.5, 0.5, 0], [0.55, 0.55, 0.05], (300, 3))
    lone = np.array([[2.0, 2.0, 2.0]])
    pts = np.vstack([a, b, lone])
    labels = dbscan_labels(pts, eps=0.05, min_samples=4)
    assert len(set(labels[:400])) == 1 and len(set(labels[400:700])) == 1 and labels[700] == -1
    assert labels[0] != labels[400]
    obs = describe_clusters(pts, labels, min_points=10)
    assert len(obs) == 2
    first = obs[0]  # sorted by x
    np.testing.assert_allclose(first.center, (a.min(0) + a.max(0)) / 2)
    np.testing.assert_allclose(first.size, a.max(0) - a.min(0))
    assert first.num_points == 400
    assert first.radius == pytest.approx(np.max(np.linalg.norm(a - first.center, axis=1)))
    assert first.radius <= np.linalg.norm(first.size) / 2 + 1e-12
    assert len(describe_clusters(pts, labels, min_points=350)) == 1
    assert len(describe_clusters(pts, labels, min_points=1, min_extent=0.1)) == 1


def test_params_are_validated():
    with pytest.raises(ObstacleError, match='voxel_size'):
        ObstacleParams(voxel_size=0).validate()
    with pytest.raises(ObstacleError, match='lower < upper'):
        ObstacleParams(workspace_min=(0, 0, 0), workspace_max=(1, 1, 0)).validate()
    with pytest.raises(ObstacleError, match='quaternion'):
        ObstacleParams(camera_orientation_xyzw=(0, 0, 0)).validate()
    with pytest.raises(ObstacleError, match='plane_max_tilt_deg'):
        ObstacleParams(plane_max_tilt_deg=90).validate()
    with pytest.raises(ObstacleError, match='cluster_min_neighbors'):
        ObstacleParams(cluster_min_neighbors=0).validate()
    # The default parameter pose: a level camera at the origin looking along base +x (optical y = down).
    R = quaternion_xyzw_to_matrix(LEVEL_CAMERA_XYZW)
    np.testing.assert_allclose(R[:, 2], [1, 0, 0], atol=1e-12)
    np.testing.assert_allclose(R[:, 1], [0, 0, -1], atol=1e-12)


# ------------------------------------------------------------------------------------------ rendered scenes
def test_obstacles_in_rendered_scene(scene, record_property):
    params = params_for(scene.camera).validate()
    det = detect_obstacles(camera_points(scene), params)
    assert det.plane_detection.status == 'found' and abs(det.plane.height_at(0.45, 0.0)) < 0.01
    assert det.plane.tilt_deg < 0.5
    assert all(0.5 < d.confidence <= 1.0 for d in det.obstacles)
    assert len(det.obstacles) == len(scene.objects), [o.center for o in det.obstacles]  # no phantoms
    seen = set()
    for o, d, err_expected, err_visible in match(det.obstacles, scene.objects, params.plane_margin):
        record_property(f'{o.name}_error_cm', round(err_expected * 100, 2))
        assert id(d) not in seen
        seen.add(id(d))
        assert err_expected < TOL, (o.name, d.center, o.expected_center(params.plane_margin))
        assert err_visible < TOL, (o.name, d.center, o.visible_center(params.plane_margin))
        true_size = 2 * o.half_extents - [0, 0, params.plane_margin]
        assert np.all(np.abs(d.size - true_size) < 0.04), (o.name, d.size, true_size)
        assert d.radius <= np.linalg.norm(d.size) / 2 + 1e-9
        assert d.num_points >= params.min_cluster_points
    assert set(det.timings) == {'voxel', 'plane', 'self_filter', 'cluster'}  # speed: bench/perception.py


def test_no_phantoms_on_an_empty_table(empty_scene):
    det = detect_obstacles(camera_points(empty_scene), params_for(empty_scene.camera))
    assert det.plane_detection.status == 'found'
    assert det.obstacles == []


def _perturbed_pose(cam, dz, pitch_deg, roll_deg=0.0):
    """(4, 4) camera pose with the position off by dz (m, base z) and the orientation rotated by pitch
    (about the optical x axis) and roll (about the optical z axis)."""
    R = quaternion_xyzw_to_matrix(cam.orientation_xyzw) @ cv2.Rodrigues(
        np.array([math.radians(pitch_deg), 0, 0]))[0] @ cv2.Rodrigues(np.array([0, 0, math.radians(roll_deg)]))[0]
    T = np.eye(4)
    T[:3, :3] = R
    T[:3, 3] = cam.position + [0, 0, dz]
    return T


@pytest.mark.parametrize('dz, pitch_deg, roll_deg', [(0.10, 5.0, 0.0), (-0.10, -5.0, 0.0), (0.10, -5.0, 5.0),
                                                     (-0.10, 5.0, -5.0)])
def test_pose_errors_leave_the_obstacle_set_unchanged(scene, dz, pitch_deg, roll_deg):
    """The camera pose off by +-10 cm in height and +-5 degrees in pitch and roll: the table then lies
    10 cm off and tilted 5-7 degrees in the base frame. The support plane is found wherever it is, and the
    obstacles are the same: each detection, mapped back through the wrong pose into the camera frame and
    out through the true one, is within 2 cm of the detection with the true pose (same count, no phantoms)."""
    cam = scene.camera
    pts = camera_points(scene)
    params = ObstacleParams().validate()  # defaults: no scene prior at all
    T_true = camera_pose_matrix(cam.position, cam.orientation_xyzw)
    ref = detect_obstacles(pts, params, camera_pose=T_true)
    assert len(ref.obstacles) == len(scene.objects)
    T_wrong = _perturbed_pose(cam, dz, pitch_deg, roll_deg)
    det = detect_obstacles(pts, params, camera_pose=T_wrong)
    assert det.plane_detection.status == 'found', det.plane_detection.message
    assert abs(det.plane.height_at(*cam.position[:2]) - dz) < 0.03  # the plane moved with the pose error
    assert len(det.obstacles) == len(ref.obstacles), [d.center for d in det.obstacles]
    back = transform_points([d.center for d in det.obstacles], T_true @ np.linalg.inv(T_wrong))
    for r in ref.obstacles:
        err = np.min(np.linalg.norm(back - r.center, axis=1))
        assert err < 0.02, (r.center, back)
    # With the plane fixed at z = 0 instead, the same pose error leaves table pieces or loses objects.
    fixed = detect_obstacles(pts, ObstacleParams(plane_fit=False), camera_pose=T_wrong)
    assert len(fixed.obstacles) != len(scene.objects) or max(d.size.max() for d in fixed.obstacles) > 0.3


def test_self_filter_removes_the_robot(camera, gt, tmp_path):
    """A UR5 stand-in (cylinders of radius 4.5 cm along its link chain, posed by manip_core forward kinematics)
    next to two objects: without the self-filter it shows up as obstacles; with it (the UR5 without its
    collision elements: capsules of 8 cm along the chain; test_robot_body.py has the Panda's meshes) only the
    objects remain."""
    from manip_perception.robot_body import RobotBody
    model = gt.import_manip_core_model().RobotModel.load('ur5')
    chain, robot = gt.robot_stand_in(model, gt.ROBOT_Q)
    objects = [o for o in gt.main_objects() if o.name != 'box_a']
    sc = gt.render_scene(camera, objects, tmp_path, seed=3, extra_bodies=robot)
    params = params_for(camera)
    pts = camera_points(sc)
    without = detect_obstacles(pts, params)
    near_robot = [d for d in without.obstacles
                  if min(np.linalg.norm(d.center - p) for p in chain) < 0.25]
    assert near_robot, 'the robot stand-in should be seen without the self-filter'
    body = RobotBody.from_description(model, gt.ur5_stand_in_description(tmp_path), 0.08)
    assert body.source.startswith('capsules')
    det = detect_obstacles(pts, params, robot=body.at(np.array(gt.ROBOT_Q)))
    assert det.counts['self_filtered'] < det.counts['above_plane']
    assert len(det.obstacles) == len(objects), [d.center for d in det.obstacles]
    for o, d, err, _ in match(det.obstacles, objects, params.plane_margin):
        assert err < TOL, o.name


def test_no_phantoms_against_a_textureless_background(camera, gt, tmp_path):
    """The simulator's scene: a 1.2 x 1.4 m table with the renderer's plain white background behind it and a
    30 cm pillar near its far edge, plus a 4 cm cube. SGBM smears the pillar's disparity along the image rows
    into the white background (points in the air beside the pillar); the texture check removes them."""
    objects = [gt.SceneObject('pillar', 'box', np.array([0.45, 0.0, 0.15]), np.array([0.05, 0.05, 0.15])),
               gt.SceneObject('cube', 'box', np.array([0.45, -0.25, 0.02]), np.array([0.02, 0.02, 0.02]))]
    sc = gt.render_scene(camera, objects, tmp_path, seed=5, table_center=(0.25, 0.0), table_half_size=(0.6, 0.7))
    params = params_for(camera)
    det = detect_obstacles(camera_points(sc, DisparityMatcher(SgbmParams(texture_threshold=1.5))), params)
    assert len(det.obstacles) == len(objects), [(d.center, d.size) for d in det.obstacles]
    for o, d, err, err_visible in match(det.obstacles, objects, params.plane_margin):
        assert err < TOL and err_visible < TOL, (o.name, d.center, d.size)
        assert np.all(d.size <= 2 * o.half_extents + 0.03), (o.name, d.size)
    # Without the texture check the pillar grows sideways (the test would catch the phantom points).
    smeared = detect_obstacles(camera_points(sc, DisparityMatcher(SgbmParams(texture_threshold=0))), params)
    assert max(d.size[0] for d in smeared.obstacles) > 0.2


def test_image_without_a_support_plane(camera, gt, tmp_path):
    """The objects in front of the renderer's empty background, no table anywhere in view: no plane is
    found (the detection says so), nothing is removed, and the objects are still the obstacles."""
    objects = gt.main_objects()
    sc = gt.render_scene(camera, objects, tmp_path, seed=4, table_center=(0.0, 40.0), table_half_size=(0.1, 0.1))
    assert not np.any(sc.seg == sc.table)
    params = params_for(camera)
    det = detect_obstacles(camera_points(sc, DisparityMatcher(SgbmParams(texture_threshold=1.5))), params)
    assert det.plane is None and det.plane_detection.status in ('none', 'rejected')
    msg = det.plane_detection.message  # what the node logs: none found, or the best candidate and why not
    assert msg.startswith('no support plane') or re.match(r'support plane rejected .*inliers < 500', msg), msg
    assert det.counts['above_plane'] == det.counts['voxels']  # nothing removed, no fallback height
    assert len(det.obstacles) == len(objects), [d.center for d in det.obstacles]
    for o in objects:
        d = min(det.obstacles, key=lambda d: np.linalg.norm(d.center - o.position))
        vis = o.visible_points
        assert np.linalg.norm(d.center - (vis.min(0) + vis.max(0)) / 2) < TOL, o.name


def test_unknown_pose_pitched_camera_on_a_floor():
    """A camera 1 m above a floor, pitched 30 degrees down, a 30 cm box 2 m ahead (synthetic surface points
    in the optical frame). Without its pose (the default level camera) the floor appears tilted by 30 deg:
    beyond the 15 deg gravity check, within the wider limit the node uses when the pose is unknown; then
    the box is the one obstacle, at its true place relative to the camera."""
    rng = np.random.default_rng(0)
    g = np.stack(np.meshgrid(np.arange(-1.0, 1.0, 0.004), np.arange(0.8, 3.5, 0.004), indexing='ij'), -1)
    floor = np.column_stack([g[..., 1].ravel(), g[..., 0].ravel(), np.zeros(g.size // 2)])  # base x, y, z
    box = []
    for x0, x1, y0, y1, z0, z1 in ((1.85, 1.85, -0.15, 0.15, 0, 0.3), (1.85, 2.15, -0.15, 0.15, 0.3, 0.3),
                                   (1.85, 2.15, -0.15, -0.15, 0, 0.3), (1.85, 2.15, 0.15, 0.15, 0, 0.3)):
        n = 6000
        box.append(np.column_stack([rng.uniform(x0, x1, n), rng.uniform(y0, y1, n), rng.uniform(z0, z1, n)]))
    pts_base = np.vstack([floor, *box])
    # True pose: at (0, 0, 1), looking along +x, pitched 30 deg down (rotation about the optical x axis).
    R_level = quaternion_xyzw_to_matrix(LEVEL_CAMERA_XYZW)
    R = R_level @ cv2.Rodrigues(np.array([-math.radians(30), 0, 0]))[0]
    assert R[2, 2] == pytest.approx(-0.5)  # the optical axis points 30 deg below horizontal
    T_true = np.eye(4)
    T_true[:3, :3], T_true[:3, 3] = R, [0, 0, 1.0]
    cam_pts = transform_points(pts_base, np.linalg.inv(T_true))
    cam_pts = cam_pts[cam_pts[:, 2] > 0.3] + rng.normal(0, 0.002, (np.count_nonzero(cam_pts[:, 2] > 0.3), 3))
    strict = detect_obstacles(cam_pts, ObstacleParams())
    assert strict.plane is None or strict.plane.tilt_deg < 15  # the 30 deg floor itself is never accepted
    det = detect_obstacles(cam_pts, ObstacleParams(plane_max_tilt_deg=45.0))
    assert det.plane_detection.status == 'found' and abs(det.plane.tilt_deg - 30) < 1.0
    assert len(det.obstacles) == 1, [(d.center, d.size) for d in det.obstacles]
    T_level = camera_pose_matrix((0, 0, 0), LEVEL_CAMERA_XYZW)
    center_true = transform_points([det.obstacles[0].center], T_true @ np.linalg.inv(T_level))[0]
    assert np.linalg.norm(center_true - [2.0, 0.0, 0.1575]) < 0.03, center_true


def test_unconfigured_defaults_find_the_objects(scene):
    """Every default as the node has it with no pose at all (no tf, pose parameters unset): texture check
    off, disparity range of the default working depths 0.5-5 m, a level camera assumed, support planes up
    to 45 deg. The table, seen 38 deg from level, is found and removed, and the three objects are the
    obstacles (boxes in the assumed frame: centres mapped to the true frame within 5 cm)."""
    from manip_perception.stereo import disparity_range
    cam = scene.camera
    lo, num = disparity_range(cam.fx, cam.baseline, 0.5, 5.0, 0, 5)
    g = [cv2.cvtColor(x, cv2.COLOR_RGB2GRAY) for x in (scene.left, scene.right)]
    disp = DisparityMatcher(SgbmParams(min_disparity=lo, num_disparities=num)).compute(*g)
    pts = back_project(disparity_to_depth(disp, cam.fx, cam.baseline), cam.fx, cam.fy, cam.cx, cam.cy,
                       min_depth=0.5, max_depth=5.0)
    det = detect_obstacles(pts, ObstacleParams(plane_max_tilt_deg=45.0))
    assert det.plane_detection.status == 'found' and abs(det.plane.tilt_deg - 38.0) < 1.0
    assert len(det.obstacles) == len(scene.objects), [d.center for d in det.obstacles]
    to_true = camera_pose_matrix(cam.position, cam.orientation_xyzw) @ np.linalg.inv(
        camera_pose_matrix((0, 0, 0), LEVEL_CAMERA_XYZW))
    centers = transform_points([d.center for d in det.obstacles], to_true)
    for o in scene.objects:
        assert np.min(np.linalg.norm(centers - o.expected_center(0.015), axis=1)) < 0.05, o.name


def test_oriented_box_of_a_turned_box():
    """Synthetic: the surface of a 0.30 x 0.10 x 0.2 m box turned 30 degrees about z. The oriented box has the
    true extent and yaw (the axis-aligned one is larger); a quarter turn more gives the same box."""
    from manip_perception.obstacles import oriented_box_xy
    rng = np.random.default_rng(0)
    local = rng.uniform(-0.5, 0.5, (4000, 3)) * [0.30, 0.10, 0.2]
    axis = rng.integers(0, 2, 4000)  # put every point on a side face (x or y), like a camera would see it
    local[np.arange(4000), axis] = np.sign(local[np.arange(4000), axis]) * [0.15, 0.05][0] * (axis == 0) + \
        np.sign(local[np.arange(4000), axis]) * 0.05 * (axis == 1)
    for turn in (math.radians(30), math.radians(30) + math.pi / 2):
        c, s = math.cos(turn), math.sin(turn)
        pts = local @ np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]]).T + [0.5, 0.2, 0.1]
        (obs,) = describe_clusters(pts, np.zeros(len(pts), int))
        exp_size = [0.30, 0.10] if turn < math.pi / 4 else [0.10, 0.30]
        np.testing.assert_allclose(obs.oriented_size, exp_size + [obs.size[2]], atol=0.005)
        assert abs(obs.yaw - math.radians(30 if turn < math.pi / 4 else -60 + 90)) < 0.01 or \
            abs(abs(obs.yaw) - math.radians(30)) < 0.01, obs.yaw
        np.testing.assert_allclose(obs.oriented_center, [0.5, 0.2, obs.center[2]], atol=0.005)
        assert np.all(obs.size[:2] > np.array(exp_size) - 1e-9)  # the axis-aligned box holds it
    c_xy, yaw, ext = oriented_box_xy(np.array([[0, 0], [2, 0], [2, 1], [0, 1]], float))
    np.testing.assert_allclose(c_xy, [1, 0.5], atol=1e-6)
    assert abs(yaw) < 1e-6 and np.allclose(ext, [2, 1], atol=1e-6)


def test_oriented_box_in_a_rendered_scene(camera, gt, tmp_path):
    """A 0.24 x 0.08 x 0.12 m box turned 35 degrees about z, rendered and seen through the stereo chain: the
    oriented box matches its true footprint within 4 cm (the stereo edges add 1-2 voxels per side, as for the
    axis-aligned sizes above) and its yaw within 5 degrees."""
    import pybullet as pb
    yaw_true = math.radians(35)
    half = [0.12, 0.04, 0.06]
    centre = [0.45, 0.1, 0.06]

    def add(cid, tex):
        vis = pb.createVisualShape(pb.GEOM_BOX, halfExtents=half, physicsClientId=cid)
        b = pb.createMultiBody(0, -1, vis, basePosition=centre, physicsClientId=cid,
                               baseOrientation=[0, 0, math.sin(yaw_true / 2), math.cos(yaw_true / 2)])
        pb.changeVisualShape(b, -1, textureUniqueId=tex, rgbaColor=[1, 1, 1, 1], physicsClientId=cid)

    sc = gt.render_scene(camera, [], tmp_path, seed=6, extra_bodies=add)
    det = detect_obstacles(camera_points(sc), params_for(camera))
    assert len(det.obstacles) == 1, [d.center for d in det.obstacles]
    o = det.obstacles[0]
    np.testing.assert_allclose(o.oriented_size[:2], [0.24, 0.08], atol=0.04)
    assert abs(o.yaw - yaw_true) < math.radians(5), math.degrees(o.yaw)
    np.testing.assert_allclose(o.oriented_center[:2], centre[:2], atol=0.02)
    assert o.size[0] > 0.24  # the axis-aligned box is larger


def _surface(lo, hi, step=0.005):
    """Points on the visible faces (top and the four sides) of an axis-aligned box."""
    xs, ys, zs = (np.arange(a, b + 1e-9, step) for a, b in zip(lo, hi))
    X, Y = np.meshgrid(xs, ys, indexing='ij')
    top = np.column_stack([X.ravel(), Y.ravel(), np.full(X.size, hi[2])])
    sides = []
    for z in zs:
        sides += [np.column_stack([xs, np.full(len(xs), y), np.full(len(xs), z)]) for y in (lo[1], hi[1])]
        sides += [np.column_stack([np.full(len(ys), x), ys, np.full(len(ys), z)]) for x in (lo[0], hi[0])]
    return np.vstack([top] + sides)


def test_shelf_levels_with_more_support_planes():
    """A floor (z = 0), a shelf board (0.8 x 0.4 m at z = 0.4, seen from above) and a box on each level.
    With max_support_planes 2 the board is a support plane: both boxes are found, each on its own, and the
    board's surface is an obstacle of its own; with the default 1 the board is reported as an obstacle
    together with the box on it. Only the board's own piece is removed, not what is below it (the floor box
    under the board's edge keeps its full height)."""
    floor = _surface((-0.2, -0.6, -0.01), (1.4, 0.8, 0.0))
    board = _surface((0.3, 0.3, 0.38), (1.1, 0.7, 0.4))
    box_floor = _surface((0.5, -0.3, 0.0), (0.62, -0.18, 0.2))
    box_shelf = _surface((0.6, 0.45, 0.4), (0.7, 0.55, 0.5))
    base_pts = np.vstack([floor, board, box_floor, box_shelf])
    # Camera at (0.6, -0.9, 1.3) looking along +y, 45 degrees down (optical x = base x, y down, z forward).
    pitch = math.radians(45)
    T = np.eye(4)
    T[:3, 3] = [0.6, -0.9, 1.3]
    T[:3, :3] = np.column_stack([[1, 0, 0], [0, -math.sin(pitch), -math.cos(pitch)],
                                 [0, math.cos(pitch), -math.sin(pitch)]])
    cam_pts = (base_pts - T[:3, 3]) @ T[:3, :3]
    params = ObstacleParams(voxel_min_points=1)
    one = detect_obstacles(cam_pts, params, camera_pose=T)
    assert one.counts['support_planes'] == 1 and abs(one.plane.height_at(0.5, 0.0)) < 0.005
    assert any(d.size[0] > 0.6 for d in one.obstacles), [(d.center, d.size) for d in one.obstacles]  # the board
    two = detect_obstacles(cam_pts, ObstacleParams(voxel_min_points=1, max_support_planes=2), camera_pose=T)
    assert two.counts['support_planes'] == 2 and abs(two.more_planes[0].height_at(0.7, 0.5) - 0.4) < 0.005
    assert len(two.obstacles) == 3, [(d.center, d.size) for d in two.obstacles]
    shelf = max(two.obstacles, key=lambda d: d.size[0])  # the board's top surface, 0.8 x 0.4 m at z = 0.4
    np.testing.assert_allclose(shelf.center[:2], [0.7, 0.5], atol=0.02)
    np.testing.assert_allclose(shelf.size[:2], [0.8, 0.4], atol=0.03)
    assert abs(shelf.center[2] - 0.4) < 0.01 and shelf.size[2] < 0.03
    by_height = sorted((d for d in two.obstacles if d is not shelf), key=lambda d: d.center[2])
    np.testing.assert_allclose(by_height[0].center, [0.56, -0.24, 0.1075], atol=0.015)
    np.testing.assert_allclose(by_height[1].center, [0.65, 0.5, 0.4575], atol=0.015)
    assert by_height[0].size[2] > 0.17  # not cut by the board's plane
