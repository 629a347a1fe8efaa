"""Jerk-limited rest-to-rest motion along each straight segment of a joint-space polyline (the ``ruckig``
package, Berscheid & Kroeger 2021), within per-joint velocity, acceleration and jerk limits.

Each segment is one Ruckig problem from rest to rest with phase synchronisation, under which all joints
follow the same normalised profile, so the motion stays on the straight segment (and a collision-free
polyline stays collision-free). Units: rad (or m), s.
"""
from __future__ import annotations

import math

import numpy as np

from .joint_path import PlanningError, Trajectory, concatenate

PROFILE = "jerk_limited"


def _segment(a, b, v, acc, jerk, dt, names):
    from ruckig import InputParameter, Result, Ruckig, Synchronization, Trajectory as RTraj
    dof = len(a)
    inp = InputParameter(dof)
    inp.current_position, inp.target_position = a.tolist(), b.tolist()
    inp.current_velocity = inp.current_acceleration = [0.0] * dof
    inp.target_velocity = inp.target_acceleration = [0.0] * dof
    inp.max_velocity, inp.max_acceleration, inp.max_jerk = v.tolist(), acc.tolist(), jerk.tolist()
    inp.synchronization = Synchronization.Phase
    traj = RTraj(dof)
    res = Ruckig(dof).calculate(inp, traj)
    if res not in (Result.Working, Result.Finished):
        raise PlanningError(PlanningError.PLANNING_FAILED, f"ruckig could not plan the segment ({res})")
    T = float(traj.duration)
    n = max(1, int(math.ceil(T / dt - 1e-9)))
    t = np.minimum(np.arange(n + 1) * dt, T)
    q = np.empty((len(t), dof))
    qd = np.empty_like(q)
    qdd = np.empty_like(q)
    for k, tk in enumerate(t):
        p, vel, ac = traj.at_time(float(tk))
        q[k], qd[k], qdd[k] = p, vel, ac
    q[0], q[-1] = a, b
    return Trajectory(t, q, qd, qdd, list(names), PROFILE)


def jerk_limited_trajectory(waypoints, velocity_limits, acceleration_limits, jerk_limits, sample_period=0.001,
                            joint_names=()):
    """Trajectory through the polyline waypoints (N, dof), at rest at each, sampled every sample_period s."""
    W = np.asarray(waypoints, dtype=np.float64)
    v, a, j = (np.asarray(x, dtype=np.float64).reshape(-1) for x in (velocity_limits, acceleration_limits,
                                                                      jerk_limits))
    if W.ndim != 2 or not (v.size == a.size == j.size == W.shape[1]):
        raise PlanningError(PlanningError.INVALID_INPUT, "waypoints (N, dof) and dof limits of each kind needed")
    if np.any(~(v > 0)) or np.any(~(a > 0)) or np.any(~(j > 0)):
        raise PlanningError(PlanningError.INVALID_INPUT, "velocity, acceleration and jerk limits must be > 0")
    parts = [_segment(p, q, v, a, j, sample_period, joint_names) for p, q in zip(W[:-1], W[1:])
             if np.linalg.norm(q - p) > 1e-12]
    if not parts:
        z = np.zeros((1, W.shape[1]))
        return Trajectory(np.zeros(1), W[:1].copy(), z, z.copy(), list(joint_names), PROFILE)
    return concatenate(parts)
