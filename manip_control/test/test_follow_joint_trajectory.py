"""follow_joint_trajectory: ros2_control joint_trajectory_controller semantics (library, no ROS graph)."""
import numpy as np
import pytest

from manip_control.follow_joint_trajectory import (JTC_TEXTS, MANIP_TEXTS, PartialGoalError, feedback_index,
                                                   fill_partial_goal)
from manip_control.trajectory_sampler import InvalidJoints, Trajectory, validate
from manip_control.tolerances import Violation


class Pt:
    def __init__(self, t, p, v=(), a=()):
        self.time_from_start, self.positions, self.velocities, self.accelerations = t, list(p), list(v), list(a)


MODEL = ("a", "b", "c")


def test_partial_goal_holds_the_other_joints_in_model_order():
    names, pts = fill_partial_goal(["c", "a"], [Pt(0.5, [3.0, 1.0], [0.3, 0.1], [0.0, 0.0]),
                                                 Pt(1.0, [3.5, 1.5], [0.0, 0.0], [0.0, 0.0])],
                                   MODEL, hold_positions=[10.0, 20.0, 30.0])
    assert names == ["c", "a", "b"]
    traj = validate(Trajectory.from_points(names, pts), MODEL)
    # model order: a from the goal, b held at its set point with zero velocity/acceleration, c from the goal
    np.testing.assert_array_equal(traj.positions, [[1.0, 20.0, 3.0], [1.5, 20.0, 3.5]])
    np.testing.assert_array_equal(traj.velocities, [[0.1, 0.0, 0.3], [0.0, 0.0, 0.0]])
    np.testing.assert_array_equal(traj.accelerations, np.zeros((2, 3)))
    np.testing.assert_array_equal(traj.times, [0.5, 1.0])


def test_partial_goal_positions_only_stays_positions_only():
    names, pts = fill_partial_goal(["b"], [Pt(1.0, [2.0])], MODEL, [0.0, 0.0, 0.0])
    assert pts[0].velocities == [] and pts[0].accelerations == [] and pts[0].positions == [2.0, 0.0, 0.0]
    assert validate(Trajectory.from_points(names, pts), MODEL).interpolation == "linear"


def test_full_goal_is_returned_unchanged_and_bad_goals_are_left_to_validation():
    pts = [Pt(1.0, [1.0, 2.0, 3.0])]
    names, out = fill_partial_goal(["b", "c", "a"], pts, MODEL, [0, 0, 0])
    assert names == ["b", "c", "a"] and out is pts
    names, pts = fill_partial_goal(["a", "zz"], [Pt(1.0, [1.0, 2.0])], MODEL, [0, 0, 0])
    with pytest.raises(InvalidJoints, match="zz"):
        validate(Trajectory.from_points(names, pts), MODEL)
    with pytest.raises(PartialGoalError, match="point 0: 1 positions for 2 joint names"):
        fill_partial_goal(["a", "b"], [Pt(1.0, [1.0])], MODEL, [0, 0, 0])


def test_feedback_index_is_the_point_heading_to():
    times = [0.5, 1.0, 2.0]
    assert [feedback_index(times, t) for t in (0.0, 0.49, 0.5, 0.99, 1.5, 2.0, 5.0)] == [0, 0, 1, 1, 2, 2, 2]


def test_result_strings_are_joint_trajectory_controllers():
    v = Violation("b", "position", 0.2, 0.1)
    assert JTC_TEXTS.succeeded() == "Goal successfully reached!"
    assert JTC_TEXTS.canceled() == ""
    assert JTC_TEXTS.path_violation(0.3, v) == "Aborted due to path tolerance violation"
    assert (JTC_TEXTS.goal_time_exceeded(0.1234567, 0.5, v)
            == "Aborted due to goal_time_tolerance exceeding by 0.123457 seconds")
    assert JTC_TEXTS.preempted("preempted by a new goal") == "Current goal preempted by new incoming action."
    # manip's own action keeps its detailed strings
    assert MANIP_TEXTS.succeeded() == ""
    assert MANIP_TEXTS.path_violation(0.3, v) == ("path tolerance violated at t = 0.300 s: joint b: position "
                                                  "error +0.2 rad beyond tolerance 0.1 rad")
    assert "0.123 s after" in MANIP_TEXTS.goal_time_exceeded(0.1234567, 0.5, v)
    assert MANIP_TEXTS.preempted("preempted by a new goal") == "preempted by a new goal"
