"""control_msgs/FollowJointTrajectory on the controller node over real DDS (simulated UR5 in lockstep sim time,
see ros_rig.py), driven by a plain rclpy ActionClient that builds its goals as MoveIt's simple controller
manager does (FollowJointTrajectoryControllerHandle::sendTrajectory): the planned JointTrajectory as is
(header.stamp zero, the planning group's joint order, first point at t = 0 = the current state, positions,
velocities and accelerations), tolerances and goal_time_tolerance left empty unless configured.

Expected outcomes are those of ros2_control's joint_trajectory_controller (Kilted): its result codes and
error strings, REJECTED invalid goals, preemption ABORTED with INVALID_GOAL, cancel CANCELED holding position.
"""
import time

import numpy as np
import pytest

pytest.importorskip("rclpy")
pytest.importorskip("control_msgs.action")

from action_msgs.msg import GoalStatus  # noqa: E402
from builtin_interfaces.msg import Duration  # noqa: E402
from control_msgs.action import FollowJointTrajectory  # noqa: E402
from control_msgs.msg import JointTolerance  # noqa: E402
from rclpy.action import ActionClient  # noqa: E402
from trajectory_msgs.msg import JointTrajectoryPoint  # noqa: E402

Result = FollowJointTrajectory.Result
Q0 = np.array([0.0, -1.2, 1.4, -1.5, -1.57, 0.0])
ACTION = "joint_trajectory_controller/follow_joint_trajectory"


@pytest.fixture(scope="module")
def rig(ros_rig, ur5, tmp_path_factory):
    with ros_rig.running_controller(ur5, Q0, tmp_path_factory.mktemp("fjt"), sim_time=True,
                                    params=["rate_hz:=250.0", "goal_time_tolerance:=1.0",
                                            "allow_partial_joints_goal:=true"]) as rig:
        rig.m = ros_rig
        rig.model = ur5
        rig.client = ActionClient(rig.robot, FollowJointTrajectory, ACTION)
        assert rig.client.wait_for_server(timeout_sec=20.0)
        yield rig
        print(rig.log()[-4000:])


def moveit_goal(joint_names, q0, q1, T, n=6):
    """A time-parameterized rest-to-rest quintic as MoveIt sends it: point 0 at t = 0 is the start state."""
    goal = FollowJointTrajectory.Goal()
    goal.trajectory.joint_names = list(joint_names)
    q0, d = np.asarray(q0, float), np.asarray(q1, float) - np.asarray(q0, float)
    for t in np.linspace(0.0, T, n):
        s = t / T
        p = 10 * s ** 3 - 15 * s ** 4 + 6 * s ** 5
        v = (30 * s ** 2 - 60 * s ** 3 + 30 * s ** 4) / T
        a = (60 * s - 180 * s ** 2 + 120 * s ** 3) / T ** 2
        sec = int(t)
        goal.trajectory.points.append(JointTrajectoryPoint(
            positions=[float(x) for x in q0 + p * d], velocities=[float(x) for x in v * d],
            accelerations=[float(x) for x in a * d], time_from_start=Duration(sec=sec, nanosec=int((t - sec) * 1e9))))
    return goal


def send(rig, goal, cancel_after=None, timeout=60.0):
    """(accepted, status, result, feedback list)."""
    m, fb = rig.m, []
    handle = m.wait_future(rig.client.send_goal_async(goal, feedback_callback=lambda f: fb.append(f.feedback)),
                           10.0)
    if not handle.accepted:
        return False, None, None, fb
    res_fut = handle.get_result_async()
    if cancel_after is not None:
        time.sleep(cancel_after)
        m.wait_future(handle.cancel_goal_async(), 5.0)
    res = m.wait_future(res_fut, timeout)
    return True, res.status, res.result, fb


def shuffled(model):
    order = [3, 0, 5, 1, 4, 2]
    return [model.joint_names[i] for i in order], order


def test_goal_in_any_joint_order_succeeds_with_feedback(rig):
    model, robot = rig.model, rig.robot
    q_start, _ = robot.state()
    q1 = q_start + np.array([0.4, -0.3, 0.3, 0.3, -0.3, 0.5])
    names, order = shuffled(model)
    accepted, status, result, fb = send(rig, moveit_goal(names, q_start[order], q1[order], 1.5))
    assert accepted and status == GoalStatus.STATUS_SUCCEEDED, result
    assert result.error_code == Result.SUCCESSFUL and result.error_string == "Goal successfully reached!"
    # default goal tolerance 0.01 rad
    np.testing.assert_allclose(robot.state()[0], q1, atol=0.01)
    assert len(fb) >= 3
    for f in fb:
        assert list(f.joint_names) == list(model.joint_names)  # the controller's joints, its order
        d, a, e = (np.array(x.positions) for x in (f.desired, f.actual, f.error))
        assert d.shape == a.shape == e.shape == (6,)
        np.testing.assert_allclose(e, d - a, atol=1e-9)
        assert 0 <= f.index <= 5
    assert fb[-1].index >= fb[0].index
    # desired follows the quintic: halfway (by its own time stamp) the set point is halfway
    mid = min(fb, key=lambda f: abs(f.desired.time_from_start.sec + 1e-9 * f.desired.time_from_start.nanosec - 0.75))
    t = mid.desired.time_from_start.sec + 1e-9 * mid.desired.time_from_start.nanosec
    s = t / 1.5
    p = 10 * s ** 3 - 15 * s ** 4 + 6 * s ** 5
    np.testing.assert_allclose(mid.desired.positions, q_start + p * (q1 - q_start), atol=2e-3)


