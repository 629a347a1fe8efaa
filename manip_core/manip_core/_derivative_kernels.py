"""numba kernels: analytic derivatives of inverse and forward dynamics, and the time derivative of the Jacobian.

Algorithm: Carpentier and Mansard, "Analytical Derivatives of Rigid Body Dynamics Algorithms", RSS 2018 (the one
behind Pinocchio's ``computeRNEADerivatives``), written in the base ("world") frame with Modern Robotics'
ordering: motions [omega; v], wrenches [moment; force], both about the base origin. In that frame the joint
screws J_i do not change along the subtree of a joint, which makes every partial derivative a product of a few
6-vectors and one pass up the tree:

forward (parents first), per body i with parent p (v_p = 0, a_p = [0; -g] at the base):
    J_i = screw of joint i; v_i = v_p + J_i qd_i; a_i = a_p + J_i qdd_i + (v_i x J_i) qd_i  (a holds -g)
    dV/dq_i = v_p x J_i;   dA/dq_i = a_p x J_i + v_p x dV/dq_i;   dA/dqd_i = v_i x J_i + dV/dq_i
    Y_i: spatial inertia in the base frame; f_i = Y_i a_i + v_i x* (Y_i v_i)
    B_i = (v_i x*) Y_i - Y_i (v_i x) + H(Y_i v_i),  H(h) dv = dv x* h  (the velocity variation of f_i)
backward (children first), with composite Yc, Bc, f (summed over the subtree, no transforms in this frame):
    dF/dq_i = Bc_i dV/dq_i + Yc_i dA/dq_i + J_i x* f_i;   dF/dqd_i = Bc_i J_i + Yc_i dA/dqd_i
    dtau_a/dq_i = J_a . dF/dq_i, dtau_a/dqd_i = J_a . dF/dqd_i, M_ai = J_a . Yc_i J_i  for a = i and its ancestors
    dtau_i/dq_c = (Bc_i^T J_i) . dV/dq_c + (Yc_i J_i) . dA/dq_c  (and qd: J_c, dA/dqd_c) for strict ancestors c
Mimic joints: the kernels work on the physical joints, q_phys = A q + b, and return A^T D A.
Forward dynamics: d qdd / d(q, qd) = -M^-1 d tau / d(q, qd) evaluated at qdd = FD(q, qd, tau); d qdd / d tau = M^-1.
Jacobian: dJ_s/dt column i = v_i x J_i (space); dJ_b/dt = Ad_{T^-1} dJ_s/dt - ad_{V_b} J_b (body, V_b = J_b qd).

Every entry point returns 0, 1 when an input holds NaN, inf or a magnitude above K.INPUT_BOUND, 2 when the mass
matrix is singular.
"""
import numpy as np
from numba import njit, prange

from . import _kernels as K
from ._layout import BODY_STRIDE, MI_HEADER, MI_STRIDE, O_H, O_I, O_M, WS_STRIDE, W_PABS, W_RABS
from ._views import unowned, view_f64, view_i64

_JIT = dict(cache=True, nogil=True, error_model="numpy", _nrt=True)
_SINGLE = dict(cache=True, nogil=False, error_model="numpy", _nrt=True)

# Per-body block of the derivative workspace (floats).
D_J, D_V, D_A, D_DVDQ, D_DADQ, D_DADV, D_F, D_Y, D_B = 0, 6, 12, 18, 24, 30, 36, 42, 78
D_YC, D_FC = 114, 150  # forward dynamics: composite inertia and force at qdd = 0, then the change of a
D_STRIDE = 156
N_TMP = 8  # scratch 6-vectors


@njit(**_JIT)
def _dws_offsets(nb, dof):
    """Derivative workspace: per-body blocks, scratch 6-vectors, three nb x nb physical matrices (dq, dqd, M;
    or two 6 x dof Jacobians), five dof x dof matrices (Cholesky factor and its inverse; dtau/dq, dtau/dqd
    and M for forward dynamics), two dof vectors; the last element is the total size."""
    o_tmp = nb * D_STRIDE
    o_phys = o_tmp + 6 * N_TMP
    o_chol = o_phys + max(3 * nb * nb, 12 * dof)
    o_vec = o_chol + 5 * dof * dof
    return o_tmp, o_phys, o_chol, o_vec, o_vec + 2 * dof


@njit(**_JIT)
def new_dws(mi):
    return np.empty(_dws_offsets(mi[0], mi[1])[4])


