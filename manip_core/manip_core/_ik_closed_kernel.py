"""numba kernels of the closed-form IK (manip_core.ik_analytic), batched over targets.

The same maths as AnalyticIK.solve (ur6r, ypp3, planar2r; see ik_analytic's module docstring), step for step:
branch roots, wrap into the joint limits by multiples of 2 pi (nearest 0), the forward-kinematics check (1e-9 m
and rad) with the Newton polish for nearly ideal geometry, duplicates removed. It returns the solutions only:
no branch labels, no failure reasons, no sorting (AnalyticIK.solve gives those). Used where many targets are
solved at once (the singularity map); test_ik_analytic checks it against AnalyticIK.solve.

The geometry arrives packed by AnalyticIK.packed(): ``gf`` (float64, offsets G_* below), S (6, n) the true
screw axes [omega; v] in the base frame, M (4, 4) the tip pose at q = 0 and its inverse, the joint limits (rad,
+-inf for continuous joints). Lengths m, angles rad, base frame.
"""
import math

import numpy as np
from numba import njit

KIND_UR6R, KIND_YPP3, KIND_PLANAR2R = 0, 1, 2
MAX_SOLUTIONS = 8
# offsets in gf
G_H, G_SIGNS, G_W1, G_P1, G_W5, G_W6, G_W0, G_P4 = 0, 3, 6, 9, 12, 15, 18, 21
G_C1, G_HAV_MIN, G_COS2_MAX, G_GAMMA0 = 24, 25, 26, 27
G_X6, G_XH, G_P0 = 28, 31, 34
G_PA, G_A, G_B, G_LA, G_LB, G_LO, G_HI, G_AB_A, G_AB_B = 40, 43, 46, 49, 50, 51, 52, 53, 54
G_SIZE = 56

TWO_PI = 2.0 * math.pi
# the tolerances of ik_analytic (kept equal by test_ik_analytic)
FK_TOL, DUPLICATE_TOL, REACH_TOL, LIMIT_TOL, EDGE_SNAP, SINGULAR_TOL = 1e-9, 1e-9, 1e-10, 1e-10, 1e-13, 1e-10

_JIT = dict(cache=True, nogil=True, error_model="numpy")


@njit(**_JIT)
def _v(gf, o):
    return gf[o:o + 3].copy()


@njit(**_JIT)
def _dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


@njit(**_JIT)
def _cross(a, b):
    return np.array([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]])


@njit(**_JIT)
def _norm(a):
    return math.sqrt(_dot(a, a))


@njit(**_JIT)
def _perp(h, x):
    return x - _dot(h, x) * h


@njit(**_JIT)
def _rot_about(h, phi, x):
    c, s = math.cos(phi), math.sin(phi)
    return x * c + _cross(h, x) * s + h * (_dot(h, x) * (1.0 - c))


@njit(**_JIT)
def _angle_about(h, x, y):
    return math.atan2(_dot(h, _cross(x, y)), _dot(_perp(h, x), _perp(h, y)))


@njit(**_JIT)
def _wrap_pi(x):
    y = x - TWO_PI * np.rint(x / TWO_PI)
    return math.pi if y <= -math.pi else y


@njit(**_JIT)
def _rodrigues(w, t):
    s, c = math.sin(t), math.cos(t)
    v = 1.0 - c
    R = np.empty((3, 3))
    R[0, 0] = 1.0 - v * (w[1] * w[1] + w[2] * w[2])
    R[1, 1] = 1.0 - v * (w[0] * w[0] + w[2] * w[2])
    R[2, 2] = 1.0 - v * (w[0] * w[0] + w[1] * w[1])
    R[0, 1] = -s * w[2] + v * w[0] * w[1]
    R[1, 0] = s * w[2] + v * w[0] * w[1]
    R[0, 2] = s * w[1] + v * w[0] * w[2]
    R[2, 0] = -s * w[1] + v * w[0] * w[2]
    R[1, 2] = -s * w[0] + v * w[1] * w[2]
    R[2, 1] = s * w[0] + v * w[1] * w[2]
    return R


