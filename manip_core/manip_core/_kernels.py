"""numba kernels: kinematics and dynamics of a tree of 1-DOF joints in body frames.

Maths: spatial vectors [omega; v] and wrenches [m; f] in each body's frame (Featherstone, Rigid Body Dynamics
Algorithms, 2008, ch. 3-6, written with Modern Robotics' ordering, Lynch & Park 2017, ch. 8). Recursive
Newton-Euler (RNEA) for inverse dynamics, composite rigid bodies (CRBA) for the mass matrix, Cholesky solve for
forward dynamics. The model arrives packed as (mf, mi), see _layout.py. Every kernel first maps the actuated
joint vector q (dof) onto the physical joints (q_phys = A q + b, mimic joints) and returns 0, or 1 when an
input holds NaN, inf or a magnitude above INPUT_BOUND.
"""
import numpy as np
from numba import njit, prange

from ._layout import (AXIS_GENERAL, BODY_STRIDE, JOINT_PRISMATIC, MI_HEADER, MI_STRIDE, O_AX, O_H, O_I, O_M,
                      O_P, O_R, W_A, W_F, W_PABS, W_PREL, W_RABS, W_RREL, W_V, WS_STRIDE)
from ._sincos import sincos
from ._views import unowned, view_f64, view_i64

# _nrt=True stated: the kernels make array views (NRT); numba would otherwise compile them with the NRT flag of
# the first caller that compiles them, and manip_core._fast's callers run without it
_JIT = dict(cache=True, nogil=True, error_model="numpy", _nrt=True)
# Entry points called once per request from Python: they hold the GIL, so the caller's workspace ``ws`` (one per
# RobotModel, from new_ws) is never used by two threads at once.
_SINGLE = dict(cache=True, nogil=False, error_model="numpy", _nrt=True)


@njit(**_JIT)
def _tip_offset(mi):
    return mi[0] * BODY_STRIDE


@njit(**_JIT)
def _map_offset(mi):
    return mi[0] * BODY_STRIDE + 12


# Inputs are refused above this magnitude too: the dynamics square velocities and multiply them by inertias and
# lever arms, so finite inputs from about 1e150 overflow float64 into inf - inf = NaN (fuzzing, issue 12). No
# joint value, rate, force or gravity of a real arm comes near it; the same comparison refuses NaN and inf.
INPUT_BOUND = 1e100


@njit(**_JIT)
def all_finite(x):
    """x: 1-D array; True when every entry is finite and at most INPUT_BOUND in magnitude."""
    for i in range(x.shape[0]):
        if not abs(x[i]) <= INPUT_BOUND:
            return False
    return True


@njit(**_JIT)
def to_phys(mf, mi, x, with_offset, out):
    """out = A x (+ b): actuated joint values -> physical joint values (mimic joints)."""
    nb, dof = mi[0], mi[1]
    if mi[3] == 0:
        for i in range(nb):
            out[i] = x[i]
        return
    o = _map_offset(mi)
    for i in range(nb):
        s = mf[o + nb * dof + i] if with_offset else 0.0
        for j in range(dof):
            s += mf[o + i * dof + j] * x[j]
        out[i] = s


@njit(**_JIT)
def from_phys(mf, mi, x, out):
    """out = A^T x: physical joint forces -> actuated joint forces."""
    nb, dof = mi[0], mi[1]
    if mi[3] == 0:
        for i in range(nb):
            out[i] = x[i]
        return
    o = _map_offset(mi)
    for j in range(dof):
        s = 0.0
        for i in range(nb):
            s += mf[o + i * dof + j] * x[i]
        out[j] = s


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def rodrigues(c, s, ax, ay, az):
    """Rot(axis, q) row-major from c = cos q, s = sin q and the unit axis (floats, or c and s _simd vectors: the
    same operations either way)."""
    t = 1.0 - c
    return (c + t * ax * ax, t * ax * ay - s * az, t * ax * az + s * ay,
            t * ax * ay + s * az, c + t * ay * ay, t * ay * az - s * ax,
            t * ax * az - s * ay, t * ay * az + s * ax, c + t * az * az)


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def times_joint_rotation(kind, b00, b01, b02, b10, b11, b12, b20, b21, b22, s, c, ax, ay, az):
    """B Rot(axis, q) row-major: kind 2, 1, 0 for an axis along z, y, x of the joint frame (two columns of B mix,
    the third stays), else Rodrigues (floats, or _simd vectors)."""
    if kind == 2:
        return (c * b00 + s * b01, -s * b00 + c * b01, b02, c * b10 + s * b11, -s * b10 + c * b11, b12,
                c * b20 + s * b21, -s * b20 + c * b21, b22)
    if kind == 1:
        return (-s * b02 + c * b00, b01, c * b02 + s * b00, -s * b12 + c * b10, b11, c * b12 + s * b10,
                -s * b22 + c * b20, b21, c * b22 + s * b20)
    if kind == 0:
        return (b00, c * b01 + s * b02, -s * b01 + c * b02, b10, c * b11 + s * b12, -s * b11 + c * b12,
                b20, c * b21 + s * b22, -s * b21 + c * b22)
    j00, j01, j02, j10, j11, j12, j20, j21, j22 = rodrigues(c, s, ax, ay, az)
    return (b00 * j00 + b01 * j10 + b02 * j20, b00 * j01 + b01 * j11 + b02 * j21, b00 * j02 + b01 * j12 + b02 * j22,
            b10 * j00 + b11 * j10 + b12 * j20, b10 * j01 + b11 * j11 + b12 * j21, b10 * j02 + b11 * j12 + b12 * j22,
            b20 * j00 + b21 * j10 + b22 * j20, b20 * j01 + b21 * j11 + b22 * j21, b20 * j02 + b21 * j12 + b22 * j22)