@njit(**_JIT)
def _cross_m(a, b, out):
    """out = a x b for motions a, b = [omega; v]."""
    w0, w1, w2, v0, v1, v2 = a[0], a[1], a[2], a[3], a[4], a[5]
    x0, x1, x2, y0, y1, y2 = b[0], b[1], b[2], b[3], b[4], b[5]
    out[0] = w1 * x2 - w2 * x1
    out[1] = w2 * x0 - w0 * x2
    out[2] = w0 * x1 - w1 * x0
    out[3] = w1 * y2 - w2 * y1 + v1 * x2 - v2 * x1
    out[4] = w2 * y0 - w0 * y2 + v2 * x0 - v0 * x2
    out[5] = w0 * y1 - w1 * y0 + v0 * x1 - v1 * x0


@njit(**_JIT)
def _cross_f_add(a, f, out):
    """out += a x* f for a motion a = [omega; v] and a wrench f = [m; f]: [w x m + v x f; w x f]."""
    w0, w1, w2, v0, v1, v2 = a[0], a[1], a[2], a[3], a[4], a[5]
    m0, m1, m2, f0, f1, f2 = f[0], f[1], f[2], f[3], f[4], f[5]
    out[0] += w1 * m2 - w2 * m1 + v1 * f2 - v2 * f1
    out[1] += w2 * m0 - w0 * m2 + v2 * f0 - v0 * f2
    out[2] += w0 * m1 - w1 * m0 + v0 * f1 - v1 * f0
    out[3] += w1 * f2 - w2 * f1
    out[4] += w2 * f0 - w0 * f2
    out[5] += w0 * f1 - w1 * f0


@njit(**_JIT)
def _mv_add(Y, x, out):
    """out += Y x for Y (36,) row-major 6 x 6."""
    for r in range(6):
        s = 0.0
        for c in range(6):
            s += Y[6 * r + c] * x[c]
        out[r] += s


@njit(**_JIT)
def _dot6(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3] + a[4] * b[4] + a[5] * b[5]


@njit(**_JIT)
def _world_inertia(mf, ws, i, Y):
    """Y (36,): spatial inertia of body i about the base origin in base axes, [[Ibar, [h]], [[h]^T, m 1]] with
    h = R h_b + m p, Ibar = R Ibar_b R^T - [Rh_b][p] - [p][Rh_b] - m [p]^2 ((R, p): the body's pose)."""
    b = i * BODY_STRIDE
    w = i * WS_STRIDE
    R = ws[w + W_RABS:w + W_RABS + 9]
    p = ws[w + W_PABS:w + W_PABS + 3]
    m = mf[b + O_M]
    hb = mf[b + O_H:b + O_H + 3]
    Ib = mf[b + O_I:b + O_I + 9]
    a0 = R[0] * hb[0] + R[1] * hb[1] + R[2] * hb[2]
    a1 = R[3] * hb[0] + R[4] * hb[1] + R[5] * hb[2]
    a2 = R[6] * hb[0] + R[7] * hb[1] + R[8] * hb[2]
    b0, b1, b2 = p[0], p[1], p[2]
    ab = a0 * b0 + a1 * b1 + a2 * b2
    pp = b0 * b0 + b1 * b1 + b2 * b2
    for r in range(3):
        t0 = R[3 * r] * Ib[0] + R[3 * r + 1] * Ib[3] + R[3 * r + 2] * Ib[6]
        t1 = R[3 * r] * Ib[1] + R[3 * r + 1] * Ib[4] + R[3 * r + 2] * Ib[7]
        t2 = R[3 * r] * Ib[2] + R[3 * r + 1] * Ib[5] + R[3 * r + 2] * Ib[8]
        ar = a0 if r == 0 else (a1 if r == 1 else a2)
        br = b0 if r == 0 else (b1 if r == 1 else b2)
        for c in range(3):
            ac = a0 if c == 0 else (a1 if c == 1 else a2)
            bc = b0 if c == 0 else (b1 if c == 1 else b2)
            d = 1.0 if r == c else 0.0
            Y[6 * r + c] = (t0 * R[3 * c] + t1 * R[3 * c + 1] + t2 * R[3 * c + 2] + 2.0 * ab * d - ar * bc
                            - br * ac + m * (pp * d - br * bc))
    h0, h1, h2 = a0 + m * b0, a1 + m * b1, a2 + m * b2
    # upper right [h], lower left [h]^T = -[h], lower right m 1
    Y[3], Y[4], Y[5] = 0.0, -h2, h1
    Y[9], Y[10], Y[11] = h2, 0.0, -h0
    Y[15], Y[16], Y[17] = -h1, h0, 0.0
    Y[18], Y[19], Y[20] = 0.0, h2, -h1
    Y[24], Y[25], Y[26] = -h2, 0.0, h0
    Y[30], Y[31], Y[32] = h1, -h0, 0.0
    Y[21], Y[22], Y[23] = m, 0.0, 0.0
    Y[27], Y[28], Y[29] = 0.0, m, 0.0
    Y[33], Y[34], Y[35] = 0.0, 0.0, m