@njit(**_JIT)
def _exp6(S, i, t):
    """e^([S_i] t) (4, 4) for column i of S (MR eq. 3.88, as spatial.exp6: any |omega|, pure translation)."""
    T = np.eye(4)
    w = S[0:3, i].copy()
    v = S[3:6, i].copy()
    if _norm(w) < 1e-12:
        for r in range(3):
            T[r, 3] = v[r] * t
        return T
    K = np.zeros((3, 3))
    K[0, 1], K[0, 2], K[1, 0], K[1, 2], K[2, 0], K[2, 1] = -w[2], w[1], w[2], -w[0], -w[1], w[0]
    K2 = _mul3(K, K)
    s, c = math.sin(t), math.cos(t)
    for r in range(3):
        for k in range(3):
            T[r, k] = (1.0 if r == k else 0.0) + s * K[r, k] + (1.0 - c) * K2[r, k]
        p = 0.0
        for k in range(3):
            p += ((t if r == k else 0.0) + (1.0 - c) * K[r, k] + (t - s) * K2[r, k]) * v[k]
        T[r, 3] = p
    return T


@njit(**_JIT)
def _mul(A, B):
    C = np.zeros((4, 4))
    for r in range(4):
        for c in range(4):
            s = 0.0
            for k in range(4):
                s += A[r, k] * B[k, c]
            C[r, c] = s
    return C


@njit(**_JIT)
def _mul3(A, B):
    C = np.zeros((3, 3))
    for r in range(3):
        for c in range(3):
            C[r, c] = A[r, 0] * B[0, c] + A[r, 1] * B[1, c] + A[r, 2] * B[2, c]
    return C


@njit(**_JIT)
def _mul3t(A, B):
    """A B^T (3, 3)."""
    C = np.zeros((3, 3))
    for r in range(3):
        for c in range(3):
            C[r, c] = A[r, 0] * B[c, 0] + A[r, 1] * B[c, 1] + A[r, 2] * B[c, 2]
    return C


@njit(**_JIT)
def _inv(T):
    X = np.eye(4)
    for r in range(3):
        for c in range(3):
            X[r, c] = T[c, r]
    for r in range(3):
        X[r, 3] = -(X[r, 0] * T[0, 3] + X[r, 1] * T[1, 3] + X[r, 2] * T[2, 3])
    return X


@njit(**_JIT)
def _apply(T, p):
    return np.array([T[r, 0] * p[0] + T[r, 1] * p[1] + T[r, 2] * p[2] + T[r, 3] for r in range(3)])


@njit(**_JIT)
def _rot_apply(R, p):
    return np.array([R[r, 0] * p[0] + R[r, 1] * p[1] + R[r, 2] * p[2] for r in range(3)])


@njit(**_JIT)
def _solve_acos_bsin(a, b, c, roots):
    """Roots of a cos x + b sin x = c into roots[0:2]; returns their number (0 or 2)."""
    r = math.hypot(a, b)
    if abs(c) > r + REACH_TOL:
        return 0
    s = 0.0 if r - abs(c) < EDGE_SNAP else math.sqrt((r - c) * (r + c))
    base, half = math.atan2(b, a), math.atan2(s, c)
    roots[0], roots[1] = base + half, base - half
    return 2


@njit(**_JIT)
def _theta1(gf, X, roots):
    h, w1, p1 = _v(gf, G_H), _v(gf, G_W1), _v(gf, G_P1)
    r = X - p1
    wh = _dot(w1, h)
    a = _dot(h - wh * w1, r)
    b = _dot(_cross(w1, h), r)
    c = gf[G_C1] - wh * _dot(w1, r)
    if math.hypot(a, b) < REACH_TOL and abs(c) <= REACH_TOL:
        roots[0], roots[1] = 0.0, math.pi
        return 2
    return _solve_acos_bsin(a, b, c, roots)


@njit(**_JIT)
def _planar(gf, target, out):
    """_Planar2.solve: (phi_a, phi_b) rows into out[0:2]; returns their number (0 or 2)."""
    h, pa, a, b = _v(gf, G_H), _v(gf, G_PA), _v(gf, G_A), _v(gf, G_B)
    la, lb, lo, hi = gf[G_LA], gf[G_LB], gf[G_LO], gf[G_HI]
    d = _perp(h, target - pa)
    ld = _norm(d)
    if ld > hi + REACH_TOL or ld < lo - REACH_TOL:
        return 0
    if hi - ld < EDGE_SNAP or ld - lo < EDGE_SNAP:
        ld = hi if hi - ld < EDGE_SNAP else lo
    C = 0.5 * (ld * ld - la * la - lb * lb)
    s2 = 0.25 * max(0.0, (hi - ld) * (hi + ld)) * max(0.0, (ld - lo) * (ld + lo))
    base, half = math.atan2(gf[G_AB_B], gf[G_AB_A]), math.atan2(math.sqrt(s2), C)
    for k in range(2):
        phi_b = base + half if k == 0 else base - half
        v = a + _rot_about(h, phi_b, b)
        out[k, 0] = _angle_about(h, v, d) if ld > 0.0 else 0.0
        out[k, 1] = phi_b
    return 2


