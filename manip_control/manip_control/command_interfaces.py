"""Command interfaces of the controller: what it sends to a driver each tick (no rclpy).

A ros2_control arm takes joint commands through forward_command_controller instances; the topic names are
the ones its example configurations use:

- ``effort``: ``effort_controller/commands``, the control law's torques (N*m or N);
- ``position``: ``forward_position_controller/commands``, the trajectory's desired positions (rad or m),
  clipped to the joint limits: the driver's own position loop tracks them (what joint_trajectory_controller
  sends on a position command interface);
- ``velocity``: ``forward_velocity_controller/commands``, desired velocity plus a proportional correction
  of the position error, qd_cmd = qd_d + k (q_d - q) (rad/s or m/s, ``velocity_command_gain`` k in 1/s),
  clipped to the velocity limits (joint_trajectory_controller's velocity interface with feed-forward and a
  P gain).

Every command is a std_msgs/Float64MultiArray in the model's joint order.
"""
from __future__ import annotations

import numpy as np

__all__ = ["COMMAND_INTERFACES", "COMMAND_TOPICS", "position_command", "velocity_command", "check_interface"]

COMMAND_INTERFACES = ("effort", "position", "velocity")
COMMAND_TOPICS = {
    "effort": "effort_controller/commands",
    "position": "forward_position_controller/commands",
    "velocity": "forward_velocity_controller/commands",
}


def check_interface(name):
    """The interface name, or ValueError naming the parameter and the choices."""
    if name not in COMMAND_INTERFACES:
        raise ValueError(f"parameter command_interface must be one of {', '.join(COMMAND_INTERFACES)}, got "
                         f"'{name}'")
    return name


def position_command(q_desired, lower, upper):
    """Desired positions (rad or m) within [lower, upper]."""
    return np.clip(np.asarray(q_desired, dtype=np.float64), lower, upper)


def velocity_command(q_desired, qd_desired, q_actual, gain_per_s, velocity_limits):
    """qd_d + k (q_d - q), within +-velocity_limits (rad/s or m/s); ``gain_per_s`` scalar or per joint."""
    qd = (np.asarray(qd_desired, dtype=np.float64)
          + np.asarray(gain_per_s, dtype=np.float64) * (np.asarray(q_desired, dtype=np.float64)
                                                         - np.asarray(q_actual, dtype=np.float64)))
    limits = np.asarray(velocity_limits, dtype=np.float64)
    return np.clip(qd, -limits, limits)