@njit(**_JIT)
def _velocity_variation(Y, v, h, B, col):
    """B (36,) = (v x*) Y - Y (v x) + H(h), H(h) dv = dv x* h; with Y symmetric, -Y (v x) = ((v x*) Y)^T."""
    for k in range(6):
        for r in range(6):
            col[r] = 0.0
        _cross_f_add(v, Y[6 * k:6 * k + 6], col)  # row k of Y = column k
        for r in range(6):
            B[6 * r + k] = col[r]
    for r in range(6):
        for c in range(r, 6):
            s = B[6 * r + c] + B[6 * c + r]
            B[6 * r + c] = s
            B[6 * c + r] = s
    # H(h): [dw x hm + dv x hf; dw x hf] = [[-[hm], -[hf]], [-[hf], 0]] dv
    m0, m1, m2, f0, f1, f2 = h[0], h[1], h[2], h[3], h[4], h[5]
    B[1] += m2
    B[2] -= m1
    B[6] -= m2
    B[8] += m0
    B[12] += m1
    B[13] -= m0
    B[4] += f2
    B[5] -= f1
    B[9] -= f2
    B[11] += f0
    B[15] += f1
    B[16] -= f0
    B[19] += f2
    B[20] -= f1
    B[24] -= f2
    B[26] += f0
    B[30] += f1
    B[31] -= f0


@njit(**_JIT)
def _forward_pass(mf, mi, qdp, qddp, grav, ws, dws, with_forces):
    """Per body: J, v, a (base frame, a holds -g), dV/dq, dA/dq, dA/dqd, and (with_forces) Y, B, f.
    Absolute poses must be in ws."""
    nb, dof = mi[0], mi[1]
    o_tmp = _dws_offsets(nb, dof)[0]
    zero = dws[o_tmp:o_tmp + 6]
    abase = dws[o_tmp + 6:o_tmp + 12]
    tmp = dws[o_tmp + 12:o_tmp + 18]
    h = dws[o_tmp + 18:o_tmp + 24]
    for k in range(6):
        zero[k] = 0.0
        abase[k] = 0.0
    abase[3] = -grav[0]
    abase[4] = -grav[1]
    abase[5] = -grav[2]
    for i in range(nb):
        d = i * D_STRIDE
        p = mi[MI_HEADER + i * MI_STRIDE]
        J = dws[d + D_J:d + D_J + 6]
        V = dws[d + D_V:d + D_V + 6]
        A = dws[d + D_A:d + D_A + 6]
        dVdq = dws[d + D_DVDQ:d + D_DVDQ + 6]
        dAdq = dws[d + D_DADQ:d + D_DADQ + 6]
        dAdv = dws[d + D_DADV:d + D_DADV + 6]
        K.joint_screw_abs(mf, mi, ws, i, J)
        if p < 0:
            vp = zero
            ap = abase
        else:
            dp = p * D_STRIDE
            vp = dws[dp + D_V:dp + D_V + 6]
            ap = dws[dp + D_A:dp + D_A + 6]
        qd, qdd = qdp[i], qddp[i]
        for k in range(6):
            V[k] = vp[k] + J[k] * qd
        _cross_m(V, J, dAdv)            # dJ/dt column = v_i x J_i
        for k in range(6):
            A[k] = ap[k] + J[k] * qdd + dAdv[k] * qd
        _cross_m(vp, J, dVdq)
        _cross_m(ap, J, dAdq)
        _cross_m(vp, dVdq, tmp)
        for k in range(6):
            dAdq[k] += tmp[k]
            dAdv[k] += dVdq[k]
        if not with_forces:
            continue
        Y = dws[d + D_Y:d + D_Y + 36]
        B = dws[d + D_B:d + D_B + 36]
        F = dws[d + D_F:d + D_F + 6]
        _world_inertia(mf, ws, i, Y)
        for k in range(6):
            h[k] = 0.0
            F[k] = 0.0
        _mv_add(Y, V, h)
        _mv_add(Y, A, F)
        _cross_f_add(V, h, F)
        _velocity_variation(Y, V, h, B, tmp)


