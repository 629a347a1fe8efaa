"""robot_body: the self-filter from the robot's own collision geometry (any robot), held objects and objects to
pick, against the simulator's ground truth.

Oracle: PyBullet renders example-robot-data's Panda (its visual meshes, posed by PyBullet from the URDF, not by
manip_core) next to objects on a table; its depth buffer and segmentation mask give the true 3-D points of
every body. The robot's points must be removed by the filter posed with manip_core at the same joint values,
the objects' points must stay; through the whole stereo chain the robot, the held box and the object to pick
must not be reported and the other objects must be, at their true positions. Without the filter the robot
is reported (the test can fail).
"""
import re
import sysconfig
from pathlib import Path

import cv2
import numpy as np
import pytest

from manip_perception.obstacles import ObstacleParams, detect_obstacles
from manip_perception.robot_body import (Box, RobotBody, RobotBodyError, box_from_pose, outside_boxes_mask,
                                         outside_spheres_mask)
from manip_perception.stereo import DisparityMatcher, SgbmParams, back_project, disparity_to_depth

ERD = Path(sysconfig.get_paths()['purelib']) / 'cmeel.prefix/share/example-robot-data'
PANDA = ERD / 'robots/panda_description/urdf/panda.urdf'
#: Panda reaching over the table towards the camera, hand low next to box_b (most of the arm in view; it
#: hides the cylinder).
PANDA_Q = (-0.6, 0.4, 0.0, -1.8, 0.0, 2.2, 0.8)
PADDING = 0.03  # m: the visual meshes stick out of the collision meshes by up to 2.9 cm (link5)
TOL = 0.03
HELD_SIZE = 0.08  # m: a cube held below the finger tips


def _model(path, tip=None):
    from manip_core import RobotModel
    return RobotModel.from_urdf(str(path), None, tip)


@pytest.fixture(scope='module')
def panda():
    if not PANDA.is_file():
        pytest.skip('example-robot-data Panda not installed')
    model = _model(PANDA, 'panda_hand')
    return model, RobotBody.from_description(model, str(PANDA), fallback_radius_m=0.08)


# ------------------------------------------------------------------------------------------ synthetic
def test_sphere_and_box_masks():
    spheres = np.array([[0, 0, 0, 0.1], [1, 0, 0, 0.2]])
    pts = np.array([[0.11, 0, 0], [0.13, 0, 0], [1.21, 0, 0], [1.23, 0, 0], [0.5, 0, 0]])
    assert outside_spheres_mask(pts, spheres, padding=0.02).tolist() == [False, True, False, True, True]
    assert outside_spheres_mask(pts, np.zeros((0, 4))).all()
    # A box turned 90 degrees about z: 0.2 long along base y, 0.02 along base x.
    T = np.eye(4)
    T[:3, :3] = [[0, -1, 0], [1, 0, 0], [0, 0, 1]]
    T[:3, 3] = [2, 0, 0]
    box = Box(T, [0.1, 0.01, 0.05])
    pts = np.array([[2, 0.09, 0], [2.035, 0, 0], [2.02, 0, 0], [2, 0.13, 0]])
    assert outside_boxes_mask(pts, [box]).tolist() == [False, True, True, True]
    assert outside_boxes_mask(pts, [box], margin=0.02).tolist() == [False, True, False, True]
    b = box_from_pose([2, 0, 0], [0, 0, 0.70710678, 0.70710678], [0.2, 0.02, 0.1])
    np.testing.assert_allclose(b.T, T, atol=1e-7)
    with pytest.raises(RobotBodyError, match='half extents'):
        Box(np.eye(4), [0.1, -1, 0.1], 'bad')