@njit(**_JIT)
def _singular_theta6(gf, Y, g5_inv, sigma):
    """AnalyticIK._singular_theta6; NaN where no theta6 brings the wrist within reach."""
    h, pa = _v(gf, G_H), _v(gf, G_PA)
    lo, hi = gf[G_LO], gf[G_HI]
    G0 = _mul(Y, g5_inv)
    Q0 = _apply(G0, _v(gf, G_P4))
    d0 = _norm(_perp(h, Q0 - pa))
    if lo <= d0 <= hi:
        return 0.0
    W = _apply(Y, _v(gf, G_W0))
    e, D = _perp(h, Q0 - W), _perp(h, W - pa)
    edge = hi if d0 > hi else lo
    roots = np.empty(2)
    if _solve_acos_bsin(_dot(D, e), _dot(D, _cross(h, e)), 0.5 * (edge * edge - _dot(D, D) - _dot(e, e)),
                        roots) == 0:
        return np.nan
    a, b = _wrap_pi(-sigma * roots[0]), _wrap_pi(-sigma * roots[1])
    return a if abs(a) <= abs(b) else b


@njit(**_JIT)
def _branches_ur6r(gf, S, Minv, T, raw):
    h, w6 = _v(gf, G_H), _v(gf, G_W6)
    signs = gf[G_SIGNS:G_SIGNS + 3]
    X = _mul(T, Minv)
    W = _apply(X, _v(gf, G_W0))
    n = 0
    roots1, roots5, pl = np.empty(2), np.empty(2), np.empty((2, 2))
    for i1 in range(_theta1(gf, W, roots1)):
        t1 = roots1[i1]
        Y = _mul(_inv(_exp6(S, 0, t1)), X)
        R_rem = Y[:3, :3].copy()
        u = _rot_apply(R_rem, w6)
        # wrist roots (AnalyticIK._wrist_roots)
        hav_e, cos2_e = 0.25 * _dot(u - h, u - h), 0.25 * _dot(u + h, u + h)
        lo, hi = hav_e - gf[G_HAV_MIN], cos2_e - gf[G_COS2_MAX]
        if lo < -REACH_TOL or hi < -REACH_TOL:
            continue
        psi = 2.0 * math.atan2(math.sqrt(max(lo, 0.0)), math.sqrt(max(hi, 0.0)))
        roots5[0], roots5[1] = gf[G_GAMMA0] + psi, gf[G_GAMMA0] - psi
        for i5 in range(2):
            t5 = roots5[i5]
            # AnalyticIK._wrist_rest
            R5 = _rodrigues(_v(gf, G_W5), t5)
            sigma = 0.0
            if _norm(_cross(h, u)) < SINGULAR_TOL:
                R_phi = _mul3t(R_rem, R5)
                xh = _v(gf, G_XH)
                phi = _angle_about(h, xh, _rot_apply(R_phi, xh))
                t6 = 0.0
                sigma = 1.0 if _dot(h, u) > 0 else -1.0
            else:
                phi = _angle_about(h, _rot_apply(R5, w6), u)
                R6 = _mul3(_mul3(np.ascontiguousarray(R5.T), _rodrigues(h, -phi)), R_rem)
                x6 = _v(gf, G_X6)
                t6 = _angle_about(w6, x6, _rot_apply(R6, x6))
            g5_inv = _exp6(S, 4, -t5)
            if sigma != 0.0:
                t6 = _singular_theta6(gf, Y, g5_inv, sigma)
                if np.isnan(t6):
                    continue
                phi -= sigma * t6
            G = _mul(_mul(Y, _exp6(S, 5, -t6)), g5_inv)
            Q = _apply(G, _v(gf, G_P4))
            for k in range(_planar(gf, Q, pl)):
                phi2, phi3 = pl[k, 0], pl[k, 1]
                raw[n, 0], raw[n, 1], raw[n, 2] = t1, signs[0] * phi2, signs[1] * phi3
                raw[n, 3], raw[n, 4], raw[n, 5] = signs[2] * (phi - phi2 - phi3), t5, t6
                n += 1
    return n