@njit(**_JIT)
def _add_tip_wrench(mf, mi, ws, dws, ftip):
    """f_tip (the wrench the tip exerts on the environment, tip frame, at the tip) in the base frame, added to
    the tip body's force: m = R m_t + p x (R f_t), f = R f_t with (R, p) the tip pose."""
    tb = mi[2]
    if ftip.size != 6 or tb < 0:
        return
    o_tmp = _dws_offsets(mi[0], mi[1])[0]
    T = dws[o_tmp + 24:o_tmp + 40].reshape((4, 4))
    K.tip_pose(mf, mi, ws, T)
    f0 = T[0, 0] * ftip[3] + T[0, 1] * ftip[4] + T[0, 2] * ftip[5]
    f1 = T[1, 0] * ftip[3] + T[1, 1] * ftip[4] + T[1, 2] * ftip[5]
    f2 = T[2, 0] * ftip[3] + T[2, 1] * ftip[4] + T[2, 2] * ftip[5]
    m0 = T[0, 0] * ftip[0] + T[0, 1] * ftip[1] + T[0, 2] * ftip[2]
    m1 = T[1, 0] * ftip[0] + T[1, 1] * ftip[1] + T[1, 2] * ftip[2]
    m2 = T[2, 0] * ftip[0] + T[2, 1] * ftip[1] + T[2, 2] * ftip[2]
    p0, p1, p2 = T[0, 3], T[1, 3], T[2, 3]
    F = dws[tb * D_STRIDE + D_F:tb * D_STRIDE + D_F + 6]
    F[0] += m0 + p1 * f2 - p2 * f1
    F[1] += m1 + p2 * f0 - p0 * f2
    F[2] += m2 + p0 * f1 - p1 * f0
    F[3] += f0
    F[4] += f1
    F[5] += f2


@njit(**_JIT)
def _backward_pass(mi, dws, Dq, Dv, M):
    """Fills the physical nb x nb matrices dtau/dq, dtau/dqd and M; consumes the composite Y, B, f."""
    nb, dof = mi[0], mi[1]
    o_tmp = _dws_offsets(nb, dof)[0]
    YJ = dws[o_tmp + 24:o_tmp + 30]
    BJ = dws[o_tmp + 30:o_tmp + 36]
    dFq = dws[o_tmp + 36:o_tmp + 42]
    dFv = dws[o_tmp + 42:o_tmp + 48]
    for r in range(nb):
        for c in range(nb):
            Dq[r, c] = 0.0
            Dv[r, c] = 0.0
            M[r, c] = 0.0
    for i in range(nb - 1, -1, -1):
        d = i * D_STRIDE
        J = dws[d + D_J:d + D_J + 6]
        Y = dws[d + D_Y:d + D_Y + 36]
        B = dws[d + D_B:d + D_B + 36]
        F = dws[d + D_F:d + D_F + 6]
        for k in range(6):
            YJ[k] = 0.0
            BJ[k] = 0.0
            dFq[k] = 0.0
            dFv[k] = 0.0
        _mv_add(Y, J, YJ)
        # BJ = B^T J
        for c in range(6):
            s = 0.0
            for r in range(6):
                s += B[6 * r + c] * J[r]
            BJ[c] = s
        _mv_add(B, J, dFv)
        _mv_add(Y, dws[d + D_DADV:d + D_DADV + 6], dFv)
        _mv_add(B, dws[d + D_DVDQ:d + D_DVDQ + 6], dFq)
        _mv_add(Y, dws[d + D_DADQ:d + D_DADQ + 6], dFq)
        _cross_f_add(J, F, dFq)
        # column i: row i and its ancestors; row i: its strict ancestors' columns
        a = i
        while a >= 0:
            da = a * D_STRIDE
            Ja = dws[da + D_J:da + D_J + 6]
            Dq[a, i] = _dot6(Ja, dFq)
            Dv[a, i] = _dot6(Ja, dFv)
            mai = _dot6(Ja, YJ)
            M[a, i] = mai
            M[i, a] = mai
            if a != i:
                Dq[i, a] = _dot6(BJ, dws[da + D_DVDQ:da + D_DVDQ + 6]) + _dot6(YJ, dws[da + D_DADQ:da + D_DADQ + 6])
                Dv[i, a] = _dot6(BJ, Ja) + _dot6(YJ, dws[da + D_DADV:da + D_DADV + 6])
            a = mi[MI_HEADER + a * MI_STRIDE]
        p = mi[MI_HEADER + i * MI_STRIDE]
        if p >= 0:
            dp = p * D_STRIDE
            for k in range(6):
                dws[dp + D_F + k] += F[k]
            for k in range(36):
                dws[dp + D_Y + k] += Y[k]
                dws[dp + D_B + k] += B[k]