@njit(**_JIT)
def rel_transforms(mf, mi, qp, ws):
    """Pose of each body in its parent's frame: R_rel = R_X R_joint(q), p_rel = p_X (+ R_X axis q)."""
    nb = mi[0]
    for i in range(nb):
        b = i * BODY_STRIDE
        w = i * WS_STRIDE
        kind = mi[MI_HEADER + i * MI_STRIDE + 2]
        jt = mi[MI_HEADER + i * MI_STRIDE + 1]
        q = qp[i]
        if jt == JOINT_PRISMATIC:
            for k in range(9):
                ws[w + W_RREL + k] = mf[b + O_R + k]
            for r in range(3):
                s = 0.0
                for c in range(3):
                    s += mf[b + O_R + 3 * r + c] * mf[b + O_AX + c]
                ws[w + W_PREL + r] = mf[b + O_P + r] + s * q
            continue
        for r in range(3):
            ws[w + W_PREL + r] = mf[b + O_P + r]
        s_, c_ = sincos(q)
        if kind == AXIS_GENERAL:
            j00, j01, j02, j10, j11, j12, j20, j21, j22 = rodrigues(c_, s_, mf[b + O_AX], mf[b + O_AX + 1],
                                                                    mf[b + O_AX + 2])
            for r in range(3):
                a0, a1, a2 = mf[b + O_R + 3 * r], mf[b + O_R + 3 * r + 1], mf[b + O_R + 3 * r + 2]
                ws[w + W_RREL + 3 * r] = a0 * j00 + a1 * j10 + a2 * j20
                ws[w + W_RREL + 3 * r + 1] = a0 * j01 + a1 * j11 + a2 * j21
                ws[w + W_RREL + 3 * r + 2] = a0 * j02 + a1 * j12 + a2 * j22
        else:
            # Rotation about a coordinate axis k: columns (k+1, k+2) of R_X mix, column k stays.
            k1 = (kind + 1) % 3
            k2 = (kind + 2) % 3
            for r in range(3):
                a1 = mf[b + O_R + 3 * r + k1]
                a2 = mf[b + O_R + 3 * r + k2]
                ws[w + W_RREL + 3 * r + kind] = mf[b + O_R + 3 * r + kind]
                ws[w + W_RREL + 3 * r + k1] = c_ * a1 + s_ * a2
                ws[w + W_RREL + 3 * r + k2] = -s_ * a1 + c_ * a2


@njit(**_JIT)
def abs_transforms(mi, ws):
    """Pose of each body in the base frame: T_abs_i = T_abs_parent T_rel_i (parents come first)."""
    nb = mi[0]
    for i in range(nb):
        w = i * WS_STRIDE
        p = mi[MI_HEADER + i * MI_STRIDE]
        if p < 0:
            for k in range(9):
                ws[w + W_RABS + k] = ws[w + W_RREL + k]
            for k in range(3):
                ws[w + W_PABS + k] = ws[w + W_PREL + k]
            continue
        wp = p * WS_STRIDE
        for r in range(3):
            a0, a1, a2 = ws[wp + W_RABS + 3 * r], ws[wp + W_RABS + 3 * r + 1], ws[wp + W_RABS + 3 * r + 2]
            for c in range(3):
                ws[w + W_RABS + 3 * r + c] = (a0 * ws[w + W_RREL + c] + a1 * ws[w + W_RREL + 3 + c]
                                              + a2 * ws[w + W_RREL + 6 + c])
            ws[w + W_PABS + r] = (ws[wp + W_PABS + r] + a0 * ws[w + W_PREL] + a1 * ws[w + W_PREL + 1]
                                  + a2 * ws[w + W_PREL + 2])


@njit(**_JIT)
def frame_pose(mf, mi, ws, body, off_R, off_p, out):
    """out (4, 4) = T_abs[body] [off_R, off_p; 0, 1]; body -1 is the base frame."""
    if body < 0:
        for r in range(3):
            for c in range(3):
                out[r, c] = off_R[3 * r + c]
            out[r, 3] = off_p[r]
    else:
        w = body * WS_STRIDE
        for r in range(3):
            a0, a1, a2 = ws[w + W_RABS + 3 * r], ws[w + W_RABS + 3 * r + 1], ws[w + W_RABS + 3 * r + 2]
            for c in range(3):
                out[r, c] = a0 * off_R[c] + a1 * off_R[3 + c] + a2 * off_R[6 + c]
            out[r, 3] = ws[w + W_PABS + r] + a0 * off_p[0] + a1 * off_p[1] + a2 * off_p[2]
    out[3, 0] = 0.0
    out[3, 1] = 0.0
    out[3, 2] = 0.0
    out[3, 3] = 1.0


@njit(**_JIT)
def tip_pose(mf, mi, ws, out):
    o = _tip_offset(mi)
    frame_pose(mf, mi, ws, mi[2], mf[o:o + 9], mf[o + 9:o + 12], out)


@njit(**_JIT)
def _ws_offsets(nb):
    """Scratch regions after the per-body blocks: qp, rnea buffers (4 nb), 6-vectors (6 x 6),
    composite inertias (13 nb), two nb x nb matrices, 9 + nb floats, then (see _scratch_offset) a 6 x nb
    Jacobian, a 4 x 4 pose and 12 floats; the last element is the total size."""
    o_qp = nb * WS_STRIDE
    o_buf = o_qp + nb
    o_vec = o_buf + 4 * nb
    o_comp = o_vec + 36
    o_mat = o_comp + 13 * nb
    o_mat2 = o_mat + nb * nb
    o_tmp = o_mat2 + nb * nb
    return o_qp, o_buf, o_vec, o_comp, o_mat, o_mat2, o_tmp, o_tmp + 9 + nb + 6 * nb + 28


@njit(**_JIT)
def _scratch_offset(nb):
    """Start of the 6 nb + 28 floats at the end of ws (single-call kernels: no allocation per call)."""
    return _ws_offsets(nb)[6] + 9 + nb


@njit(**_JIT)
def new_ws(mi):
    return np.empty(_ws_offsets(mi[0])[7])


@njit(**_JIT)
def _vec(ws, nb, k):
    """k-th scratch 6-vector (k < 6)."""
    o = _ws_offsets(nb)[2] + 6 * k
    return ws[o:o + 6]


@njit(**_JIT)
def fk_all_into(mf, mi, q, ws, out):
    """Tip pose into out, and every body's relative and absolute pose into ws (for Jacobians after it)."""
    nb = mi[0]
    qp = ws[nb * WS_STRIDE:nb * WS_STRIDE + nb]
    to_phys(mf, mi, q, True, qp)
    rel_transforms(mf, mi, qp, ws)
    abs_transforms(mi, ws)
    tip_pose(mf, mi, ws, out)


