"""numba kernels: batched dynamics with W configurations side by side in SIMD lanes.

The scalar kernels (_kernels.py) walk the tree once per configuration; here every per-body quantity is stored
as (component, lane) with the W lanes contiguous, and every arithmetic step works on all W lanes at once as one
_simd vector (LLVM's <W x double>: one AVX-512 instruction, or two AVX2 ones, per operation; a loop over the
lanes would stay scalar, numba's SLP vectorizer being off). The tree structure (parents, joint types, axes,
inertias) is the same for every lane, so every branch is on the tree, none on the lanes. sin and cos come from
_sincos.sincos_lanes (the same bits as _sincos.sincos), libm for a lane beyond its range. Same maths as
rnea_into: relative transforms R_rel = R_X Rot(axis, q) (Rodrigues), p_rel = p_X (+ R_X axis q for prismatic
joints), then Newton-Euler in body frames; mimic joints through q_phys = A q + b and tau = A^T tau_phys.
Gathering a group's inputs from (N, dof) rows and scattering its outputs back are scalar loops.
"""
import numpy as np
from numba import njit, prange

from . import _kernels as K
from ._simd import W, vget, vload, vsplat, vsqrt, vstore
from ._sincos import FAST_BOUND_RAD, sincos, sincos_lanes
from ._views import unowned
from ._layout import BODY_STRIDE, JOINT_PRISMATIC, MI_HEADER, MI_STRIDE, O_AX, O_H, O_I, O_M, O_P, O_R

_JIT = dict(cache=True, nogil=True, error_model="numpy", fastmath=False)


_INL = dict(cache=True, nogil=True, error_model="numpy", inline="always")


@njit(**_INL)
def _row3(X, i):
    """X[i, 0:3] as 3 vectors (a position)."""
    return vload(X, (i, 0)), vload(X, (i, 1)), vload(X, (i, 2))


@njit(**_INL)
def _row6(X, i):
    """X[i, 0:6] as 6 vectors (a twist or a wrench)."""
    return vload(X, (i, 0)), vload(X, (i, 1)), vload(X, (i, 2)), vload(X, (i, 3)), vload(X, (i, 4)), vload(X, (i, 5))


@njit(**_INL)
def _rot(R, i):
    """Body i's relative rotation, row-major, as 9 vectors."""
    return (vload(R, (i, 0)), vload(R, (i, 1)), vload(R, (i, 2)), vload(R, (i, 3)), vload(R, (i, 4)),
            vload(R, (i, 5)), vload(R, (i, 6)), vload(R, (i, 7)), vload(R, (i, 8)))


@njit(**_INL)
def _store6(X, i, x0, x1, x2, x3, x4, x5):
    vstore(X, (i, 0), x0)
    vstore(X, (i, 1), x1)
    vstore(X, (i, 2), x2)
    vstore(X, (i, 3), x3)
    vstore(X, (i, 4), x4)
    vstore(X, (i, 5), x5)


@njit(**_INL)
def _joint_screw(mf, mi, i):
    """Joint i's motion subspace S = [w; v] in its body frame: [axis; 0] (revolute) or [0; axis] (prismatic)."""
    b = i * BODY_STRIDE
    ax, ay, az = mf[b + O_AX], mf[b + O_AX + 1], mf[b + O_AX + 2]
    if mi[MI_HEADER + i * MI_STRIDE + 1] == JOINT_PRISMATIC:
        return 0.0, 0.0, 0.0, ax, ay, az
    return ax, ay, az, 0.0, 0.0, 0.0


@njit(**_INL)
def _inertia(mf, i):
    """Body i's spatial inertia in its frame: m, h = m c (3), Ibar (9, row-major)."""
    b = i * BODY_STRIDE
    return (mf[b + O_M], mf[b + O_H], mf[b + O_H + 1], mf[b + O_H + 2], mf[b + O_I], mf[b + O_I + 1],
            mf[b + O_I + 2], mf[b + O_I + 3], mf[b + O_I + 4], mf[b + O_I + 5], mf[b + O_I + 6], mf[b + O_I + 7],
            mf[b + O_I + 8])


@njit(**_INL)
def _inertia_times(G, w0, w1, w2, v0, v1, v2):
    """G [w; v] = [Ibar w + h x v; m v - h x w]."""
    m, h0, h1, h2, I00, I01, I02, I10, I11, I12, I20, I21, I22 = G
    return (I00 * w0 + I01 * w1 + I02 * w2 + h1 * v2 - h2 * v1, I10 * w0 + I11 * w1 + I12 * w2 + h2 * v0 - h0 * v2,
            I20 * w0 + I21 * w1 + I22 * w2 + h0 * v1 - h1 * v0, m * v0 - (h1 * w2 - h2 * w1),
            m * v1 - (h2 * w0 - h0 * w2), m * v2 - (h0 * w1 - h1 * w0))


@njit(**_INL)
def _motion_to_child(r0, r1, r2, r3, r4, r5, r6, r7, r8, q0, q1, q2, w0, w1, w2, v0, v1, v2):
    """A parent's twist [w; v] seen in the child's frame (child pose R, p in the parent): [R^T w; R^T (v + w x p)]."""
    u0 = v0 + w1 * q2 - w2 * q1
    u1 = v1 + w2 * q0 - w0 * q2
    u2 = v2 + w0 * q1 - w1 * q0
    return (r0 * w0 + r3 * w1 + r6 * w2, r1 * w0 + r4 * w1 + r7 * w2, r2 * w0 + r5 * w1 + r8 * w2,
            r0 * u0 + r3 * u1 + r6 * u2, r1 * u0 + r4 * u1 + r7 * u2, r2 * u0 + r5 * u1 + r8 * u2)


@njit(**_INL)
def _force_to_parent(r0, r1, r2, r3, r4, r5, r6, r7, r8, q0, q1, q2, c0, c1, c2, c3, c4, c5):
    """A child's wrench [m; f] in its parent's frame (child pose R, p in the parent): [R m + p x R f; R f]
    (_kernels._force_to_parent_s, on vectors)."""
    n0 = r0 * c3 + r1 * c4 + r2 * c5
    n1 = r3 * c3 + r4 * c4 + r5 * c5
    n2 = r6 * c3 + r7 * c4 + r8 * c5
    return (r0 * c0 + r1 * c1 + r2 * c2 + q1 * n2 - q2 * n1, r3 * c0 + r4 * c1 + r5 * c2 + q2 * n0 - q0 * n2,
            r6 * c0 + r7 * c1 + r8 * c2 + q0 * n1 - q1 * n0, n0, n1, n2)