@njit(**_JIT)
def _project(mf, mi, P, out):
    """out (dof, dof) = A^T P A for the physical nb x nb matrix P (mimic joints)."""
    nb, dof = mi[0], mi[1]
    o = K._map_offset(mi)
    for r in range(dof):
        for c in range(dof):
            s = 0.0
            for i in range(nb):
                ai = mf[o + i * dof + r]
                if ai == 0.0:
                    continue
                for j in range(nb):
                    s += ai * P[i, j] * mf[o + j * dof + c]
            out[r, c] = s


@njit(**_JIT)
def _prepare(mf, mi, q, qd, qdd, ws):
    """Physical joint values into ws's rnea buffer, relative and absolute poses; returns (qdp, qddp)."""
    nb = mi[0]
    o = K._ws_offsets(nb)[1]
    buf = ws[o:o + 4 * nb]
    qp, qdp, qddp = buf[:nb], buf[nb:2 * nb], buf[2 * nb:3 * nb]
    K.to_phys(mf, mi, q, True, qp)
    K.to_phys(mf, mi, qd, False, qdp)
    K.to_phys(mf, mi, qdd, False, qddp)
    K.rel_transforms(mf, mi, qp, ws)
    K.abs_transforms(mi, ws)
    return qdp, qddp


@njit(**_JIT)
def rnea_derivatives_into(mf, mi, q, qd, qdd, grav, ftip, ws, dws, dq, dv, M):
    """dq = dtau/dq, dv = dtau/dqd, M = dtau/dqdd (dof x dof each) at (q, qd, qdd)."""
    nb, dof = mi[0], mi[1]
    qdp, qddp = _prepare(mf, mi, q, qd, qdd, ws)
    _forward_pass(mf, mi, qdp, qddp, grav, ws, dws, True)
    _add_tip_wrench(mf, mi, ws, dws, ftip)
    if mi[3] == 0:
        _backward_pass(mi, dws, dq, dv, M)
        return
    o_phys = _dws_offsets(nb, dof)[1]
    n2 = nb * nb
    Pq = dws[o_phys:o_phys + n2].reshape((nb, nb))
    Pv = dws[o_phys + n2:o_phys + 2 * n2].reshape((nb, nb))
    PM = dws[o_phys + 2 * n2:o_phys + 3 * n2].reshape((nb, nb))
    _backward_pass(mi, dws, Pq, Pv, PM)
    _project(mf, mi, Pq, dq)
    _project(mf, mi, Pv, dv)
    _project(mf, mi, PM, M)


@njit(**_JIT)
def _spd_inverse(M, L, Li, out):
    """out = M^-1 (full, symmetric) for symmetric positive definite M: L L^T = M (Cholesky), Li = L^-1,
    M^-1 = Li^T Li. False when M is not positive definite. Reciprocals of the diagonal are kept so that the
    inner loops multiply (no division chains)."""
    n = M.shape[0]
    for j in range(n):
        s = M[j, j]
        for k in range(j):
            s -= L[j, k] * L[j, k]
        if s <= 0.0:
            return False
        dj = np.sqrt(s)
        L[j, j] = dj
        Li[j, j] = 1.0 / dj  # the reciprocal, used below
        for i in range(j + 1, n):
            t = M[i, j]
            for k in range(j):
                t -= L[i, k] * L[j, k]
            L[i, j] = t * Li[j, j]
    # Li = L^-1 (lower): column j by forward substitution
    for j in range(n):
        for i in range(j + 1, n):
            t = 0.0
            for k in range(j, i):
                t -= L[i, k] * Li[k, j]
            Li[i, j] = t * Li[i, i]
    for r in range(n):
        for c in range(r, n):
            t = 0.0
            for k in range(c, n):
                t += Li[k, r] * Li[k, c]
            out[r, c] = t
            out[c, r] = t
    return True


