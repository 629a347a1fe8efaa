"""robot_body: the self-filter from the robot's own collision geometry (any robot), held objects and objects to
pick, against the simulator's ground truth.

Oracle: PyBullet renders example-robot-data's Panda (its visual meshes, posed by PyBullet from the URDF, not by
manip_core) next to objects on a table; its depth buffer and segmentation mask give the true 3-D points of
every body. The robot's points must be removed by the filter posed with manip_core at the same joint values,
the objects' points must stay; through the whole stereo chain the robot, the held box and the object to pick
must not be reported and the other objects must be, at their true positions. Without the filter the robot
is reported (the test can fail).
"""
import cv2
import numpy as np
import pytest

from manip_perception.obstacles import ObstacleParams, detect_obstacles
from manip_perception.robot_body import (Box, RobotBody, RobotBodyError, box_from_pose, outside_boxes_mask,
                                         outside_spheres_mask)
from manip_perception.stereo import DisparityMatcher, SgbmParams, back_project, disparity_to_depth

PADDING = 0.03  # m: the visual meshes stick out of the collision meshes by up to 2.9 cm (link5)
TOL = 0.03


def _model(path, tip=None):
    from manip_core import RobotModel
    return RobotModel.from_urdf(str(path), None, tip)


@pytest.fixture(scope='module')
def panda(gt):
    if not gt.PANDA_URDF.is_file():
        pytest.skip('example-robot-data Panda not installed')
    model = _model(gt.PANDA_URDF, 'panda_hand')
    return model, RobotBody.from_description(model, str(gt.PANDA_URDF), fallback_radius_m=0.08)


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


def test_panda_spheres_follow_pinocchio(panda, gt):
    """Every collision sphere posed by RobotBody sits where Pinocchio puts the same point of its link."""
    pin = pytest.importorskip('pinocchio')
    model, body = panda
    assert 'collision geometry' in body.source and body.n_spheres > 100  # STL covers, not the capsule fallback
    pm = pin.buildModelFromUrdf(str(gt.PANDA_URDF))
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


def test_description_without_collision_geometry_gets_capsules(gt, tmp_path):
    from manip_core import RobotModel
    model = RobotModel.load('ur5')
    body = RobotBody.from_description(model, gt.ur5_stand_in_description(tmp_path), fallback_radius_m=0.06)
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
def test_ground_truth_robot_points_are_removed(panda, panda_scene, gt):
    """The Panda's true surface points (depth buffer x segmentation) are inside its posed collision geometry
    (+ padding); the objects' points are not."""
    model, body = panda
    sc, ids, _ = panda_scene
    pts = sc.camera.back_project_base(sc.depth)
    robot_pts = pts[sc.seg == ids['robot']]
    assert len(robot_pts) > 5000, 'the Panda should be in view'
    posed = body.at(np.array(gt.PANDA_Q))
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


def test_panda_held_and_picked_objects_are_not_obstacles(panda, panda_scene, gt):
    """Through the stereo chain: without the self-filter the Panda (and what it holds) shows up as obstacles;
    with it, holding a box (attached to panda_hand) and told that box_a is the object to pick, only the other
    objects in view remain (box_b; the arm hides the cylinder), at their true positions."""
    model, body = panda
    sc, ids, _ = panda_scene
    cam = sc.camera
    params = ObstacleParams(camera_position=tuple(cam.position), camera_orientation_xyzw=tuple(cam.orientation_xyzw),
                            self_filter_padding=PADDING)
    pts = _stereo_points(sc)
    q = np.array(gt.PANDA_Q)
    without = detect_obstacles(pts, params)
    robot_true = sc.camera.back_project_base(sc.depth)[sc.seg == ids['robot']]

    def near_robot(d):
        return np.min(np.linalg.norm(robot_true - d.center, axis=1)) < 0.1

    assert any(near_robot(d) for d in without.obstacles), [d.center for d in without.obstacles]

    # The held box: its pose in the hand frame from manip_core's hand pose at q and the true box pose.
    T_hand = model.fk(q, 'panda_hand')
    held = Box(np.linalg.inv(T_hand) @ ids["held_T"], [gt.PANDA_HELD_SIZE / 2] * 3, "held", link="panda_hand")
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


