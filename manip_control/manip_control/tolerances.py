"""Path and goal tolerances with control_msgs/FollowJointTrajectory semantics (no rclpy).

A goal's JointTolerance entries (name, position, velocity, acceleration) override the controller's defaults
joint by joint: a value > 0 is the tolerance, 0 keeps the default, a negative value (control_msgs: -1)
removes the check. Joints the goal does not name keep the defaults. Internally "no check" is +inf; in the
controller's default parameters 0 means no check (as in ros2_control's joint_trajectory_controller).

While the trajectory runs (before its last point) the path tolerances apply; from the last point's time
the goal tolerances: the goal succeeds as soon as the state is within them, and fails with
GOAL_TOLERANCE_VIOLATED when it is not within them goal_time_tolerance after the last point's time. A
goal_time_tolerance of 0 in a goal means the default; a default of 0 or inf waits without a time limit.

Accelerations are not measured (sensor_msgs/JointState has none): acceleration tolerances are accepted and
resolved but :func:`check` only tests them when it is given an acceleration error.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["StateTolerances", "Violation", "ToleranceError", "defaults_from_params", "resolve", "check",
           "resolve_goal_time", "goal_outcome", "RUNNING", "SUCCEEDED", "TIMED_OUT"]

RUNNING, SUCCEEDED, TIMED_OUT = "running", "succeeded", "timed_out"


class ToleranceError(ValueError):
    """A goal's tolerances cannot be used (unknown joint, NaN); FollowJointTrajectory INVALID_GOAL."""


@dataclass(frozen=True)
class StateTolerances:
    """Per-joint tolerances (n,) each; +inf = not checked."""

    position: np.ndarray
    velocity: np.ndarray
    acceleration: np.ndarray

    @classmethod
    def unchecked(cls, n):
        return cls(np.full(n, np.inf), np.full(n, np.inf), np.full(n, np.inf))


@dataclass(frozen=True)
class Violation:
    """The first tolerance broken: joint name, quantity ("position", "velocity", "acceleration"), the
    error (signed, desired - actual) and the tolerance."""

    joint: str
    quantity: str
    error: float
    tolerance: float

    def __str__(self):
        unit = {"position": "rad", "velocity": "rad/s", "acceleration": "rad/s^2"}[self.quantity]
        return (f"joint {self.joint}: {self.quantity} error {self.error:+.4g} {unit} beyond tolerance "
                f"{self.tolerance:.4g} {unit}")


def _param_values(values, n, what):
    """Parameter tolerances: one value for every joint or one per joint; <= 0 (or empty) -> no check."""
    a = np.asarray(values if values is not None else [], dtype=np.float64).reshape(-1)
    if a.size == 0:
        return np.full(n, np.inf)
    if a.size == 1:
        a = np.full(n, a[0])
    if a.size != n:
        raise ValueError(f"{what} needs 1 or {n} values (one per joint), got {a.size}")
    if np.any(np.isnan(a)):
        raise ValueError(f"{what} holds NaN")
    return np.where(a > 0.0, a, np.inf)


def defaults_from_params(n, position=(), velocity=(), acceleration=(), what="tolerance"):
    """StateTolerances of controller parameters (see :func:`_param_values`)."""
    return StateTolerances(_param_values(position, n, f"{what} position"),
                           _param_values(velocity, n, f"{what} velocity"),
                           _param_values(acceleration, n, f"{what} acceleration"))


def _override(default, value, where):
    v = float(value)
    if math.isnan(v):
        raise ToleranceError(f"{where} is NaN")
    if v > 0.0:
        return v
    if v < 0.0:
        return math.inf
    return default


def resolve(joint_names, entries, defaults: StateTolerances, what="tolerance"):
    """StateTolerances from the defaults and a goal's entries (objects with name, position, velocity,
    acceleration, e.g. manip_msgs/JointTolerance). Raises ToleranceError for an unknown or repeated joint
    or a NaN value."""
    names = list(joint_names)
    pos, vel, acc = (np.array(defaults.position, float), np.array(defaults.velocity, float),
                     np.array(defaults.acceleration, float))
    seen = set()
    for e in entries or ():
        if e.name not in names:
            raise ToleranceError(f"{what} names joint '{e.name}', which the controller does not drive "
                                 f"({', '.join(names)})")
        if e.name in seen:
            raise ToleranceError(f"{what} names joint '{e.name}' twice")
        seen.add(e.name)
        j = names.index(e.name)
        pos[j] = _override(pos[j], e.position, f"{what} position of {e.name}")
        vel[j] = _override(vel[j], e.velocity, f"{what} velocity of {e.name}")
        acc[j] = _override(acc[j], e.acceleration, f"{what} acceleration of {e.name}")
    return StateTolerances(pos, vel, acc)


def check(tol: StateTolerances, joint_names, position_error, velocity_error=None, acceleration_error=None):
    """The first Violation (positions first, then velocities, then accelerations), or None."""
    for quantity, err, bound in (("position", position_error, tol.position),
                                 ("velocity", velocity_error, tol.velocity),
                                 ("acceleration", acceleration_error, tol.acceleration)):
        if err is None:
            continue
        err = np.asarray(err, dtype=np.float64)
        bad = ~(np.abs(err) <= bound)  # NaN errors count as violations
        if bad.any():
            j = int(np.argmax(bad))
            return Violation(joint_names[j], quantity, float(err[j]), float(bound[j]))
    return None


def resolve_goal_time(goal_value_s, default_s):
    """Goal time tolerance (s): the goal's value when > 0, else the default; 0 or inf -> no limit (inf).
    Negative or NaN goal values raise ToleranceError."""
    v = float(goal_value_s)
    if math.isnan(v) or v < 0.0:
        raise ToleranceError(f"goal_time_tolerance must be >= 0, got {v:g} s")
    if v == 0.0:
        v = float(default_s)
    return v if v > 0.0 else math.inf


def goal_outcome(t, end_time, goal_time_tolerance, within_goal):
    """RUNNING, SUCCEEDED or TIMED_OUT at time t (s from the trajectory start): succeeded once t reaches
    the last point's time within the goal tolerances, timed out when still outside them after
    end_time + goal_time_tolerance."""
    if t < end_time:
        return RUNNING
    if within_goal:
        return SUCCEEDED
    if t > end_time + goal_time_tolerance:
        return TIMED_OUT
    return RUNNING