@njit(**_JIT)
def fk_into(mf, mi, q, ws, out):
    """Tip pose (4, 4) in the base frame at q into out.

    Walks only the bodies on the tip's path and keeps the running pose (R, p) in registers:
    R <- R R_X R_joint(q_i), p <- p + R p_X (+ R R_X axis q_i for a prismatic joint); then T_tip = (R, p) T_off.
    ws holds q_phys when the model has mimic joints.
    """
    nb = mi[0]
    if mi[3] != 0:
        qp = ws[nb * WS_STRIDE:nb * WS_STRIDE + nb]
        to_phys(mf, mi, q, True, qp)
    else:
        qp = q
    o_path = MI_HEADER + nb * MI_STRIDE
    r00, r01, r02, r10, r11, r12, r20, r21, r22 = 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0
    p0, p1, p2 = 0.0, 0.0, 0.0
    for k in range(mi[o_path]):
        i = mi[o_path + 1 + k]
        b = i * BODY_STRIDE
        x = mf[b + O_R:b + O_R + 12]  # R_X row-major, then p_X
        p0 += r00 * x[9] + r01 * x[10] + r02 * x[11]
        p1 += r10 * x[9] + r11 * x[10] + r12 * x[11]
        p2 += r20 * x[9] + r21 * x[10] + r22 * x[11]
        # B = R R_X
        b00 = r00 * x[0] + r01 * x[3] + r02 * x[6]
        b01 = r00 * x[1] + r01 * x[4] + r02 * x[7]
        b02 = r00 * x[2] + r01 * x[5] + r02 * x[8]
        b10 = r10 * x[0] + r11 * x[3] + r12 * x[6]
        b11 = r10 * x[1] + r11 * x[4] + r12 * x[7]
        b12 = r10 * x[2] + r11 * x[5] + r12 * x[8]
        b20 = r20 * x[0] + r21 * x[3] + r22 * x[6]
        b21 = r20 * x[1] + r21 * x[4] + r22 * x[7]
        b22 = r20 * x[2] + r21 * x[5] + r22 * x[8]
        qi = qp[i]
        ax, ay, az = mf[b + O_AX], mf[b + O_AX + 1], mf[b + O_AX + 2]
        if mi[MI_HEADER + i * MI_STRIDE + 1] == JOINT_PRISMATIC:
            p0 += (b00 * ax + b01 * ay + b02 * az) * qi
            p1 += (b10 * ax + b11 * ay + b12 * az) * qi
            p2 += (b20 * ax + b21 * ay + b22 * az) * qi
            r00, r01, r02, r10, r11, r12, r20, r21, r22 = b00, b01, b02, b10, b11, b12, b20, b21, b22
            continue
        s, c = sincos(qi)
        r00, r01, r02, r10, r11, r12, r20, r21, r22 = times_joint_rotation(
            mi[MI_HEADER + i * MI_STRIDE + 2], b00, b01, b02, b10, b11, b12, b20, b21, b22, s, c, ax, ay, az)
    o = _tip_offset(mi)
    t_ = mf[o:o + 12]
    out[0, 0] = r00 * t_[0] + r01 * t_[3] + r02 * t_[6]
    out[0, 1] = r00 * t_[1] + r01 * t_[4] + r02 * t_[7]
    out[0, 2] = r00 * t_[2] + r01 * t_[5] + r02 * t_[8]
    out[1, 0] = r10 * t_[0] + r11 * t_[3] + r12 * t_[6]
    out[1, 1] = r10 * t_[1] + r11 * t_[4] + r12 * t_[7]
    out[1, 2] = r10 * t_[2] + r11 * t_[5] + r12 * t_[8]
    out[2, 0] = r20 * t_[0] + r21 * t_[3] + r22 * t_[6]
    out[2, 1] = r20 * t_[1] + r21 * t_[4] + r22 * t_[7]
    out[2, 2] = r20 * t_[2] + r21 * t_[5] + r22 * t_[8]
    out[0, 3] = p0 + r00 * t_[9] + r01 * t_[10] + r02 * t_[11]
    out[1, 3] = p1 + r10 * t_[9] + r11 * t_[10] + r12 * t_[11]
    out[2, 3] = p2 + r20 * t_[9] + r21 * t_[10] + r22 * t_[11]
    out[3, 0] = 0.0
    out[3, 1] = 0.0
    out[3, 2] = 0.0
    out[3, 3] = 1.0


@njit(inline="always", cache=True, _nrt=True)
def _vf(x):
    """x as a view without meminfo (manip_core._views): the kernels' slices of it count no references. Only for
    arrays the caller holds for the whole call (the entry points' arguments)."""
    return view_f64(x.ctypes.data, x.size)


@njit(inline="always", cache=True, _nrt=True)
def _vi(x):
    return view_i64(x.ctypes.data, x.size)


@njit(**_SINGLE)
def fk(mf, mi, ws, q, out):
    if not all_finite(q):
        return 1
    fk_into(_vf(mf), _vi(mi), q, _vf(ws), out)
    return 0


@njit(**_SINGLE)
def fk_frame(mf_, mi_, ws_, q, body, off, out):
    """Pose of a frame rigidly attached to ``body`` at offset ``off`` (4, 4)."""
    if not all_finite(q):
        return 1
    mf, mi, ws = _vf(mf_), _vi(mi_), _vf(ws_)
    nb = mi[0]
    qp = ws[nb * WS_STRIDE:nb * WS_STRIDE + nb]
    to_phys(mf, mi, q, True, qp)
    rel_transforms(mf, mi, qp, ws)
    abs_transforms(mi, ws)
    o = _scratch_offset(nb) + 6 * nb + 16
    offR = ws[o:o + 9]
    offp = ws[o + 9:o + 12]
    for r in range(3):
        for c in range(3):
            offR[3 * r + c] = off[r, c]
        offp[r] = off[r, 3]
    frame_pose(mf, mi, ws, body, offR, offp, out)
    return 0


@njit(**_JIT)
def joint_screw_abs(mf, mi, ws, i, out6):
    """Screw axis of physical joint i in the base frame, [omega; v], from the current absolute poses."""
    b = i * BODY_STRIDE
    w = i * WS_STRIDE
    # The axis is fixed in the joint frame = body frame: a = R_abs axis.
    ax0, ax1, ax2 = mf[b + O_AX], mf[b + O_AX + 1], mf[b + O_AX + 2]
    a0 = ws[w + W_RABS] * ax0 + ws[w + W_RABS + 1] * ax1 + ws[w + W_RABS + 2] * ax2
    a1 = ws[w + W_RABS + 3] * ax0 + ws[w + W_RABS + 4] * ax1 + ws[w + W_RABS + 5] * ax2
    a2 = ws[w + W_RABS + 6] * ax0 + ws[w + W_RABS + 7] * ax1 + ws[w + W_RABS + 8] * ax2
    if mi[MI_HEADER + i * MI_STRIDE + 1] == JOINT_PRISMATIC:
        out6[0] = 0.0
        out6[1] = 0.0
        out6[2] = 0.0
        out6[3] = a0
        out6[4] = a1
        out6[5] = a2
    else:
        p0, p1, p2 = ws[w + W_PABS], ws[w + W_PABS + 1], ws[w + W_PABS + 2]
        out6[0] = a0
        out6[1] = a1
        out6[2] = a2
        # v = -omega x p = p x omega
        out6[3] = p1 * a2 - p2 * a1
        out6[4] = p2 * a0 - p0 * a2
        out6[5] = p0 * a1 - p1 * a0


