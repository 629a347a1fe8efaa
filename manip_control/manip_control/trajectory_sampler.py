"""Joint trajectories as arrays: validation and sampling (no rclpy).

A :class:`Trajectory` is what a trajectory_msgs/JointTrajectory carries: times from the trajectory start (s),
positions (N, n) in rad or m, optional velocities (N, n) and accelerations (N, n). :func:`validate` checks it
against a robot's joints and limits and reorders it into the model's joint order; :class:`TrajectorySampler`
interpolates it:

- positions, velocities and accelerations given: quintic Hermite between points (C2);
- positions and velocities given: cubic Hermite (C1);
- positions only: linear (velocity = the finite difference of the segment, acceleration 0).

Before the first point, the sampler interpolates from a start state (the robot's state when the trajectory
was taken up, as ros2_control's joint_trajectory_controller does) with the same interpolation; after the last
point it holds the last positions with zero velocity and acceleration.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Trajectory", "InvalidTrajectory", "InvalidJoints", "validate", "check_start", "TrajectorySampler",
           "hermite_coefficients", "LIMIT_MARGIN"]

# Positions may exceed the joint limits by this much (rad or m): rounding in planners and message round trips.
LIMIT_MARGIN = 1e-9


class InvalidTrajectory(ValueError):
    """The trajectory cannot be executed; the message says why (FollowJointTrajectory INVALID_GOAL)."""


class InvalidJoints(InvalidTrajectory):
    """The trajectory's joint names do not match the controlled joints (FollowJointTrajectory INVALID_JOINTS)."""


@dataclass(frozen=True)
class Trajectory:
    """A joint trajectory as arrays. times: (N,) s from the trajectory start, strictly increasing, >= 0;
    positions: (N, n); velocities / accelerations: (N, n) or None. Joint order: ``joint_names``."""

    joint_names: tuple
    times: np.ndarray
    positions: np.ndarray
    velocities: np.ndarray | None = None
    accelerations: np.ndarray | None = None

    @property
    def duration(self):
        """Time of the last point from the trajectory start (s)."""
        return float(self.times[-1])

    @property
    def interpolation(self):
        """"quintic", "cubic" or "linear" (from the fields the points carry)."""
        if self.accelerations is not None:
            return "quintic"
        return "cubic" if self.velocities is not None else "linear"

    @classmethod
    def from_points(cls, joint_names, points):
        """Build from trajectory_msgs/JointTrajectoryPoint-like objects (fields positions, velocities,
        accelerations, time_from_start with sec/nanosec, or plain seconds) without checking anything;
        :func:`validate` does the checks. Rows of different lengths are kept as a ragged object list so that
        validate can name the offending point."""
        times, pos, vel, acc = [], [], [], []
        for p in points:
            tfs = p.time_from_start
            times.append(float(tfs) if isinstance(tfs, (int, float)) else tfs.sec + 1e-9 * tfs.nanosec)
            pos.append(list(p.positions))
            vel.append(list(p.velocities))
            acc.append(list(p.accelerations))
        return _RawTrajectory(tuple(joint_names), times, pos, vel, acc)


@dataclass(frozen=True)
class _RawTrajectory:
    joint_names: tuple
    times: list
    positions: list
    velocities: list
    accelerations: list


def _finite_rows(rows, what, n):
    for i, row in enumerate(rows):
        if len(row) != n:
            raise InvalidTrajectory(f"point {i} has {len(row)} {what} for {n} joints")
    arr = np.array(rows, dtype=np.float64).reshape(len(rows), n)
    bad = ~np.isfinite(arr)
    if bad.any():
        i, j = map(int, np.argwhere(bad)[0])
        raise InvalidTrajectory(f"point {i} holds NaN or inf in {what} (column {j})")
    return arr


def _optional_rows(rows, what, n):
    given = [len(r) > 0 for r in rows]
    if not any(given):
        return None
    if not all(given):
        missing = [i for i, g in enumerate(given) if not g]
        raise InvalidTrajectory(f"{what} are given for some points but not for point(s) {missing[:5]}: give "
                                f"them for every point or for none")
    return _finite_rows(rows, what, n)


def _rows(x, n_points):
    """Rows of an (N, n) array-like as lists; None -> N empty rows."""
    if x is None:
        return [[] for _ in range(n_points)]
    return [list(np.atleast_1d(np.asarray(r, dtype=np.float64))) for r in x]


