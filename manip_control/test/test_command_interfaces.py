"""Position and velocity command interfaces: the library, and the controller driving manip_sim's PyBullet arm
through forward_position_controller/commands or forward_velocity_controller/commands (subprocesses, sim time)."""
import sys
from pathlib import Path

import numpy as np
import pytest

from manip_control.command_interfaces import (COMMAND_TOPICS, check_interface, position_command,
                                              velocity_command)


def test_position_command_is_clipped_to_the_limits():
    np.testing.assert_array_equal(position_command([-4.0, 0.5, 9.0], [-3.0, -3.0, -3.0], [3.0, 3.0, 3.0]),
                                  [-3.0, 0.5, 3.0])


def test_velocity_command_is_feed_forward_plus_p_and_clipped():
    qd = velocity_command([1.0, 0.0], [0.5, 0.2], [0.9, 0.3], 10.0, [3.0, 0.5])
    np.testing.assert_allclose(qd, [0.5 + 10.0 * 0.1, -0.5])  # second: 0.2 - 3.0 clipped to -0.5


def test_interface_names_and_topics():
    assert COMMAND_TOPICS == {"effort": "effort_controller/commands",
                              "position": "forward_position_controller/commands",
                              "velocity": "forward_velocity_controller/commands"}
    with pytest.raises(ValueError, match="command_interface must be one of effort, position, velocity, got 'torque'"):
        check_interface("torque")


def _run_on_sim(ros_rig, ur5, tmp_path, interface):
    pytest.importorskip("pybullet")
    import manip_sim
    from action_msgs.msg import GoalStatus
    from manip_msgs.msg import ControllerState, JointTolerance
    m = ros_rig
    sim = [sys.executable, "-m", "manip_sim.sim_bridge_node", "--ros-args",
           "-p", "camera_rate_hz:=0.0", "-p", "objects_rate_hz:=0.0", "-p", "real_time_factor:=0.5",
           "-p", "use_sim_time:=false"]
    ctrl = [sys.executable, "-m", "manip_control.controller_node", "--ros-args",
            "-p", f"urdf_path:={ur5.source}", "-p", "base_link:=base_link", "-p", "tip_link:=tool0",
            "-p", "use_sim_time:=true", "-p", "state_timeout:=0.25", "-p", f"command_interface:={interface}"]
    with m.running_nodes([sim, ctrl], tmp_path, extra_packages=(manip_sim,)) as (obs, procs):
        logs = [tmp_path / "0.log", tmp_path / "1.log"]

        def alive():
            for p, log in zip(procs, logs):
                assert p.poll() is None, f"{log.name} exited: {Path(log).read_text()[-3000:]}"
            return True

        m.wait_for(lambda: alive() and obs.client.wait_for_server(timeout_sec=0.2), 40.0, "action server")
        st = m.wait_for(lambda: alive() and (s := obs.latest()) is not None and s.mode == ControllerState.MODE_HOLD
                        and s, 30.0, "controller_state in MODE_HOLD")
        q0 = np.array(st.actual_positions)
        q1 = q0 + np.array([-0.4, 0.3, -0.3, 0.3, 0.3, 0.5])
        goal = m.quintic_goal(ur5, q0, q1, 2.0, goal_tolerance=[JointTolerance(name=n, position=0.01, velocity=0.05)
                                                                for n in ur5.joint_names])
        status, result, _ = m.send_goal(obs, goal, timeout=60.0)
        assert status == GoalStatus.STATUS_SUCCEEDED, (result.error_string, logs[1].read_text()[-2000:])
        with obs.lock:
            js = obs.joint_states[-1]
        q_sim = np.array([js.position[list(js.name).index(n)] for n in ur5.joint_names])
        np.testing.assert_allclose(q_sim, q1, atol=0.01)
        sim_log = logs[0].read_text()
        assert "rejected" not in sim_log and "watchdog" not in sim_log, sim_log[-2000:]


def test_position_interface_on_the_pybullet_sim(ros_rig, ur5, tmp_path):
    _run_on_sim(ros_rig, ur5, tmp_path, "position")


@pytest.mark.slow
def test_velocity_interface_on_the_pybullet_sim(ros_rig, ur5, tmp_path):
    _run_on_sim(ros_rig, ur5, tmp_path, "velocity")