@njit(**_JIT)
def jacobian_space_into(mf, mi, ws, body, out):
    """Space Jacobian (6, dof) of a frame on ``body`` (all frames of a body share it), abs poses in ws."""
    nb, dof = mi[0], mi[1]
    for r in range(6):
        for c in range(dof):
            out[r, c] = 0.0
    col = _vec(ws, nb, 0)
    j = body
    while j >= 0:
        joint_screw_abs(mf, mi, ws, j, col)
        if mi[3] == 0:
            for r in range(6):
                out[r, j] = col[r]
        else:
            o = _map_offset(mi)
            for c in range(dof):
                a = mf[o + j * dof + c]
                if a != 0.0:
                    for r in range(6):
                        out[r, c] += a * col[r]
        j = mi[MI_HEADER + j * MI_STRIDE]


@njit(**_SINGLE)
def jacobian_space(mf_, mi_, ws_, q, out):
    if not all_finite(q):
        return 1
    mf, mi, ws = _vf(mf_), _vi(mi_), _vf(ws_)
    nb = mi[0]
    qp = ws[nb * WS_STRIDE:nb * WS_STRIDE + nb]
    to_phys(mf, mi, q, True, qp)
    rel_transforms(mf, mi, qp, ws)
    abs_transforms(mi, ws)
    jacobian_space_into(mf, mi, ws, mi[2], out)
    return 0


@njit(**_JIT)
def space_to_body(T, Js, out):
    """J_b = [Ad_{T^-1}] J_s: omega_b = R^T omega, v_b = R^T (v - p x omega)."""
    n = Js.shape[1]
    for c in range(n):
        w0, w1, w2 = Js[0, c], Js[1, c], Js[2, c]
        v0 = Js[3, c] - (T[1, 3] * w2 - T[2, 3] * w1)
        v1 = Js[4, c] - (T[2, 3] * w0 - T[0, 3] * w2)
        v2 = Js[5, c] - (T[0, 3] * w1 - T[1, 3] * w0)
        for r in range(3):
            out[r, c] = T[0, r] * w0 + T[1, r] * w1 + T[2, r] * w2
            out[3 + r, c] = T[0, r] * v0 + T[1, r] * v1 + T[2, r] * v2


@njit(**_SINGLE)
def jacobian_body(mf_, mi_, ws_, q, out):
    if not all_finite(q):
        return 1
    mf, mi, ws = _vf(mf_), _vi(mi_), _vf(ws_)
    nb = mi[0]
    qp = ws[nb * WS_STRIDE:nb * WS_STRIDE + nb]
    to_phys(mf, mi, q, True, qp)
    rel_transforms(mf, mi, qp, ws)
    abs_transforms(mi, ws)
    o = _scratch_offset(nb)
    Js = ws[o:o + 6 * mi[1]].reshape((6, mi[1]))
    jacobian_space_into(mf, mi, ws, mi[2], Js)
    T = ws[o + 6 * nb:o + 6 * nb + 16].reshape((4, 4))
    tip_pose(mf, mi, ws, T)
    space_to_body(T, Js, out)
    return 0


# ----------------------------------------------------------------------------------------------- dynamics
@njit(inline="always", cache=True, _nrt=True)
def _motion_to_child_s(ws, wi, w0, w1, w2, v0, v1, v2):
    """A twist [w; v] in the parent's frame expressed in child i's frame: Ad_{T_rel^-1} [w; v] =
    [R^T w; R^T (v + w x p)] with (R, p) = T_rel of the child (in ws at wi)."""
    o = wi + W_RREL  # indices into ws (no slices: a slice's bounds logic costs more than these products)
    r0, r1, r2, r3, r4, r5, r6, r7, r8 = (ws[o], ws[o + 1], ws[o + 2], ws[o + 3], ws[o + 4], ws[o + 5], ws[o + 6],
                                          ws[o + 7], ws[o + 8])
    p0, p1, p2 = ws[wi + W_PREL], ws[wi + W_PREL + 1], ws[wi + W_PREL + 2]
    u0 = v0 + w1 * p2 - w2 * p1
    u1 = v1 + w2 * p0 - w0 * p2
    u2 = v2 + w0 * p1 - w1 * p0
    return (r0 * w0 + r3 * w1 + r6 * w2, r1 * w0 + r4 * w1 + r7 * w2,
            r2 * w0 + r5 * w1 + r8 * w2, r0 * u0 + r3 * u1 + r6 * u2,
            r1 * u0 + r4 * u1 + r7 * u2, r2 * u0 + r5 * u1 + r8 * u2)


@njit(inline="always", cache=True, _nrt=True)
def _force_to_parent_s(ws, wi, f0, f1, f2, f3, f4, f5):
    """A wrench [m; f] on child i expressed in its parent's frame: Ad_{T_rel^-1}^T [m; f] = [R m + p x R f; R f]."""
    o = wi + W_RREL
    r0, r1, r2, r3, r4, r5, r6, r7, r8 = (ws[o], ws[o + 1], ws[o + 2], ws[o + 3], ws[o + 4], ws[o + 5], ws[o + 6],
                                          ws[o + 7], ws[o + 8])
    p0, p1, p2 = ws[wi + W_PREL], ws[wi + W_PREL + 1], ws[wi + W_PREL + 2]
    m0 = r0 * f0 + r1 * f1 + r2 * f2
    m1 = r3 * f0 + r4 * f1 + r5 * f2
    m2 = r6 * f0 + r7 * f1 + r8 * f2
    n0 = r0 * f3 + r1 * f4 + r2 * f5
    n1 = r3 * f3 + r4 * f4 + r5 * f5
    n2 = r6 * f3 + r7 * f4 + r8 * f5
    return m0 + p1 * n2 - p2 * n1, m1 + p2 * n0 - p0 * n2, m2 + p0 * n1 - p1 * n0, n0, n1, n2


@njit(inline="always", cache=True, _nrt=True)
def _inertia_times_s(x, o, w0, w1, w2, v0, v1, v2):
    """G [w; v] = [Ibar w + h x v; m v - h x w] for the spatial inertia G with m, h (3), Ibar (9) at x[o:o + 13]."""
    m, h0, h1, h2 = x[o], x[o + 1], x[o + 2], x[o + 3]
    i = o + 4
    return (x[i] * w0 + x[i + 1] * w1 + x[i + 2] * w2 + h1 * v2 - h2 * v1,
            x[i + 3] * w0 + x[i + 4] * w1 + x[i + 5] * w2 + h2 * v0 - h0 * v2,
            x[i + 6] * w0 + x[i + 7] * w1 + x[i + 8] * w2 + h0 * v1 - h1 * v0,
            m * v0 - (h1 * w2 - h2 * w1), m * v1 - (h2 * w0 - h0 * w2), m * v2 - (h0 * w1 - h1 * w0))