@njit(**_JIT)
def _bias_and_mass(mi, dws, tau_p, Mp):
    """At qdd = 0 (forward pass done, tip wrench added): tau_p = bias forces c + g (+ J^T f_tip) and Mp = M of
    the physical joints, from composites kept apart (D_YC, D_FC) so that Y, B, f stay for the derivatives."""
    nb = mi[0]
    for i in range(nb):
        d = i * D_STRIDE
        for k in range(36):
            dws[d + D_YC + k] = dws[d + D_Y + k]
        for k in range(6):
            dws[d + D_FC + k] = dws[d + D_F + k]
    for r in range(nb):
        for c in range(nb):
            Mp[r, c] = 0.0
    o_tmp = _dws_offsets(nb, mi[1])[0]
    YJ = dws[o_tmp + 24:o_tmp + 30]
    for i in range(nb - 1, -1, -1):
        d = i * D_STRIDE
        J = dws[d + D_J:d + D_J + 6]
        Yc = dws[d + D_YC:d + D_YC + 36]
        fc = dws[d + D_FC:d + D_FC + 6]
        tau_p[i] = _dot6(J, fc)
        for k in range(6):
            YJ[k] = 0.0
        _mv_add(Yc, J, YJ)
        a = i
        while a >= 0:
            da = a * D_STRIDE
            v = _dot6(dws[da + D_J:da + D_J + 6], YJ)
            Mp[a, i] = v
            Mp[i, a] = v
            a = mi[MI_HEADER + a * MI_STRIDE]
        p = mi[MI_HEADER + i * MI_STRIDE]
        if p >= 0:
            dp = p * D_STRIDE
            for k in range(36):
                dws[dp + D_YC + k] += Yc[k]
            for k in range(6):
                dws[dp + D_FC + k] += fc[k]


@njit(**_JIT)
def _add_acceleration(mi, dws, qddp):
    """The forward-pass quantities at qdd = 0 moved to qdd: a_i += da_i, da_i = da_p + J_i qdd_i (base frame:
    accelerations add along the chain), dA/dq_i += da_p x J_i, f_i += Y_i da_i. da_i is kept in D_FC."""
    nb = mi[0]
    o_tmp = _dws_offsets(nb, mi[1])[0]
    tmp = dws[o_tmp + 12:o_tmp + 18]
    for i in range(nb):
        d = i * D_STRIDE
        p = mi[MI_HEADER + i * MI_STRIDE]
        J = dws[d + D_J:d + D_J + 6]
        da = dws[d + D_FC:d + D_FC + 6]
        qdd = qddp[i]
        if p < 0:
            for k in range(6):
                da[k] = J[k] * qdd
        else:
            dap = dws[p * D_STRIDE + D_FC:p * D_STRIDE + D_FC + 6]
            for k in range(6):
                da[k] = dap[k] + J[k] * qdd
            _cross_m(dap, J, tmp)
            for k in range(6):
                dws[d + D_DADQ + k] += tmp[k]
        for k in range(6):
            dws[d + D_A + k] += da[k]
        _mv_add(dws[d + D_Y:d + D_Y + 36], da, dws[d + D_F:d + D_F + 6])


@njit(**_JIT)
def forward_dynamics_derivatives_into(mf, mi, q, qd, tau, grav, ftip, ws, dws, dq, dv, minv):
    """dq = d qdd/dq, dv = d qdd/dqd, minv = d qdd/dtau = M^-1 at (q, qd, tau). False if M is singular.

    One forward pass at qdd = 0 gives the bias forces and M (composites kept apart), qdd = M^-1 (tau - bias),
    the pass is moved to qdd (accelerations add in the base frame) and the derivative pass runs on it."""
    nb, dof = mi[0], mi[1]
    o = _dws_offsets(nb, dof)
    n2 = dof * dof
    L = dws[o[2]:o[2] + n2].reshape((dof, dof))
    Li = dws[o[2] + n2:o[2] + 2 * n2].reshape((dof, dof))
    Tq = dws[o[2] + 2 * n2:o[2] + 3 * n2].reshape((dof, dof))
    Tv = dws[o[2] + 3 * n2:o[2] + 4 * n2].reshape((dof, dof))
    M = dws[o[2] + 4 * n2:o[2] + 5 * n2].reshape((dof, dof))
    r = dws[o[3]:o[3] + dof]
    qdd = dws[o[3] + dof:o[3] + 2 * dof]
    for k in range(dof):
        qdd[k] = 0.0
    qdp, qddp = _prepare(mf, mi, q, qd, qdd, ws)   # qddp = 0
    _forward_pass(mf, mi, qdp, qddp, grav, ws, dws, True)
    _add_tip_wrench(mf, mi, ws, dws, ftip)
    o_buf = K._ws_offsets(nb)[1]
    tau_p = ws[o_buf + 3 * nb:o_buf + 4 * nb]
    if mi[3] == 0:
        _bias_and_mass(mi, dws, r, M)
    else:
        o_phys = o[1]
        PM = dws[o_phys + 2 * nb * nb:o_phys + 3 * nb * nb].reshape((nb, nb))
        _bias_and_mass(mi, dws, tau_p, PM)
        K.from_phys(mf, mi, tau_p, r)
        _project(mf, mi, PM, M)
    if not _spd_inverse(M, L, Li, minv):
        return False
    for k in range(dof):
        r[k] = tau[k] - r[k]
    for i in range(dof):
        s = 0.0
        for k in range(dof):
            s += minv[i, k] * r[k]
        qdd[i] = s
    K.to_phys(mf, mi, qdd, False, qddp)
    _add_acceleration(mi, dws, qddp)
    if mi[3] == 0:
        _backward_pass(mi, dws, Tq, Tv, M)
    else:
        Pq = dws[o[1]:o[1] + nb * nb].reshape((nb, nb))
        Pv = dws[o[1] + nb * nb:o[1] + 2 * nb * nb].reshape((nb, nb))
        PM = dws[o[1] + 2 * nb * nb:o[1] + 3 * nb * nb].reshape((nb, nb))
        _backward_pass(mi, dws, Pq, Pv, PM)
        _project(mf, mi, Pq, Tq)
        _project(mf, mi, Pv, Tv)
    for i in range(dof):
        for c in range(dof):
            s1 = 0.0
            s2 = 0.0
            for k in range(dof):
                a = minv[i, k]
                s1 += a * Tq[k, c]
                s2 += a * Tv[k, c]
            dq[i, c] = -s1
            dv[i, c] = -s2
    return True


