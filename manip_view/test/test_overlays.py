"""What the page draws besides the arm, as numbers: plans (tool path against Pinocchio's FK), point clouds (the bytes
manip_perception packs, any field layout), decimation, IK branches of a goal (each one checked with Pinocchio)."""
import numpy as np
import pinocchio as pin
import pytest

from manip_core.errors import InputError
from manip_core.robots import robot_path
from manip_perception.stereo import pack_pointcloud2
from manip_view.overlays import (cloud_from_fields, decimate, ghost_indices, plan_view, solve_ik_offline,
                                 stick_segments, transform_points)
from manip_view.scene import RobotScene, load_robot


def pin_tip(name, q):
    model = pin.buildModelFromUrdf(str(robot_path(name)))
    data = model.createData()
    pin.framesForwardKinematics(model, data, np.asarray(q, dtype=float))
    return data.oMf[model.getFrameId(load_robot(name)[0].tip_link)]


@pytest.mark.parametrize("name", ["ur5", "ypp3"])
def test_plan_tool_path_is_pinocchios_fk_and_the_joint_order_follows_the_names(name):
    scene = RobotScene(*load_robot(name))
    robot = scene.robot
    rng = np.random.default_rng(3)
    Q = rng.uniform(np.maximum(robot.joint_lower, -3), np.minimum(robot.joint_upper, 3), (7, robot.dof))
    order = list(reversed(robot.joint_names))  # the trajectory names its joints in another order
    view = plan_view(scene, order, np.linspace(0.5, 2.0, 7), Q[:, ::-1], ghosts=3)
    np.testing.assert_allclose(view.positions, Q)
    for q, p in zip(Q, view.tool_path_m):
        np.testing.assert_allclose(p, pin_tip(name, q).translation, atol=1e-9)
    assert view.duration_s == pytest.approx(1.5)
    assert view.path_length_m == pytest.approx(np.sum(np.linalg.norm(np.diff(view.tool_path_m, axis=0), axis=1)))
    assert [i for i, _ in view.ghosts] == [0, 3, 6]
    segs = view.ghosts[1][1]
    assert segs.shape == (len(scene.segments), 2, 3)
    np.testing.assert_allclose(segs[-1][1], robot.fk(Q[3], link=scene.segments[-1][1])[:3, 3])
    with pytest.raises(InputError, match="lacks joints"):
        plan_view(scene, order[1:], [0.0], Q[:1, 1:])
    with pytest.raises(InputError, match="NaN"):
        plan_view(scene, order, [0.0], np.full((1, robot.dof), np.nan))


def test_ghost_indices_spread_over_the_plan():
    assert ghost_indices(0, 5) == []
    assert ghost_indices(3, 5) == [0, 1, 2]
    assert ghost_indices(101, 5) == [0, 25, 50, 75, 100]


def test_cloud_from_the_bytes_perception_packs():
    rng = np.random.default_rng(0)
    pts = rng.normal(size=(1000, 3)).astype(np.float32)
    cols = rng.integers(0, 256, (1000, 3))
    c = pack_pointcloud2(pts, cols)
    got, got_cols = cloud_from_fields(c.data, c.fields, c.point_step, c.width * c.height, c.is_bigendian)
    np.testing.assert_array_equal(got, pts)
    np.testing.assert_array_equal(got_cols, cols)
    c = pack_pointcloud2(pts)  # no colour
    got, got_cols = cloud_from_fields(c.data, c.fields, c.point_step, 1000)
    np.testing.assert_array_equal(got, pts) and got_cols is None


def test_cloud_with_padding_other_field_order_big_endian_and_nans():
    n = 50
    rec = np.zeros(n, dtype=np.dtype({"names": ["intensity", "z", "x", "y"], "formats": [">f4"] * 4,
                                      "offsets": [0, 4, 8, 16], "itemsize": 32}))
    rec["x"], rec["y"], rec["z"] = np.arange(n), -np.arange(n), 2.0
    rec["x"][7] = np.nan
    fields = [("intensity", 0, 7, 1), ("z", 4, 7, 1), ("x", 8, 7, 1), ("y", 16, 7, 1)]
    pts, cols = cloud_from_fields(rec.tobytes(), fields, 32, n, is_bigendian=True)
    keep = np.arange(n) != 7
    np.testing.assert_array_equal(pts, np.column_stack([np.arange(n), -np.arange(n), np.full(n, 2.0)])[keep])
    assert cols is None
    with pytest.raises(InputError, match="x, y, z"):
        cloud_from_fields(rec.tobytes(), fields[:2], 32, n)
    with pytest.raises(InputError, match="bytes"):
        cloud_from_fields(rec.tobytes()[:-1], fields, 32, n)


