"""The robot-description contract (issue 16, docs/graph.md), process to process over real DDS.

model_server (UR5 from ``urdf_path``) publishes robot_description; controller, planner, pick_place and
stereo_obstacles (self_filter) take it from the topic. An outside client then publishes, one at a time: a file
path, a device file name, an empty string, text that is not XML, an oversized description, and a different
robot while the controller follows a trajectory. Every consumer keeps the UR5, logs one line per message, and
still serves requests (model_server IK, planner plan, controller commands). The same for model_server's
``robot_description`` parameter. Fixtures: tests/conftest.py.
"""
import re
import time
from pathlib import Path

import pytest

ROBOTS = Path(__file__).resolve().parents[1] / "manip_core" / "manip_core" / "robots"
UR5 = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
       "wrist_3_joint"]
Q0 = [3.0, -1.4, 1.5, -1.7, -1.6, 0.2]
CONSUMERS = ("controller", "planner", "pick_place", "stereo_obstacles")


@pytest.fixture(scope="module")
def graph(node_procs, ros_client):
    from std_msgs.msg import String
    from sensor_msgs.msg import JointState
    from manip_core.ros.model_source import DESCRIPTION_QOS
    procs = {"model_server": node_procs("model_server", {"urdf_path": ROBOTS / "ur5.urdf"})}
    params = {"controller": {"state_timeout": 5.0}, "stereo_obstacles": {"self_filter": "true"}}
    for exe in CONSUMERS:
        procs[exe] = node_procs(exe, params.get(exe, {}))
    for exe in CONSUMERS:
        procs[exe].wait_log(r"robot model from robot_description topic: ur5", timeout=120)
    node = ros_client.node
    pub = node.create_publisher(String, "robot_description", DESCRIPTION_QOS)
    js = node.create_publisher(JointState, "joint_states", 10)

    def joint_states():
        js.publish(JointState(name=UR5, position=Q0, velocity=[0.0] * 6,
                              header=_header(node)))
    node.create_timer(0.02, joint_states)
    return {"procs": procs, "pub": pub, "client": ros_client}


def _header(node):
    from std_msgs.msg import Header
    return Header(stamp=node.get_clock().now().to_msg())


def _rejections(p):
    return len(re.findall(r"rejected robot_description", p.log))


def _publish_and_expect_rejection(graph, text, consumers=CONSUMERS, timeout=30.0):
    from std_msgs.msg import String
    procs, client = graph["procs"], graph["client"]
    before = {exe: _rejections(procs[exe]) for exe in consumers}
    graph["pub"].publish(String(data=text))
    ok = client.spin_until(lambda: all(_rejections(procs[e]) > before[e] for e in consumers), timeout)
    assert ok, {e: procs[e].log[-600:] for e in consumers if _rejections(procs[e]) == before[e]}
    client.spin_until(lambda: False, 0.3)  # a duplicate line would show up here
    for exe in consumers:
        log = procs[exe].log
        assert _rejections(procs[exe]) == before[exe] + 1, f"{exe}: not one line\n{log[-1500:]}"
        assert len(re.findall(r"robot model from", log)) == 1, f"{exe} changed its model\n{log[-1500:]}"
        assert "Traceback" not in log
    return [procs[e].log.splitlines() for e in consumers]


def _last_rejection(p):
    return [ln for ln in p.log.splitlines() if "rejected robot_description" in ln][-1]


def _ik_and_plan_still_served(graph):
    from geometry_msgs.msg import PoseStamped
    from manip_msgs.srv import ComputeIK, PlanTrajectory
    from manip_core import RobotModel
    from manip_core.ros.conversions import matrix_to_pose
    client = graph["client"]
    ur5 = RobotModel.load("ur5")
    res = client.call(ComputeIK, "compute_ik", ComputeIK.Request(target=PoseStamped(pose=matrix_to_pose(
        ur5.fk(Q0))), seed=Q0))
    assert res is not None and res.success, res
    req = PlanTrajectory.Request(start_positions=Q0, goal_type=PlanTrajectory.Request.GOAL_JOINTS,
                                 goal_positions=[q + 0.1 for q in Q0], profile=PlanTrajectory.Request.PROFILE_QUINTIC)
    res = client.call(PlanTrajectory, "plan_trajectory", req)
    assert res is not None and res.success, res
    assert list(res.trajectory.joint_names) == UR5


@pytest.mark.parametrize("what,text,says", [
    ("path", str(ROBOTS / "planar2r.urdf"), "a file path is read only from the urdf_path parameter"),
    ("device", "/dev/zero", "a file path is read only from the urdf_path parameter"),
    ("empty", "", "empty"),
    ("not xml", "robot: ur5 # yaml, not URDF", "not URDF or kinematic.json text"),
    ("oversized", "<robot name='big'>" + " " * (4 * 1024 * 1024) + "</robot>", "more than the maximum of"),
    ("bad xml", "<robot name='x'><link name='a'/><joint name='j' type='ball'>", "robot_description topic"),
])
def test_bad_descriptions_on_the_topic_are_refused(graph, what, text, says):
    _publish_and_expect_rejection(graph, text)
    for exe in CONSUMERS:
        line = _last_rejection(graph["procs"][exe])
        assert says in line and "keeping ur5" in line, (exe, line)
        assert len(line) < 700, line
    _ik_and_plan_still_served(graph)


