"""GPU backend (numba.cuda) of the collision checks: many configurations, or many edges, in one launch.

``configs_kernel``: one thread per configuration (free or not). ``edge_samples_kernel``: one thread per
sample of a batch of straight joint-space edges (sample i of edge e is a + (i / n_e) (b - a), i = 1..n_e, as
in collision_kernels.edge_free), a colliding sample marks its edge. This is the batched mode: candidate
paths, shortcuts or the samples of many seeds' edges checked together, as cuRobo does.

The device functions repeat the CPU kernels' arithmetic operation for operation (forward kinematics of
manip_core._kernels.rel_transforms/abs_transforms, the sphere placement, the same bounding tests and the
same signed distances, shapes.sdf_row compiled for the device), so that under NUMBA_ENABLE_CUDASIM=1 the
results are identical to the CPU kernels; on a GPU, sin/cos of libdevice may differ from the CPU's in the
last bit. Per-thread scratch is in local arrays: at most MAX_BODIES moving bodies, MAX_GROUPS collision
groups and MAX_DOF joints.
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda

from manip_core._layout import BODY_STRIDE, JOINT_PRISMATIC, MI_HEADER, MI_STRIDE, O_AX, O_P, O_R

from . import shapes

MAX_BODIES = 32
MAX_GROUPS = 64
MAX_DOF = 16
THREADS = 128

sdf_dev = cuda.jit(device=True)(shapes.sdf_row.py_func)
aabb_misses_dev = cuda.jit(device=True)(shapes.aabb_misses.py_func)


@cuda.jit(device=True)
def fk_dev(mf, mi, q, qp, RA, PA):
    """Absolute body rotations RA (MAX_BODIES, 9) and positions PA (MAX_BODIES, 3) at q (as the CPU)."""
    nb, dof = mi[0], mi[1]
    if mi[3] == 0:
        for i in range(nb):
            qp[i] = q[i]
    else:
        o = nb * BODY_STRIDE + 12
        for i in range(nb):
            s = mf[o + nb * dof + i]
            for j in range(dof):
                s += mf[o + i * dof + j] * q[j]
            qp[i] = s
    rr = cuda.local.array(9, np.float64)
    pr = cuda.local.array(3, np.float64)
    for i in range(nb):
        b = i * BODY_STRIDE
        kind = mi[MI_HEADER + i * MI_STRIDE + 2]
        jt = mi[MI_HEADER + i * MI_STRIDE + 1]
        qi = qp[i]
        if jt == JOINT_PRISMATIC:
            for k in range(9):
                rr[k] = mf[b + O_R + k]
            for r in range(3):
                s = 0.0
                for c in range(3):
                    s += mf[b + O_R + 3 * r + c] * mf[b + O_AX + c]
                pr[r] = mf[b + O_P + r] + s * qi
        else:
            for r in range(3):
                pr[r] = mf[b + O_P + r]
            c_, s_ = math.cos(qi), math.sin(qi)
            if kind == 3:
                x, y, z = mf[b + O_AX], mf[b + O_AX + 1], mf[b + O_AX + 2]
                t = 1.0 - c_
                j00 = c_ + t * x * x
                j01 = t * x * y - s_ * z
                j02 = t * x * z + s_ * y
                j10 = t * x * y + s_ * z
                j11 = c_ + t * y * y
                j12 = t * y * z - s_ * x
                j20 = t * x * z - s_ * y
                j21 = t * y * z + s_ * x
                j22 = c_ + t * z * z
                for r in range(3):
                    a0, a1, a2 = mf[b + O_R + 3 * r], mf[b + O_R + 3 * r + 1], mf[b + O_R + 3 * r + 2]
                    rr[3 * r] = a0 * j00 + a1 * j10 + a2 * j20
                    rr[3 * r + 1] = a0 * j01 + a1 * j11 + a2 * j21
                    rr[3 * r + 2] = a0 * j02 + a1 * j12 + a2 * j22
            else:
                k1 = (kind + 1) % 3
                k2 = (kind + 2) % 3
                for r in range(3):
                    a1 = mf[b + O_R + 3 * r + k1]
                    a2 = mf[b + O_R + 3 * r + k2]
                    rr[3 * r + kind] = mf[b + O_R + 3 * r + kind]
                    rr[3 * r + k1] = c_ * a1 + s_ * a2
                    rr[3 * r + k2] = -s_ * a1 + c_ * a2
        p = mi[MI_HEADER + i * MI_STRIDE]
        if p < 0:
            for k in range(9):
                RA[i, k] = rr[k]
            for k in range(3):
                PA[i, k] = pr[k]
            continue
        for r in range(3):
            a0, a1, a2 = RA[p, 3 * r], RA[p, 3 * r + 1], RA[p, 3 * r + 2]
            for c in range(3):
                RA[i, 3 * r + c] = a0 * rr[c] + a1 * rr[3 + c] + a2 * rr[6 + c]
            PA[i, r] = PA[p, r] + a0 * pr[0] + a1 * pr[1] + a2 * pr[2]


@cuda.jit(device=True)
def place_dev(RA, PA, body, src, k):
    x, y, z = src[k, 0], src[k, 1], src[k, 2]
    if body < 0:
        return x, y, z
    return (PA[body, 0] + RA[body, 0] * x + RA[body, 1] * y + RA[body, 2] * z,
            PA[body, 1] + RA[body, 3] * x + RA[body, 4] * y + RA[body, 5] * z,
            PA[body, 2] + RA[body, 6] * x + RA[body, 7] * y + RA[body, 8] * z)


@cuda.jit(device=True)
def free_dev(mf, mi, grp_body, grp_start, grp_bound, grp_env, sph_local, obs, pairs, q):
    """True when q is collision-free: the tests of collision_kernels.config_free, spheres placed on demand."""
    qp = cuda.local.array(MAX_BODIES, np.float64)
    RA = cuda.local.array((MAX_BODIES, 9), np.float64)
    PA = cuda.local.array((MAX_BODIES, 3), np.float64)
    BW = cuda.local.array((MAX_GROUPS, 4), np.float64)
    fk_dev(mf, mi, q, qp, RA, PA)
    G = grp_body.shape[0]
    for g in range(G):
        x, y, z = place_dev(RA, PA, grp_body[g], grp_bound, g)
        BW[g, 0], BW[g, 1], BW[g, 2], BW[g, 3] = x, y, z, grp_bound[g, 3]
    for o in range(obs.shape[0]):
        for g in range(G):
            if not grp_env[g]:
                continue
            bx, by, bz, br = BW[g, 0], BW[g, 1], BW[g, 2], BW[g, 3]
            if aabb_misses_dev(obs, o, bx, by, bz, br):
                continue
            if sdf_dev(obs, o, bx, by, bz) > br:
                continue
            for s in range(grp_start[g], grp_start[g + 1]):
                x, y, z = place_dev(RA, PA, grp_body[g], sph_local, s)
                r = sph_local[s, 3]
                if not aabb_misses_dev(obs, o, x, y, z, r) and sdf_dev(obs, o, x, y, z) <= r:
                    return False
    for k in range(pairs.shape[0]):
        g, h = pairs[k, 0], pairs[k, 1]
        dx, dy, dz = BW[g, 0] - BW[h, 0], BW[g, 1] - BW[h, 1], BW[g, 2] - BW[h, 2]
        reach = BW[g, 3] + BW[h, 3]
        if dx * dx + dy * dy + dz * dz > reach * reach:
            continue
        for s in range(grp_start[g], grp_start[g + 1]):
            px, py, pz = place_dev(RA, PA, grp_body[g], sph_local, s)
            pr = sph_local[s, 3]
            ex, ey, ez = px - BW[h, 0], py - BW[h, 1], pz - BW[h, 2]
            rr = pr + BW[h, 3]
            if ex * ex + ey * ey + ez * ez > rr * rr:
                continue
            for t in range(grp_start[h], grp_start[h + 1]):
                tx, ty, tz = place_dev(RA, PA, grp_body[h], sph_local, t)
                ex, ey, ez = px - tx, py - ty, pz - tz
                rr = pr + sph_local[t, 3]
                if ex * ex + ey * ey + ez * ez <= rr * rr:
                    return False
    return True


@cuda.jit
def configs_kernel(mf, mi, grp_body, grp_start, grp_bound, grp_env, sph_local, obs, pairs, Q, out):
    i = cuda.grid(1)
    if i >= Q.shape[0]:
        return
    q = cuda.local.array(MAX_DOF, np.float64)
    for k in range(Q.shape[1]):
        q[k] = Q[i, k]
    out[i] = 1 if free_dev(mf, mi, grp_body, grp_start, grp_bound, grp_env, sph_local, obs, pairs, q) else 0


@cuda.jit
def edge_samples_kernel(mf, mi, grp_body, grp_start, grp_bound, grp_env, sph_local, obs, pairs, A, B, n, offsets,
                        hit):
    k = cuda.grid(1)
    E = A.shape[0]
    if k >= offsets[E]:
        return
    lo, hi = 0, E   # the edge e with offsets[e] <= k < offsets[e + 1]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if offsets[mid] <= k:
            lo = mid
        else:
            hi = mid
    e = lo
    i = k - offsets[e] + 1
    t = i / n[e]
    q = cuda.local.array(MAX_DOF, np.float64)
    for j in range(A.shape[1]):
        q[j] = A[e, j] + t * (B[e, j] - A[e, j])
    if not free_dev(mf, mi, grp_body, grp_start, grp_bound, grp_env, sph_local, obs, pairs, q):
        hit[e] = 1


class CudaCollisionChecker:
    """The arrays of a CollisionChecker on the device; batched checks from host arrays."""

    def __init__(self, checker):
        ca = checker.ca
        rc = checker.robot
        if int(ca[1][0]) > MAX_BODIES or len(rc.grp_body) > MAX_GROUPS or checker.dof > MAX_DOF:
            raise ValueError(f"the cuda backend handles at most {MAX_BODIES} moving bodies, {MAX_GROUPS} collision "
                             f"groups and {MAX_DOF} joints")
        self.dof = checker.dof
        # mf, mi, grp_body, grp_start, grp_bound, grp_env, sph_local, obs, pairs
        self.args = tuple(cuda.to_device(np.ascontiguousarray(a)) for a in
                          (ca[0], ca[1], ca[3], ca[4], ca[5], ca[6], ca[7], ca[8], ca[12]))

    def are_free(self, Q):
        Q = np.ascontiguousarray(Q, dtype=np.float64).reshape(-1, self.dof)
        out = cuda.device_array(len(Q), dtype=np.int8)
        if len(Q):
            tb = min(THREADS, len(Q))
            configs_kernel[(len(Q) + tb - 1) // tb, tb](*self.args, cuda.to_device(Q), out)
        return out.copy_to_host().astype(bool)

    def edges_free(self, A, B, resolution):
        """(E,) bools: edge A[e] -> B[e] free at steps <= resolution (rad); A[e] itself is not checked."""
        from .collision_kernels import n_steps
        A = np.ascontiguousarray(A, dtype=np.float64).reshape(-1, self.dof)
        B = np.ascontiguousarray(B, dtype=np.float64).reshape(-1, self.dof)
        n = np.array([n_steps(a, b, float(resolution)) for a, b in zip(A, B)], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(n)]).astype(np.int64)
        hit = cuda.to_device(np.zeros(len(A), dtype=np.int8))
        total = int(offsets[-1])
        if total:
            tb = min(THREADS, total)
            edge_samples_kernel[(total + tb - 1) // tb, tb](
                *self.args, cuda.to_device(A), cuda.to_device(B), cuda.to_device(n), cuda.to_device(offsets), hit)
        return hit.copy_to_host() == 0
