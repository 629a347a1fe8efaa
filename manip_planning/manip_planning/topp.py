"""Time-optimal parametrisation (TOPP-RA, Pham & Pham 2018, the ``toppra`` package) of a smooth path through
joint-space waypoints under per-joint velocity and acceleration limits.

The waypoints are joined by a C2 cubic spline in normalised chord length (clamped: at rest at both ends);
TOPP-RA finds the fastest s(t) along it, at rest at both ends. A spline leaves the straight segments that
a planner checked, so with a ``checker`` (robot_collision.CollisionChecker) the spline is re-checked at
``check_resolution_rad``; a colliding spline gives None, and callers fall back to trapezoidal.py on the
polyline. The limits given to TOPP-RA are shrunk by ``safety`` (1 %): the constant-acceleration
parametrisation meets them at its grid points, and the margin covers the samples between them.
"""
from __future__ import annotations

import math

import numpy as np

from .joint_path import PlanningError, Trajectory

PROFILE = "toppra"


def _spline(W):
    import toppra as ta
    u = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(W, axis=0), axis=1))])
    return ta.SplineInterpolator(u / u[-1], W, bc_type="clamped"), u[-1]


def toppra_trajectory(waypoints, velocity_limits, acceleration_limits, sample_period=0.001, joint_names=(),
                      checker=None, check_resolution_rad=0.005, safety=0.01, gridpoints=None):
    """Trajectory along the spline through waypoints (N, dof), or None when the spline collides (see
    module doc); raises PlanningError when TOPP-RA finds no parametrisation."""
    import toppra as ta
    import toppra.algorithm as algo
    import toppra.constraint as constraint
    W = np.asarray(waypoints, dtype=np.float64)
    keep = [0] + [i for i in range(1, len(W)) if np.linalg.norm(W[i] - W[i - 1]) > 1e-9]
    W = W[keep]
    dof = W.shape[1]
    if len(W) < 2:
        z = np.zeros((1, dof))
        return Trajectory(np.zeros(1), W[:1].copy(), z, z.copy(), list(joint_names), PROFILE)
    if len(W) == 2:   # a clamped spline through two points is a straight line: insert its midpoint
        W = np.array([W[0], 0.5 * (W[0] + W[1]), W[1]])
    path, length = _spline(W)
    if checker is not None:
        n = max(2, int(math.ceil(length * 1.5 / check_resolution_rad)) + 1)
        s = np.linspace(0.0, 1.0, n)
        Q = path(s)
        while np.max(np.linalg.norm(np.diff(Q, axis=0), axis=1)) > check_resolution_rad and n < 10 ** 6:
            n *= 2
            s = np.linspace(0.0, 1.0, n)
            Q = path(s)
        if not np.all(checker.are_free(Q)):
            return None
    v = np.asarray(velocity_limits, dtype=np.float64) * (1.0 - safety)
    a = np.asarray(acceleration_limits, dtype=np.float64) * (1.0 - safety)
    pc_vel = constraint.JointVelocityConstraint(np.column_stack([-v, v]))
    pc_acc = constraint.JointAccelerationConstraint(np.column_stack([-a, a]),
                                                    discretization_scheme=constraint.DiscretizationType.Interpolation)
    if gridpoints is None:
        gridpoints = np.linspace(0.0, 1.0, max(200, 40 * len(W)))
    inst = algo.TOPPRA([pc_vel, pc_acc], path, gridpoints=gridpoints, parametrizer="ParametrizeConstAccel")
    jnt = inst.compute_trajectory(0.0, 0.0)
    if jnt is None:
        raise PlanningError(PlanningError.PLANNING_FAILED, "TOPP-RA found no feasible parametrisation")
    T = float(jnt.duration)
    n = max(1, int(math.ceil(T / sample_period - 1e-9)))
    t = np.minimum(np.arange(n + 1) * sample_period, T)
    q, qd, qdd = jnt(t), jnt(t, 1), jnt(t, 2)
    q[0], q[-1] = W[0], W[-1]
    qd[0], qd[-1] = 0.0, 0.0
    return Trajectory(t, q, qd, qdd, list(joint_names), PROFILE)