@njit(**_JIT)
def _gather_phys(mf, mi, X, k0, with_offset, xp):
    """Physical joint values xp (nb, W) of rows k0 .. k0 + W - 1 of X: A x (+ b with_offset, for positions),
    as _kernels.to_phys."""
    nb, dof = mi[0], mi[1]
    om = K._map_offset(mi)
    for i in range(nb):
        if mi[3] != 0:
            for l in range(W):
                s0 = mf[om + nb * dof + i] if with_offset else 0.0
                for j in range(dof):
                    s0 += mf[om + i * dof + j] * X[k0 + l, j]
                xp[i, l] = s0
        else:
            for l in range(W):
                xp[i, l] = X[k0 + l, i]


@njit(**_JIT)
def _sincos_row(qp, i, P):
    """(sin, cos) of the lanes of qp[i]; lanes beyond _sincos's reduction (rare) through libm, with P[i, :2]
    as scratch."""
    s, c = sincos_lanes(vload(qp, (i,)))
    for l in range(W):
        if not abs(qp[i, l]) <= FAST_BOUND_RAD:
            vstore(P, (i, 0), c)
            vstore(P, (i, 1), s)
            for m in range(W):
                if not abs(qp[i, m]) <= FAST_BOUND_RAD:
                    P[i, 1, m], P[i, 0, m] = sincos(qp[i, m])
            return vload(P, (i, 1)), vload(P, (i, 0))
    return s, c


@njit(**_JIT)
def _poses_group(mf, mi, Q, k0, qp, R, P):
    """Physical joint positions qp (nb, W) of configurations k0 .. k0 + W - 1 and each body's pose in its
    parent's frame, R (nb, 9, W) row-major and P (nb, 3, W)."""
    nb = mi[0]
    _gather_phys(mf, mi, Q, k0, True, qp)
    for i in range(nb):
        b = i * BODY_STRIDE
        x00, x01, x02 = mf[b + O_R], mf[b + O_R + 1], mf[b + O_R + 2]
        x10, x11, x12 = mf[b + O_R + 3], mf[b + O_R + 4], mf[b + O_R + 5]
        x20, x21, x22 = mf[b + O_R + 6], mf[b + O_R + 7], mf[b + O_R + 8]
        px, py, pz = mf[b + O_P], mf[b + O_P + 1], mf[b + O_P + 2]
        ax, ay, az = mf[b + O_AX], mf[b + O_AX + 1], mf[b + O_AX + 2]
        q = vload(qp, (i,))
        if mi[MI_HEADER + i * MI_STRIDE + 1] == JOINT_PRISMATIC:
            dx = x00 * ax + x01 * ay + x02 * az
            dy = x10 * ax + x11 * ay + x12 * az
            dz = x20 * ax + x21 * ay + x22 * az
            for k in range(9):
                vstore(R, (i, k), vsplat(mf[b + O_R + k]))
            vstore(P, (i, 0), px + dx * q)
            vstore(P, (i, 1), py + dy * q)
            vstore(P, (i, 2), pz + dz * q)
            continue
        s, c = _sincos_row(qp, i, P)
        j00, j01, j02, j10, j11, j12, j20, j21, j22 = K.rodrigues(c, s, ax, ay, az)
        vstore(R, (i, 0), x00 * j00 + x01 * j10 + x02 * j20)
        vstore(R, (i, 1), x00 * j01 + x01 * j11 + x02 * j21)
        vstore(R, (i, 2), x00 * j02 + x01 * j12 + x02 * j22)
        vstore(R, (i, 3), x10 * j00 + x11 * j10 + x12 * j20)
        vstore(R, (i, 4), x10 * j01 + x11 * j11 + x12 * j21)
        vstore(R, (i, 5), x10 * j02 + x11 * j12 + x12 * j22)
        vstore(R, (i, 6), x20 * j00 + x21 * j10 + x22 * j20)
        vstore(R, (i, 7), x20 * j01 + x21 * j11 + x22 * j21)
        vstore(R, (i, 8), x20 * j02 + x21 * j12 + x22 * j22)
        vstore(P, (i, 0), vsplat(px))
        vstore(P, (i, 1), vsplat(py))
        vstore(P, (i, 2), vsplat(pz))


@njit(**_JIT)
def _backward_group(mf, mi, R, P, F, taup):
    """Newton-Euler's backward pass: taup[i] = S_i^T F_i (physical joints), F_p += X_i^T F_i:
    m' = R m + p x (R f), f' = R f."""
    nb = mi[0]
    for i in range(nb - 1, -1, -1):
        b = i * BODY_STRIDE
        p = mi[MI_HEADER + i * MI_STRIDE]
        s0, s1, s2 = mf[b + O_AX], mf[b + O_AX + 1], mf[b + O_AX + 2]
        c0, c1, c2, c3, c4, c5 = _row6(F, i)
        if mi[MI_HEADER + i * MI_STRIDE + 1] == JOINT_PRISMATIC:
            vstore(taup, (i,), s0 * c3 + s1 * c4 + s2 * c5)
        else:
            vstore(taup, (i,), s0 * c0 + s1 * c1 + s2 * c2)
        if p < 0:
            continue
        r0, r1, r2, r3, r4, r5, r6, r7, r8 = _rot(R, i)
        q0, q1, q2 = _row3(P, i)
        m0, m1, m2, f0, f1, f2 = _force_to_parent(r0, r1, r2, r3, r4, r5, r6, r7, r8, q0, q1, q2,
                                                  c0, c1, c2, c3, c4, c5)
        e0, e1, e2, e3, e4, e5 = _row6(F, p)
        _store6(F, p, e0 + m0, e1 + m1, e2 + m2, e3 + f0, e4 + f1, e5 + f2)


