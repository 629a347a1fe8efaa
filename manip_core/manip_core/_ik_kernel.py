"""numba kernel for numerical IK: Levenberg-Marquardt on the pose error with joint limits and restarts.

Step (Sugihara, "Solvability-unconcerned inverse kinematics by the Levenberg-Marquardt method", IEEE T-RO
2011): dq = (J^T J + lambda I)^-1 J^T e with lambda = e^T e + lambda_min, e = [omega_err; p_err] in the base
frame (omega_err = log(R_target R^T), p_err = p_target - p), J the space Jacobian of the tip point
([J_w; J_v + J_w x p]). Each step is projected onto the joint limits; an attempt that stalls restarts from a
uniformly random in-limit configuration.
"""
import numpy as np
from numba import njit

from . import _kernels as K

_JIT = dict(cache=True, nogil=True, error_model="numpy")


@njit(**_JIT)
def _rot_log(R, Rt, out):
    """out = log(Rt R^T) as a rotation vector (rad) in the base frame."""
    # E = Rt R^T
    e00 = Rt[0, 0] * R[0, 0] + Rt[0, 1] * R[0, 1] + Rt[0, 2] * R[0, 2]
    e01 = Rt[0, 0] * R[1, 0] + Rt[0, 1] * R[1, 1] + Rt[0, 2] * R[1, 2]
    e02 = Rt[0, 0] * R[2, 0] + Rt[0, 1] * R[2, 1] + Rt[0, 2] * R[2, 2]
    e10 = Rt[1, 0] * R[0, 0] + Rt[1, 1] * R[0, 1] + Rt[1, 2] * R[0, 2]
    e11 = Rt[1, 0] * R[1, 0] + Rt[1, 1] * R[1, 1] + Rt[1, 2] * R[1, 2]
    e12 = Rt[1, 0] * R[2, 0] + Rt[1, 1] * R[2, 1] + Rt[1, 2] * R[2, 2]
    e20 = Rt[2, 0] * R[0, 0] + Rt[2, 1] * R[0, 1] + Rt[2, 2] * R[0, 2]
    e21 = Rt[2, 0] * R[1, 0] + Rt[2, 1] * R[1, 1] + Rt[2, 2] * R[1, 2]
    e22 = Rt[2, 0] * R[2, 0] + Rt[2, 1] * R[2, 1] + Rt[2, 2] * R[2, 2]
    x, y, z = e21 - e12, e02 - e20, e10 - e01
    c = (e00 + e11 + e22 - 1.0) * 0.5
    s = 0.5 * np.sqrt(x * x + y * y + z * z)
    theta = np.arctan2(s, c)
    if s > 1e-7:
        k = theta / (2.0 * s)
        out[0], out[1], out[2] = k * x, k * y, k * z
    elif c > 0.0:
        out[0], out[1], out[2] = 0.5 * x, 0.5 * y, 0.5 * z
    else:
        # theta near pi: axis from the largest diagonal of (E + I) / 2 = w w^T
        d0, d1, d2 = (e00 + 1.0) * 0.5, (e11 + 1.0) * 0.5, (e22 + 1.0) * 0.5
        if d0 >= d1 and d0 >= d2:
            w0 = np.sqrt(d0)
            w1, w2 = (e01 + e10) * 0.25 / w0, (e02 + e20) * 0.25 / w0
        elif d1 >= d2:
            w1 = np.sqrt(d1)
            w0, w2 = (e01 + e10) * 0.25 / w1, (e12 + e21) * 0.25 / w1
        else:
            w2 = np.sqrt(d2)
            w0, w1 = (e02 + e20) * 0.25 / w2, (e12 + e21) * 0.25 / w2
        out[0], out[1], out[2] = theta * w0, theta * w1, theta * w2
    return theta


@njit(**_JIT)
def _errors(mf, mi, q, Tt, ws, T, e):
    """Pose at q into T, error [omega; p] into e; returns (position error m, rotation error rad)."""
    K.fk_all_into(mf, mi, q, ws, T)
    rot = _rot_log(T, Tt, e)
    e[3] = Tt[0, 3] - T[0, 3]
    e[4] = Tt[1, 3] - T[1, 3]
    e[5] = Tt[2, 3] - T[2, 3]
    pos = np.sqrt(e[3] * e[3] + e[4] * e[4] + e[5] * e[5])
    return pos, rot


@njit(**_JIT)
def _limited_step(J, e, q, lower, upper, lam, r0, H, g, er, free, qn):
    """qn = q + dq from the damped normal equations (J^T J + lam I) dq = J^T e, with joint limits as an
    active set: a joint whose step would cross its limit is moved onto the limit, its motion taken out of the
    error (er = e - J_k dq_k), and the step re-solved for the remaining joints (at most dof passes)."""
    dof = q.shape[0]
    for k in range(dof):
        free[k] = True
        qn[k] = q[k]
    for r in range(6):
        er[r] = e[r]
    for _ in range(dof):
        for a in range(dof):
            s = 0.0
            if free[a]:
                for r in range(r0, 6):
                    s += J[r, a] * er[r]
            g[a] = s
            for b in range(a + 1):
                s = 0.0
                if free[a] and free[b]:
                    for r in range(r0, 6):
                        s += J[r, a] * J[r, b]
                H[a, b] = s
                H[b, a] = s
            H[a, a] += lam
        K.cholesky_solve_inplace(H, g)
        blocked = False
        for k in range(dof):
            if not free[k]:
                continue
            v = qn[k] + g[k]
            lim = lower[k] if v < lower[k] else (upper[k] if v > upper[k] else v)
            if lim != v:
                free[k] = False
                blocked = True
                d = lim - qn[k]
                qn[k] = lim
                for r in range(r0, 6):
                    er[r] -= J[r, k] * d
        if not blocked:
            for k in range(dof):
                if free[k]:
                    qn[k] += g[k]
            return


