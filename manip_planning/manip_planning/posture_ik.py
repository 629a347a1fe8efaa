"""Redundancy resolution of an IK solution: move it toward a preferred posture without moving the tip.

For an arm with more joints than the pose has (a 7-DOF arm reaching a 6-D pose) the solutions of one pose
form a self-motion manifold. ``toward_posture`` walks a solution q along it toward ``q_posture`` by gradient
projection (Liegeois 1977): each step is ``N (q_posture - q) * gain`` with ``N = I - J_b^+ J_b`` the projector
onto the null space of the body Jacobian, plus the damped least-squares correction ``J_b^+ e`` of the pose
drift (e: the body twist [omega; v] from the current tip pose to the target, rad and m, in the tip frame).
A joint that a step pushes into a limit is clipped there and held (left out of J_b and the posture step) for
the rest of the walk. The result is returned only when a fresh FK of it is within the
tolerances and it is no farther from the posture than the input; otherwise the input comes back unchanged.
No rclpy.
"""
from __future__ import annotations

import numpy as np

from manip_core.spatial import log3, pose_error


def _body_error(model, q, T_target):
    """Body twist [omega; v] (rad; m, tip frame) that takes the tip pose at q to T_target (first order)."""
    T = model.fk(q)
    R = T[:3, :3]
    e = np.empty(6)
    e[:3] = log3(R.T @ T_target[:3, :3])
    e[3:] = R.T @ (T_target[:3, 3] - T[:3, 3])
    return e


def null_space_projector(model, q, joints=None):
    """Projector onto the null space of the body Jacobian at q (joint motions that keep the tip pose to first
    order), over all joints or the boolean mask ``joints`` (the others held)."""
    J = model.jacobian_body(q)
    if joints is not None:
        J = J[:, np.asarray(joints, dtype=bool)]
    return np.eye(J.shape[1]) - np.linalg.pinv(J, rcond=1e-6) @ J


def toward_posture(model, q, T_target, q_posture, *, gain=0.5, max_step_rad=0.2, iterations=200,
                   tol_position_m=1e-6, tol_rotation_rad=1e-6):
    """q (an IK solution of T_target, (4, 4) base frame) moved along its self-motion toward q_posture (rad,
    model order); see the module doc. Returns (q, moved: bool)."""
    q0 = np.asarray(q, dtype=np.float64).copy()
    qp = np.asarray(q_posture, dtype=np.float64)
    T_target = np.asarray(T_target, dtype=np.float64)
    lo, hi = np.asarray(model.joint_lower, float), np.asarray(model.joint_upper, float)
    if model.dof <= 6:
        return q0, False
    qc = q0.copy()
    locked = np.zeros(model.dof, dtype=bool)      # joints a step pushed into a limit: held there
    for _ in range(iterations):
        free = ~locked
        J = model.jacobian_body(qc)[:, free]
        Jp = np.linalg.pinv(J, rcond=1e-6)
        N = np.eye(J.shape[1]) - Jp @ J
        d = gain * (N @ (qp - qc)[free])
        n = float(np.max(np.abs(d), initial=0.0))
        if n > max_step_rad:
            d *= max_step_rad / n
        d += Jp @ _body_error(model, qc, T_target)
        dq = np.zeros(model.dof)
        dq[free] = d
        q_new = qc + dq
        out = (q_new < lo) | (q_new > hi)
        if np.any(out):
            locked |= out
            q_new = np.clip(q_new, lo, hi)
        step = float(np.max(np.abs(q_new - qc)))
        qc = q_new
        if step < 1e-9:
            break
    for _ in range(20):   # polish the pose (clipping at a limit may have left a drift)
        dp, dr = pose_error(model.fk(qc), T_target)
        if dp <= tol_position_m and dr <= tol_rotation_rad:
            break
        J = model.jacobian_body(qc)
        qc = np.clip(qc + np.linalg.pinv(J, rcond=1e-6) @ _body_error(model, qc, T_target), lo, hi)
    dp, dr = pose_error(model.fk(qc), T_target)
    if dp > tol_position_m or dr > tol_rotation_rad:
        return q0, False
    if np.linalg.norm(qc - qp) > np.linalg.norm(q0 - qp):
        return q0, False
    return qc, True
