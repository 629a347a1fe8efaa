"""manip-demo's scene preparation (no ROS): --robot or a robot-only scene gets the demo's objects placed for the
arm's reach (manip_sim.layout) and a ready initial configuration; the written scene loads and its grasp poses are
reachable with the tool down (checked here with Pinocchio's FK of the URDF)."""
import argparse
from pathlib import Path

import numpy as np
import pytest
import yaml

from manip_sim.demo import default_scene_path_dir, prepare_scene
from manip_sim.scene import load_scene

MBM_PANDA = Path(__file__).resolve().parents[2].parent / "shared/benchmarks/mbm/robots/panda/panda_spherized.urdf"
MBM_UR5 = MBM_PANDA.parents[1] / "ur5" / "ur5_spherized.urdf"



def _pin_frame_pose(pin, urdf, positions, frame):
    """Pinocchio's pose (SE3, base frame) of ``frame`` of ``urdf`` with the joints at ``positions`` (name -> rad,
    the others at neutral): the oracle of the ready poses."""
    m = pin.buildModelFromUrdf(str(urdf))
    d = m.createData()
    q = pin.neutral(m)
    for name, v in positions.items():
        q[m.joints[m.getJointId(name)].idx_q] = v
    pin.framesForwardKinematics(m, d, q)
    return d.oMf[m.getFrameId(frame)]

def _args(**kw):
    d = dict(scene=str(Path(default_scene_path_dir()) / "pick_place_scene.yaml"), scene_given=False, robot=None,
             base_link=None, tip_link=None, camera=str(Path(default_scene_path_dir()) / "stereo_camera.yaml"),
             tcp_offset=None, tcp_link="tcp")
    d.update(kw)
    return argparse.Namespace(**d)


def test_default_scene_is_kept(tmp_path):
    scene_path, camera_path = prepare_scene(_args(), tmp_path)
    s = load_scene(scene_path)
    assert s.robot.tip_link == "tool0" and s.robot.initial_positions["shoulder_pan_joint"] == pytest.approx(3.14159265)
    assert [o.position for o in s.objects] == [(0.45, -0.25, 0.02)]
    cam = yaml.safe_load(camera_path.read_text())["/**"]["ros__parameters"]
    assert cam["camera_position"] == [0.45, -0.9, 0.7]


@pytest.mark.slow
def test_robot_only_scene_gets_objects_for_the_arm_and_a_ready_pose(tmp_path):
    if not MBM_PANDA.is_file():
        pytest.skip(f"{MBM_PANDA} not present")
    pin = pytest.importorskip("pinocchio")
    only = tmp_path / "panda_scene.yaml"
    only.write_text(f"robot:\n  urdf: {MBM_PANDA}\n  base_link: panda_link0\n  tip_link: panda_grasptarget\n")
    scene_path, camera_path = prepare_scene(_args(scene=str(only), scene_given=True), tmp_path)
    s = load_scene(scene_path)
    assert (s.robot.base_link, s.robot.tip_link) == ("panda_link0", "panda_grasptarget")
    assert [b.name for b in s.objects] == ["cube"] and [b.name for b in s.obstacles] == ["pillar"]
    assert s.tasks[0].object == "cube" and s.table is not None
    # the ready pose: the tool (tip z) pointing down, by Pinocchio
    T = _pin_frame_pose(pin, MBM_PANDA, s.robot.initial_positions, "panda_grasptarget").homogeneous
    assert T[2, 2] < -0.999 and T[2, 3] > 0.1
    # the same scene through --robot (no --scene): the same layout
    (tmp_path / "b").mkdir()
    scene2, _ = prepare_scene(_args(robot=str(MBM_PANDA), base_link="panda_link0", tip_link="panda_grasptarget"),
                              tmp_path / "b")
    s2 = load_scene(scene2)
    assert s2.objects == s.objects and s2.tasks == s.tasks
    np.testing.assert_allclose(list(s2.robot.initial_positions.values()), list(s.robot.initial_positions.values()))


def test_robot_path_on_the_command_line_is_relative_to_the_working_directory(tmp_path, monkeypatch):
    """`make demo DEMO_ARGS="--robot ../x/arm.urdf"`: the path is the user's, relative to where they are, not to
    the default scene's folder (a regression: it was looked up under manip_sim/config)."""
    from manip_core.robots import robot_path
    (tmp_path / "arms").mkdir()
    (tmp_path / "work").mkdir()
    (tmp_path / "arms" / "my_ur5.urdf").write_text(Path(robot_path("ur5")).read_text())
    monkeypatch.chdir(tmp_path / "work")
    scene_path, _ = prepare_scene(_args(robot="../arms/my_ur5.urdf", base_link="base_link", tip_link="tool0"),
                                  tmp_path)
    assert load_scene(scene_path).robot.urdf == str((tmp_path / "arms" / "my_ur5.urdf").resolve())