@njit(**_JIT)
def _search(mf, mi, Tt, q0, lower, upper, tol_pos, tol_rot, position_only, max_iters, max_restarts, seed,
            lambda_min, q_out, info):
    """LM with restarts. q_out: best q found; info: [success, pos err m, rot err rad, iterations, restarts]."""
    dof = mi[1]
    np.random.seed(seed)
    ws = K.new_ws(mi)
    T = np.empty((4, 4))
    e = np.empty(6)
    J = np.empty((6, dof))
    H = np.empty((dof, dof))
    g = np.empty(dof)
    q = q0.copy()
    qn = np.empty(dof)
    er = np.empty(6)
    free = np.empty(dof, dtype=np.bool_)
    r0 = 3 if position_only else 0
    total_iters = 0
    best_cost = np.inf
    for attempt in range(max_restarts + 1):
        if attempt > 0:
            for k in range(dof):
                lo = lower[k] if np.isfinite(lower[k]) else -np.pi
                hi = upper[k] if np.isfinite(upper[k]) else np.pi
                q[k] = lo + (hi - lo) * np.random.random()
        pos, rot = _errors(mf, mi, q, Tt, ws, T, e)
        cost = 0.0
        for r in range(r0, 6):
            cost += e[r] * e[r]
        stall = 0
        mu = 1.0
        for it in range(max_iters):
            ok = pos <= tol_pos and (position_only or rot <= tol_rot)
            if cost < best_cost or ok:
                best_cost = cost
                for k in range(dof):
                    q_out[k] = q[k]
                info[1] = pos
                info[2] = rot
            if ok:
                info[0] = 1.0
                info[3] = total_iters
                info[4] = attempt
                return
            total_iters += 1
            # Jacobian of [omega; p] w.r.t. q: angular rows and the tip point's linear velocity.
            K.jacobian_space_into(mf, mi, ws, mi[2], J)
            px, py, pz = T[0, 3], T[1, 3], T[2, 3]
            for c in range(dof):
                wx, wy, wz = J[0, c], J[1, c], J[2, c]
                J[3, c] += wy * pz - wz * py
                J[4, c] += wz * px - wx * pz
                J[5, c] += wx * py - wy * px
            lam = mu * cost + lambda_min
            _limited_step(J, e, q, lower, upper, lam, r0, H, g, er, free, qn)
            pos_n, rot_n = _errors(mf, mi, qn, Tt, ws, T, e)
            cost_n = 0.0
            for r in range(r0, 6):
                cost_n += e[r] * e[r]
            if cost_n < cost:
                stall = stall + 1 if cost_n > cost * 0.999 else 0
                mu = max(mu * 0.5, 1e-2)
                for k in range(dof):
                    q[k] = qn[k]
                pos, rot, cost = pos_n, rot_n, cost_n
            else:
                # Rejected: restore the pose of q in ws/T/e and damp more.
                stall += 1
                mu *= 8.0
                pos, rot = _errors(mf, mi, q, Tt, ws, T, e)
            if stall >= 6:
                break
        else:
            ok = pos <= tol_pos and (position_only or rot <= tol_rot)
            if ok:
                for k in range(dof):
                    q_out[k] = q[k]
                info[0] = 1.0
                info[1] = pos
                info[2] = rot
                info[3] = total_iters
                info[4] = attempt
                return
    info[0] = 0.0
    info[3] = total_iters
    info[4] = max_restarts


@njit(**_JIT)
def solve(mf, mi, Tt, q0, lower, upper, tol_pos, tol_rot, position_only, max_iters, max_restarts, seed,
          lambda_min, q_out, info):
    """Check the target, search, then judge the returned q afresh.

    Returns 0, 1 when Tt or q0 holds NaN/inf, 2 when Tt's rotation is not orthonormal (|R^T R - I| > 1e-6
    or det R < 0). info = [success, position error m, rotation error rad, iterations, restarts], where the
    errors come from a new FK of q_out and success requires them within tolerance and q_out within limits.
    """
    for r in range(4):
        if not K.all_finite(Tt[r]):
            return 1
    if not K.all_finite(q0):
        return 1
    for a in range(3):
        for b in range(3):
            d = Tt[0, a] * Tt[0, b] + Tt[1, a] * Tt[1, b] + Tt[2, a] * Tt[2, b] - (1.0 if a == b else 0.0)
            if abs(d) > 1e-6:
                return 2
    det = (Tt[0, 0] * (Tt[1, 1] * Tt[2, 2] - Tt[1, 2] * Tt[2, 1]) - Tt[0, 1] * (Tt[1, 0] * Tt[2, 2] - Tt[1, 2] * Tt[2, 0])
           + Tt[0, 2] * (Tt[1, 0] * Tt[2, 1] - Tt[1, 1] * Tt[2, 0]))
    if det < 0.0:
        return 2
    _search(mf, mi, Tt, q0, lower, upper, tol_pos, tol_rot, position_only, max_iters, max_restarts, seed,
            lambda_min, q_out, info)
    ws = K.new_ws(mi)
    T = np.empty((4, 4))
    e = np.empty(6)
    pos, rot = _errors(mf, mi, q_out, Tt, ws, T, e)
    within = True
    for k in range(q_out.shape[0]):
        if not (lower[k] <= q_out[k] <= upper[k]):
            within = False
    info[0] = 1.0 if (within and pos <= tol_pos and (position_only or rot <= tol_rot)) else 0.0
    info[1] = pos
    info[2] = rot
    return 0
