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

import cv2
import numpy as np
import pytest

from manip_perception.obstacles import (ObstacleError, ObstacleParams, camera_pose_matrix, cluster_labels,
                                        crop_box, describe_clusters, detect_obstacles, fit_support_plane,
                                        quaternion_xyzw_to_matrix, remove_support_plane, self_filter,
                                        transform_points, voxel_downsample)
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


def _plane_scene(rng, tilt_deg=1.5, height=0.01, noise=0.002):
    """Table points on a known tilted plane, a box whose top holds more points than the table, outliers."""
    n = np.array([math.sin(math.radians(tilt_deg)), 0, math.cos(math.radians(tilt_deg))])
    xy = rng.uniform(-0.8, 0.8, (6000, 2))
    z = height - (n[0] * xy[:, 0]) / n[2] + rng.normal(0, noise, 6000)
    table = np.column_stack([xy, z])
    top = np.column_stack([rng.uniform(0.2, 0.5, (9000, 2)), np.full(9000, 0.15)])
    junk = rng.uniform([-0.8, -0.8, -0.2], [0.8, 0.8, 0.5], (1500, 3))
    return n, table, top, junk


def test_support_plane_fit_is_robust():
    rng = np.random.default_rng(7)
    n, table, top, junk = _plane_scene(rng)
    pts = np.vstack([table, top, junk])
    plane = fit_support_plane(pts, table_height=0.0, search_band=0.05, rng=np.random.default_rng(0))
    assert plane.fitted
    assert math.degrees(math.acos(min(1.0, plane.normal @ n))) < 0.3
    assert abs(plane.height_at(0, 0) - 0.01) < 0.001
    keep, used = remove_support_plane(pts, plane_margin=0.015, table_height=0.0)
    assert used.fitted
    assert keep[:len(table)].mean() < 0.001  # the table is gone, tilt and offset included
    assert keep[len(table):len(table) + len(top)].all()  # the box top stays
    # A point just above the margin stays, one inside it or below the plane goes.
    probe = np.array([[0.0, 0.0, 0.01 + 0.016], [0.0, 0.0, 0.01 + 0.012], [0.0, 0.0, -0.2]])
    assert (used.signed_distance(probe) > 0.015).tolist() == [True, False, False]
    # Without the fit the fixed height cannot follow the tilt: table points survive at the high side.
    keep_fixed, fixed = remove_support_plane(pts, plane_margin=0.015, table_height=0.0, fit=False)
    assert not fixed.fitted and keep_fixed[:len(table)].sum() > 100
    # No candidate points near the expected height: fallback z = table_height.
    keep, used = remove_support_plane(top, plane_margin=0.015, table_height=0.0)
    assert not used.fitted and keep.all()


def test_self_filter_distances():
    links = np.array([[0, 0, 0], [0, 0, 1.0], [1.0, 0, 1.0]])
    pts = np.array([[0.05, 0, 0.5],  # 5 cm from the first segment
                    [0.15, 0, 0.5],  # 15 cm
                    [0.5, 0.08, 1.0],  # 8 cm from the second segment
                    [1.12, 0, 1.0],  # 12 cm beyond the last link point
                    [0, 0, -0.09]])  # 9 cm below the first link point
    assert self_filter(pts, links, 0.1).tolist() == [False, True, False, True, False]
    # Link points only (no segments): the middle of a segment is far from both ends.
    assert self_filter(pts, links, 0.1, segments=False).tolist() == [True, True, True, True, False]
    assert self_filter(pts, np.zeros((0, 3)), 0.1).all()


def test_clusters_and_bounds():
    rng = np.random.default_rng(1)
    a = rng.uniform([0, 0, 0], [0.1, 0.2, 0.3], (400, 3))
    b = rng.uniform([0.5, 0.5, 0], [0.55, 0.55, 0.05], (300, 3))
    lone = np.array([[2.0, 2.0, 2.0]])
    pts = np.vstack([a, b, lone])
    labels = cluster_labels(pts, eps=0.05, min_samples=4)
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


# ------------------------------------------------------------------------------------------ rendered scenes
def test_obstacles_in_rendered_scene(scene, record_property):
    params = params_for(scene.camera).validate()
    det = detect_obstacles(camera_points(scene), params)
    assert det.plane.fitted and abs(det.plane.height_at(0.45, 0.0)) < 0.01
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
    assert sum(det.timings.values()) < 1.0


def test_no_phantoms_on_an_empty_table(empty_scene):
    det = detect_obstacles(camera_points(empty_scene), params_for(empty_scene.camera))
    assert det.plane.fitted
    assert det.obstacles == []


def test_plane_fit_absorbs_extrinsic_error(scene, gt):
    """Camera pose parameters off by 2 cm in height and 1 degree in pitch: the table then lies 2 cm
    higher and tilted in the base frame; the fitted plane still removes all of it."""
    cam = scene.camera
    quat_xyzw = gt.quat_xyzw
    pitch = quaternion_xyzw_to_matrix([math.sin(math.radians(0.5)), 0, 0, math.cos(math.radians(0.5))])
    R = quaternion_xyzw_to_matrix(cam.orientation_xyzw) @ pitch
    q = quat_xyzw(R)
    np.testing.assert_allclose(quaternion_xyzw_to_matrix(q), R, atol=1e-9)
    pts = camera_points(scene)
    wrong = ObstacleParams(camera_position=tuple(cam.position + [0, 0, 0.02]), camera_orientation_xyzw=tuple(q))
    det = detect_obstacles(pts, wrong)
    assert det.plane.fitted
    assert len(det.obstacles) == len(scene.objects)
    for o, d, _, _ in match(det.obstacles, scene.objects, wrong.plane_margin):
        assert np.linalg.norm(d.center[:2] - o.position[:2]) < TOL
    fixed = detect_obstacles(pts, ObstacleParams(**{**wrong.__dict__, 'plane_fit': False}))
    # The fixed height leaves table pieces behind: extra or table-sized clusters.
    assert len(fixed.obstacles) != len(scene.objects) or max(d.size.max() for d in fixed.obstacles) > 0.3


def test_self_filter_removes_the_robot(camera, gt, tmp_path):
    """A UR5 stand-in (cylinders along its link chain, posed by manip_core forward kinematics) next to
    two objects: without the self-filter it shows up as obstacles, with it only the objects remain."""
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
    det = detect_obstacles(pts, params, link_points=np.array(chain))
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
    det = detect_obstacles(camera_points(sc), params)
    assert len(det.obstacles) == len(objects), [(d.center, d.size) for d in det.obstacles]
    for o, d, err, err_visible in match(det.obstacles, objects, params.plane_margin):
        assert err < TOL and err_visible < TOL, (o.name, d.center, d.size)
        assert np.all(d.size <= 2 * o.half_extents + 0.03), (o.name, d.size)
    # Without the texture check the pillar grows sideways (the test would catch the phantom points).
    smeared = detect_obstacles(camera_points(sc, DisparityMatcher(SgbmParams(texture_threshold=0))), params)
    assert max(d.size[0] for d in smeared.obstacles) > 0.2