def test_ready_pose_target_clears_an_obstacle_below_it():
    """The derived ready pose must not start the arm on top of the demo's pillar (it did: the default work
    point is 3 cm above the pillar's top for every arm, inside the planner's margin)."""
    from manip_core import RobotModel
    from manip_core.ready_pose import default_work_point, horizontal_reach
    from manip_core.robots import robot_path
    from manip_sim.demo import _ready_target
    model = RobotModel.from_urdf(str(robot_path("ur5")), None, None)
    reach = horizontal_reach(model)
    free = default_work_point(model, reach)
    assert np.allclose(_ready_target(model, {}), free)
    pillar = {"name": "pillar", "shape": "box", "size": [0.1, 0.1, 0.3], "position": [free[0], 0.0, 0.15]}
    far = dict(pillar, name="far", position=[free[0], 3.0 * reach, 0.15])
    top = 0.15 + 0.5 * np.linalg.norm([0.1, 0.1, 0.3])   # the pillar's bounding sphere
    target = _ready_target(model, {"obstacles": [pillar, far]})
    assert np.allclose(target[:2], free[:2]) and target[2] == pytest.approx(max(free[2], top + 0.15 * reach))
    assert np.allclose(_ready_target(model, {"obstacles": [far]}), free)


def test_ready_pose_keeps_clear_of_the_scene_bodies():
    """The derived ready pose: when manip_core.ready_pose's best-manipulability solution has a link inside a
    scene body (a box put around its elbow here, as the demo's pillar was for the UR10), another tool-down
    solution at the same target is taken that keeps READY_CLEARANCE_M; oracle: the collision spheres the planner
    checks (RobotCollisionModel.spheres_world) against the box, by clamping."""
    from manip_core import RobotModel
    from manip_core.ready_pose import ready_configuration
    from manip_core.robots import robot_path
    from manip_planning.planning import collision_model_for
    from manip_sim.demo import READY_CLEARANCE_M, _clear_ready
    urdf = str(robot_path("ur5"))
    model = RobotModel.from_urdf(urdf, None, None)
    target = np.array([0.45, 0.0, 0.40])
    best = ready_configuration(model, target).q
    elbow = model.fk(best, "forearm_link")[:3, 3]
    box = {"name": "block", "shape": "box", "size": [0.12, 0.12, 0.12], "position": elbow.tolist()}
    q, how = _clear_ready(model, urdf, {"obstacles": [box]}, target)
    assert "instead" in how, how
    assert np.allclose(model.fk(q)[:3, 3], target, atol=1e-5)
    robot = collision_model_for(model, urdf)

    def clearance(qq):
        S = robot.spheres_world(qq)
        lo, hi = elbow - 0.06, elbow + 0.06
        return float(np.min(np.linalg.norm(S[:, :3] - np.clip(S[:, :3], lo, hi), axis=1) - S[:, 3]))

    assert clearance(best) < 0 and clearance(q) >= READY_CLEARANCE_M - 1e-9
    q2, how2 = _clear_ready(model, urdf, {}, target)            # nothing in the way: manip_core's choice
    assert np.allclose(q2, best)


def test_tcp_offset_gives_every_node_a_tool_frame_between_the_fingers(tmp_path):
    """The MBM UR5 has no frame between its Robotiq fingers (tool0 is the flange: with it the fingers would go through
    the table and no layout is found). --tcp-offset 0 0 0.16: the run's robot is the URDF with a fixed link 'tcp' 16 cm
    along tool0's z (the fingertips' links are at 0.15 m), the tip of every node; the layout and the ready pose are
    the tcp's. Oracle: Pinocchio's FK of the original file, tool0 times the offset."""
    if not MBM_UR5.is_file():
        pytest.skip(f"{MBM_UR5} not present")
    pin = pytest.importorskip("pinocchio")
    scene_path, _ = prepare_scene(_args(robot=str(MBM_UR5), base_link="base_link", tip_link="tool0",
                                        tcp_offset=[0.0, 0.0, 0.16]), tmp_path)
    s = load_scene(scene_path)
    assert s.robot.tip_link == "tcp" and s.robot.urdf == str(tmp_path / "ur5_spherized_tcp.urdf")
    assert [b.name for b in s.objects] == ["cube"] and s.tasks[0].object == "cube"
    T = (_pin_frame_pose(pin, MBM_UR5, s.robot.initial_positions, "tool0")
         * pin.SE3(np.eye(3), np.array([0.0, 0.0, 0.16]))).homogeneous
    from manip_core import RobotModel
    model = RobotModel.from_urdf(s.robot.urdf, "base_link", "tcp")
    np.testing.assert_allclose(model.fk(np.array([s.robot.initial_positions[n] for n in model.joint_names])),
                               (_pin_frame_pose(pin, MBM_UR5, s.robot.initial_positions, "base_link")
                                .inverse().homogeneous @ T), atol=1e-9)
    assert T[2, 2] < -0.999     # the ready pose has the tool (tcp z) pointing down
