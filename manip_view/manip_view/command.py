"""What a joint slider sends to the controller: a short, smooth move from where the arm is, never a jump (no ROS).

``slider_move`` gives a minimum-jerk (quintic, rest to rest) joint path from the measured position to the slider's
target, clipped into the joint limits, timed so that no joint exceeds ``speed_fraction`` of its velocity limit
(peak speed of a quintic rest-to-rest move of amplitude d over T: 15 d / (8 T)). Stop is the empty
trajectory (the controller then holds the measured position, ros2_control semantics).
"""
from __future__ import annotations

import math

import numpy as np

from manip_core.errors import InputError

__all__ = ["slider_move", "PEAK_SPEED_FACTOR"]

PEAK_SPEED_FACTOR = 15.0 / 8.0  # max |s'(t)| T of s(t) = 10 t^3 - 15 t^4 + 6 t^5 on [0, 1]


def _vec(x, n, what):
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    if x.shape != (n,) or not np.all(np.isfinite(x)):
        raise InputError(f"{what} must hold {n} finite values, got {x.tolist()}")
    return x


def slider_move(q_now, q_target, lower, upper, velocity_limits, speed_fraction=0.25, min_duration_s=0.5,
                dt_s=0.1):
    """(times_s (N,), positions (N, dof) rad or m, velocities (N, dof)): the first point is q_now at t = dt_s."""
    q_now = _vec(q_now, len(lower), "q_now")
    q_target = np.clip(_vec(q_target, len(lower), "q_target"), lower, upper)
    if not 0 < speed_fraction <= 1:
        raise InputError(f"speed_fraction must be in (0, 1], got {speed_fraction}")
    vmax = np.where(np.isfinite(velocity_limits), np.asarray(velocity_limits, dtype=np.float64), 1.0) * speed_fraction
    d = q_target - q_now
    duration = max(min_duration_s, float(np.max(PEAK_SPEED_FACTOR * np.abs(d) / vmax)))
    n = max(2, int(math.ceil(duration / dt_s)) + 1)
    s = np.linspace(0.0, 1.0, n)
    pos = q_now + np.outer(10 * s**3 - 15 * s**4 + 6 * s**5, d)
    vel = np.outer((30 * s**2 - 60 * s**3 + 30 * s**4) / duration, d)
    return dt_s + s * duration, pos, vel