@njit(**_JIT)
def jacobian_dot_into(mf, mi, q, qd, body_frame, ws, dws, out):
    """Time derivative (6, dof) of the tip's space (or body) Jacobian at (q, qd)."""
    nb, dof = mi[0], mi[1]
    o = _dws_offsets(nb, dof)
    zero = dws[o[3]:o[3] + dof]
    for k in range(dof):
        zero[k] = 0.0
    grav = dws[o[0] + 42:o[0] + 45]
    for k in range(3):
        grav[k] = 0.0
    qdp, qddp = _prepare(mf, mi, q, qd, zero, ws)
    _forward_pass(mf, mi, qdp, qddp, grav, ws, dws, False)
    for r in range(6):
        for c in range(dof):
            out[r, c] = 0.0
    j = mi[2]
    while j >= 0:
        col = dws[j * D_STRIDE + D_DADV:j * D_STRIDE + D_DADV + 6]
        dvdq = dws[j * D_STRIDE + D_DVDQ:j * D_STRIDE + D_DVDQ + 6]
        # dA/dqd_j = v_j x J_j + v_p x J_j; dJ_j/dt = v_j x J_j = v_p x J_j: half of it
        if mi[3] == 0:
            for r in range(6):
                out[r, j] = col[r] - dvdq[r]
        else:
            om = K._map_offset(mi)
            for c in range(dof):
                a = mf[om + j * dof + c]
                if a != 0.0:
                    for r in range(6):
                        out[r, c] += a * (col[r] - dvdq[r])
        j = mi[MI_HEADER + j * MI_STRIDE]
    if not body_frame:
        return
    # dJ_b/dt = Ad_{T^-1} dJ_s/dt - ad_{V_b} J_b, V_b = J_b qd
    T = dws[o[0] + 24:o[0] + 40].reshape((4, 4))
    K.tip_pose(mf, mi, ws, T)
    Js = dws[o[1]:o[1] + 6 * dof].reshape((6, dof))
    Jb = dws[o[1] + 6 * dof:o[1] + 12 * dof].reshape((6, dof))
    K.jacobian_space_into(mf, mi, ws, mi[2], Js)
    K.space_to_body(T, Js, Jb)
    Vb = dws[o[0]:o[0] + 6]
    col = dws[o[0] + 6:o[0] + 12]
    adj = dws[o[0] + 12:o[0] + 18]
    for r in range(6):
        s = 0.0
        for c in range(dof):
            s += Jb[r, c] * qd[c]
        Vb[r] = s
    for k in range(6):
        for c in range(dof):
            Js[k, c] = out[k, c]
    K.space_to_body(T, Js, out)
    for c in range(dof):
        for r in range(6):
            col[r] = Jb[r, c]
        _cross_m(Vb, col, adj)
        for r in range(6):
            out[r, c] -= adj[r]


# ------------------------------------------------------------------------------------------ single calls
@njit(**_SINGLE)
def rnea_derivatives(mf, mi, ws, dws, q, qd, qdd, grav, ftip, dq, dv, M):
    if not (K.all_finite(q) and K.all_finite(qd) and K.all_finite(qdd) and K.all_finite(grav)
            and K.all_finite(ftip)):
        return 1
    rnea_derivatives_into(K._vf(mf), K._vi(mi), q, qd, qdd, grav, ftip, K._vf(ws), K._vf(dws), dq, dv, M)
    return 0


