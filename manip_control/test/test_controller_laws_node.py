"""The controller node with each control law over real DDS (lockstep sim time, see ros_rig.py): law
selection, law parameters validated at start, the Kalman estimator in front of a law, and OSC pose
targets on ``target_pose`` with the task error in the controller state."""
import os
import random
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("rclpy")
pytest.importorskip("manip_msgs.action")

from action_msgs.msg import GoalStatus  # noqa: E402
from geometry_msgs.msg import PoseStamped  # noqa: E402
from scipy.spatial.transform import Rotation  # noqa: E402

from manip_msgs.msg import ControllerState  # noqa: E402

Q0 = np.array([0.0, -1.2, 1.4, -1.5, -1.57, 0.0])


def _start_fails(ur5, *params):
    env = dict(os.environ, ROS_DOMAIN_ID=str(random.randint(100, 200)), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    args = ["-p", f"urdf_path:={ur5.source}"]
    for p in params:
        args += ["-p", p]
    proc = subprocess.run([sys.executable, "-m", "manip_control.controller_node", "--ros-args", *args], env=env,
                          capture_output=True, text=True, timeout=60)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.parametrize("params, text", [
    (("control_law:=lqr",), "control_law must be one of pd, pid, computed_torque, robust, adaptive, osc"),
    (("control_law:=robust", "robust.boundary_layer:=-0.1"), "robust.boundary_layer must be a finite number > 0"),
    (("control_law:=pid", "pid.anti_windup:=none"), "pid.anti_windup must be one of clamping, back_calculation"),
    (("state_estimator:=kalman", "kalman.measurement_noise:=0.0"), "measurement_noise must be > 0"),
])
def test_bad_law_parameters_stop_the_node_at_start(ur5, params, text):
    code, out = _start_fails(ur5, *params)
    assert code == 2, out[-2000:]
    assert text in out, out[-2000:]


def _goal_succeeds(m, rig, ur5, amplitude=0.3, T=1.5):
    robot = rig.robot
    q, _ = robot.state()
    status, result, _ = m.send_goal(robot, m.quintic_goal(ur5, q, q + amplitude, T, goal_time_tolerance=m.dur(2.0)))
    assert status == GoalStatus.STATUS_SUCCEEDED, (result.error_string, rig.log()[-2000:])
    np.testing.assert_allclose(robot.state()[0], q + amplitude, atol=0.01)


@pytest.mark.parametrize("law", ["adaptive", pytest.param("pid", marks=pytest.mark.slow),
                                 pytest.param("robust", marks=pytest.mark.slow),
                                 pytest.param("computed_torque", marks=pytest.mark.slow)])
def test_law_follows_a_goal_with_kalman_estimator(ros_rig, ur5, tmp_path, law):
    with ros_rig.running_controller(ur5, Q0, tmp_path, sim_time=True,
                                    params=[f"control_law:={law}", "state_estimator:=kalman",
                                            "kalman.measurement_noise:=0.0001"]) as rig:
        assert rig.robot.latest().control_law == law
        _goal_succeeds(ros_rig, rig, ur5)
        log = rig.log()
        assert f"with {law}" in log and "Traceback" not in log, log[-2000:]


def test_osc_tracks_a_target_pose(ros_rig, ur5, tmp_path):
    m = ros_rig
    with m.running_controller(ur5, Q0, tmp_path, sim_time=True, params=["control_law:=osc"]) as rig:
        robot = rig.robot
        st = robot.latest()
        assert st.control_law == "osc" and len(st.task_errors) == 6
        assert np.linalg.norm(st.task_errors) < 1e-3  # holding: the pose of the held joints
        T = ur5.fk(Q0 + np.array([0.15, -0.1, 0.15, 0.1, -0.1, 0.2]))
        msg = PoseStamped()
        msg.header.frame_id = "base_link"
        msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = (float(v) for v in T[:3, 3])
        x, y, z, w = Rotation.from_matrix(T[:3, :3]).as_quat()  # scipy: (x, y, z, w)
        msg.pose.orientation.x, msg.pose.orientation.y, msg.pose.orientation.z, msg.pose.orientation.w = x, y, z, w
        pub = robot.create_publisher(PoseStamped, "target_pose", 10)
        mark = robot.mark()
        m.wait_for(lambda: pub.get_subscription_count() > 0, 10.0, "target_pose subscriber")
        pub.publish(msg)
        m.wait_for(lambda: any(np.linalg.norm(s.task_errors) > 0.1 for s in robot.states_since(mark)), 10.0,
                   "the new target")
        m.wait_for(lambda: np.linalg.norm(robot.latest().task_errors) < 1e-3, 30.0, "the target pose reached")
        q, _ = robot.state()
        np.testing.assert_allclose(ur5.fk(q)[:3, 3], T[:3, 3], atol=2e-3)
        assert robot.latest().mode == ControllerState.MODE_HOLD
        assert "target_pose: tip to" in rig.log()