@njit(**_JIT)
def _rnea_group(mf, mi, Q, QD, QDD, k0, grav, ftip_body, has_ftip, qp, qdp, qddp, R, P, V, A, F, out):
    """tau of configurations k0 .. k0 + W - 1 into out[k0:k0 + W] (qdd = 0 when QDD has no rows: the bias
    forces; out then gets nothing and qp holds the physical joints' forces). R, P keep the relative poses."""
    with_qdd = QDD.shape[0] > 0
    nb, dof = mi[0], mi[1]
    mimic = mi[3] != 0
    om = K._map_offset(mi)
    _poses_group(mf, mi, Q, k0, qp, R, P)
    _gather_phys(mf, mi, QD, k0, False, qdp)
    if with_qdd:
        _gather_phys(mf, mi, QDD, k0, False, qddp)
    else:
        qddp[:] = 0.0
    # forward: V_i = X_i V_p + S qd, A_i = X_i A_p + V_i x S qd + S qdd; F_i = G A_i + V_i x* G V_i
    zero = vsplat(0.0)
    for i in range(nb):
        p = mi[MI_HEADER + i * MI_STRIDE]
        sw0, sw1, sw2, sv0, sv1, sv2 = _joint_screw(mf, mi, i)
        G = _inertia(mf, i)
        if p < 0:
            vw0, vw1, vw2, vv0, vv1, vv2 = zero, zero, zero, zero, zero, zero
            aw0, aw1, aw2 = zero, zero, zero
            av0, av1, av2 = vsplat(-grav[0]), vsplat(-grav[1]), vsplat(-grav[2])
        else:
            vw0, vw1, vw2, vv0, vv1, vv2 = _row6(V, p)
            aw0, aw1, aw2, av0, av1, av2 = _row6(A, p)
        r0, r1, r2, r3, r4, r5, r6, r7, r8 = _rot(R, i)
        q0, q1, q2 = _row3(P, i)
        qd = vload(qdp, (i,))
        qdd = vload(qddp, (i,))
        w0, w1, w2, v0, v1, v2 = _motion_to_child(r0, r1, r2, r3, r4, r5, r6, r7, r8, q0, q1, q2,
                                                  vw0, vw1, vw2, vv0, vv1, vv2)
        w0, w1, w2 = w0 + sw0 * qd, w1 + sw1 * qd, w2 + sw2 * qd
        v0, v1, v2 = v0 + sv0 * qd, v1 + sv1 * qd, v2 + sv2 * qd
        a0, a1, a2, a3, a4, a5 = _motion_to_child(r0, r1, r2, r3, r4, r5, r6, r7, r8, q0, q1, q2,
                                                  aw0, aw1, aw2, av0, av1, av2)
        # + ad_V (S qd) + S qdd
        t0, t1, t2, t3, t4, t5 = sw0 * qd, sw1 * qd, sw2 * qd, sv0 * qd, sv1 * qd, sv2 * qd
        a0 = a0 + (w1 * t2 - w2 * t1 + sw0 * qdd)
        a1 = a1 + (w2 * t0 - w0 * t2 + sw1 * qdd)
        a2 = a2 + (w0 * t1 - w1 * t0 + sw2 * qdd)
        a3 = a3 + (v1 * t2 - v2 * t1 + w1 * t5 - w2 * t4 + sv0 * qdd)
        a4 = a4 + (v2 * t0 - v0 * t2 + w2 * t3 - w0 * t5 + sv1 * qdd)
        a5 = a5 + (v0 * t1 - v1 * t0 + w0 * t4 - w1 * t3 + sv2 * qdd)
        _store6(V, i, w0, w1, w2, v0, v1, v2)
        _store6(A, i, a0, a1, a2, a3, a4, a5)
        f0, f1, f2, f3, f4, f5 = _inertia_times(G, a0, a1, a2, a3, a4, a5)
        k0_, k1_, k2_, k3_, k4_, k5_ = _inertia_times(G, w0, w1, w2, v0, v1, v2)
        # - ad_V^T (G V) = [w x gm + v x gf; w x gf]
        _store6(F, i, f0 + w1 * k2_ - w2 * k1_ + v1 * k5_ - v2 * k4_, f1 + w2 * k0_ - w0 * k2_ + v2 * k3_ - v0 * k5_,
                f2 + w0 * k1_ - w1 * k0_ + v0 * k4_ - v1 * k3_, f3 + w1 * k5_ - w2 * k4_, f4 + w2 * k3_ - w0 * k5_,
                f5 + w0 * k4_ - w1 * k3_)
    tb = mi[2]
    if has_ftip and tb >= 0:
        for r in range(6):
            vstore(F, (tb, r), vload(F, (tb, r)) + ftip_body[r])
    _backward_group(mf, mi, R, P, F, qp)
    # actuated joint forces: tau = A^T tau_phys
    if not with_qdd:
        return
    if mimic:
        for j in range(dof):
            for l in range(W):
                s = 0.0
                for i in range(nb):
                    s += mf[om + i * dof + j] * qp[i, l]
                out[k0 + l, j] = s
    else:
        for i in range(nb):
            for l in range(W):
                out[k0 + l, i] = qp[i, l]


@njit(**_JIT)
def _tip_wrench_body(mf, mi, ftip, out6):
    """f_tip (tip frame, at the tip) as a wrench on the tip body in its frame: constant, the same for every q."""
    o = K._tip_offset(mi)
    R = mf[o:o + 9]
    pp = mf[o + 9:o + 12]
    m0 = R[0] * ftip[0] + R[1] * ftip[1] + R[2] * ftip[2]
    m1 = R[3] * ftip[0] + R[4] * ftip[1] + R[5] * ftip[2]
    m2 = R[6] * ftip[0] + R[7] * ftip[1] + R[8] * ftip[2]
    f0 = R[0] * ftip[3] + R[1] * ftip[4] + R[2] * ftip[5]
    f1 = R[3] * ftip[3] + R[4] * ftip[4] + R[5] * ftip[5]
    f2 = R[6] * ftip[3] + R[7] * ftip[4] + R[8] * ftip[5]
    out6[0] = m0 + pp[1] * f2 - pp[2] * f1
    out6[1] = m1 + pp[2] * f0 - pp[0] * f2
    out6[2] = m2 + pp[0] * f1 - pp[1] * f0
    out6[3] = f0
    out6[4] = f1
    out6[5] = f2


@njit(**_JIT)
def _rows_finite(X, k0):
    """Rows k0 .. k0 + W - 1 of X hold no NaN or inf."""
    for l in range(W):
        if not K.all_finite(X[k0 + l]):
            return False
    return True