@njit(**_SINGLE)
def forward_dynamics_derivatives(mf, mi, ws, dws, q, qd, tau, grav, ftip, dq, dv, minv):
    if not (K.all_finite(q) and K.all_finite(qd) and K.all_finite(tau) and K.all_finite(grav)
            and K.all_finite(ftip)):
        return 1
    if not forward_dynamics_derivatives_into(K._vf(mf), K._vi(mi), q, qd, tau, grav, ftip, K._vf(ws), K._vf(dws),
                                             dq, dv, minv):
        return 2
    return 0


@njit(**_SINGLE)
def jacobian_dot(mf, mi, ws, dws, q, qd, body_frame, out):
    if not (K.all_finite(q) and K.all_finite(qd)):
        return 1
    jacobian_dot_into(K._vf(mf), K._vi(mi), q, qd, body_frame, K._vf(ws), K._vf(dws), out)
    return 0


# Without the GIL, for callers that pass their own workspace (see _kernels.fk_nogil).
@njit(**_JIT)
def rnea_derivatives_nogil(mf, mi, ws, dws, q, qd, qdd, grav, ftip, dq, dv, M):
    return rnea_derivatives(mf, mi, ws, dws, q, qd, qdd, grav, ftip, dq, dv, M)


@njit(**_JIT)
def forward_dynamics_derivatives_nogil(mf, mi, ws, dws, q, qd, tau, grav, ftip, dq, dv, minv):
    return forward_dynamics_derivatives(mf, mi, ws, dws, q, qd, tau, grav, ftip, dq, dv, minv)


@njit(**_JIT)
def jacobian_dot_nogil(mf, mi, ws, dws, q, qd, body_frame, out):
    return jacobian_dot(mf, mi, ws, dws, q, qd, body_frame, out)


# ---------------------------------------------------------------------------------------------- batched
@njit(cache=True, parallel=True, error_model="numpy")
def rnea_derivatives_batch(mf, mi, Q, QD, QDD, grav, ftip, dq, dv, M):
    # the rows handed to the kernel below count no references (_views.unowned: the threads would contend for them)
    Q, QD, QDD, dq, dv, M = unowned(Q), unowned(QD), unowned(QDD), unowned(dq), unowned(dv), unowned(M)
    n = Q.shape[0]
    nc = K._chunks(n)
    bad = 0
    # views without meminfo (manip_core._views): the kernels' slices of mf / ws count no references, and the
    # threads do not contend for mf's reference count; mf, mi and each chunk's scratch outlive the loop
    mfv, miv = view_f64(mf.ctypes.data, mf.size), view_i64(mi.ctypes.data, mi.size)
    for c in prange(nc):
        ws_own = K.new_ws(mi)
        dws_own = new_dws(mi)
        ws, dws = view_f64(ws_own.ctypes.data, ws_own.size), view_f64(dws_own.ctypes.data, dws_own.size)
        for k in range(c * n // nc, (c + 1) * n // nc):
            if not (K.all_finite(Q[k]) and K.all_finite(QD[k]) and K.all_finite(QDD[k])):
                bad += 1
                continue
            rnea_derivatives_into(mfv, miv, Q[k], QD[k], QDD[k], grav, ftip, ws, dws, dq[k], dv[k], M[k])
        _keep(ws_own, dws_own)
    return bad


@njit(cache=True, parallel=True, error_model="numpy")
def forward_dynamics_derivatives_batch(mf, mi, Q, QD, TAU, grav, ftip, dq, dv, minv):
    Q, QD, TAU, dq, dv, minv = unowned(Q), unowned(QD), unowned(TAU), unowned(dq), unowned(dv), unowned(minv)
    n = Q.shape[0]
    nc = K._chunks(n)
    bad = 0
    mfv, miv = view_f64(mf.ctypes.data, mf.size), view_i64(mi.ctypes.data, mi.size)  # as rnea_derivatives_batch
    for c in prange(nc):
        ws_own = K.new_ws(mi)
        dws_own = new_dws(mi)
        ws, dws = view_f64(ws_own.ctypes.data, ws_own.size), view_f64(dws_own.ctypes.data, dws_own.size)
        for k in range(c * n // nc, (c + 1) * n // nc):
            if not (K.all_finite(Q[k]) and K.all_finite(QD[k]) and K.all_finite(TAU[k])):
                bad += 1
                continue
            if not forward_dynamics_derivatives_into(mfv, miv, Q[k], QD[k], TAU[k], grav, ftip, ws, dws, dq[k],
                                                     dv[k], minv[k]):
                bad += 1
        _keep(ws_own, dws_own)
    return bad


@njit(cache=True, _nrt=True)
def _keep(a, b):
    """Uses a and b (the scratch behind views) after their last view, so that they are released only here."""
    return a.size + b.size