def validate(traj, model_joint_names, lower=None, upper=None):
    """Check a trajectory and return it as a :class:`Trajectory` in the order of ``model_joint_names``.

    ``traj``: a :class:`Trajectory` or the result of :meth:`Trajectory.from_points`. ``lower``/``upper``:
    joint limits in model order (None: not checked). Raises :class:`InvalidJoints` (joint names missing,
    unknown or repeated) or :class:`InvalidTrajectory` (no points, counts that do not match, times not
    strictly increasing or negative, NaN/inf, accelerations without velocities, positions beyond limits).
    """
    names = list(traj.joint_names)
    model_names = list(model_joint_names)
    if not names:
        raise InvalidJoints("the trajectory names no joints")
    dup = sorted({x for x in names if names.count(x) > 1})
    if dup:
        raise InvalidJoints(f"joint name(s) repeated: {', '.join(dup)}")
    unknown = [x for x in names if x not in model_names]
    if unknown:
        raise InvalidJoints(f"unknown joint(s) {', '.join(unknown)}; the controller drives "
                            f"{', '.join(model_names)}")
    missing = [x for x in model_names if x not in names]
    if missing:
        raise InvalidJoints(f"the trajectory lacks joint(s) {', '.join(missing)}; it must name every "
                            f"controlled joint ({', '.join(model_names)})")
    n = len(names)
    times = np.asarray(traj.times, dtype=np.float64).reshape(-1)
    if times.size == 0:
        raise InvalidTrajectory("the trajectory has no points")
    if not np.all(np.isfinite(times)):
        raise InvalidTrajectory("time_from_start holds NaN or inf")
    if times[0] < 0.0:
        raise InvalidTrajectory(f"time_from_start of point 0 is negative ({times[0]:g} s)")
    steps = np.diff(times)
    if np.any(steps <= 0.0):
        i = int(np.argmax(steps <= 0.0))
        raise InvalidTrajectory(f"time_from_start is not strictly increasing: point {i + 1} at "
                                f"{times[i + 1]:.9g} s does not come after point {i} at {times[i]:.9g} s")
    if isinstance(traj, Trajectory):
        traj = _RawTrajectory(traj.joint_names, times, _rows(traj.positions, times.size),
                              _rows(traj.velocities, times.size), _rows(traj.accelerations, times.size))
    if not (len(traj.positions) == len(traj.velocities) == len(traj.accelerations) == times.size):
        raise InvalidTrajectory(f"{len(traj.positions)} rows of positions for {times.size} times")
    pos = _finite_rows(traj.positions, "positions", n)
    vel = _optional_rows(traj.velocities, "velocities", n)
    acc = _optional_rows(traj.accelerations, "accelerations", n)
    if acc is not None and vel is None:
        raise InvalidTrajectory("accelerations are given without velocities")
    order = [names.index(x) for x in model_names]
    pos = pos[:, order]
    vel = None if vel is None else vel[:, order]
    acc = None if acc is None else acc[:, order]
    if lower is not None and upper is not None:
        lo = np.asarray(lower, dtype=np.float64)
        hi = np.asarray(upper, dtype=np.float64)
        bad = (pos < lo - LIMIT_MARGIN) | (pos > hi + LIMIT_MARGIN)
        if bad.any():
            i, j = map(int, np.argwhere(bad)[0])
            raise InvalidTrajectory(f"point {i}: position {pos[i, j]:.6g} of joint {model_names[j]} is beyond "
                                    f"its limits [{lo[j]:.6g}, {hi[j]:.6g}]")
    for a in (times, pos, vel, acc):
        if a is not None:
            a.setflags(write=False)
    return Trajectory(tuple(model_names), times, pos, vel, acc)


def check_start(traj, q, lead_s, velocity_limits, tolerance):
    """Refuse a trajectory whose first point the robot cannot reach without a jump.

    The first point comes ``lead_s`` s from now (0 or less: at once, e.g. time_from_start 0 and header.stamp 0).
    Joint j may then be at most ``tolerance`` (rad or m) + velocity_limits[j] (rad/s or m/s) * lead_s from its
    measured position q[j]; a joint without a finite positive velocity limit only gets ``tolerance`` when the
    point comes at once. ros2_control's joint_trajectory_controller takes such a point as the set point at once
    (the arm lunges; its path-tolerance check of the first sample, ros2_controllers PR 350, aborts afterwards);
    here it is refused before anything moves. ``tolerance`` <= 0: not checked. Raises InvalidTrajectory naming
    the joint, the distance and the time.
    """
    if not tolerance > 0.0:
        return
    q = np.asarray(q, dtype=np.float64)
    d = np.abs(np.asarray(traj.positions[0], dtype=np.float64) - q)
    v = np.asarray(velocity_limits, dtype=np.float64)
    lead = max(float(lead_s), 0.0)
    limited = np.isfinite(v) & (v > 0.0)
    reach = np.where(limited, np.where(limited, v, 0.0) * lead, np.inf if lead > 0.0 else 0.0)
    over = d - (tolerance + reach)
    if np.any(over > 0.0):
        j = int(np.argmax(over))
        when = "at once (time_from_start 0)" if lead == 0.0 else f"in {lead:.3f} s"
        speed = f" + velocity limit {v[j]:g} x {lead:.3f} s" if limited[j] and lead > 0.0 else ""
        raise InvalidTrajectory(
            f"point 0 puts joint {traj.joint_names[j]} {d[j]:.4g} away from its measured position {q[j]:.4g} "
            f"{when}: more than start_tolerance {tolerance:g}{speed}; the arm would jump (start the trajectory "
            f"at the current position or give the first point time to get there)")