@njit(**_JIT)
def _fk_group(mf, mi, Q, k0, qp, P, T):
    """Tip poses of configurations k0 .. k0 + W - 1 as T (12, W): rows of R (row-major), then p; as
    _kernels.fk_into, the running pose (R, p) down the tip's path: R <- R R_X R_joint(q_i),
    p <- p + R p_X (+ R R_X axis q_i for a prismatic joint), then (R, p) T_off. P: scratch (nb, 3, W)."""
    nb = mi[0]
    _gather_phys(mf, mi, Q, k0, True, qp)
    one, zero = vsplat(1.0), vsplat(0.0)
    r00, r01, r02, r10, r11, r12, r20, r21, r22 = one, zero, zero, zero, one, zero, zero, zero, one
    p0, p1, p2 = zero, zero, zero
    o_path = MI_HEADER + nb * MI_STRIDE
    for k in range(mi[o_path]):
        i = mi[o_path + 1 + k]
        b = i * BODY_STRIDE
        x0, x1, x2, x3, x4, x5 = mf[b + O_R], mf[b + O_R + 1], mf[b + O_R + 2], mf[b + O_R + 3], \
            mf[b + O_R + 4], mf[b + O_R + 5]
        x6, x7, x8, x9, x10, x11 = mf[b + O_R + 6], mf[b + O_R + 7], mf[b + O_R + 8], mf[b + O_P], \
            mf[b + O_P + 1], mf[b + O_P + 2]
        p0 = p0 + (r00 * x9 + r01 * x10 + r02 * x11)
        p1 = p1 + (r10 * x9 + r11 * x10 + r12 * x11)
        p2 = p2 + (r20 * x9 + r21 * x10 + r22 * x11)
        # B = R R_X
        b00 = r00 * x0 + r01 * x3 + r02 * x6
        b01 = r00 * x1 + r01 * x4 + r02 * x7
        b02 = r00 * x2 + r01 * x5 + r02 * x8
        b10 = r10 * x0 + r11 * x3 + r12 * x6
        b11 = r10 * x1 + r11 * x4 + r12 * x7
        b12 = r10 * x2 + r11 * x5 + r12 * x8
        b20 = r20 * x0 + r21 * x3 + r22 * x6
        b21 = r20 * x1 + r21 * x4 + r22 * x7
        b22 = r20 * x2 + r21 * x5 + r22 * x8
        ax, ay, az = mf[b + O_AX], mf[b + O_AX + 1], mf[b + O_AX + 2]
        if mi[MI_HEADER + i * MI_STRIDE + 1] == JOINT_PRISMATIC:
            qi = vload(qp, (i,))
            p0 = p0 + (b00 * ax + b01 * ay + b02 * az) * qi
            p1 = p1 + (b10 * ax + b11 * ay + b12 * az) * qi
            p2 = p2 + (b20 * ax + b21 * ay + b22 * az) * qi
            r00, r01, r02, r10, r11, r12, r20, r21, r22 = b00, b01, b02, b10, b11, b12, b20, b21, b22
            continue
        s, c = _sincos_row(qp, i, P)
        r00, r01, r02, r10, r11, r12, r20, r21, r22 = K.times_joint_rotation(
            mi[MI_HEADER + i * MI_STRIDE + 2], b00, b01, b02, b10, b11, b12, b20, b21, b22, s, c, ax, ay, az)
    o = K._tip_offset(mi)
    t0, t1, t2, t3, t4, t5 = mf[o], mf[o + 1], mf[o + 2], mf[o + 3], mf[o + 4], mf[o + 5]
    t6, t7, t8, t9, t10, t11 = mf[o + 6], mf[o + 7], mf[o + 8], mf[o + 9], mf[o + 10], mf[o + 11]
    vstore(T, (0,), r00 * t0 + r01 * t3 + r02 * t6)
    vstore(T, (1,), r00 * t1 + r01 * t4 + r02 * t7)
    vstore(T, (2,), r00 * t2 + r01 * t5 + r02 * t8)
    vstore(T, (3,), r10 * t0 + r11 * t3 + r12 * t6)
    vstore(T, (4,), r10 * t1 + r11 * t4 + r12 * t7)
    vstore(T, (5,), r10 * t2 + r11 * t5 + r12 * t8)
    vstore(T, (6,), r20 * t0 + r21 * t3 + r22 * t6)
    vstore(T, (7,), r20 * t1 + r21 * t4 + r22 * t7)
    vstore(T, (8,), r20 * t2 + r21 * t5 + r22 * t8)
    vstore(T, (9,), p0 + r00 * t9 + r01 * t10 + r02 * t11)
    vstore(T, (10,), p1 + r10 * t9 + r11 * t10 + r12 * t11)
    vstore(T, (11,), p2 + r20 * t9 + r21 * t10 + r22 * t11)