def test_same_robot_again_is_a_no_op(graph):
    from std_msgs.msg import String
    procs = graph["procs"]
    text = (ROBOTS / "ur5.urdf").read_text()
    before = {e: procs[e].log for e in CONSUMERS}
    graph["pub"].publish(String(data=text + "\n<!-- republished -->\n"))  # other text, the same robot
    graph["client"].spin_until(lambda: False, 2.0)
    for exe in CONSUMERS:
        new = procs[exe].log[len(before[exe]):]
        assert "robot model from" not in new and "rejected" not in new, (exe, new)


def test_different_robot_refused_while_the_controller_follows_a_trajectory(graph):
    from std_msgs.msg import String
    from manip_msgs.msg import ControllerState
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
    from builtin_interfaces.msg import Duration
    procs, client, node = graph["procs"], graph["client"], graph["client"].node
    states = []
    node.create_subscription(ControllerState, "joint_trajectory_controller/controller_state", states.append, 10)
    traj = node.create_publisher(JointTrajectory, "joint_trajectory_controller/joint_trajectory", 10)
    assert client.spin_until(lambda: traj.get_subscription_count() > 0, 30)
    msg = JointTrajectory(joint_names=UR5, points=[
        JointTrajectoryPoint(positions=Q0, time_from_start=Duration(sec=0)),
        JointTrajectoryPoint(positions=[q + 0.3 for q in Q0], time_from_start=Duration(sec=60))])
    traj.publish(msg)
    assert client.spin_until(lambda: any(s.mode == ControllerState.MODE_TRACKING for s in states), 30), \
        procs["controller"].log[-1500:]
    before = _rejections(procs["controller"])
    graph["pub"].publish(String(data=(ROBOTS / "planar2r.urdf").read_text()))
    assert client.spin_until(lambda: _rejections(procs["controller"]) > before, 30), procs["controller"].log[-1500:]
    line = _last_rejection(procs["controller"])
    assert "a different robot (planar2r, 2 joints) while a trajectory is being followed; keeping ur5" in line, line
    states.clear()
    assert client.spin_until(lambda: len(states) > 5, 10)
    assert all(list(s.joint_names) == UR5 for s in states)
    assert states[-1].mode == ControllerState.MODE_TRACKING
    # stop the trajectory (no points: hold), then put the UR5 back for the other consumers
    traj.publish(JointTrajectory(joint_names=UR5))
    graph["pub"].publish(String(data=(ROBOTS / "ur5.urdf").read_text()))
    client.spin_until(lambda: False, 1.0)


def test_model_server_parameter_takes_text_only(graph):
    from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParameters
    client = graph["client"]
    log0 = graph["procs"]["model_server"].log

    def set_param(name, text):
        req = SetParameters.Request(parameters=[Parameter(name=name, value=ParameterValue(
            type=ParameterType.PARAMETER_STRING, string_value=text))])
        res = client.call(SetParameters, "/model_server/set_parameters", req)
        assert res is not None
        return res.results[0]

    for text, says in [(str(ROBOTS / "planar2r.urdf"), "a file path is read only from the urdf_path"),
                       ("/dev/zero", "a file path"), ("", "empty"), ("not xml at all", "not URDF"),
                       ("<" + "r" * (4 * 1024 * 1024 + 1), "more than the maximum")]:
        r = set_param("robot_description", text)
        assert not r.successful and says in r.reason, (text[:40], r.reason)
    r = set_param("urdf_path", str(ROBOTS / "planar2r.urdf"))
    assert not r.successful and "read-only" in r.reason.lower().replace("read only", "read-only"), r.reason
    new = graph["procs"]["model_server"].log[len(log0):]
    assert new.count("rejected new robot_description") == 5 and "robot model from" not in new, new
    _ik_and_plan_still_served(graph)


def test_controller_last_command_before_exit_is_a_hold(graph):
    """SIGINT while the controller follows a trajectory: it exits 0, and its last effort command is the hold
    at the measured position, g(q) (what the tracking commands are not: the trajectory starts 0.2 rad away)."""
    import signal
    import numpy as np
    from std_msgs.msg import Float64MultiArray
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
    from builtin_interfaces.msg import Duration
    from manip_core import RobotModel
    procs, client, node = graph["procs"], graph["client"], graph["client"].node
    cmds = []
    node.create_subscription(Float64MultiArray, "effort_controller/commands", lambda m: cmds.append(list(m.data)),
                             1000)
    traj = node.create_publisher(JointTrajectory, "joint_trajectory_controller/joint_trajectory", 10)
    assert client.spin_until(lambda: traj.get_subscription_count() > 0 and len(cmds) > 0, 30)
    traj.publish(JointTrajectory(joint_names=UR5, points=[
        # (a first point away from the arm needs time to get there: one at t = 0 is refused, start_tolerance)
        JointTrajectoryPoint(positions=[q + 0.2 for q in Q0], time_from_start=Duration(sec=1)),
        JointTrajectoryPoint(positions=[q + 0.3 for q in Q0], time_from_start=Duration(sec=60))]))
    ur5 = RobotModel.load("ur5")
    hold = np.clip(ur5.gravity_torques(np.array(Q0)), -ur5.effort_limits, ur5.effort_limits)
    tracking = lambda c: np.max(np.abs(np.array(c) - hold)) > 1.0  # noqa: E731
    assert client.spin_until(lambda: cmds and tracking(cmds[-1]), 30), procs["controller"].log[-1500:]
    ctl = procs["controller"]
    ctl.signal(signal.SIGINT)
    code = ctl.wait(20.0)
    client.spin_until(lambda: False, 1.0)  # the last messages in flight
    assert code == 0 and "Traceback" not in ctl.log, ctl.log[-2000:]
    assert "last command: hold at the last measured position" in ctl.log
    np.testing.assert_allclose(cmds[-1], hold, atol=1e-6)