def test_panda_spheres_follow_pinocchio(panda):
    """Every collision sphere posed by RobotBody sits where Pinocchio puts the same point of its link."""
    pin = pytest.importorskip('pinocchio')
    model, body = panda
    assert 'collision geometry' in body.source and body.n_spheres > 100  # STL covers, not the capsule fallback
    pm = pin.buildModelFromUrdf(str(PANDA))
    pd = pm.createData()
    rng = np.random.default_rng(0)
    for _ in range(3):
        q = rng.uniform(model.joint_lower, model.joint_upper)
        qp = pin.neutral(pm)
        for name, v in zip(model.joint_names, q):
            qp[pm.idx_qs[pm.getJointId(name)]] = v
        pin.framesForwardKinematics(pm, pd, qp)
        base = pd.oMf[pm.getFrameId(model.base_link)]
        posed = body.at(q)
        k = 0
        for link, S in body.link_spheres.items():
            oMl = base.actInv(pd.oMf[pm.getFrameId(link)])
            expected = S[:, :3] @ oMl.rotation.T + oMl.translation
            np.testing.assert_allclose(posed.spheres[k:k + len(S), :3], expected, atol=1e-9)
            k += len(S)


def test_description_without_collision_geometry_gets_capsules():
    from manip_core import RobotModel
    model = RobotModel.load('ur5')
    body = RobotBody.from_description(model, (Path(model.source) if Path(str(model.source)).is_file() else
                                              Path(__file__).parents[2] / 'manip_core/manip_core/robots/ur5.urdf'),
                                      fallback_radius_m=0.06)
    assert body.source.startswith('capsules of radius 0.060 m') and 'no <collision>' in body.source
    q = np.array([0.3, -1.2, 1.4, -0.5, 0.8, 0.0])
    posed = body.at(q)
    # Points on the segments between the link origins are removed, points 0.2 m away from every segment stay.
    origins = np.array([model.fk(q, ln)[:3, 3] for ln in model.link_names])
    t = np.linspace(0, 1, 11)[:, None]
    on = np.vstack([a + t * (b - a) for a, b in zip(origins[:-1], origins[1:])])
    assert not posed.mask(on, 0.0, 0.0).any()
    far = origins + [0, 0, 5.0]
    assert posed.mask(far, 0.0, 0.0).all()
    with pytest.raises(RobotBodyError, match='6 finite'):
        body.at(np.zeros(5))
    with pytest.raises(RobotBodyError, match='fallback radius'):
        RobotBody.from_description(model, '<robot name="x"><link name="base_link"/></robot>', 0.0)


# ------------------------------------------------------------------------------------------ rendered
def _panda_in_pybullet(model, q, held_size, tmp_path):
    """extra_bodies callable for render_scene: the Panda from its URDF (package:// resolved to the
    example-robot-data folder) with its joints set by name, and a box held below the hand (pose from
    PyBullet's own hand link). Returns (callable, ids: filled with 'robot', 'held', 'held_T')."""
    ids = {}
    text = PANDA.read_text().replace('package://example-robot-data/', str(ERD) + '/')
    urdf = tmp_path / 'panda_resolved.urdf'
    urdf.write_text(text)

    def add(cid, tex):
        import pybullet as pb
        rid = pb.loadURDF(str(urdf), useFixedBase=True, physicsClientId=cid)
        values = dict(zip(model.joint_names, q))
        hand = None
        for j in range(pb.getNumJoints(rid, physicsClientId=cid)):
            info = pb.getJointInfo(rid, j, physicsClientId=cid)
            if info[1].decode() in values:
                pb.resetJointState(rid, j, values[info[1].decode()], physicsClientId=cid)
            if info[12].decode() == 'panda_hand':
                hand = j
        pos, orn = pb.getLinkState(rid, hand, computeForwardKinematics=True, physicsClientId=cid)[4:6]
        R = np.array(pb.getMatrixFromQuaternion(orn)).reshape(3, 3)
        centre = np.array(pos) + R @ [0, 0, 0.105 + held_size / 2]  # below the finger tips
        vis = pb.createVisualShape(pb.GEOM_BOX, halfExtents=[held_size / 2] * 3, physicsClientId=cid)
        hid = pb.createMultiBody(0, -1, vis, basePosition=centre.tolist(), baseOrientation=orn, physicsClientId=cid)
        pb.changeVisualShape(hid, -1, textureUniqueId=tex, rgbaColor=[1, 1, 1, 1], physicsClientId=cid)
        T = np.eye(4)
        T[:3, :3], T[:3, 3] = R, centre
        ids.update(robot=rid, held=hid, held_T=T)

    return add, ids


