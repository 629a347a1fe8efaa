"""numba kernels of the closed-chain kinematics: frames, loop-closure residual and Jacobian, LM and CCD.

A mechanism is a list of elements; element e makes frame e + 1 from its parent frame ``ep[e]`` (frame 0 is the
ground): T_{e+1} = T_{ep[e]} @ eT[e] @ motion(e), where motion is a rotation about / translation along the
local unit axis ``eax[e]`` by q[ev[e]] (rad or m) for a revolute (ety 1) / prismatic (ety 2) element and the
identity for a fixed one (ety 0). ``anc[e, f]`` says whether element e moves frame f.

Residual rows (all in the ground frame): for each weld (a, b): p_a - p_b (m) and log(R_a R_b^T) (rad); then,
when a target is given, w * [p_ee - p_target; log(R_ee R_target^T)] with per-row weights w (0 drops a row).
The Jacobian is the exact derivative for the position rows and the first-order one (omega_a - omega_b) for
the rotation rows, exact at zero error.
"""
import math

import numba as nb
import numpy as np

_OPTS = dict(cache=True, nogil=True, fastmath=False)


@nb.njit(**_OPTS)
def frames(ep, eT, ety, eax, ev, q, Tf):
    """Fill Tf (nf, 4, 4) with every frame's pose in the ground frame at joint values q."""
    ne = ep.shape[0]
    for i in range(4):
        for j in range(4):
            Tf[0, i, j] = 1.0 if i == j else 0.0
    M = np.empty((4, 4))
    A = np.empty((4, 4))
    for e in range(ne):
        P = Tf[ep[e]]
        # A = P @ eT[e]
        for i in range(4):
            for j in range(4):
                s = 0.0
                for k in range(4):
                    s += P[i, k] * eT[e, k, j]
                A[i, j] = s
        t = ety[e]
        if t == 0:
            for i in range(4):
                for j in range(4):
                    Tf[e + 1, i, j] = A[i, j]
            continue
        x = q[ev[e]]
        ax, ay, az = eax[e, 0], eax[e, 1], eax[e, 2]
        for i in range(4):
            for j in range(4):
                M[i, j] = 1.0 if i == j else 0.0
        if t == 1:
            c, s = math.cos(x), math.sin(x)
            C = 1.0 - c
            M[0, 0] = c + ax * ax * C
            M[0, 1] = ax * ay * C - az * s
            M[0, 2] = ax * az * C + ay * s
            M[1, 0] = ay * ax * C + az * s
            M[1, 1] = c + ay * ay * C
            M[1, 2] = ay * az * C - ax * s
            M[2, 0] = az * ax * C - ay * s
            M[2, 1] = az * ay * C + ax * s
            M[2, 2] = c + az * az * C
        else:
            M[0, 3] = ax * x
            M[1, 3] = ay * x
            M[2, 3] = az * x
        for i in range(4):
            for j in range(4):
                s = 0.0
                for k in range(4):
                    s += A[i, k] * M[k, j]
                Tf[e + 1, i, j] = s


@nb.njit(**_OPTS)
def _rrt(Ra, Rb, i, j):
    """(Ra Rb^T)[i, j] of the rotation blocks."""
    return Ra[i, 0] * Rb[j, 0] + Ra[i, 1] * Rb[j, 1] + Ra[i, 2] * Rb[j, 2]


@nb.njit(**_OPTS)
def rot_log(Ra, Rb, out, o):
    """out[o:o+3] = log(Ra Rb^T) as a rotation vector (rad)."""
    R00, R11, R22 = _rrt(Ra, Rb, 0, 0), _rrt(Ra, Rb, 1, 1), _rrt(Ra, Rb, 2, 2)
    tr = R00 + R11 + R22
    c = 0.5 * (tr - 1.0)
    if c > 1.0:
        c = 1.0
    if c < -1.0:
        c = -1.0
    th = math.acos(c)
    vx = _rrt(Ra, Rb, 2, 1) - _rrt(Ra, Rb, 1, 2)
    vy = _rrt(Ra, Rb, 0, 2) - _rrt(Ra, Rb, 2, 0)
    vz = _rrt(Ra, Rb, 1, 0) - _rrt(Ra, Rb, 0, 1)
    if th < 1e-7:
        f = 0.5
    elif th < math.pi - 1e-5:
        f = th / (2.0 * math.sin(th))
    else:
        # near pi: axis from the diagonal
        ux = math.sqrt(max(0.0, 0.5 * (R00 + 1.0)))
        uy = math.sqrt(max(0.0, 0.5 * (R11 + 1.0)))
        uz = math.sqrt(max(0.0, 0.5 * (R22 + 1.0)))
        if vx < 0:
            ux = -ux
        if vy < 0:
            uy = -uy
        if vz < 0:
            uz = -uz
        out[o], out[o + 1], out[o + 2] = th * ux, th * uy, th * uz
        return
    out[o], out[o + 1], out[o + 2] = f * vx, f * vy, f * vz