@njit(**_JIT)
def _branches_ypp3(gf, S, T, raw):
    P = T[:3, 3].copy()
    signs = gf[G_SIGNS:G_SIGNS + 3]
    roots1, pl = np.empty(2), np.empty((2, 2))
    n = 0
    for i1 in range(_theta1(gf, P, roots1)):
        t1 = roots1[i1]
        g1 = _exp6(S, 0, t1)
        Q = _apply(_inv(g1), P)
        for k in range(_planar(gf, Q, pl)):
            raw[n, 0], raw[n, 1], raw[n, 2] = t1, signs[0] * pl[k, 0], signs[1] * pl[k, 1]
            n += 1
    return n


@njit(**_JIT)
def _branches_planar2r(gf, T, raw):
    P = T[:3, 3].copy()
    h = _v(gf, G_H)
    if abs(_dot(h, P - _v(gf, G_P0))) > REACH_TOL:
        return 0
    pl = np.empty((2, 2))
    n = _planar(gf, P, pl)
    for k in range(n):
        raw[k, 0], raw[k, 1] = gf[G_SIGNS] * pl[k, 0], gf[G_SIGNS + 1] * pl[k, 1]
    return n


@njit(**_JIT)
def _fk(S, M, q):
    T = np.eye(4)
    for i in range(q.size):
        T = _mul(T, _exp6(S, i, q[i]))
    return _mul(T, M)


@njit(**_JIT)
def _fk_ok(S, M, q, T, position_only):
    A = _fk(S, M, q)
    dp = math.sqrt((A[0, 3] - T[0, 3]) ** 2 + (A[1, 3] - T[1, 3]) ** 2 + (A[2, 3] - T[2, 3]) ** 2)
    if position_only:
        return dp < FK_TOL
    if dp >= FK_TOL:
        return False
    # rotation error |log3(A_R^T T_R)| as spatial.pose_error (the vee part, accurate for small angles)
    R = np.zeros((3, 3))
    for r in range(3):
        for c in range(3):
            R[r, c] = A[0, r] * T[0, c] + A[1, r] * T[1, c] + A[2, r] * T[2, c]
    c = min(1.0, max(-1.0, 0.5 * (R[0, 0] + R[1, 1] + R[2, 2] - 1.0)))
    theta = math.acos(c)
    vx, vy, vz = R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]
    vee = math.sqrt(vx * vx + vy * vy + vz * vz)
    if theta < 1e-9:
        err = 0.5 * vee
    elif math.pi - theta < 1e-6:
        err = theta
    else:
        err = theta / (2.0 * math.sin(theta)) * vee
    return err < FK_TOL


@njit(**_JIT)
def _space_jacobian(S, q):
    n = q.size
    J = np.zeros((6, n))
    T = np.eye(4)
    for i in range(n):
        w = S[0:3, i].copy()
        v = S[3:6, i].copy()
        R = T[:3, :3].copy()
        p = T[:3, 3].copy()
        Rw, Rv = _rot_apply(R, w), _rot_apply(R, v)
        pRw = _cross(p, Rw)
        for r in range(3):
            J[r, i] = Rw[r]
            J[3 + r, i] = pRw[r] + Rv[r]
        T = _mul(T, _exp6(S, i, q[i]))
    return J


@njit(**_JIT)
def _lstsq(J, e):
    """numpy.linalg.lstsq(J, e, rcond=None)[0] (SVD, singular values below eps max(m, n) sigma_max cut)."""
    return np.linalg.lstsq(J, e, 2.220446049250313e-16 * max(J.shape[0], J.shape[1]))[0]


