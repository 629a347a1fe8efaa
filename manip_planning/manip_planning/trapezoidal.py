"""Synchronised trapezoidal velocity profiles: the fastest rest-to-rest motion along each straight segment of
a joint-space polyline under per-joint velocity and acceleration limits.

On a segment q(s) = a + s (b - a), s in [0, 1], every joint's |qd_i| = |b_i - a_i| sd and |qdd_i| =
|b_i - a_i| |sdd|, so the limits become sd <= V = min_i v_i / |dq_i| and |sdd| <= A = min_i a_i / |dq_i|; the
time-optimal s(t) under those bounds is bang-coast-bang: accelerate at A, cruise at V (when 1 > V^2 / A),
brake at A (Lynch & Park 2017, ch. 9.2.2). All joints start and stop together and the path stays on the
segment, so a collision-free polyline stays collision-free. Units: rad (or m), s.
"""
from __future__ import annotations

import math

import numpy as np

from .joint_path import PlanningError, Trajectory, concatenate

PROFILE = "trapezoidal"


def segment_profile(delta_q, velocity_limits, acceleration_limits):
    """(V, A, t_acc, T): the s-profile's peak rate (1/s), acceleration (1/s^2), acceleration time and
    duration (s) for a segment with joint change delta_q; T = 0 for a zero-length segment."""
    dq = np.abs(np.asarray(delta_q, dtype=np.float64))
    moving = dq > 0
    if not np.any(moving):
        return 0.0, 0.0, 0.0, 0.0
    v = np.asarray(velocity_limits, dtype=np.float64)
    a = np.asarray(acceleration_limits, dtype=np.float64)
    if np.any(~(v[moving] > 0)) or np.any(~(a[moving] > 0)):
        raise PlanningError(PlanningError.INVALID_INPUT, "velocity and acceleration limits must be positive")
    V = float(np.min(v[moving] / dq[moving]))
    A = float(np.min(a[moving] / dq[moving]))
    if V * V / A >= 1.0:          # triangular: the peak rate is never reached
        ta = math.sqrt(1.0 / A)
        return A * ta, A, ta, 2.0 * ta
    ta = V / A
    return V, A, ta, 1.0 / V + V / A


def s_of_t(t, V, A, ta, T):
    """(s, sd, sdd) of the trapezoidal profile at times t (clipped to [0, T])."""
    t = np.clip(np.asarray(t, dtype=np.float64), 0.0, T)
    s = np.empty_like(t)
    sd = np.empty_like(t)
    sdd = np.empty_like(t)
    acc = t < ta
    dec = t > T - ta
    cru = ~(acc | dec)
    s[acc], sd[acc], sdd[acc] = 0.5 * A * t[acc] ** 2, A * t[acc], A
    s[cru] = 0.5 * A * ta * ta + V * (t[cru] - ta)
    sd[cru], sdd[cru] = V, 0.0
    r = T - t[dec]
    s[dec], sd[dec], sdd[dec] = 1.0 - 0.5 * A * r ** 2, A * r, -A
    return s, sd, sdd


def trapezoidal_trajectory(waypoints, velocity_limits, acceleration_limits, sample_period=0.001,
                           joint_names=()):
    """Trajectory through the polyline waypoints (N, dof), at rest at every waypoint, sampled every
    sample_period s (each segment's last sample falls exactly on its end)."""
    W = np.asarray(waypoints, dtype=np.float64)
    if W.ndim != 2 or len(W) < 1:
        raise PlanningError(PlanningError.INVALID_INPUT, "waypoints must be (N, dof) with N >= 1")
    if not sample_period > 0:
        raise PlanningError(PlanningError.INVALID_INPUT, f"sample_period must be > 0, got {sample_period}")
    parts = []
    for a, b in zip(W[:-1], W[1:]):
        V, A, ta, T = segment_profile(b - a, velocity_limits, acceleration_limits)
        if T == 0.0:
            continue
        n = max(1, int(math.ceil(T / sample_period - 1e-9)))
        t = np.minimum(np.arange(n + 1) * sample_period, T)
        s, sd, sdd = s_of_t(t, V, A, ta, T)
        d = b - a
        parts.append(Trajectory(t, a + s[:, None] * d, sd[:, None] * d, sdd[:, None] * d, list(joint_names),
                                PROFILE))
    if not parts:
        z = np.zeros((1, W.shape[1]))
        return Trajectory(np.zeros(1), W[:1].copy(), z, z.copy(), list(joint_names), PROFILE)
    return concatenate(parts)