@njit(inline="always", cache=True, _nrt=True)
def _put6(ws, o, x0, x1, x2, x3, x4, x5):
    """ws[o:o + 6] = a twist or a wrench, element by element (no slice)."""
    ws[o] = x0
    ws[o + 1] = x1
    ws[o + 2] = x2
    ws[o + 3] = x3
    ws[o + 4] = x4
    ws[o + 5] = x5


@njit(**_JIT)
def rnea_phys(mf, mi, qp, qdp, qddp, grav, ftip, ws, tau_p):
    """Recursive Newton-Euler on the physical joints (rel transforms already in ws).

    V_i = X_i V_p + S_i qd_i; A_i = X_i A_p + ad_{V_i} S_i qd_i + S_i qdd_i, A_base = [0; -g];
    F_i = G_i A_i - ad_{V_i}^T G_i V_i + sum_children X_c^T F_c (+ tip wrench); tau_i = S_i^T F_i.
    """
    nb = mi[0]
    for i in range(nb):
        # every quantity of body i in scalars; only V, A, F are stored (children and the backward pass read them)
        w = i * WS_STRIDE
        b = i * BODY_STRIDE
        p = mi[MI_HEADER + i * MI_STRIDE]
        if p < 0:
            pw0, pw1, pw2, pv0, pv1, pv2 = 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
            qw0, qw1, qw2, qv0, qv1, qv2 = 0.0, 0.0, 0.0, -grav[0], -grav[1], -grav[2]
        else:
            wp = p * WS_STRIDE
            pw0, pw1, pw2 = ws[wp + W_V], ws[wp + W_V + 1], ws[wp + W_V + 2]
            pv0, pv1, pv2 = ws[wp + W_V + 3], ws[wp + W_V + 4], ws[wp + W_V + 5]
            qw0, qw1, qw2 = ws[wp + W_A], ws[wp + W_A + 1], ws[wp + W_A + 2]
            qv0, qv1, qv2 = ws[wp + W_A + 3], ws[wp + W_A + 4], ws[wp + W_A + 5]
        # V = Ad_{T_rel^-1} V_parent + S qd, A = Ad_{T_rel^-1} A_parent + ad_V (S qd) + S qdd (_motion_to_child_s)
        w0, w1, w2, v0, v1, v2 = _motion_to_child_s(ws, w, pw0, pw1, pw2, pv0, pv1, pv2)
        a0, a1, a2, a3, a4, a5 = _motion_to_child_s(ws, w, qw0, qw1, qw2, qv0, qv1, qv2)
        ax0, ax1, ax2 = mf[b + O_AX], mf[b + O_AX + 1], mf[b + O_AX + 2]
        if mi[MI_HEADER + i * MI_STRIDE + 1] == JOINT_PRISMATIC:
            s0, s1, s2, s3, s4, s5 = 0.0, 0.0, 0.0, ax0, ax1, ax2
        else:
            s0, s1, s2, s3, s4, s5 = ax0, ax1, ax2, 0.0, 0.0, 0.0
        qd = qdp[i]
        qdd = qddp[i]
        w0 += s0 * qd
        w1 += s1 * qd
        w2 += s2 * qd
        v0 += s3 * qd
        v1 += s4 * qd
        v2 += s5 * qd
        # ad_V (S qd) = [w x s_w; v x s_w + w x s_v] * qd
        sw0, sw1, sw2, sv0, sv1, sv2 = s0 * qd, s1 * qd, s2 * qd, s3 * qd, s4 * qd, s5 * qd
        a0 += w1 * sw2 - w2 * sw1 + s0 * qdd
        a1 += w2 * sw0 - w0 * sw2 + s1 * qdd
        a2 += w0 * sw1 - w1 * sw0 + s2 * qdd
        a3 += v1 * sw2 - v2 * sw1 + w1 * sv2 - w2 * sv1 + s3 * qdd
        a4 += v2 * sw0 - v0 * sw2 + w2 * sv0 - w0 * sv2 + s4 * qdd
        a5 += v0 * sw1 - v1 * sw0 + w0 * sv1 - w1 * sv0 + s5 * qdd
        # F = G A - ad_V^T (G V), G V = gv (_inertia_times_s); - ad_V^T gv = [w x gm + v x gf; w x gf]
        f0, f1, f2, f3, f4, f5 = _inertia_times_s(mf, b + O_M, a0, a1, a2, a3, a4, a5)
        g0, g1, g2, g3, g4, g5 = _inertia_times_s(mf, b + O_M, w0, w1, w2, v0, v1, v2)
        _put6(ws, w + W_V, w0, w1, w2, v0, v1, v2)
        _put6(ws, w + W_A, a0, a1, a2, a3, a4, a5)
        ws[w + W_F] = f0 + (w1 * g2 - w2 * g1 + v1 * g5 - v2 * g4)
        ws[w + W_F + 1] = f1 + (w2 * g0 - w0 * g2 + v2 * g3 - v0 * g5)
        ws[w + W_F + 2] = f2 + (w0 * g1 - w1 * g0 + v0 * g4 - v1 * g3)
        ws[w + W_F + 3] = f3 + (w1 * g5 - w2 * g4)
        ws[w + W_F + 4] = f4 + (w2 * g3 - w0 * g5)
        ws[w + W_F + 5] = f5 + (w0 * g4 - w1 * g3)
    tb = mi[2]
    if ftip.size == 6 and tb >= 0:
        # The tip frame sits at (R, p) in the tip body's frame: move the wrench like a child's.
        o = _tip_offset(mi)
        R = mf[o:o + 9]
        pp = mf[o + 9:o + 12]
        m0 = R[0] * ftip[0] + R[1] * ftip[1] + R[2] * ftip[2]
        m1 = R[3] * ftip[0] + R[4] * ftip[1] + R[5] * ftip[2]
        m2 = R[6] * ftip[0] + R[7] * ftip[1] + R[8] * ftip[2]
        f0 = R[0] * ftip[3] + R[1] * ftip[4] + R[2] * ftip[5]
        f1 = R[3] * ftip[3] + R[4] * ftip[4] + R[5] * ftip[5]
        f2 = R[6] * ftip[3] + R[7] * ftip[4] + R[8] * ftip[5]
        wt = tb * WS_STRIDE + W_F
        ws[wt] += m0 + pp[1] * f2 - pp[2] * f1
        ws[wt + 1] += m1 + pp[2] * f0 - pp[0] * f2
        ws[wt + 2] += m2 + pp[0] * f1 - pp[1] * f0
        ws[wt + 3] += f0
        ws[wt + 4] += f1
        ws[wt + 5] += f2
    _rnea_backward(mf, mi, ws, tau_p)