@nb.njit(**_OPTS)
def _effect(Tf, ety, eax, e, f, dp, dw):
    """Velocity of frame f's origin (dp) and angular velocity (dw) per unit rate of element e's joint."""
    J = Tf[e + 1]
    wx = J[0, 0] * eax[e, 0] + J[0, 1] * eax[e, 1] + J[0, 2] * eax[e, 2]
    wy = J[1, 0] * eax[e, 0] + J[1, 1] * eax[e, 1] + J[1, 2] * eax[e, 2]
    wz = J[2, 0] * eax[e, 0] + J[2, 1] * eax[e, 1] + J[2, 2] * eax[e, 2]
    if ety[e] == 1:
        rx, ry, rz = Tf[f, 0, 3] - J[0, 3], Tf[f, 1, 3] - J[1, 3], Tf[f, 2, 3] - J[2, 3]
        dp[0], dp[1], dp[2] = wy * rz - wz * ry, wz * rx - wx * rz, wx * ry - wy * rx
        dw[0], dw[1], dw[2] = wx, wy, wz
    else:
        dp[0], dp[1], dp[2] = wx, wy, wz
        dw[0], dw[1], dw[2] = 0.0, 0.0, 0.0


@nb.njit(**_OPTS)
def residual(Tf, welds, ee, Tt, wt, r):
    """Fill r with the residual rows (welds, then the weighted target rows when wt has a nonzero)."""
    nw = welds.shape[0]
    for k in range(nw):
        a, b = welds[k, 0], welds[k, 1]
        for i in range(3):
            r[6 * k + i] = Tf[a, i, 3] - Tf[b, i, 3]
        rot_log(Tf[a], Tf[b], r, 6 * k + 3)
    if r.shape[0] > 6 * nw:
        o = 6 * nw
        for i in range(3):
            r[o + i] = wt[i] * (Tf[ee, i, 3] - Tt[i, 3])
        rot_log(Tf[ee], Tt, r, o + 3)
        for i in range(3):
            r[o + 3 + i] *= wt[3 + i]


@nb.njit(**_OPTS)
def jacobian(Tf, ety, eax, ev_elem, anc, welds, ee, wt, free, Jm):
    """Jm (rows, len(free)): derivative of the residual rows with respect to q[free]."""
    nw = welds.shape[0]
    dp = np.empty(3)
    dw = np.empty(3)
    Jm[:, :] = 0.0
    has_t = Jm.shape[0] > 6 * nw
    for c in range(free.shape[0]):
        e = ev_elem[free[c]]
        for k in range(nw):
            a, b = welds[k, 0], welds[k, 1]
            if anc[e, a]:
                _effect(Tf, ety, eax, e, a, dp, dw)
                for i in range(3):
                    Jm[6 * k + i, c] += dp[i]
                    Jm[6 * k + 3 + i, c] += dw[i]
            if anc[e, b]:
                _effect(Tf, ety, eax, e, b, dp, dw)
                for i in range(3):
                    Jm[6 * k + i, c] -= dp[i]
                    Jm[6 * k + 3 + i, c] -= dw[i]
        if has_t and anc[e, ee]:
            _effect(Tf, ety, eax, e, ee, dp, dw)
            o = 6 * nw
            for i in range(3):
                Jm[o + i, c] = wt[i] * dp[i]
                Jm[o + 3 + i, c] = wt[3 + i] * dw[i]


@nb.njit(**_OPTS)
def _maxabs(r):
    m = 0.0
    for i in range(r.shape[0]):
        a = abs(r[i])
        if a > m:
            m = a
    return m


@nb.njit(**_OPTS)
def _bound(x, lo, hi, revolute):
    """x within [lo, hi]: a revolute angle past a limit is first wrapped by 2 pi (same pose) when that lands
    inside the range, else clipped."""
    if x > hi:
        if revolute and lo <= x - 2.0 * math.pi <= hi:
            return x - 2.0 * math.pi
        return hi
    if x < lo:
        if revolute and lo <= x + 2.0 * math.pi <= hi:
            return x + 2.0 * math.pi
        return lo
    return x


@nb.njit(**_OPTS)
def _normal_equations(Jm, r, A, g, nz):
    """A = Jm^T Jm and g = Jm^T r in place, skipping the zero entries of each row (loop-closure rows touch
    only the joints of the two chains they join); nz is integer scratch of len(g)."""
    rows, n = Jm.shape
    for a in range(n):
        g[a] = 0.0
        for b in range(n):
            A[a, b] = 0.0
    for i in range(rows):
        c = 0
        for a in range(n):
            if Jm[i, a] != 0.0:
                nz[c] = a
                c += 1
        ri = r[i]
        for x in range(c):
            a = nz[x]
            v = Jm[i, a]
            g[a] += v * ri
            for y in range(x, c):
                A[a, nz[y]] += v * Jm[i, nz[y]]
    for a in range(n):
        for b in range(a):
            A[a, b] = A[b, a]