def hermite_coefficients(T, p0, v0, a0, p1, v1, a1, kind):
    """Polynomial coefficients c (k+1, n), lowest order first, of p(s) = sum c_k s^k on [0, T] that meets
    the boundary values: "linear" (p0 -> p1), "cubic" (p, v at both ends) or "quintic" (p, v, a)."""
    p0, p1 = np.asarray(p0, float), np.asarray(p1, float)
    dp = p1 - p0
    if kind == "linear":
        return np.stack([p0, dp / T])
    v0, v1 = np.asarray(v0, float), np.asarray(v1, float)
    if kind == "cubic":
        c2 = (3.0 * dp - (2.0 * v0 + v1) * T) / T ** 2
        c3 = (-2.0 * dp + (v0 + v1) * T) / T ** 3
        return np.stack([p0, v0, c2, c3])
    a0, a1 = np.asarray(a0, float), np.asarray(a1, float)
    c3 = (20.0 * dp - (8.0 * v1 + 12.0 * v0) * T - (3.0 * a0 - a1) * T ** 2) / (2.0 * T ** 3)
    c4 = (-30.0 * dp + (14.0 * v1 + 16.0 * v0) * T + (3.0 * a0 - 2.0 * a1) * T ** 2) / (2.0 * T ** 4)
    c5 = (12.0 * dp - 6.0 * (v1 + v0) * T - (a0 - a1) * T ** 2) / (2.0 * T ** 5)
    return np.stack([p0, v0, 0.5 * a0, c3, c4, c5])


def _eval(c, s):
    """p, p', p'' of the polynomial with coefficients c (k+1, n) at s (Horner)."""
    k = c.shape[0] - 1
    p = c[k].copy()
    d = np.zeros_like(p)
    dd = np.zeros_like(p)
    for i in range(k - 1, -1, -1):
        dd = dd * s + 2.0 * d
        d = d * s + p
        p = p * s + c[i]
    return p, d, dd


class TrajectorySampler:
    """Desired state (q, qd, qdd) of a validated :class:`Trajectory` at time t (s from the trajectory start).

    start_state: (q, qd[, qdd]) of the robot at ``start_time`` (s, same time base, may be negative when the
    trajectory starts in the future); when the first point comes later than start_time the sampler
    interpolates from it. Without a start state (or when start_time >= the first point's time) the first point
    is held before its time. Before start_time the start positions are held. After the last point: its
    positions with zero velocity and acceleration.
    """

    def __init__(self, traj: Trajectory, start_state=None, start_time=0.0):
        self.trajectory = traj
        self.kind = traj.interpolation
        n = len(traj.joint_names)
        t = np.asarray(traj.times, float)
        P = np.asarray(traj.positions, float)
        V = np.zeros_like(P) if traj.velocities is None else np.asarray(traj.velocities, float)
        A = np.zeros_like(P) if traj.accelerations is None else np.asarray(traj.accelerations, float)
        self.start_time = float(start_time)
        if start_state is not None and self.start_time < t[0]:
            q0 = np.asarray(start_state[0], float).reshape(n)
            v0 = np.asarray(start_state[1], float).reshape(n) if len(start_state) > 1 else np.zeros(n)
            a0 = np.asarray(start_state[2], float).reshape(n) if len(start_state) > 2 else np.zeros(n)
            t = np.concatenate([[self.start_time], t])
            P, V, A = np.vstack([q0, P]), np.vstack([v0, V]), np.vstack([a0, A])
        self._t = t
        self._P = P
        self._segments = [hermite_coefficients(t[i + 1] - t[i], P[i], V[i], A[i], P[i + 1], V[i + 1], A[i + 1],
                                               self.kind) for i in range(len(t) - 1)]
        self._zero = np.zeros(n)

    @property
    def end_time(self):
        """Time of the last point (s from the trajectory start)."""
        return float(self._t[-1])

    @property
    def first_time(self):
        """Time from which the sampler interpolates (the start state's time or the first point's)."""
        return float(self._t[0])

    def sample(self, t):
        """(q, qd, qdd) at t (s from the trajectory start); new arrays."""
        t = float(t)
        last = len(self._segments) - 1
        if last < 0 or t < self._t[0]:
            return self._P[0].copy(), self._zero.copy(), self._zero.copy()
        if t > self._t[-1]:
            return self._P[-1].copy(), self._zero.copy(), self._zero.copy()
        i = min(int(np.searchsorted(self._t, t, side="right")) - 1, last)
        return _eval(self._segments[i], t - self._t[i])

    def finished(self, t):
        """True at and after the last point."""
        return t >= self._t[-1]