@njit(**_JIT)
def _rnea_backward(mf, mi, ws, tau_p):
    """Newton-Euler's backward pass on the forces F in ws: tau_i = S_i^T F_i, F_parent += X_i^T F_i."""
    nb = mi[0]
    for i in range(nb - 1, -1, -1):
        w = i * WS_STRIDE
        b = i * BODY_STRIDE
        # tau = S^T F, S = [axis; 0] (revolute) or [0; axis] (prismatic)
        k = w + W_F + (3 if mi[MI_HEADER + i * MI_STRIDE + 1] == JOINT_PRISMATIC else 0)
        tau_p[i] = mf[b + O_AX] * ws[k] + mf[b + O_AX + 1] * ws[k + 1] + mf[b + O_AX + 2] * ws[k + 2]
        p = mi[MI_HEADER + i * MI_STRIDE]
        if p >= 0:
            f0, f1, f2, f3, f4, f5 = _force_to_parent_s(ws, w, ws[w + W_F], ws[w + W_F + 1], ws[w + W_F + 2],
                                                        ws[w + W_F + 3], ws[w + W_F + 4], ws[w + W_F + 5])
            d = p * WS_STRIDE + W_F
            ws[d] += f0
            ws[d + 1] += f1
            ws[d + 2] += f2
            ws[d + 3] += f3
            ws[d + 4] += f4
            ws[d + 5] += f5


@njit(**_JIT)
def mass_times_phys(mf, mi, qddp, ws, tau_p):
    """tau_p = M_phys qddp without M: Newton-Euler at zero velocity and gravity (rel transforms already in ws):
    A_i = X_i A_p + S_i qdd_i, F_i = G_i A_i, then the backward pass."""
    nb = mi[0]
    for i in range(nb):
        w = i * WS_STRIDE
        b = i * BODY_STRIDE
        p = mi[MI_HEADER + i * MI_STRIDE]
        if p < 0:
            a0, a1, a2, a3, a4, a5 = 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
        else:
            wp = p * WS_STRIDE + W_A
            a0, a1, a2, a3, a4, a5 = _motion_to_child_s(ws, w, ws[wp], ws[wp + 1], ws[wp + 2], ws[wp + 3],
                                                        ws[wp + 4], ws[wp + 5])
        qdd = qddp[i]
        ax0, ax1, ax2 = mf[b + O_AX], mf[b + O_AX + 1], mf[b + O_AX + 2]
        if mi[MI_HEADER + i * MI_STRIDE + 1] == JOINT_PRISMATIC:
            a3 += ax0 * qdd
            a4 += ax1 * qdd
            a5 += ax2 * qdd
        else:
            a0 += ax0 * qdd
            a1 += ax1 * qdd
            a2 += ax2 * qdd
        _put6(ws, w + W_A, a0, a1, a2, a3, a4, a5)
        f0, f1, f2, f3, f4, f5 = _inertia_times_s(mf, b + O_M, a0, a1, a2, a3, a4, a5)
        _put6(ws, w + W_F, f0, f1, f2, f3, f4, f5)
    _rnea_backward(mf, mi, ws, tau_p)


@njit(**_JIT)
def rnea_into(mf, mi, q, qd, qdd, grav, ftip, ws, tau):
    """tau = A^T RNEA(A q + b, A qd, A qdd): inverse dynamics of the actuated joints."""
    nb = mi[0]
    o = _ws_offsets(nb)[1]
    buf = ws[o:o + 4 * nb]
    qp, qdp, qddp, taup = buf[:nb], buf[nb:2 * nb], buf[2 * nb:3 * nb], buf[3 * nb:]
    to_phys(mf, mi, q, True, qp)
    to_phys(mf, mi, qd, False, qdp)
    to_phys(mf, mi, qdd, False, qddp)
    rel_transforms(mf, mi, qp, ws)
    rnea_phys(mf, mi, qp, qdp, qddp, grav, ftip, ws, taup)
    from_phys(mf, mi, taup, tau)


@njit(**_SINGLE)
def rnea(mf, mi, ws, q, qd, qdd, grav, ftip, tau):
    if not (all_finite(q) and all_finite(qd) and all_finite(qdd) and all_finite(grav) and all_finite(ftip)):
        return 1
    rnea_into(_vf(mf), _vi(mi), q, qd, qdd, grav, ftip, _vf(ws), tau)
    return 0


@njit(**_JIT)
def _add_inertia_to_parent(ws, wi, oc, op):
    """Composite inertia of a child (ws[oc:oc + 13] = [m, h (3), Ibar (9)] in the child's frame) added to the
    parent's (at op, the same layout), in the parent's frame: h' = R h + m p;
    Ibar' = R Ibar R^T - [Rh][p] - [p][Rh] - m [p]^2.

    Every product in scalars, indices into ws (no scratch array, no slices; Ibar symmetric: six entries computed,
    nine written).
    """
    o = wi + W_RREL
    r00, r01, r02, r10, r11, r12, r20, r21, r22 = (ws[o], ws[o + 1], ws[o + 2], ws[o + 3], ws[o + 4], ws[o + 5],
                                                   ws[o + 6], ws[o + 7], ws[o + 8])
    b0, b1, b2 = ws[wi + W_PREL], ws[wi + W_PREL + 1], ws[wi + W_PREL + 2]
    c = ws
    pc = ws
    m, h0, h1, h2 = c[oc], c[oc + 1], c[oc + 2], c[oc + 3]
    a0 = r00 * h0 + r01 * h1 + r02 * h2
    a1 = r10 * h0 + r11 * h1 + r12 * h2
    a2 = r20 * h0 + r21 * h1 + r22 * h2
    pc[op] += m
    pc[op + 1] += a0 + m * b0
    pc[op + 2] += a1 + m * b1
    pc[op + 3] += a2 + m * b2
    i00, i01, i02, i10, i11, i12, i20, i21, i22 = (c[oc + 4], c[oc + 5], c[oc + 6], c[oc + 7], c[oc + 8], c[oc + 9],
                                                   c[oc + 10], c[oc + 11], c[oc + 12])
    # T = R Ibar
    t00 = r00 * i00 + r01 * i10 + r02 * i20
    t01 = r00 * i01 + r01 * i11 + r02 * i21
    t02 = r00 * i02 + r01 * i12 + r02 * i22
    t10 = r10 * i00 + r11 * i10 + r12 * i20
    t11 = r10 * i01 + r11 * i11 + r12 * i21
    t12 = r10 * i02 + r11 * i12 + r12 * i22
    t20 = r20 * i00 + r21 * i10 + r22 * i20
    t21 = r20 * i01 + r21 * i11 + r22 * i21
    t22 = r20 * i02 + r21 * i12 + r22 * i22
    # -[a][b] - [b][a] - m [p]^2 = 2 (a.b) I - a b^T - b a^T + m (|p|^2 I - p p^T)  ([a][b] = b a^T - (a.b) I)
    d = 2.0 * (a0 * b0 + a1 * b1 + a2 * b2) + m * (b0 * b0 + b1 * b1 + b2 * b2)
    u00 = t00 * r00 + t01 * r01 + t02 * r02 + d - 2.0 * a0 * b0 - m * b0 * b0
    u11 = t10 * r10 + t11 * r11 + t12 * r12 + d - 2.0 * a1 * b1 - m * b1 * b1
    u22 = t20 * r20 + t21 * r21 + t22 * r22 + d - 2.0 * a2 * b2 - m * b2 * b2
    u01 = t00 * r10 + t01 * r11 + t02 * r12 - a0 * b1 - b0 * a1 - m * b0 * b1
    u02 = t00 * r20 + t01 * r21 + t02 * r22 - a0 * b2 - b0 * a2 - m * b0 * b2
    u12 = t10 * r20 + t11 * r21 + t12 * r22 - a1 * b2 - b1 * a2 - m * b1 * b2
    pc[op + 4] += u00
    pc[op + 5] += u01
    pc[op + 6] += u02
    pc[op + 7] += u01
    pc[op + 8] += u11
    pc[op + 9] += u12
    pc[op + 10] += u02
    pc[op + 11] += u12
    pc[op + 12] += u22