def test_decimate_keeps_every_kth_point_and_transform_maps_frames():
    p = np.arange(30, dtype=np.float32).reshape(10, 3)
    d, c = decimate(p, p.astype(np.uint8), 4)
    np.testing.assert_array_equal(d, p[::3]) and np.testing.assert_array_equal(c, p[::3].astype(np.uint8))
    assert decimate(p, None, 10)[0] is p
    T = np.eye(4)
    T[:3, :3] = [[0, -1, 0], [1, 0, 0], [0, 0, 1]]
    T[:3, 3] = [1, 2, 3]
    np.testing.assert_allclose(transform_points(T, [[1, 0, 0]]), [[1, 3, 3]])


def test_offline_ik_lists_every_closed_form_branch_closest_first():
    robot, _ = load_robot("ur5")
    q = np.array([0.3, -1.2, 1.4, -0.8, 0.6, 0.2])
    T = pin_tip("ur5", q)
    Tm = np.eye(4)
    Tm[:3, :3], Tm[:3, 3] = T.rotation, T.translation
    br = solve_ik_offline(robot, Tm, q + 0.01)
    assert len(br.solutions) == 8
    np.testing.assert_allclose(br.solutions[0], q, atol=1e-6)  # closest to the seed first
    for s in br.solutions:
        Ts = pin_tip("ur5", s)
        np.testing.assert_allclose(Ts.translation, T.translation, atol=1e-6)
        np.testing.assert_allclose(Ts.rotation, T.rotation, atol=1e-6)
    md = br.markdown(robot.joint_names)
    assert md.startswith("**IK: 8 solutions**") and md.count("\n\n") == 8
    far = Tm.copy()
    far[:3, 3] = [5.0, 0, 0]
    br = solve_ik_offline(robot, far, q)
    assert br.solutions == [] and "no solution" in br.markdown(robot.joint_names)


FOUR_R = """<robot name="four_r"><link name="l0"/><link name="l1"/><link name="l2"/><link name="l3"/><link name="l4"/>
<joint name="j1" type="revolute"><parent link="l0"/><child link="l1"/><axis xyz="0 0 1"/>
  <limit lower="-3" upper="3" effort="10" velocity="1"/></joint>
<joint name="j2" type="revolute"><parent link="l1"/><child link="l2"/><origin xyz="0 0 0.3"/><axis xyz="0 1 0"/>
  <limit lower="-3" upper="3" effort="10" velocity="1"/></joint>
<joint name="j3" type="revolute"><parent link="l2"/><child link="l3"/><origin xyz="0.25 0 0"/><axis xyz="1 0 0"/>
  <limit lower="-3" upper="3" effort="10" velocity="1"/></joint>
<joint name="j4" type="revolute"><parent link="l3"/><child link="l4"/><origin xyz="0 0.2 0.1"/><axis xyz="0 1 0"/>
  <limit lower="-3" upper="3" effort="10" velocity="1"/></joint></robot>"""


def test_offline_ik_of_an_arm_without_a_closed_form_is_the_numerical_solution(tmp_path):
    (tmp_path / "four_r.urdf").write_text(FOUR_R)
    robot, _ = load_robot(str(tmp_path / "four_r.urdf"))
    q = np.array([0.2, 0.4, -0.3, 0.5])
    T = robot.fk(q)
    br = solve_ik_offline(robot, T, np.zeros(robot.dof))
    assert len(br.solutions) == 1 and br.message == "numerical"
    model = pin.buildModelFromUrdf(str(tmp_path / "four_r.urdf"))  # Pinocchio's FK of the solution
    data = model.createData()
    pin.framesForwardKinematics(model, data, br.solutions[0])
    np.testing.assert_allclose(data.oMf[model.getFrameId("l4")].translation, T[:3, 3], atol=1e-5)


def test_stick_segments_join_link_origins():
    scene = RobotScene(*load_robot("planar2r"))
    q = np.array([0.4, -0.7])
    segs = stick_segments(scene, q)
    poses = scene.link_poses(q)
    for (p, c), s in zip(scene.segments, segs):
        np.testing.assert_allclose(s, [poses[p][:3, 3], poses[c][:3, 3]])
