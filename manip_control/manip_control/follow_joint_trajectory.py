"""control_msgs/FollowJointTrajectory semantics of ros2_control's joint_trajectory_controller (no rclpy).

The controller node serves the same goal machinery under two action names; this module holds what differs
between them and what the ros2_control controller (Kilted release, ros2_controllers
``joint_trajectory_controller.cpp``) does that a generic trajectory follower does not:

- :class:`GoalTexts` / :data:`JTC_TEXTS`: the result ``error_string`` of each outcome, word for word those of
  joint_trajectory_controller (``"Goal successfully reached!"``, ``"Aborted due to path tolerance
  violation"``, ``"Aborted due to goal_time_tolerance exceeding by 0.123000 seconds"``, ``"Current goal
  preempted by new incoming action."``, an empty string when canceled), so that MoveIt and scripts written
  for a ros2_control arm read the same results. :data:`MANIP_TEXTS` are the more detailed strings of
  manip's own ``ExecuteTrajectory`` action.
- :func:`fill_partial_goal`: a goal naming a subset of the joints (``allow_partial_joints_goal``) gets the
  other joints appended, holding their current set point with zero velocity and acceleration in every
  point, as the ros2_control controller does.
- :func:`feedback_index`: ``Feedback.index`` (control_msgs 6.3 and later): the index of the point the
  trajectory is heading to.

Result codes are the same numbers in control_msgs/FollowJointTrajectory and manip_msgs/ExecuteTrajectory
(SUCCESSFUL 0, INVALID_GOAL -1, INVALID_JOINTS -2, OLD_HEADER_TIMESTAMP -3, PATH_TOLERANCE_VIOLATED -4,
GOAL_TOLERANCE_VIOLATED -5).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["GoalTexts", "JTC_TEXTS", "MANIP_TEXTS", "PartialGoalError", "fill_partial_goal", "feedback_index",
           "SimplePoint"]


@dataclass(frozen=True)
class GoalTexts:
    """Result error_string of each way a goal ends. ``detailed``: append manip's diagnostics (which joint,
    by how much); joint_trajectory_controller's strings have none (its log has them; so has manip's)."""

    name: str
    detailed: bool

    def succeeded(self):
        return "" if self.detailed else "Goal successfully reached!"

    def canceled(self):
        return "canceled; holding the current position" if self.detailed else ""

    def path_violation(self, t_rel_s, violation):
        if self.detailed:
            return f"path tolerance violated at t = {t_rel_s:.3f} s: {violation}"
        return "Aborted due to path tolerance violation"

    def goal_time_exceeded(self, late_s, goal_time_s, violation):
        if self.detailed:
            return (f"goal tolerance not reached {late_s:.3f} s after the trajectory's end "
                    f"(goal_time_tolerance {goal_time_s:g} s): {violation}")
        # std::to_string(double) of the C++ controller: six decimals
        return f"Aborted due to goal_time_tolerance exceeding by {late_s:.6f} seconds"

    def preempted(self, why):
        """``why``: manip's reason ("preempted by a new goal", "... by a trajectory on the topic")."""
        if self.detailed or why != "preempted by a new goal":
            return why
        return "Current goal preempted by new incoming action."


JTC_TEXTS = GoalTexts("control_msgs/FollowJointTrajectory", detailed=False)
MANIP_TEXTS = GoalTexts("manip_msgs/ExecuteTrajectory", detailed=True)


class PartialGoalError(ValueError):
    """A partial goal that cannot be completed (a point without positions to extend)."""


@dataclass
class SimplePoint:
    """A trajectory point with time_from_start in seconds (what Trajectory.from_points accepts)."""

    positions: list
    velocities: list
    accelerations: list
    time_from_start: float


def fill_partial_goal(joint_names, points, model_joint_names, hold_positions):
    """(joint names, points) naming every joint of ``model_joint_names``.

    ``points``: trajectory_msgs/JointTrajectoryPoint-like objects (positions, velocities, accelerations,
    time_from_start with sec/nanosec or seconds). Each joint of the model that ``joint_names`` lacks is
    appended, holding ``hold_positions[j]`` (model order, rad or m) in every point, with velocity and
    acceleration 0 where the point has those fields. Unknown or repeated names are left for the trajectory
    validation to report. When nothing is missing the input comes back unchanged.
    """
    names = list(joint_names)
    missing = [j for j, name in enumerate(model_joint_names) if name not in names]
    if not missing:
        return names, points
    hold = np.asarray(hold_positions, dtype=np.float64)
    out = []
    for i, p in enumerate(points):
        pos, vel, acc = list(p.positions), list(p.velocities), list(p.accelerations)
        if len(pos) != len(names):
            raise PartialGoalError(f"point {i}: {len(pos)} positions for {len(names)} joint names")
        pos += [float(hold[j]) for j in missing]
        if vel:
            vel += [0.0] * len(missing)
        if acc:
            acc += [0.0] * len(missing)
        tfs = p.time_from_start
        t = float(tfs) if isinstance(tfs, (int, float)) else tfs.sec + 1e-9 * tfs.nanosec
        out.append(SimplePoint(pos, vel, acc, t))
    return names + [model_joint_names[j] for j in missing], out


def feedback_index(times_s, t_rel_s):
    """Index of the point the trajectory heads to at ``t_rel_s`` (s from its start): 0 before the first
    point's time, the last index from the last point's time on (joint_trajectory_controller's
    ``next_point_index``)."""
    times = np.asarray(times_s, dtype=np.float64)
    return int(min(np.searchsorted(times, t_rel_s, side="right"), times.size - 1))