@njit(**_JIT)
def crba_into(mf, mi, q, ws, M, rel_done=False):
    """Mass matrix M = A^T M_phys A by composite rigid bodies (Featherstone ch. 6); rel transforms from q
    (rel_done: ws already holds them for this q, as after rnea_into)."""
    nb, dof = mi[0], mi[1]
    o_qp, o_buf, o_vec, o_comp, o_mat, o_mat2, o_tmp, o_end = _ws_offsets(nb)
    if not rel_done:
        buf = ws[o_qp:o_qp + nb]
        to_phys(mf, mi, q, True, buf)
        rel_transforms(mf, mi, buf, ws)
    # composite inertias [m, h (3), Ibar (9)] per body at ws[o_comp + 13 i:], from the leaves to the root
    for i in range(nb):
        b = i * BODY_STRIDE + O_M
        oc = o_comp + 13 * i
        for k in range(13):
            ws[oc + k] = mf[b + k]
    for i in range(nb - 1, -1, -1):
        p = mi[MI_HEADER + i * MI_STRIDE]
        if p >= 0:
            _add_inertia_to_parent(ws, i * WS_STRIDE, o_comp + 13 * i, o_comp + 13 * p)
    Mp = ws[o_mat:o_mat + nb * nb].reshape((nb, nb)) if mi[3] != 0 else M
    for i in range(nb):
        b = i * BODY_STRIDE
        ax0, ax1, ax2 = mf[b + O_AX], mf[b + O_AX + 1], mf[b + O_AX + 2]
        if mi[MI_HEADER + i * MI_STRIDE + 1] == JOINT_PRISMATIC:
            s0, s1, s2, s3, s4, s5 = 0.0, 0.0, 0.0, ax0, ax1, ax2
        else:
            s0, s1, s2, s3, s4, s5 = ax0, ax1, ax2, 0.0, 0.0, 0.0
        # F = I_composite S (_inertia_times_s), M_ii = S^T F
        f0, f1, f2, f3, f4, f5 = _inertia_times_s(ws, o_comp + 13 * i, s0, s1, s2, s3, s4, s5)
        Mp[i, i] = s0 * f0 + s1 * f1 + s2 * f2 + s3 * f3 + s4 * f4 + s5 * f5
        j = i
        pj = mi[MI_HEADER + j * MI_STRIDE]
        while pj >= 0:
            # F <- Ad_{T_rel^-1}^T F (child j's wrench in its parent's frame), in registers
            f0, f1, f2, f3, f4, f5 = _force_to_parent_s(ws, j * WS_STRIDE, f0, f1, f2, f3, f4, f5)
            j = pj
            pj = mi[MI_HEADER + j * MI_STRIDE]
            # S_j^T F: [axis; 0] (revolute) or [0; axis] (prismatic)
            b = j * BODY_STRIDE
            if mi[MI_HEADER + j * MI_STRIDE + 1] == JOINT_PRISMATIC:
                v = mf[b + O_AX] * f3 + mf[b + O_AX + 1] * f4 + mf[b + O_AX + 2] * f5
            else:
                v = mf[b + O_AX] * f0 + mf[b + O_AX + 1] * f1 + mf[b + O_AX + 2] * f2
            Mp[i, j] = v
            Mp[j, i] = v
        # zero entries of bodies on other branches
    if mi[3] == 0:
        _zero_unrelated(mi, M)
        return
    _zero_unrelated(mi, Mp)
    o = _map_offset(mi)
    for r in range(dof):
        for c in range(dof):
            s = 0.0
            for i in range(nb):
                ai = mf[o + i * dof + r]
                if ai == 0.0:
                    continue
                for j in range(nb):
                    s += ai * Mp[i, j] * mf[o + j * dof + c]
            M[r, c] = s


@njit(**_JIT)
def _is_ancestor(mi, a, b):
    j = b
    while j >= 0:
        if j == a:
            return True
        j = mi[MI_HEADER + j * MI_STRIDE]
    return False


@njit(**_JIT)
def is_chain(mi):
    """A serial chain: each body's parent is the one before it, so every pair of bodies is related."""
    for i in range(mi[0]):
        if mi[MI_HEADER + i * MI_STRIDE] != i - 1:
            return False
    return True


@njit(**_JIT)
def _zero_unrelated(mi, M):
    nb = mi[0]
    if is_chain(mi):
        return
    for i in range(nb):
        for j in range(i):
            if not (_is_ancestor(mi, j, i) or _is_ancestor(mi, i, j)):
                M[i, j] = 0.0
                M[j, i] = 0.0


@njit(**_SINGLE)
def mass_matrix(mf, mi, ws, q, M):
    if not all_finite(q):
        return 1
    crba_into(_vf(mf), _vi(mi), q, _vf(ws), M)
    return 0


@njit(**_JIT)
def cholesky_factor_inplace(M):
    """Lower Cholesky factor of the symmetric positive definite M in its lower triangle. False when M is not
    positive definite (a body without mass on a moving joint)."""
    n = M.shape[0]
    for j in range(n):
        s = M[j, j]
        for k in range(j):
            s -= M[j, k] * M[j, k]
        if s <= 0.0:
            return False
        d = np.sqrt(s)
        M[j, j] = d
        for i in range(j + 1, n):
            t = M[i, j]
            for k in range(j):
                t -= M[i, k] * M[j, k]
            M[i, j] = t / d
    return True