def test_partial_goal_holds_the_other_joints(rig):
    model, robot = rig.model, rig.robot
    q_start, _ = robot.state()
    names = [model.joint_names[4], model.joint_names[1]]
    target = q_start[[4, 1]] + np.array([0.3, 0.2])
    accepted, status, result, _ = send(rig, moveit_goal(names, q_start[[4, 1]], target, 1.0))
    assert accepted and status == GoalStatus.STATUS_SUCCEEDED, result
    q = robot.state()[0]
    np.testing.assert_allclose(q[[4, 1]], target, atol=0.01)
    others = [0, 2, 3, 5]
    np.testing.assert_allclose(q[others], q_start[others], atol=0.01)


def test_invalid_goals_are_rejected(rig):
    model, robot = rig.model, rig.robot
    q_start, _ = robot.state()
    bad_name = moveit_goal(list(model.joint_names[:5]) + ["no_such_joint"], q_start, q_start, 1.0)
    assert not send(rig, bad_name)[0]
    beyond = moveit_goal(model.joint_names, q_start, q_start + np.array([0, 0, 0, 0, 0, 100.0]), 1.0)
    assert not send(rig, beyond)[0]
    assert "FollowJointTrajectory goal rejected (INVALID_JOINTS)" in rig.log()


def test_preemption_aborts_the_running_goal(rig):
    model, robot, m = rig.model, rig.robot, rig.m
    q_start, _ = robot.state()
    slow = moveit_goal(model.joint_names, q_start, q_start + 0.3, 6.0)
    h1 = m.wait_future(rig.client.send_goal_async(slow), 10.0)
    assert h1.accepted
    r1 = h1.get_result_async()
    time.sleep(0.5)
    q_now, _ = robot.state()
    accepted, status, result, _ = send(rig, moveit_goal(model.joint_names, q_now, q_start, 1.0))
    first = m.wait_future(r1, 10.0)
    assert first.status == GoalStatus.STATUS_ABORTED
    assert first.result.error_code == Result.INVALID_GOAL
    assert first.result.error_string == "Current goal preempted by new incoming action."
    assert accepted and status == GoalStatus.STATUS_SUCCEEDED, result


def test_cancel_holds_position(rig):
    model, robot, m = rig.model, rig.robot, rig.m
    q_start, _ = robot.state()
    h = m.wait_future(rig.client.send_goal_async(moveit_goal(model.joint_names, q_start, q_start - 0.4, 4.0)), 10.0)
    assert h.accepted
    res = h.get_result_async()
    m.wait_for(lambda: np.max(np.abs(robot.state()[0] - q_start)) > 0.05, 60.0, "the arm to move")
    m.wait_future(h.cancel_goal_async(), 10.0)
    r = m.wait_future(res, 30.0)
    assert r.status == GoalStatus.STATUS_CANCELED
    assert r.result.error_code == Result.SUCCESSFUL and r.result.error_string == ""
    q_cancel = robot.state()[0]
    mark = robot.mark()
    m.wait_for(lambda: robot.mark() - mark >= 250, 60.0, "1 s of simulated time")  # 250 ticks of 4 ms
    q_later, qd_later = robot.state()
    # braking from the speed at the cancel (~0.15 rad/s), then holding: far from the goal, still
    np.testing.assert_allclose(q_later, q_cancel, atol=0.03)
    assert np.max(np.abs(q_later - (q_start - 0.4))) > 0.2
    assert np.max(np.abs(qd_later)) < 0.01


def test_path_and_goal_time_tolerances(rig):
    model, robot = rig.model, rig.robot
    q_start, _ = robot.state()
    goal = moveit_goal(model.joint_names, q_start, q_start + 0.3, 1.0)
    goal.path_tolerance = [JointTolerance(name=n, position=1e-7) for n in model.joint_names]
    accepted, status, result, _ = send(rig, goal)
    assert accepted and status == GoalStatus.STATUS_ABORTED
    assert result.error_code == Result.PATH_TOLERANCE_VIOLATED
    assert result.error_string == "Aborted due to path tolerance violation"

    q_start, _ = robot.state()
    goal = moveit_goal(model.joint_names, q_start, q_start - 0.2, 1.0)
    goal.goal_tolerance = [JointTolerance(name=n, position=1e-9) for n in model.joint_names]
    goal.goal_time_tolerance = Duration(sec=0, nanosec=100_000_000)
    accepted, status, result, _ = send(rig, goal)
    assert accepted and status == GoalStatus.STATUS_ABORTED
    assert result.error_code == Result.GOAL_TOLERANCE_VIOLATED
    assert result.error_string.startswith("Aborted due to goal_time_tolerance exceeding by ")
    late = float(result.error_string.split(" by ")[1].split()[0])
    assert 0.1 <= late < 0.2  # reported at the first tick past end + goal_time_tolerance