@nb.njit(**_OPTS)
def _cholesky_solve(B, g, x):
    """x = -B^-1 g for a symmetric positive definite B, overwritten by its lower Cholesky factor. Returns
    False (x undefined) when B is not numerically positive definite."""
    n = B.shape[0]
    for j in range(n):
        s = B[j, j]
        for k in range(j):
            s -= B[j, k] * B[j, k]
        if not s > 0.0:
            return False
        d = math.sqrt(s)
        B[j, j] = d
        for i in range(j + 1, n):
            s = B[i, j]
            for k in range(j):
                s -= B[i, k] * B[j, k]
            B[i, j] = s / d
    for i in range(n):
        s = -g[i]
        for k in range(i):
            s -= B[i, k] * x[k]
        x[i] = s / B[i, i]
    for i in range(n - 1, -1, -1):
        s = x[i]
        for k in range(i + 1, n):
            s -= B[k, i] * x[k]
        x[i] = s / B[i, i]
    return True


@nb.njit(**_OPTS)
def solve_lm(ep, eT, ety, eax, ev, ev_elem, anc, welds, ee, Tt, wt, free, lo, hi, q, nrows, tol, max_iter):
    """Levenberg-Marquardt on q[free] (in place, clipped to [lo, hi]) until max |residual| <= tol
    (revolute angles wrapped by 2 pi into their range where possible).

    Returns (max |residual|, iterations)."""
    nf = ep.shape[0] + 1
    Tf = np.empty((nf, 4, 4))
    r = np.empty(nrows)
    rn = np.empty(nrows)
    n = free.shape[0]
    Jm = np.empty((nrows, n))
    qn = q.copy()
    frames(ep, eT, ety, eax, ev, q, Tf)
    residual(Tf, welds, ee, Tt, wt, r)
    cost = np.dot(r, r)
    lam = 1e-3
    it = 0
    stall = 0
    if n == 0:
        return _maxabs(r), 0
    need_j = True
    A = np.empty((n, n))
    B = np.empty((n, n))
    g = np.empty(n)
    dx = np.empty(n)
    nz = np.empty(n, dtype=np.int64)
    while it < max_iter:
        if _maxabs(r) <= tol:
            break
        if need_j:
            jacobian(Tf, ety, eax, ev_elem, anc, welds, ee, wt, free, Jm)
            _normal_equations(Jm, r, A, g, nz)
            need_j = False
        it += 1
        B[:, :] = A
        for i in range(n):
            B[i, i] += lam * (A[i, i] + 1e-6)
        if not _cholesky_solve(B, g, dx):
            B[:, :] = A
            for i in range(n):
                B[i, i] += lam * (A[i, i] + 1e-6)
            dx[:] = np.linalg.solve(B, -g)
        for k in range(n):
            v = free[k]
            qn[v] = _bound(q[v] + dx[k], lo[v], hi[v], ety[ev_elem[v]] == 1)
        frames(ep, eT, ety, eax, ev, qn, Tf)
        residual(Tf, welds, ee, Tt, wt, rn)
        cn = np.dot(rn, rn)
        if cn < cost:
            for k in range(n):
                q[free[k]] = qn[free[k]]
            r[:] = rn
            # stalled (e.g. pressed against a joint limit): 8 accepted steps in a row that gain < 0.1 %
            stall = stall + 1 if cost - cn < 1e-3 * cost else 0
            cost = cn
            if stall >= 8:
                break
            lam = max(lam * 0.2, 1e-12)
            need_j = True
        else:
            for k in range(n):
                qn[free[k]] = q[free[k]]
            lam *= 8.0
            if lam > 1e10:
                break
    frames(ep, eT, ety, eax, ev, q, Tf)
    residual(Tf, welds, ee, Tt, wt, r)
    return _maxabs(r), it


@nb.njit(**_OPTS)
def solve_ccd(ep, eT, ety, eax, ev, ev_elem, anc, welds, ee, Tt, wt, free, lo, hi, q, nrows, tol, max_sweeps):
    """Cyclic coordinate descent: one variable of q[free] at a time, each by the 1-D Gauss-Newton step
    that minimises the squared residual along it (clipped to its limits). Returns (max |residual|, sweeps)."""
    nf = ep.shape[0] + 1
    Tf = np.empty((nf, 4, 4))
    r = np.empty(nrows)
    one = np.empty(1, dtype=np.int64)
    col = np.empty((nrows, 1))
    sweeps = 0
    frames(ep, eT, ety, eax, ev, q, Tf)
    residual(Tf, welds, ee, Tt, wt, r)
    while sweeps < max_sweeps and _maxabs(r) > tol:
        sweeps += 1
        for k in range(free.shape[0]):
            one[0] = free[k]
            jacobian(Tf, ety, eax, ev_elem, anc, welds, ee, wt, one, col)
            num = 0.0
            den = 1e-12
            for i in range(nrows):
                num += col[i, 0] * r[i]
                den += col[i, 0] * col[i, 0]
            v = free[k]
            q[v] = _bound(q[v] - num / den, lo[v], hi[v], ety[ev_elem[v]] == 1)
            frames(ep, eT, ety, eax, ev, q, Tf)
            residual(Tf, welds, ee, Tt, wt, r)
    return _maxabs(r), sweeps