@njit(**_JIT)
def cholesky_substitute(L, x):
    """x <- (L L^T)^-1 x with L from cholesky_factor_inplace."""
    n = L.shape[0]
    for i in range(n):
        t = x[i]
        for k in range(i):
            t -= L[i, k] * x[k]
        x[i] = t / L[i, i]
    for i in range(n - 1, -1, -1):
        t = x[i]
        for k in range(i + 1, n):
            t -= L[k, i] * x[k]
        x[i] = t / L[i, i]


@njit(**_JIT)
def cholesky_solve_inplace(M, x):
    """Solve M y = x for symmetric positive definite M (overwritten by its Cholesky factor); x <- y.

    Returns False when M is not positive definite (a body without mass on a moving joint).
    """
    if not cholesky_factor_inplace(M):
        return False
    cholesky_substitute(M, x)
    return True


@njit(**_JIT)
def forward_dynamics_into(mf, mi, q, qd, tau, grav, ftip, ws, qdd):
    """qdd = M(q)^-1 (tau - c(q, qd) - g(q) - J^T f_tip). Returns False if M is singular.

    M from crba_into, solved by Cholesky, then one step of iterative refinement whose residual
    r = (tau - bias) - M qdd is evaluated by Newton-Euler at zero velocity and gravity (M qdd without the formed
    M): the solve alone amplifies M's rounding by its condition number (4e-12 rad/s^2 on a Panda, against
    Pinocchio's ABA); the refined qdd is as accurate as ABA (at most 3e-13 against ABA in long double on a
    Panda). mass_times_phys is that Newton-Euler pass."""
    nb, dof = mi[0], mi[1]
    o = _ws_offsets(nb)
    zero = ws[o[6]:o[6] + dof]  # tmp region (9 + nb floats)
    for k in range(dof):
        zero[k] = 0.0
    rnea_into(mf, mi, q, qd, zero, grav, ftip, ws, qdd)  # bias forces
    for k in range(dof):
        qdd[k] = tau[k] - qdd[k]
    M = ws[o[5]:o[5] + dof * dof].reshape((dof, dof))
    crba_into(mf, mi, q, ws, M, True)  # rnea_into left q's rel transforms in ws
    if not cholesky_factor_inplace(M):
        return False
    r = ws[o[4]:o[4] + dof]  # crba's nb x nb region: free once M is formed
    r[:] = qdd
    cholesky_substitute(M, qdd)
    # refinement: r -= M qdd by Newton-Euler (physical joints: A qdd; forces back through A^T)
    buf = ws[o[1]:o[1] + 4 * nb]
    qddp, taup = buf[2 * nb:3 * nb], buf[3 * nb:]
    to_phys(mf, mi, qdd, False, qddp)
    mass_times_phys(mf, mi, qddp, ws, taup)
    from_phys(mf, mi, taup, zero)
    for k in range(dof):
        zero[k] = r[k] - zero[k]
    cholesky_substitute(M, zero)
    for k in range(dof):
        qdd[k] += zero[k]
    return True


@njit(**_SINGLE)
def forward_dynamics(mf, mi, ws, q, qd, tau, grav, ftip, qdd):
    if not (all_finite(q) and all_finite(qd) and all_finite(tau) and all_finite(grav) and all_finite(ftip)):
        return 1
    if not forward_dynamics_into(_vf(mf), _vi(mi), q, qd, tau, grav, ftip, _vf(ws), qdd):
        return 2
    return 0


# The same entry points without the GIL, for callers that pass their own workspace (RobotModel methods called
# with data=, manip_core._entry): threads that each own a RobotData then run their kernels at the same time.
@njit(**_JIT)
def fk_nogil(mf, mi, ws, q, out):
    return fk(mf, mi, ws, q, out)


@njit(**_JIT)
def jacobian_space_nogil(mf, mi, ws, q, out):
    return jacobian_space(mf, mi, ws, q, out)


@njit(**_JIT)
def jacobian_body_nogil(mf, mi, ws, q, out):
    return jacobian_body(mf, mi, ws, q, out)


@njit(**_JIT)
def rnea_nogil(mf, mi, ws, q, qd, qdd, grav, ftip, tau):
    return rnea(mf, mi, ws, q, qd, qdd, grav, ftip, tau)


@njit(**_JIT)
def mass_matrix_nogil(mf, mi, ws, q, M):
    return mass_matrix(mf, mi, ws, q, M)


@njit(**_JIT)
def forward_dynamics_nogil(mf, mi, ws, q, qd, tau, grav, ftip, qdd):
    return forward_dynamics(mf, mi, ws, q, qd, tau, grav, ftip, qdd)


# -------------------------------------------------------------------------------------------- batched
@njit(**_JIT)
def _chunks(n):
    return max(1, min(n, 64))


@njit(cache=True, _nrt=True)
def _keep(a):
    """Uses a (the scratch behind a view) after the view's last use, so that it is released only then."""
    return a.size


@njit(**_JIT)
def jacobian_row(mf, mi, q, body_frame, ws, Js, T, out):
    """Space (or body) Jacobian of the tip at q into out (6, dof); ws, Js (6, dof), T (4, 4): scratch."""
    nb = mi[0]
    qp = ws[nb * WS_STRIDE:nb * WS_STRIDE + nb]
    to_phys(mf, mi, q, True, qp)
    rel_transforms(mf, mi, qp, ws)
    abs_transforms(mi, ws)
    if body_frame:
        jacobian_space_into(mf, mi, ws, mi[2], Js)
        tip_pose(mf, mi, ws, T)
        space_to_body(T, Js, out)
    else:
        jacobian_space_into(mf, mi, ws, mi[2], out)


@njit(cache=True, parallel=True, error_model="numpy")
def rnea_batch(mf, mi, Q, QD, QDD, grav, ftip, out):
    """One configuration at a time: the reference bench/batch_cpu.py times _lane_kernels.rnea_batch_lanes
    against (the model runs the lanes; every other batch is in _lane_kernels only)."""
    Q, QD, QDD, out = unowned(Q), unowned(QD), unowned(QDD), unowned(out)  # rows count no references
    n = Q.shape[0]
    nc = _chunks(n)
    bad = 0
    # views without meminfo (manip_core._views): the kernels' slices of mf count no references, and the threads
    # do not contend for mf's reference count (mf and mi outlive the loop: the caller holds them)
    mfv, miv = view_f64(mf.ctypes.data, mf.size), view_i64(mi.ctypes.data, mi.size)
    for c in prange(nc):
        ws_own = new_ws(mi)
        ws = view_f64(ws_own.ctypes.data, ws_own.size)
        for k in range(c * n // nc, (c + 1) * n // nc):
            if not (all_finite(Q[k]) and all_finite(QD[k]) and all_finite(QDD[k])):
                bad += 1
                continue
            rnea_into(mfv, miv, Q[k], QD[k], QDD[k], grav, ftip, ws, out[k])
        _keep(ws_own)
    return bad
