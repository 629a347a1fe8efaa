"""Joint-space paths q(s), s in [0, 1], and their time parameterisation into float64 trajectories.

A path object evaluates ``derivatives(s) -> (q, q', q'')`` at an array of s (each (len(s), dof), float64):
``LinePath`` (straight line in joint space) and ``SplinePath`` (C2 cubic spline through waypoints, by chord
length). ``time_scale`` turns any such path into a ``Trajectory`` with a cubic or quintic s(t): the given
duration, or the shortest one within the scaled joint velocity and acceleration limits.
Units: rad or m (joints), s (time).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from . import time_scaling as ts


class PlanningError(Exception):
    """A path or trajectory cannot be produced; ``code`` is a manip_msgs/ErrorCode value, ``message`` why."""

    INVALID_INPUT = -1
    NO_IK_SOLUTION = -4
    OUT_OF_LIMITS = -5
    PLANNING_FAILED = -6
    COLLISION = -8

    def __init__(self, code, message):
        super().__init__(message)
        self.code = int(code)
        self.message = str(message)


@dataclass
class Trajectory:
    """Sampled joint trajectory (float64): times (N,) s from 0; positions, velocities, accelerations (N, dof)."""

    times: np.ndarray
    positions: np.ndarray
    velocities: np.ndarray
    accelerations: np.ndarray
    joint_names: list = field(default_factory=list)
    profile: str = ts.QUINTIC

    @property
    def duration(self):
        return float(self.times[-1])

    def __len__(self):
        return len(self.times)


class LinePath:
    """q(s) = q0 + s (q1 - q0)."""

    def __init__(self, q0, q1):
        self.q0 = np.asarray(q0, dtype=np.float64).reshape(-1).copy()
        self.q1 = np.asarray(q1, dtype=np.float64).reshape(-1).copy()
        if self.q0.shape != self.q1.shape:
            raise PlanningError(PlanningError.INVALID_INPUT,
                                f"start and goal have different sizes ({self.q0.size} vs {self.q1.size})")
        self.dof = self.q0.size

    def derivatives(self, s):
        s = np.asarray(s, dtype=np.float64).reshape(-1, 1)
        d = self.q1 - self.q0
        q = self.q0 + s * d
        return q, np.broadcast_to(d, q.shape).copy(), np.zeros_like(q)

    def bounds(self):
        """(max |q'|, max |q''|) per joint over s in [0, 1]."""
        return np.abs(self.q1 - self.q0), np.zeros(self.dof)


class SplinePath:
    """C2 cubic spline through joint waypoints (not-a-knot), parameterised by normalised chord length.

    ``kind="pchip"`` gives a shape-preserving C1 interpolant instead (no overshoot between waypoints).
    """

    def __init__(self, waypoints, kind="cubic"):
        from scipy.interpolate import CubicSpline, PchipInterpolator

        W = np.asarray(waypoints, dtype=np.float64)
        if W.ndim != 2 or len(W) < 2:
            raise PlanningError(PlanningError.INVALID_INPUT, "a spline path needs at least two waypoints")
        keep = [0]
        for i in range(1, len(W)):
            if np.linalg.norm(W[i] - W[keep[-1]]) > 1e-9:
                keep.append(i)
        W = W[keep]
        self.waypoints = W
        self.dof = W.shape[1]
        if len(W) == 1:
            self._line = LinePath(W[0], W[0])
            return
        if len(W) == 2:
            self._line = LinePath(W[0], W[1])
            return
        self._line = None
        u = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(W, axis=0), axis=1))])
        u /= u[-1]
        self.knots = u
        if kind == "pchip":
            self._f = PchipInterpolator(u, W, axis=0)
        else:
            self._f = CubicSpline(u, W, axis=0, bc_type="not-a-knot" if len(W) > 3 else "natural")
        self._d1 = self._f.derivative(1)
        self._d2 = self._f.derivative(2)

    def derivatives(self, s):
        if self._line is not None:
            return self._line.derivatives(s)
        s = np.clip(np.asarray(s, dtype=np.float64).reshape(-1), 0.0, 1.0)
        return self._f(s), self._d1(s), self._d2(s)

    def bounds(self, samples=2001):
        if self._line is not None:
            return self._line.bounds()
        s = np.linspace(0.0, 1.0, samples)
        s = np.union1d(s, self.knots)
        _, d1, d2 = self.derivatives(s)
        return np.max(np.abs(d1), axis=0), np.max(np.abs(d2), axis=0)


