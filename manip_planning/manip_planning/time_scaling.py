"""Time scalings s(t) on [0, T] (Modern Robotics, Lynch & Park 2017, ch. 9.2) and the shortest T within limits.

A path q(s), s in [0, 1], becomes a trajectory q(s(t)) with
    qd = q'(s) sd,    qdd = q''(s) sd^2 + q'(s) sdd.
Cubic:   s = 3 tau^2 - 2 tau^3,               tau = t / T (zero velocity at both ends).
Quintic: s = 10 tau^3 - 15 tau^4 + 6 tau^5    (zero velocity and acceleration at both ends).
Units: s (time), rad or m (joints); limits are positive per-joint arrays.
"""
from __future__ import annotations

import math

import numpy as np

CUBIC = "cubic"
QUINTIC = "quintic"
PROFILES = (CUBIC, QUINTIC)

# max over tau of ds/dtau and |d2s/dtau2|: cubic 3/2 (tau = 1/2) and 6 (tau = 0, 1); quintic 15/8 (tau = 1/2)
# and 10 / sqrt(3) (tau = 1/2 -+ sqrt(3)/6).
PEAK_VELOCITY = {CUBIC: 1.5, QUINTIC: 15.0 / 8.0}
PEAK_ACCELERATION = {CUBIC: 6.0, QUINTIC: 10.0 / math.sqrt(3.0)}


def _profile(profile):
    p = str(profile).lower()
    if p not in PROFILES:
        raise ValueError(f"unknown time scaling {profile!r} (expected one of {', '.join(PROFILES)})")
    return p


def scaling(profile, t, T):
    """(s, sd, sdd) of the cubic or quintic time scaling at times t (clipped to [0, T]); float64 arrays."""
    p = _profile(profile)
    T = float(T)
    if not (T > 0.0 and math.isfinite(T)):
        raise ValueError(f"duration T must be positive and finite, got {T!r}")
    t = np.clip(np.asarray(t, dtype=np.float64), 0.0, T)
    u = t / T
    if p == CUBIC:
        s = u * u * (3.0 - 2.0 * u)
        sd = 6.0 * u * (1.0 - u) / T
        sdd = (6.0 - 12.0 * u) / (T * T)
    else:
        u2 = u * u
        s = u2 * u * (10.0 - 15.0 * u + 6.0 * u2)
        sd = 30.0 * u2 * (1.0 - u) ** 2 / T
        sdd = u * (60.0 - 180.0 * u + 120.0 * u2) / (T * T)
    return s, sd, sdd


def cubic(t, T):
    """Cubic time scaling (s, sd, sdd) at t in [0, T]."""
    return scaling(CUBIC, t, T)


def quintic(t, T):
    """Quintic time scaling (s, sd, sdd) at t in [0, T]."""
    return scaling(QUINTIC, t, T)


def scaled_limits(velocity_limits, acceleration_limits, velocity_scaling=1.0, acceleration_scaling=1.0):
    """(v, a) per joint after the scalings (fractions in (0, 1]); raises ValueError on bad input."""
    v = np.asarray(velocity_limits, dtype=np.float64).reshape(-1)
    a = np.asarray(acceleration_limits, dtype=np.float64).reshape(-1)
    if v.shape != a.shape:
        raise ValueError(f"velocity and acceleration limits differ in size ({v.size} vs {a.size})")
    for name, k in (("velocity_scaling", velocity_scaling), ("acceleration_scaling", acceleration_scaling)):
        if not (0.0 < k <= 1.0):
            raise ValueError(f"{name} must be in (0, 1], got {k!r}")
    if np.any(~(v > 0.0)) or np.any(~(a > 0.0)):
        raise ValueError("velocity and acceleration limits must be positive (inf allowed)")
    return v * float(velocity_scaling), a * float(acceleration_scaling)


def minimum_duration(delta_q, velocity_limits, acceleration_limits, profile=QUINTIC, velocity_scaling=1.0,
                     acceleration_scaling=1.0):
    """Shortest T (s) for a straight joint-space move by delta_q (rad or m) within the scaled limits.

    Per joint: |qd| <= |dq| PEAK_VELOCITY / T <= v and |qdd| <= |dq| PEAK_ACCELERATION / T^2 <= a.
    """
    dq = np.abs(np.asarray(delta_q, dtype=np.float64).reshape(-1))
    return path_minimum_duration(dq, np.zeros_like(dq), velocity_limits, acceleration_limits, profile,
                                 velocity_scaling, acceleration_scaling)


def path_minimum_duration(dq_ds_max, d2q_ds2_max, velocity_limits, acceleration_limits, profile=QUINTIC,
                          velocity_scaling=1.0, acceleration_scaling=1.0):
    """Shortest T (s) that keeps a path q(s) within the scaled limits, from per-joint bounds of |q'(s)| and
    |q''(s)| over s in [0, 1] (a bound: qdd <= |q''| max sd^2 + |q'| max |sdd|, so T may be a little long)."""
    p = _profile(profile)
    v, a = scaled_limits(velocity_limits, acceleration_limits, velocity_scaling, acceleration_scaling)
    d1 = np.abs(np.asarray(dq_ds_max, dtype=np.float64).reshape(-1))
    d2 = np.abs(np.asarray(d2q_ds2_max, dtype=np.float64).reshape(-1))
    if d1.shape != v.shape or d2.shape != v.shape:
        raise ValueError(f"path bounds must have {v.size} values (one per joint)")
    cv, ca = PEAK_VELOCITY[p], PEAK_ACCELERATION[p]
    t_vel = np.max(cv * d1 / v, initial=0.0)
    t_acc = math.sqrt(max(0.0, float(np.max((cv * cv * d2 + ca * d1) / a, initial=0.0))))
    return float(max(t_vel, t_acc))


def sample_times(T, sample_period):
    """0, dt, 2 dt, ... and T itself as the last time (float64); a final interval below dt / 2 is merged."""
    T, dt = float(T), float(sample_period)
    if not (dt > 0.0 and math.isfinite(dt)):
        raise ValueError(f"sample period must be positive, got {sample_period!r}")
    if T <= 0.0:
        return np.zeros(1)
    n = int(math.floor(T / dt + 1e-9))
    t = np.arange(n + 1, dtype=np.float64) * dt
    if T - t[-1] < 0.5 * dt and len(t) > 1:
        t[-1] = T
    else:
        t = np.append(t, T)
    return t