def test_known_objects_held_and_to_pick():
    """known_objects messages -> boxes: objects to pick stay where they are, held objects move with the tip
    (given in the base frame at a stamp: fixed to the tip with the joint values of that stamp), obstacles are
    ignored, malformed objects are refused by name."""
    from manip_core import RobotModel

    from manip_msgs.msg import SceneObject, SceneObjectArray
    from manip_perception.known_objects import KIND_OBJECT, KnownObjects
    assert KIND_OBJECT == SceneObject.KIND_OBJECT
    model = RobotModel.load('ur5')
    q0 = np.array([0.3, -1.2, 1.4, -0.5, 0.8, 0.0])
    q1 = np.array([-0.4, -1.0, 1.0, -0.9, 1.2, 0.5])

    def obj(name, kind, xyz, size, attached=False, frame=''):
        o = SceneObject(name=name, kind=kind, attached=attached)
        o.header.frame_id = frame
        o.pose.position.x, o.pose.position.y, o.pose.position.z = xyz
        o.pose.orientation.w = 1.0
        o.size.x, o.size.y, o.size.z = size
        return o

    T_tip0 = model.fk(q0, model.tip_link)
    held_xyz = T_tip0[:3, 3] + T_tip0[:3, 2] * 0.05  # 5 cm along the tool axis at q0
    msg = SceneObjectArray(objects=[obj('cube', SceneObject.KIND_OBJECT, held_xyz, (0.04,) * 3, attached=True),
                                    obj('target', SceneObject.KIND_OBJECT, (0.5, 0.2, 0.02), (0.04,) * 3),
                                    obj('wall', SceneObject.KIND_OBSTACLE, (0.5, 0.5, 0.2), (0.1, 1, 0.4)),
                                    obj('tool', SceneObject.KIND_OBJECT, (0, 0, 0.1), (0.02,) * 3, attached=True,
                                        frame=model.tip_link)])
    msg.header.frame_id = 'base_link'
    msg.header.stamp.sec = 7
    known = KnownObjects()
    known.set(msg, 'base_link')
    assert known.describe() == ('cube (held, in base_link), target (to pick, in base_link), '
                                f'tool (held, in {model.tip_link})')
    asked = []

    def frame_pose(frame, q):
        assert frame == 'base_link'
        return np.eye(4)

    def joints_at(t):
        asked.append(t)
        return q0

    body = RobotBody(model, {})
    for q in (q0, q1):
        held, to_pick = known.boxes(model, q, frame_pose, joints_at)
        posed = body.at(q, held=held, to_pick=to_pick)
        T_tip = model.fk(q, model.tip_link)
        np.testing.assert_allclose(posed.boxes[0].T[:3, 3], T_tip[:3, 3] + T_tip[:3, 2] * 0.05, atol=1e-9)
        np.testing.assert_allclose(posed.boxes[1].T[:3, 3], (T_tip @ [0, 0, 0.1, 1])[:3], atol=1e-9)
        np.testing.assert_allclose(posed.boxes[2].T[:3, 3], [0.5, 0.2, 0.02])
        assert [b.name for b in posed.boxes] == ['cube', 'tool', 'target']
    assert asked == [7.0]  # the held cube is fixed to the tip once, with the joints of its stamp
    bad = SceneObjectArray(objects=[obj('broken', SceneObject.KIND_OBJECT, (0, 0, 0), (0.1, -1, 0.1))])
    with pytest.raises(ValueError, match="'broken'"):
        known.set(bad, 'base_link')
    assert 'cube' in known.describe()  # the previous set is kept
    known.set(SceneObjectArray(), 'base_link')
    assert known.describe() == 'none'