def time_scale(path, profile=ts.QUINTIC, *, velocity_limits, acceleration_limits, duration=0.0,
               velocity_scaling=1.0, acceleration_scaling=1.0, sample_period=0.02, joint_names=(),
               position_limits=None):
    """Trajectory of ``path`` under a cubic/quintic s(t).

    duration > 0: that duration, refused (INVALID_INPUT) when it would exceed the scaled limits;
    duration == 0: the shortest duration within the scaled limits (bound from path.bounds(), then checked
    on the samples and stretched if the sampled path needs it). position_limits: optional (lower, upper)
    checked on every sample (OUT_OF_LIMITS).
    """
    profile = ts._profile(profile)
    v, a = ts.scaled_limits(velocity_limits, acceleration_limits, velocity_scaling, acceleration_scaling)
    d1, d2 = path.bounds()
    T_min = ts.path_minimum_duration(d1, d2, v, a, profile)
    if duration and duration > 0.0:
        if not math.isfinite(duration):
            raise PlanningError(PlanningError.INVALID_INPUT, f"duration must be finite, got {duration}")
        T = float(duration)
        if T < T_min * (1.0 - 1e-9):
            raise PlanningError(PlanningError.INVALID_INPUT,
                                f"duration {T:.3f} s is shorter than the {T_min:.3f} s that the joint velocity/"
                                f"acceleration limits (scaled by {velocity_scaling:g}/{acceleration_scaling:g}) "
                                f"allow for this path")
        fixed = True
    else:
        T = T_min
        fixed = False
    if T <= 1e-9:  # start == goal (up to rounding of the IK on a zero-length Cartesian line)
        q, _, _ = path.derivatives([0.0])
        z = np.zeros_like(q)
        return Trajectory(np.zeros(1), q, z, z.copy(), list(joint_names), profile)
    for _ in range(4):
        t = ts.sample_times(T, sample_period)
        s, sd, sdd = ts.scaling(profile, t, T)
        q, d1s, d2s = path.derivatives(s)
        qd = d1s * sd[:, None]
        qdd = d2s * (sd * sd)[:, None] + d1s * sdd[:, None]
        rv = float(np.max(np.abs(qd) / v))
        ra = float(np.max(np.abs(qdd) / a))
        if (rv <= 1.0 + 1e-9 and ra <= 1.0 + 1e-9) or fixed:
            break
        T *= max(rv, math.sqrt(ra), 1.0) * 1.001
    if fixed and (rv > 1.0 + 1e-6 or ra > 1.0 + 1e-6):
        raise PlanningError(PlanningError.INVALID_INPUT,
                            f"duration {T:.3f} s exceeds the scaled limits on this path (velocity x{rv:.3f}, "
                            f"acceleration x{ra:.3f})")
    if position_limits is not None:
        lo, hi = (np.asarray(x, dtype=np.float64) for x in position_limits)
        bad = np.argwhere((q < lo - 1e-9) | (q > hi + 1e-9))
        if len(bad):
            k, j = bad[0]
            name = joint_names[j] if len(joint_names) > j else f"#{j}"
            raise PlanningError(PlanningError.OUT_OF_LIMITS,
                                f"joint '{name}' leaves its limits [{lo[j]:.3f}, {hi[j]:.3f}] at t = {t[k]:.3f} s "
                                f"({q[k, j]:.3f})")
    q[-1] = path.derivatives([1.0])[0][0]
    qd[0] = 0.0
    qd[-1] = 0.0
    return Trajectory(np.ascontiguousarray(t, dtype=np.float64), np.ascontiguousarray(q, dtype=np.float64),
                      np.ascontiguousarray(qd, dtype=np.float64), np.ascontiguousarray(qdd, dtype=np.float64),
                      list(joint_names), profile)


def joint_line_trajectory(q0, q1, profile=ts.QUINTIC, **kwargs):
    """Straight line in joint space from q0 to q1, time-scaled (see time_scale for the keyword arguments)."""
    return time_scale(LinePath(q0, q1), profile, **kwargs)


def concatenate(trajectories):
    """One trajectory from consecutive ones (each starting where the previous ends, at rest)."""
    trajs = [t for t in trajectories if len(t)]
    if not trajs:
        raise PlanningError(PlanningError.INVALID_INPUT, "nothing to concatenate")
    times, q, qd, qdd = [trajs[0].times], [trajs[0].positions], [trajs[0].velocities], [trajs[0].accelerations]
    t0 = trajs[0].duration
    for t in trajs[1:]:
        times.append(t.times[1:] + t0)
        q.append(t.positions[1:])
        qd.append(t.velocities[1:])
        qdd.append(t.accelerations[1:])
        t0 += t.duration
    return Trajectory(np.concatenate(times), np.concatenate(q), np.concatenate(qd), np.concatenate(qdd),
                      list(trajs[0].joint_names), trajs[0].profile)