@njit(**_JIT)
def _polish(S, M, q0, T, position_only):
    """AnalyticIK._polish: up to 5 least-squares Newton steps on the true screws."""
    q = q0.copy()
    for _ in range(5):
        A = _fk(S, M, q)
        p = A[:3, 3].copy()
        J = _space_jacobian(S, q)
        if position_only:
            e = T[:3, 3] - p
            if _norm(e) < 1e-13:
                break
            Jp = np.empty((3, q.size))
            for c in range(q.size):
                wc = J[0:3, c].copy()
                x = _cross(wc, p)
                for r in range(3):
                    Jp[r, c] = J[3 + r, c] + x[r]       # v + omega x p
            q = q + _lstsq(Jp, e)
            continue
        R = _mul3t(T[:3, :3], A[:3, :3])
        c = min(1.0, max(-1.0, 0.5 * (R[0, 0] + R[1, 1] + R[2, 2] - 1.0)))
        th = math.acos(c)
        vee = np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
        if th < 1e-9:
            w = 0.5 * vee
        elif math.pi - th < 1e-6:
            i = 0
            for k in range(1, 3):
                if R[k, k] > R[i, i]:
                    i = k
            B = np.empty(3)
            for r in range(3):
                B[r] = 0.5 * (R[r, i] + (1.0 if r == i else 0.0))
            w = B / math.sqrt(B[i]) * th
        else:
            w = th / (2.0 * math.sin(th)) * vee
        V = np.empty(6)
        wp = _cross(w, p)
        for r in range(3):
            V[r] = w[r]
            V[3 + r] = T[r, 3] - p[r] - wp[r]
        if math.sqrt(_dot(V[:3], V[:3]) + _dot(V[3:], V[3:])) < 1e-13:
            break
        q = q + _lstsq(J, V)
    return q


@njit(**_JIT)
def _wrap(q, lower, upper, out):
    """AnalyticIK._wrap (near 0): False when some joint cannot be brought within its limits."""
    for i in range(q.size):
        lo, hi, x = lower[i], upper[i], q[i]
        if not (np.isfinite(lo) and np.isfinite(hi)):
            y = _wrap_pi(x)
            if np.isfinite(lo) and y < lo:
                y += TWO_PI * math.ceil((lo - y) / TWO_PI)
            if np.isfinite(hi) and y > hi:
                y -= TWO_PI * math.ceil((y - hi) / TWO_PI)
            out[i] = y
            continue
        kmin = math.ceil((lo - LIMIT_TOL - x) / TWO_PI)
        kmax = math.floor((hi + LIMIT_TOL - x) / TWO_PI)
        if kmin > kmax:
            return False
        k = min(max(np.rint(-x / TWO_PI), kmin), kmax)
        out[i] = min(max(x + TWO_PI * k, lo), hi)
    return True


@njit(**_JIT)
def _same(a, b):
    for i in range(a.size):
        d = a[i] - b[i]
        if abs(d - TWO_PI * np.rint(d / TWO_PI)) >= DUPLICATE_TOL:
            return False
    return True


@njit(**_JIT)
def solve_all(kind, gf, S, M, Minv, lower, upper, T, out):
    """Every in-limit solution for the target pose T (4, 4) into out (MAX_SOLUTIONS, n); returns how many."""
    n = S.shape[1]
    for r in range(4):
        for c in range(4):
            if not np.isfinite(T[r, c]):
                return 0
    raw = np.empty((MAX_SOLUTIONS, n))
    if kind == KIND_UR6R:
        m = _branches_ur6r(gf, S, Minv, T, raw)
    elif kind == KIND_YPP3:
        m = _branches_ypp3(gf, S, T, raw)
    else:
        m = _branches_planar2r(gf, T, raw)
    position_only = kind != KIND_UR6R
    count = 0
    w = np.empty(n)
    for k in range(m):
        ok = _wrap(raw[k], lower, upper, w)
        if ok and not _fk_ok(S, M, w, T, position_only):
            ok = _wrap(_polish(S, M, raw[k], T, position_only), lower, upper, w)
            if ok and not _fk_ok(S, M, w, T, position_only):
                continue
        if not ok:
            continue
        dup = False
        for j in range(count):
            if _same(w, out[j]):
                dup = True
                break
        if not dup:
            out[count] = w
            count += 1
    return count


@njit(**_JIT)
def solve_all_batch(kind, gf, S, M, Minv, lower, upper, T, out, counts):
    """solve_all for N targets T (N, 4, 4): out (N, MAX_SOLUTIONS, n), counts (N,). One thread (a parallel
    version compiles for ~50 s of CPU time on a cold cache and the map spends most of its time elsewhere)."""
    for i in range(T.shape[0]):
        counts[i] = solve_all(kind, gf, S, M, Minv, lower, upper, T[i], out[i])