@pytest.fixture(scope='module')
def panda_scene(panda, camera, gt, tmp_path_factory):
    model, _ = panda
    tmp = tmp_path_factory.mktemp('panda_scene')
    add, ids = _panda_in_pybullet(model, np.array(PANDA_Q), HELD_SIZE, tmp)
    objects = gt.main_objects()  # box_a is the object to pick; box_b and the cylinder are obstacles
    sc = gt.render_scene(camera, objects, tmp, seed=5, extra_bodies=add)
    return sc, ids


def test_ground_truth_robot_points_are_removed(panda, panda_scene):
    """The Panda's true surface points (depth buffer x segmentation) are inside its posed collision geometry
    (+ padding); the objects' points are not."""
    model, body = panda
    sc, ids = panda_scene
    pts = sc.camera.back_project_base(sc.depth)
    robot_pts = pts[sc.seg == ids['robot']]
    assert len(robot_pts) > 5000, 'the Panda should be in view'
    posed = body.at(np.array(PANDA_Q))
    kept = posed.mask(robot_pts, PADDING, 0.0)
    assert kept.mean() < 0.002, f"{kept.sum()} of {len(robot_pts)} robot points outside its geometry"
    for o in sc.objects:
        assert posed.mask(o.visible_points, PADDING, 0.0).all(), o.name


def _stereo_points(sc):
    cam = sc.camera
    g = [cv2.cvtColor(x, cv2.COLOR_RGB2GRAY) for x in (sc.left, sc.right)]
    # texture check as in the simulator's stereo_camera.yaml (the renderer's white background beyond the table)
    disp = DisparityMatcher(SgbmParams(texture_threshold=1.5)).compute(*g)
    return back_project(disparity_to_depth(disp, cam.fx, cam.baseline), cam.fx, cam.fy, cam.cx, cam.cy,
                        max_depth=3.0)


def test_panda_held_and_picked_objects_are_not_obstacles(panda, panda_scene):
    """Through the stereo chain: without the self-filter the Panda (and what it holds) shows up as obstacles;
    with it, holding a box (attached to panda_hand) and told that box_a is the object to pick, only the other
    objects in view remain (box_b; the arm hides the cylinder), at their true positions."""
    model, body = panda
    sc, ids = panda_scene
    cam = sc.camera
    params = ObstacleParams(camera_position=tuple(cam.position), camera_orientation_xyzw=tuple(cam.orientation_xyzw),
                            self_filter_padding=PADDING)
    pts = _stereo_points(sc)
    q = np.array(PANDA_Q)
    without = detect_obstacles(pts, params)
    robot_true = sc.camera.back_project_base(sc.depth)[sc.seg == ids['robot']]

    def near_robot(d):
        return np.min(np.linalg.norm(robot_true - d.center, axis=1)) < 0.1

    assert any(near_robot(d) for d in without.obstacles), [d.center for d in without.obstacles]

    # The held box: its pose in the hand frame from manip_core's hand pose at q and the true box pose.
    T_hand = model.fk(q, 'panda_hand')
    held = Box(np.linalg.inv(T_hand) @ ids["held_T"], [HELD_SIZE / 2] * 3, "held", link="panda_hand")
    box_a = next(o for o in sc.objects if o.name == 'box_a')
    to_pick = box_from_pose(box_a.position, [0, 0, 0, 1], 2 * box_a.half_extents, 'box_a')
    det = detect_obstacles(pts, params, robot=body.at(q, held=[held], to_pick=[to_pick]))
    expected = [o for o in sc.objects if o.name != 'box_a'
                and np.sum(o.visible_points[:, 2] > params.plane_margin) > 500]
    assert [o.name for o in expected] == ['box_b']  # the scene is as described (ground truth)
    assert len(det.obstacles) == len(expected), [(d.center, d.size) for d in det.obstacles]
    for o in expected:
        err = min(np.linalg.norm(d.center - o.expected_center(params.plane_margin)) for d in det.obstacles)
        assert err < TOL, (o.name, err)
    # Without the held box and the object to pick, both come back (only the robot is filtered).
    only_robot = detect_obstacles(pts, params, robot=body.at(q))
    assert len(only_robot.obstacles) == len(expected) + 2, [d.center for d in only_robot.obstacles]