@njit(cache=True, parallel=True, error_model="numpy")
def fk_batch_lanes(mf, mi, Q, out):
    """Tip poses (N, 4, 4) into out; returns the number of configurations with NaN/inf. W lanes at a time;
    the tail and groups holding NaN/inf through the one-configuration kernel."""
    Q, out = unowned(Q), unowned(out)  # rows count no references
    n = Q.shape[0]
    nb = mi[0]
    ngroups = (n + W - 1) // W  # the last one may be partial: the scalar kernel
    nc = max(1, min(ngroups, 64))
    bad = 0
    for c in prange(nc):
        qp = np.empty((nb, W))
        P = np.empty((nb, 3, W))
        T = np.empty((12, W))
        ws = K.new_ws(mi)
        for g in range(c * ngroups // nc, (c + 1) * ngroups // nc):
            k0 = g * W
            if k0 + W <= n and _rows_finite(Q, k0):
                _fk_group(mf, mi, Q, k0, qp, P, T)
                for l in range(W):
                    o = out[k0 + l]
                    for r in range(3):
                        o[r, 0] = T[3 * r, l]
                        o[r, 1] = T[3 * r + 1, l]
                        o[r, 2] = T[3 * r + 2, l]
                        o[r, 3] = T[9 + r, l]
                    o[3, 0] = 0.0
                    o[3, 1] = 0.0
                    o[3, 2] = 0.0
                    o[3, 3] = 1.0
                continue
            for k in range(k0, min(k0 + W, n)):
                if not K.all_finite(Q[k]):
                    bad += 1
                    continue
                K.fk_into(mf, mi, Q[k], ws, out[k])
    return bad


@njit(**_JIT)
def _jacobian_group(mf, mi, Q, k0, body_frame, qp, R, P, Ra, Pa, J):
    """Space (or, with body_frame, body) Jacobians of the tip of configurations k0 .. k0 + W - 1 into
    J (6, dof, W), as _kernels.jacobian_row: absolute poses Ra, Pa (nb, 9 / 3, W) down the tree, then each
    ancestor j of the tip body contributes its screw [a; p x a] (revolute) or [0; a] (prismatic), a = R_j axis,
    to its column (through A with mimic joints); body frame: J_b = Ad_{T^-1} J_s with T the tip pose."""
    nb, dof = mi[0], mi[1]
    _poses_group(mf, mi, Q, k0, qp, R, P)
    zero = vsplat(0.0)
    for i in range(nb):
        p = mi[MI_HEADER + i * MI_STRIDE]
        if p < 0:
            for k in range(9):
                vstore(Ra, (i, k), vload(R, (i, k)))
            for k in range(3):
                vstore(Pa, (i, k), vload(P, (i, k)))
            continue
        e0, e1, e2 = _row3(P, i)
        for r in range(3):
            a0, a1, a2 = vload(Ra, (p, 3 * r)), vload(Ra, (p, 3 * r + 1)), vload(Ra, (p, 3 * r + 2))
            for c in range(3):
                vstore(Ra, (i, 3 * r + c), a0 * vload(R, (i, c)) + a1 * vload(R, (i, 3 + c))
                       + a2 * vload(R, (i, 6 + c)))
            vstore(Pa, (i, r), vload(Pa, (p, r)) + a0 * e0 + a1 * e1 + a2 * e2)
    for r in range(6):
        for c in range(dof):
            vstore(J, (r, c), zero)
    om = K._map_offset(mi)
    j = mi[2]
    while j >= 0:
        b = j * BODY_STRIDE
        ax0, ax1, ax2 = mf[b + O_AX], mf[b + O_AX + 1], mf[b + O_AX + 2]
        a0 = vload(Ra, (j, 0)) * ax0 + vload(Ra, (j, 1)) * ax1 + vload(Ra, (j, 2)) * ax2
        a1 = vload(Ra, (j, 3)) * ax0 + vload(Ra, (j, 4)) * ax1 + vload(Ra, (j, 5)) * ax2
        a2 = vload(Ra, (j, 6)) * ax0 + vload(Ra, (j, 7)) * ax1 + vload(Ra, (j, 8)) * ax2
        if mi[MI_HEADER + j * MI_STRIDE + 1] == JOINT_PRISMATIC:
            s0, s1, s2, s3, s4, s5 = zero, zero, zero, a0, a1, a2
        else:
            p0, p1, p2 = vload(Pa, (j, 0)), vload(Pa, (j, 1)), vload(Pa, (j, 2))
            s0, s1, s2 = a0, a1, a2
            s3, s4, s5 = p1 * a2 - p2 * a1, p2 * a0 - p0 * a2, p0 * a1 - p1 * a0
        if mi[3] == 0:
            vstore(J, (0, j), s0)
            vstore(J, (1, j), s1)
            vstore(J, (2, j), s2)
            vstore(J, (3, j), s3)
            vstore(J, (4, j), s4)
            vstore(J, (5, j), s5)
        else:
            for c in range(dof):
                a = mf[om + j * dof + c]
                if a != 0.0:
                    vstore(J, (0, c), vload(J, (0, c)) + a * s0)
                    vstore(J, (1, c), vload(J, (1, c)) + a * s1)
                    vstore(J, (2, c), vload(J, (2, c)) + a * s2)
                    vstore(J, (3, c), vload(J, (3, c)) + a * s3)
                    vstore(J, (4, c), vload(J, (4, c)) + a * s4)
                    vstore(J, (5, c), vload(J, (5, c)) + a * s5)
        j = mi[MI_HEADER + j * MI_STRIDE]
    if not body_frame:
        return
    # the tip pose T (_kernels.frame_pose), then omega_b = R^T omega, v_b = R^T (v - p x omega)
    o = K._tip_offset(mi)
    tb = mi[2]
    if tb < 0:
        t00, t01, t02, t10, t11, t12, t20, t21, t22 = (vsplat(mf[o]), vsplat(mf[o + 1]), vsplat(mf[o + 2]),
                                                       vsplat(mf[o + 3]), vsplat(mf[o + 4]), vsplat(mf[o + 5]),
                                                       vsplat(mf[o + 6]), vsplat(mf[o + 7]), vsplat(mf[o + 8]))
        tp0, tp1, tp2 = vsplat(mf[o + 9]), vsplat(mf[o + 10]), vsplat(mf[o + 11])
    else:
        a0, a1, a2 = vload(Ra, (tb, 0)), vload(Ra, (tb, 1)), vload(Ra, (tb, 2))
        t00 = a0 * mf[o] + a1 * mf[o + 3] + a2 * mf[o + 6]
        t01 = a0 * mf[o + 1] + a1 * mf[o + 4] + a2 * mf[o + 7]
        t02 = a0 * mf[o + 2] + a1 * mf[o + 5] + a2 * mf[o + 8]
        tp0 = vload(Pa, (tb, 0)) + a0 * mf[o + 9] + a1 * mf[o + 10] + a2 * mf[o + 11]
        a0, a1, a2 = vload(Ra, (tb, 3)), vload(Ra, (tb, 4)), vload(Ra, (tb, 5))
        t10 = a0 * mf[o] + a1 * mf[o + 3] + a2 * mf[o + 6]
        t11 = a0 * mf[o + 1] + a1 * mf[o + 4] + a2 * mf[o + 7]
        t12 = a0 * mf[o + 2] + a1 * mf[o + 5] + a2 * mf[o + 8]
        tp1 = vload(Pa, (tb, 1)) + a0 * mf[o + 9] + a1 * mf[o + 10] + a2 * mf[o + 11]
        a0, a1, a2 = vload(Ra, (tb, 6)), vload(Ra, (tb, 7)), vload(Ra, (tb, 8))
        t20 = a0 * mf[o] + a1 * mf[o + 3] + a2 * mf[o + 6]
        t21 = a0 * mf[o + 1] + a1 * mf[o + 4] + a2 * mf[o + 7]
        t22 = a0 * mf[o + 2] + a1 * mf[o + 5] + a2 * mf[o + 8]
        tp2 = vload(Pa, (tb, 2)) + a0 * mf[o + 9] + a1 * mf[o + 10] + a2 * mf[o + 11]
    for c in range(dof):
        w0, w1, w2 = vload(J, (0, c)), vload(J, (1, c)), vload(J, (2, c))
        v0 = vload(J, (3, c)) - (tp1 * w2 - tp2 * w1)
        v1 = vload(J, (4, c)) - (tp2 * w0 - tp0 * w2)
        v2 = vload(J, (5, c)) - (tp0 * w1 - tp1 * w0)
        vstore(J, (0, c), t00 * w0 + t10 * w1 + t20 * w2)
        vstore(J, (1, c), t01 * w0 + t11 * w1 + t21 * w2)
        vstore(J, (2, c), t02 * w0 + t12 * w1 + t22 * w2)
        vstore(J, (3, c), t00 * v0 + t10 * v1 + t20 * v2)
        vstore(J, (4, c), t01 * v0 + t11 * v1 + t21 * v2)
        vstore(J, (5, c), t02 * v0 + t12 * v1 + t22 * v2)


@njit(cache=True, parallel=True, error_model="numpy")
def jacobian_batch_lanes(mf, mi, Q, body_frame, out):
    """Space (body_frame False) or body Jacobians (N, 6, dof) into out; returns the number of configurations
    with NaN/inf. W lanes at a time; the tail and groups holding NaN/inf through the one-configuration kernel."""
    Q, out = unowned(Q), unowned(out)  # rows count no references
    n = Q.shape[0]
    nb, dof = mi[0], mi[1]
    ngroups = (n + W - 1) // W  # the last one may be partial: the scalar kernel
    nc = max(1, min(ngroups, 64))
    bad = 0
    for c in prange(nc):
        qp = np.empty((nb, W))
        R = np.empty((nb, 9, W))
        P = np.empty((nb, 3, W))
        Ra = np.empty((nb, 9, W))
        Pa = np.empty((nb, 3, W))
        J = np.empty((6, dof, W))
        ws = K.new_ws(mi)
        Js = np.empty((6, dof))
        T = np.empty((4, 4))
        for g in range(c * ngroups // nc, (c + 1) * ngroups // nc):
            k0 = g * W
            if k0 + W <= n and _rows_finite(Q, k0):
                _jacobian_group(mf, mi, Q, k0, body_frame, qp, R, P, Ra, Pa, J)
                for l in range(W):
                    for r in range(6):
                        for cc in range(dof):
                            out[k0 + l, r, cc] = J[r, cc, l]
                continue
            for k in range(k0, min(k0 + W, n)):
                if not K.all_finite(Q[k]):
                    bad += 1
                    continue
                K.jacobian_row(mf, mi, Q[k], body_frame, ws, Js, T, out[k])
    return bad


@njit(cache=True, parallel=True, error_model="numpy")
def rnea_batch_lanes(mf, mi, Q, QD, QDD, grav, ftip, out):
    """Like _kernels.rnea_batch (returns the number of configurations with NaN/inf), W lanes at a time; the
    last group when it is partial, and groups holding NaN/inf, go through the scalar kernel."""
    Q, QD, QDD, out = unowned(Q), unowned(QD), unowned(QDD), unowned(out)  # rows count no references
    n = Q.shape[0]
    nb = mi[0]
    ngroups = (n + W - 1) // W  # the last one may be partial: the scalar kernel
    nc = max(1, min(ngroups, 64))
    ftb = np.zeros(6)
    has_ftip = ftip.size == 6
    if has_ftip:
        _tip_wrench_body(mf, mi, ftip, ftb)
    bad = 0
    for c in prange(nc):
        qp = np.empty((nb, W))
        qdp = np.empty((nb, W))
        qddp = np.empty((nb, W))
        R = np.empty((nb, 9, W))
        P = np.empty((nb, 3, W))
        V = np.empty((nb, 6, W))
        A = np.empty((nb, 6, W))
        F = np.empty((nb, 6, W))
        ws = K.new_ws(mi)
        for g in range(c * ngroups // nc, (c + 1) * ngroups // nc):
            k0 = g * W
            if k0 + W <= n and _rows_finite(Q, k0) and _rows_finite(QD, k0) and _rows_finite(QDD, k0):
                _rnea_group(mf, mi, Q, QD, QDD, k0, grav, ftb, has_ftip, qp, qdp, qddp, R, P, V, A, F, out)
                continue
            for k in range(k0, min(k0 + W, n)):
                if not (K.all_finite(Q[k]) and K.all_finite(QD[k]) and K.all_finite(QDD[k])):
                    bad += 1
                    continue
                K.rnea_into(mf, mi, Q[k], QD[k], QDD[k], grav, ftip, ws, out[k])
    return bad


@njit(**_JIT)
def _mass_group(mf, mi, R, P, Yc, Mp, Ma, F):
    """Mass matrices (dof, dof, W) of the group from the relative poses R, P by composite rigid bodies in each
    body's own frame (Featherstone ch. 6, as _kernels.crba_into): composites Yc = [m, h, Ibar (6)] from the
    leaves up, F = Yc_i S_i carried to each ancestor a's frame, M_ai = S_a . F. Every lever arm is a joint
    offset, so the small entries of a wrist keep their own relative accuracy (inertias about the base origin
    lost them, and forward dynamics amplified that by M's condition number). A^T M_phys A with mimic joints
    (into Ma, else Mp is returned). F: scratch (nb, 6, W)."""
    nb, dof = mi[0], mi[1]
    om = K._map_offset(mi)
    for i in range(nb):
        b = i * BODY_STRIDE
        for k, o in ((0, O_M), (1, O_H), (2, O_H + 1), (3, O_H + 2), (4, O_I), (5, O_I + 1), (6, O_I + 2),
                     (7, O_I + 4), (8, O_I + 5), (9, O_I + 8)):
            vstore(Yc, (i, k), vsplat(mf[b + o]))
    # composites: the child's [m, h, Ibar] in its parent's frame (_kernels._add_inertia_to_parent):
    # h' = R h + m p; Ibar' = R Ibar R^T - [Rh][p] - [p][Rh] - m [p]^2
    for i in range(nb - 1, -1, -1):
        p = mi[MI_HEADER + i * MI_STRIDE]
        if p < 0:
            continue
        r00, r01, r02, r10, r11, r12, r20, r21, r22 = _rot(R, i)
        b0, b1, b2 = _row3(P, i)
        m, h0, h1, h2 = vload(Yc, (i, 0)), vload(Yc, (i, 1)), vload(Yc, (i, 2)), vload(Yc, (i, 3))
        i00, i01, i02 = vload(Yc, (i, 4)), vload(Yc, (i, 5)), vload(Yc, (i, 6))
        i11, i12, i22 = vload(Yc, (i, 7)), vload(Yc, (i, 8)), vload(Yc, (i, 9))
        a0 = r00 * h0 + r01 * h1 + r02 * h2
        a1 = r10 * h0 + r11 * h1 + r12 * h2
        a2 = r20 * h0 + r21 * h1 + r22 * h2
        t00 = r00 * i00 + r01 * i01 + r02 * i02
        t01 = r00 * i01 + r01 * i11 + r02 * i12
        t02 = r00 * i02 + r01 * i12 + r02 * i22
        t10 = r10 * i00 + r11 * i01 + r12 * i02
        t11 = r10 * i01 + r11 * i11 + r12 * i12
        t12 = r10 * i02 + r11 * i12 + r12 * i22
        t20 = r20 * i00 + r21 * i01 + r22 * i02
        t21 = r20 * i01 + r21 * i11 + r22 * i12
        t22 = r20 * i02 + r21 * i12 + r22 * i22
        d = 2.0 * (a0 * b0 + a1 * b1 + a2 * b2) + m * (b0 * b0 + b1 * b1 + b2 * b2)
        vstore(Yc, (p, 0), vload(Yc, (p, 0)) + m)
        vstore(Yc, (p, 1), vload(Yc, (p, 1)) + (a0 + m * b0))
        vstore(Yc, (p, 2), vload(Yc, (p, 2)) + (a1 + m * b1))
        vstore(Yc, (p, 3), vload(Yc, (p, 3)) + (a2 + m * b2))
        vstore(Yc, (p, 4), vload(Yc, (p, 4)) + (t00 * r00 + t01 * r01 + t02 * r02 + d - 2.0 * a0 * b0 - m * b0 * b0))
        vstore(Yc, (p, 5), vload(Yc, (p, 5)) + (t00 * r10 + t01 * r11 + t02 * r12 - a0 * b1 - b0 * a1 - m * b0 * b1))
        vstore(Yc, (p, 6), vload(Yc, (p, 6)) + (t00 * r20 + t01 * r21 + t02 * r22 - a0 * b2 - b0 * a2 - m * b0 * b2))
        vstore(Yc, (p, 7), vload(Yc, (p, 7)) + (t10 * r10 + t11 * r11 + t12 * r12 + d - 2.0 * a1 * b1 - m * b1 * b1))
        vstore(Yc, (p, 8), vload(Yc, (p, 8)) + (t10 * r20 + t11 * r21 + t12 * r22 - a1 * b2 - b1 * a2 - m * b1 * b2))
        vstore(Yc, (p, 9), vload(Yc, (p, 9)) + (t20 * r20 + t21 * r21 + t22 * r22 + d - 2.0 * a2 * b2 - m * b2 * b2))
    for i in range(nb):
        b = i * BODY_STRIDE
        ax, ay, az = mf[b + O_AX], mf[b + O_AX + 1], mf[b + O_AX + 2]
        m, h0, h1, h2 = vload(Yc, (i, 0)), vload(Yc, (i, 1)), vload(Yc, (i, 2)), vload(Yc, (i, 3))
        # F = Yc S: [Ibar a; -h x a] (revolute) or [h x a; m a] (prismatic); M_ii = S . F
        if mi[MI_HEADER + i * MI_STRIDE + 1] == JOINT_PRISMATIC:
            f0, f1, f2 = h1 * az - h2 * ay, h2 * ax - h0 * az, h0 * ay - h1 * ax
            f3, f4, f5 = m * ax, m * ay, m * az
            vstore(Mp, (i, i), ax * f3 + ay * f4 + az * f5)
        else:
            f0 = vload(Yc, (i, 4)) * ax + vload(Yc, (i, 5)) * ay + vload(Yc, (i, 6)) * az
            f1 = vload(Yc, (i, 5)) * ax + vload(Yc, (i, 7)) * ay + vload(Yc, (i, 8)) * az
            f2 = vload(Yc, (i, 6)) * ax + vload(Yc, (i, 8)) * ay + vload(Yc, (i, 9)) * az
            f3, f4, f5 = h2 * ay - h1 * az, h0 * az - h2 * ax, h1 * ax - h0 * ay
            vstore(Mp, (i, i), ax * f0 + ay * f1 + az * f2)
        # up the tree: F in the parent's frame [R m + p x R f; R f], M_ai = S_a . F
        j = i
        a = mi[MI_HEADER + j * MI_STRIDE]
        while a >= 0:
            r0, r1, r2, r3, r4, r5, r6, r7, r8 = _rot(R, j)
            q0, q1, q2 = _row3(P, j)
            f0, f1, f2, f3, f4, f5 = _force_to_parent(r0, r1, r2, r3, r4, r5, r6, r7, r8, q0, q1, q2,
                                                      f0, f1, f2, f3, f4, f5)
            ba = a * BODY_STRIDE
            sx, sy, sz = mf[ba + O_AX], mf[ba + O_AX + 1], mf[ba + O_AX + 2]
            if mi[MI_HEADER + a * MI_STRIDE + 1] == JOINT_PRISMATIC:
                v = sx * f3 + sy * f4 + sz * f5
            else:
                v = sx * f0 + sy * f1 + sz * f2
            vstore(Mp, (a, i), v)
            vstore(Mp, (i, a), v)
            j = a
            a = mi[MI_HEADER + j * MI_STRIDE]
    # bodies on other branches do not couple (a serial chain has none)
    zero = vsplat(0.0)
    if not K.is_chain(mi):
        for i in range(nb):
            for j in range(i):
                if not (K._is_ancestor(mi, j, i) or K._is_ancestor(mi, i, j)):
                    vstore(Mp, (i, j), zero)
                    vstore(Mp, (j, i), zero)
    if mi[3] != 0:
        for rr in range(dof):
            for cc in range(dof):
                acc = zero
                for i in range(nb):
                    ai = mf[om + i * dof + rr]
                    if ai == 0.0:
                        continue
                    for j in range(nb):
                        aj = mf[om + j * dof + cc]
                        if aj == 0.0:
                            continue
                        acc = acc + ai * aj * vload(Mp, (i, j))
                vstore(Ma, (rr, cc), acc)
        return Ma
    return Mp


@njit(**_JIT)
def _mass_times_group(mf, mi, R, P, x, qddp, A, F, taup):
    """M x of the group without M: Newton-Euler at zero velocity and gravity on the physical joints (qdd = A x,
    into qddp), physical joint forces into taup (nb, W). A, F: scratch."""
    nb, dof = mi[0], mi[1]
    om = K._map_offset(mi)
    for i in range(nb):
        if mi[3] != 0:
            for l in range(W):
                s1 = 0.0
                for j in range(dof):
                    s1 += mf[om + i * dof + j] * x[j, l]
                qddp[i, l] = s1
        else:
            vstore(qddp, (i,), vload(x, (i,)))
    # A_i = X_i A_p + S qdd_i (A_base = 0), F_i = G_i A_i
    for i in range(nb):
        p = mi[MI_HEADER + i * MI_STRIDE]
        sw0, sw1, sw2, sv0, sv1, sv2 = _joint_screw(mf, mi, i)
        qdd = vload(qddp, (i,))
        a0, a1, a2 = sw0 * qdd, sw1 * qdd, sw2 * qdd
        a3, a4, a5 = sv0 * qdd, sv1 * qdd, sv2 * qdd
        if p >= 0:
            r0, r1, r2, r3, r4, r5, r6, r7, r8 = _rot(R, i)
            q0, q1, q2 = _row3(P, i)
            aw0, aw1, aw2, av0, av1, av2 = _row6(A, p)
            b0, b1, b2, b3, b4, b5 = _motion_to_child(r0, r1, r2, r3, r4, r5, r6, r7, r8, q0, q1, q2,
                                                      aw0, aw1, aw2, av0, av1, av2)
            a0, a1, a2, a3, a4, a5 = a0 + b0, a1 + b1, a2 + b2, a3 + b3, a4 + b4, a5 + b5
        _store6(A, i, a0, a1, a2, a3, a4, a5)
        f0, f1, f2, f3, f4, f5 = _inertia_times(_inertia(mf, i), a0, a1, a2, a3, a4, a5)
        _store6(F, i, f0, f1, f2, f3, f4, f5)
    _backward_group(mf, mi, R, P, F, taup)


@njit(**_JIT)
def _actuated_minus(mf, mi, taup, r):
    """r -= A^T taup: physical joint forces (nb, W) taken from actuated ones (dof, W)."""
    nb, dof = mi[0], mi[1]
    om = K._map_offset(mi)
    for j in range(dof):
        if mi[3] != 0:
            for i in range(nb):
                a = mf[om + i * dof + j]
                if a != 0.0:
                    vstore(r, (j,), vload(r, (j,)) - a * vload(taup, (i,)))
        else:
            vstore(r, (j,), vload(r, (j,)) - vload(taup, (j,)))


@njit(**_JIT)
def _cholesky_group(M, dof):
    """Lower Cholesky factor of every lane's M (dof, dof, W) in place; False if a lane's M is not positive
    definite."""
    for j in range(dof):
        d = vload(M, (j, j))
        for k in range(j):
            e = vload(M, (j, k))
            d = d - e * e
        for l in range(W):
            if not vget(d, l) > 0.0:
                return False
        d = vsqrt(d)
        vstore(M, (j, j), d)
        for i in range(j + 1, dof):
            e = vload(M, (i, j))
            for k in range(j):
                e = e - vload(M, (i, k)) * vload(M, (j, k))
            vstore(M, (i, j), e / d)
    return True


@njit(**_JIT)
def _substitute_group(L, r, dof):
    """r <- (L L^T)^-1 r, every lane, with L from _cholesky_group."""
    for i in range(dof):
        e = vload(r, (i,))
        for k in range(i):
            e = e - vload(L, (i, k)) * vload(r, (k,))
        vstore(r, (i,), e / vload(L, (i, i)))
    for i in range(dof - 1, -1, -1):
        e = vload(r, (i,))
        for k in range(i + 1, dof):
            e = e - vload(L, (k, i)) * vload(r, (k,))
        vstore(r, (i,), e / vload(L, (i, i)))


@njit(**_JIT)
def _fd_group(mf, mi, Q, QD, TAU, k0, grav, ftip_body, has_ftip, qp, qdp, qddp, R, P, V, A, F, Yc, Mp, Ma, r,
              r0, out):
    """qdd = M^-1 (tau - bias) of configurations k0 .. k0 + W - 1 into out; False if a lane's M is not
    positive definite. Bias: _rnea_group at qdd = 0. M: _mass_group (composites in each body's frame), solved
    by Cholesky, then one step of iterative refinement whose residual (tau - bias) - M qdd comes from
    _mass_times_group, not from the formed M (as _kernels.forward_dynamics_into: ABA's accuracy)."""
    dof = mi[1]
    _rnea_group(mf, mi, Q, QD, Q[:0], k0, grav, ftip_body, has_ftip, qp, qdp, qddp, R, P, V, A, F, out)
    # r = tau - A^T bias_phys (bias in qp)
    for j in range(dof):
        for l in range(W):
            r[j, l] = TAU[k0 + l, j]
    _actuated_minus(mf, mi, qp, r)
    M = _mass_group(mf, mi, R, P, Yc, Mp, Ma, V)
    if not _cholesky_group(M, dof):
        return False
    for j in range(dof):
        vstore(r0, (j,), vload(r, (j,)))
    _substitute_group(M, r, dof)
    _mass_times_group(mf, mi, R, P, r, qddp, A, F, qp)
    _actuated_minus(mf, mi, qp, r0)
    _substitute_group(M, r0, dof)
    for j in range(dof):
        vstore(r, (j,), vload(r, (j,)) + vload(r0, (j,)))
        for l in range(W):
            out[k0 + l, j] = r[j, l]
    return True


@njit(cache=True, parallel=True, error_model="numpy")
def forward_dynamics_batch_lanes(mf, mi, Q, QD, TAU, grav, ftip, out):
    """qdd (N, dof) into out; returns the number of configurations that failed (NaN/inf or a singular M). W
    lanes at a time; tails and groups with a failing lane go through the one-configuration kernel."""
    Q, QD, TAU, out = unowned(Q), unowned(QD), unowned(TAU), unowned(out)  # rows count no references
    n = Q.shape[0]
    nb, dof = mi[0], mi[1]
    ngroups = (n + W - 1) // W  # the last one may be partial: the scalar kernel
    nc = max(1, min(ngroups, 64))
    ftb = np.zeros(6)
    has_ftip = ftip.size == 6
    if has_ftip:
        _tip_wrench_body(mf, mi, ftip, ftb)
    bad = 0
    for c in prange(nc):
        qp = np.empty((nb, W))
        qdp = np.empty((nb, W))
        qddp = np.empty((nb, W))
        R = np.empty((nb, 9, W))
        P = np.empty((nb, 3, W))
        V = np.empty((nb, 6, W))
        A = np.empty((nb, 6, W))
        F = np.empty((nb, 6, W))
        Yc = np.empty((nb, 10, W))
        Mp = np.empty((nb, nb, W))
        Ma = np.empty((dof, dof, W))
        r = np.empty((dof, W))
        r0 = np.empty((dof, W))
        ws = K.new_ws(mi)
        for g in range(c * ngroups // nc, (c + 1) * ngroups // nc):
            k0 = g * W
            if k0 + W <= n and _rows_finite(Q, k0) and _rows_finite(QD, k0) and _rows_finite(TAU, k0) and _fd_group(
                    mf, mi, Q, QD, TAU, k0, grav, ftb, has_ftip, qp, qdp, qddp, R, P, V, A, F, Yc, Mp, Ma, r, r0, out):
                continue
            for k in range(k0, min(k0 + W, n)):
                if not (K.all_finite(Q[k]) and K.all_finite(QD[k]) and K.all_finite(TAU[k])):
                    bad += 1
                    continue
                if not K.forward_dynamics_into(mf, mi, Q[k], QD[k], TAU[k], grav, ftip, ws, out[k]):
                    bad += 1
    return bad


@njit(cache=True, parallel=True, error_model="numpy")
def mass_matrix_batch_lanes(mf, mi, Q, out):
    """M (N, dof, dof) into out; returns the number of configurations with NaN/inf. W lanes at a time."""
    Q, out = unowned(Q), unowned(out)  # rows count no references
    n = Q.shape[0]
    nb, dof = mi[0], mi[1]
    ngroups = (n + W - 1) // W  # the last one may be partial: the scalar kernel
    nc = max(1, min(ngroups, 64))
    bad = 0
    for c in prange(nc):
        qp = np.empty((nb, W))
        R = np.empty((nb, 9, W))
        P = np.empty((nb, 3, W))
        V = np.empty((nb, 6, W))
        Yc = np.empty((nb, 10, W))
        Mp = np.empty((nb, nb, W))
        Ma = np.empty((dof, dof, W))
        ws = K.new_ws(mi)
        for g in range(c * ngroups // nc, (c + 1) * ngroups // nc):
            k0 = g * W
            if k0 + W <= n and _rows_finite(Q, k0):
                _poses_group(mf, mi, Q, k0, qp, R, P)
                M = _mass_group(mf, mi, R, P, Yc, Mp, Ma, V)
                for r in range(dof):
                    for cc in range(dof):
                        for l in range(W):
                            out[k0 + l, r, cc] = M[r, cc, l]
                continue
            for k in range(k0, min(k0 + W, n)):
                if not K.all_finite(Q[k]):
                    bad += 1
                    continue
                K.crba_into(mf, mi, Q[k], ws, out[k])
    return bad
