"""numba CPU kernels: forward kinematics of the robot's collision spheres, configuration and edge checks.

Everything a kernel needs travels in one tuple ``ca`` (see CollisionChecker), in this order:
  0 mf, 1 mi, 2 ws  manip_core's packed chain and a scratch workspace (manip_core._kernels layout)
  3 grp_body (G,)   body index of each collision group (a link, or the attached object); -1: fixed to the base
  4 grp_start (G+1,) the group's spheres are sph_local[grp_start[g]:grp_start[g + 1]]
  5 grp_bound (G, 4) bounding sphere [x, y, z, r] of the group in its body frame (m)
  6 grp_env (G,)    1 when the group is checked against obstacles
  7 sph_local (S, 4) spheres [x, y, z, r] in their body frame (m)
  8 obs (O, 23)     obstacles packed by shapes.pack (planning frame)
  9 sph_w (S, 4), 10 bnd_w (G, 4), 11 done (G,)   scratch: world spheres, world group bounds, placed flags
  12 pairs (P, 2)   group pairs checked for self-collision
  13 sl_body (B,)   the bodies that carry groups ("slots"), the most distal first; -1: the fixed base
  14 sl_gstart (B+1,), 15 sl_groups (G,)   the groups of slot s are sl_groups[sl_gstart[s]:sl_gstart[s + 1]]
  16 sl_bound (B, 4) bounding sphere of all the slot's groups in its body frame (m)
  17 sl_env (B,)    1 when the slot moves and has a group checked against obstacles
  18 sl_w (B, 4), 19 sl_done (B,)   scratch: world slot bounds; bit 1 slot bound placed, bit 2 group bounds
  20 bpairs (K, 2)  slot pairs with at least one group pair; 21 bp_start (K+1,), 22 bp_pairs (P,): the
                    group pairs (rows of pairs) of slot pair k are bp_pairs[bp_start[k]:bp_start[k + 1]]
  23 state (4,)     [1 when a fixed group touches an obstacle (set per scene), last colliding env slot,
                    its obstacle, last colliding slot pair] (-1: none)
A configuration is free when no sphere of an env group touches an obstacle (signed distance <= 0) and no
sphere of one group of a pair touches one of the other. Checks are hierarchical: a slot's bounding sphere
against an obstacle's axis-aligned box and exact distance, then each group's, then the spheres (placed on
demand); the self-collision pairs likewise by slot pair. The slot / obstacle and slot pair that collided last
are tried first (consecutive configurations of a search are close), and the first collision ends the check.
The fixed groups (the base) are checked against the scene once, when the checker is made. Every top-level
kernel unpacks ``ca`` once and runs the per-configuration check inlined (a call that passes arrays costs a
reference count update per array, more than the geometry itself). Edges are checked at configurations at
most ``resolution`` apart (Euclidean norm in joint space, rad), in bisection order (coarse first) so that a
colliding edge is usually rejected after a few checks.

Forward kinematics repeats manip_core._kernels.to_phys / rel_transforms / abs_transforms operation for
operation (fused into one pass), so the world poses are bit-identical to manip_core's and to the cuda kernels'.
"""
import math

import numpy as np
from numba import njit

from manip_core._layout import (AXIS_GENERAL, BODY_STRIDE, JOINT_PRISMATIC, MI_HEADER, MI_STRIDE, O_AX, O_P,
                                O_R, W_PABS, W_RABS, WS_STRIDE)

from .shapes import aabb_misses, sdf_row

_JIT = dict(cache=True, nogil=True, error_model="numpy", _nrt=False)
_INLINE = dict(inline="always", **_JIT)


@njit(**_INLINE)
def _fk(mf, mi, q, ws):
    """Absolute body poses (ws[W_RABS], ws[W_PABS] of each body) at actuated joint values q."""
    nb, dof = mi[0], mi[1]
    qo = nb * WS_STRIDE
    if mi[3] == 0:
        for i in range(nb):
            ws[qo + i] = q[i]
    else:
        o = nb * BODY_STRIDE + 12
        for i in range(nb):
            s = mf[o + nb * dof + i]
            for j in range(dof):
                s += mf[o + i * dof + j] * q[j]
            ws[qo + i] = s
    for i in range(nb):
        b = i * BODY_STRIDE
        kind = mi[MI_HEADER + i * MI_STRIDE + 2]
        jt = mi[MI_HEADER + i * MI_STRIDE + 1]
        qi = ws[qo + i]
        x00, x01, x02 = mf[b + O_R], mf[b + O_R + 1], mf[b + O_R + 2]
        x10, x11, x12 = mf[b + O_R + 3], mf[b + O_R + 4], mf[b + O_R + 5]
        x20, x21, x22 = mf[b + O_R + 6], mf[b + O_R + 7], mf[b + O_R + 8]
        p0, p1, p2 = mf[b + O_P], mf[b + O_P + 1], mf[b + O_P + 2]
        if jt == JOINT_PRISMATIC:
            r00, r01, r02, r10, r11, r12, r20, r21, r22 = x00, x01, x02, x10, x11, x12, x20, x21, x22
            ax0, ax1, ax2 = mf[b + O_AX], mf[b + O_AX + 1], mf[b + O_AX + 2]
            s = 0.0
            s += x00 * ax0
            s += x01 * ax1
            s += x02 * ax2
            p0 = p0 + s * qi
            s = 0.0
            s += x10 * ax0
            s += x11 * ax1
            s += x12 * ax2
            p1 = p1 + s * qi
            s = 0.0
            s += x20 * ax0
            s += x21 * ax1
            s += x22 * ax2
            p2 = p2 + s * qi
        else:
            c_, s_ = np.cos(qi), np.sin(qi)
            if kind == AXIS_GENERAL:
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
                r00 = x00 * j00 + x01 * j10 + x02 * j20
                r01 = x00 * j01 + x01 * j11 + x02 * j21
                r02 = x00 * j02 + x01 * j12 + x02 * j22
                r10 = x10 * j00 + x11 * j10 + x12 * j20
                r11 = x10 * j01 + x11 * j11 + x12 * j21
                r12 = x10 * j02 + x11 * j12 + x12 * j22
                r20 = x20 * j00 + x21 * j10 + x22 * j20
                r21 = x20 * j01 + x21 * j11 + x22 * j21
                r22 = x20 * j02 + x21 * j12 + x22 * j22
            elif kind == 0:   # about x: column 0 stays, columns 1, 2 mix
                r00, r10, r20 = x00, x10, x20
                r01, r11, r21 = c_ * x01 + s_ * x02, c_ * x11 + s_ * x12, c_ * x21 + s_ * x22
                r02, r12, r22 = -s_ * x01 + c_ * x02, -s_ * x11 + c_ * x12, -s_ * x21 + c_ * x22
            elif kind == 1:   # about y: column 1 stays, columns 2, 0 mix
                r01, r11, r21 = x01, x11, x21
                r02, r12, r22 = c_ * x02 + s_ * x00, c_ * x12 + s_ * x10, c_ * x22 + s_ * x20
                r00, r10, r20 = -s_ * x02 + c_ * x00, -s_ * x12 + c_ * x10, -s_ * x22 + c_ * x20
            else:             # about z: column 2 stays, columns 0, 1 mix
                r02, r12, r22 = x02, x12, x22
                r00, r10, r20 = c_ * x00 + s_ * x01, c_ * x10 + s_ * x11, c_ * x20 + s_ * x21
                r01, r11, r21 = -s_ * x00 + c_ * x01, -s_ * x10 + c_ * x11, -s_ * x20 + c_ * x21
        w = i * WS_STRIDE + W_RABS
        wpos = i * WS_STRIDE + W_PABS
        par = mi[MI_HEADER + i * MI_STRIDE]
        if par < 0:
            ws[w], ws[w + 1], ws[w + 2] = r00, r01, r02
            ws[w + 3], ws[w + 4], ws[w + 5] = r10, r11, r12
            ws[w + 6], ws[w + 7], ws[w + 8] = r20, r21, r22
            ws[wpos], ws[wpos + 1], ws[wpos + 2] = p0, p1, p2
            continue
        v = par * WS_STRIDE + W_RABS
        vp = par * WS_STRIDE + W_PABS
        for r in range(3):
            a0, a1, a2 = ws[v + 3 * r], ws[v + 3 * r + 1], ws[v + 3 * r + 2]
            ws[w + 3 * r] = a0 * r00 + a1 * r10 + a2 * r20
            ws[w + 3 * r + 1] = a0 * r01 + a1 * r11 + a2 * r21
            ws[w + 3 * r + 2] = a0 * r02 + a1 * r12 + a2 * r22
            ws[wpos + r] = ws[vp + r] + a0 * p0 + a1 * p1 + a2 * p2


@njit(**_INLINE)
def _place(ws, body, src, k, dst, m):
    """dst[m, :3] = T_abs[body] src[k, :3], dst[m, 3] = src[k, 3]; body -1 is the base frame."""
    x, y, z = src[k, 0], src[k, 1], src[k, 2]
    if body < 0:
        dst[m, 0], dst[m, 1], dst[m, 2] = x, y, z
    else:
        w = body * WS_STRIDE
        r = w + W_RABS
        p = w + W_PABS
        dst[m, 0] = ws[p] + ws[r] * x + ws[r + 1] * y + ws[r + 2] * z
        dst[m, 1] = ws[p + 1] + ws[r + 3] * x + ws[r + 4] * y + ws[r + 5] * z
        dst[m, 2] = ws[p + 2] + ws[r + 6] * x + ws[r + 7] * y + ws[r + 8] * z
    dst[m, 3] = src[k, 3]


@njit(**_INLINE)
def _reset(done, sl_done):
    for g in range(done.shape[0]):
        done[g] = 0
    for s in range(sl_done.shape[0]):
        sl_done[s] = 0


@njit(**_JIT)
def set_configuration(ca, q):
    """Body poses at joint values q; nothing placed yet (spheres and bounds are placed on demand)."""
    _fk(ca[0], ca[1], q, ca[2])
    _reset(ca[11], ca[19])


@njit(**_INLINE)
def _spheres_of(ws, grp_body, grp_start, sph_local, sph_w, done, g):
    if done[g] == 0:
        b = grp_body[g]
        for s in range(grp_start[g], grp_start[g + 1]):
            _place(ws, b, sph_local, s, sph_w, s)
        done[g] = 1


@njit(**_INLINE)
def _slot_bound(ws, sl_body, sl_bound, sl_w, sl_done, s):
    if sl_done[s] & 1 == 0:
        _place(ws, sl_body[s], sl_bound, s, sl_w, s)
        sl_done[s] |= 1


@njit(**_INLINE)
def _group_bounds(ws, grp_body, grp_bound, bnd_w, sl_gstart, sl_groups, sl_done, s):
    if sl_done[s] & 2 == 0:
        for k in range(sl_gstart[s], sl_gstart[s + 1]):
            g = sl_groups[k]
            _place(ws, grp_body[g], grp_bound, g, bnd_w, g)
        sl_done[s] |= 2


@njit(**_INLINE)
def _slot_obstacle_hit(ws, grp_body, grp_start, grp_bound, grp_env, sph_local, obs, sph_w, bnd_w, done, sl_body,
                       sl_gstart, sl_groups, sl_bound, sl_w, sl_done, s, o):
    """True when a sphere of an env group of slot s touches obstacle o."""
    _slot_bound(ws, sl_body, sl_bound, sl_w, sl_done, s)
    bx, by, bz, br = sl_w[s, 0], sl_w[s, 1], sl_w[s, 2], sl_w[s, 3]
    if aabb_misses(obs, o, bx, by, bz, br) or sdf_row(obs, o, bx, by, bz) > br:
        return False
    g0, g1 = sl_gstart[s], sl_gstart[s + 1]
    single = g1 - g0 == 1
    if not single:
        _group_bounds(ws, grp_body, grp_bound, bnd_w, sl_gstart, sl_groups, sl_done, s)
    for k in range(g0, g1):
        g = sl_groups[k]
        if not grp_env[g]:
            continue
        if not single:
            bx, by, bz, br = bnd_w[g, 0], bnd_w[g, 1], bnd_w[g, 2], bnd_w[g, 3]
            if aabb_misses(obs, o, bx, by, bz, br) or sdf_row(obs, o, bx, by, bz) > br:
                continue
        _spheres_of(ws, grp_body, grp_start, sph_local, sph_w, done, g)
        for t in range(grp_start[g], grp_start[g + 1]):
            x, y, z, r = sph_w[t, 0], sph_w[t, 1], sph_w[t, 2], sph_w[t, 3]
            if not aabb_misses(obs, o, x, y, z, r) and sdf_row(obs, o, x, y, z) <= r:
                return True
    return False


@njit(**_INLINE)
def _pair_hit(ws, grp_body, grp_start, grp_bound, sph_local, sph_w, bnd_w, done, pairs, sl_body, sl_gstart,
              sl_groups, sl_bound, sl_w, sl_done, bpairs, bp_start, bp_pairs, k):
    """True when two spheres of a group pair of slot pair k touch."""
    a, b = bpairs[k, 0], bpairs[k, 1]
    _slot_bound(ws, sl_body, sl_bound, sl_w, sl_done, a)
    _slot_bound(ws, sl_body, sl_bound, sl_w, sl_done, b)
    dx, dy, dz = sl_w[a, 0] - sl_w[b, 0], sl_w[a, 1] - sl_w[b, 1], sl_w[a, 2] - sl_w[b, 2]
    reach = sl_w[a, 3] + sl_w[b, 3]
    if dx * dx + dy * dy + dz * dz > reach * reach:
        return False
    _group_bounds(ws, grp_body, grp_bound, bnd_w, sl_gstart, sl_groups, sl_done, a)
    _group_bounds(ws, grp_body, grp_bound, bnd_w, sl_gstart, sl_groups, sl_done, b)
    for m in range(bp_start[k], bp_start[k + 1]):
        p = bp_pairs[m]
        g, h = pairs[p, 0], pairs[p, 1]
        dx, dy, dz = bnd_w[g, 0] - bnd_w[h, 0], bnd_w[g, 1] - bnd_w[h, 1], bnd_w[g, 2] - bnd_w[h, 2]
        reach = bnd_w[g, 3] + bnd_w[h, 3]
        if dx * dx + dy * dy + dz * dz > reach * reach:
            continue
        _spheres_of(ws, grp_body, grp_start, sph_local, sph_w, done, g)
        _spheres_of(ws, grp_body, grp_start, sph_local, sph_w, done, h)
        for s in range(grp_start[g], grp_start[g + 1]):
            px, py, pz, pr = sph_w[s, 0], sph_w[s, 1], sph_w[s, 2], sph_w[s, 3]
            ex, ey, ez = px - bnd_w[h, 0], py - bnd_w[h, 1], pz - bnd_w[h, 2]
            rr = pr + bnd_w[h, 3]
            if ex * ex + ey * ey + ez * ez > rr * rr:
                continue  # this sphere misses the other group's bounding sphere
            for t in range(grp_start[h], grp_start[h + 1]):
                ex, ey, ez = px - sph_w[t, 0], py - sph_w[t, 1], pz - sph_w[t, 2]
                rr = pr + sph_w[t, 3]
                if ex * ex + ey * ey + ez * ez <= rr * rr:
                    return True
    return False


@njit(**_JIT)
def _free(q, mf, mi, ws, grp_body, grp_start, grp_bound, grp_env, sph_local, obs, sph_w, bnd_w, done, pairs,
          sl_body, sl_gstart, sl_groups, sl_bound, sl_env, sl_w, sl_done, bpairs, bp_start, bp_pairs, state):
    """True when configuration q (rad) is collision-free (see module doc)."""
    if state[0]:
        return False
    _fk(mf, mi, q, ws)
    _reset(done, sl_done)
    n_obs = obs.shape[0]
    ls, lo = state[1], state[2]
    # the slot / obstacle that collided last first (s = -1), then all of them
    for si in range(-1, sl_env.shape[0]):
        for o in range(n_obs):
            if si < 0:
                if ls < 0 or lo >= n_obs:
                    break
                s, o = ls, lo
            else:
                s = si
                if not sl_env[s]:
                    break
                if s == ls and o == lo:
                    continue
            if _slot_obstacle_hit(ws, grp_body, grp_start, grp_bound, grp_env, sph_local, obs, sph_w, bnd_w, done,
                                  sl_body, sl_gstart, sl_groups, sl_bound, sl_w, sl_done, s, o):
                state[1], state[2] = s, o
                return False
            if si < 0:
                break
    lp = state[3]
    n_bp = bpairs.shape[0]
    for ki in range(-1, n_bp):
        if ki < 0:
            if lp < 0 or lp >= n_bp:
                continue
            k = lp
        else:
            k = ki
            if k == lp:
                continue
        if _pair_hit(ws, grp_body, grp_start, grp_bound, sph_local, sph_w, bnd_w, done, pairs, sl_body, sl_gstart,
                     sl_groups, sl_bound, sl_w, sl_done, bpairs, bp_start, bp_pairs, k):
            state[3] = k
            return False
    return True


@njit(**_JIT)
def fixed_env_hit(ca):
    """1 when a sphere of a fixed env group (the base) touches an obstacle: every configuration collides."""
    ws, grp_body, grp_start, grp_env, sph_local, obs = ca[2], ca[3], ca[4], ca[6], ca[7], ca[8]
    for g in range(grp_body.shape[0]):
        if grp_body[g] >= 0 or not grp_env[g]:
            continue
        for t in range(grp_start[g], grp_start[g + 1]):
            x, y, z, r = sph_local[t, 0], sph_local[t, 1], sph_local[t, 2], sph_local[t, 3]
            for o in range(obs.shape[0]):
                if not aabb_misses(obs, o, x, y, z, r) and sdf_row(obs, o, x, y, z) <= r:
                    return 1
    return 0


@njit(**_JIT)
def config_free(ca, q):
    """True when configuration q (rad) is collision-free (see module doc)."""
    (mf, mi, ws, grp_body, grp_start, grp_bound, grp_env, sph_local, obs, sph_w, bnd_w, done, pairs, sl_body,
     sl_gstart, sl_groups, sl_bound, sl_env, sl_w, sl_done, bpairs, bp_start, bp_pairs, state) = ca
    return _free(q, mf, mi, ws, grp_body, grp_start, grp_bound, grp_env, sph_local, obs, sph_w, bnd_w, done,
                 pairs, sl_body, sl_gstart, sl_groups, sl_bound, sl_env, sl_w, sl_done, bpairs, bp_start, bp_pairs, state)


@njit(**_INLINE)
def n_steps(a, b, resolution):
    """Number of equal steps (>= 1) so that consecutive configurations are at most resolution apart."""
    s = 0.0
    for i in range(a.shape[0]):
        d = b[i] - a[i]
        s += d * d
    return max(1, int(math.ceil(math.sqrt(s) / resolution - 1e-12)))


@njit(**_INLINE)
def _edge_free(ca, a, b, resolution, q):
    (mf, mi, ws, grp_body, grp_start, grp_bound, grp_env, sph_local, obs, sph_w, bnd_w, done, pairs, sl_body,
     sl_gstart, sl_groups, sl_bound, sl_env, sl_w, sl_done, bpairs, bp_start, bp_pairs, state) = ca
    n = n_steps(a, b, resolution)
    top = 1
    while top < n:
        top *= 2
    # index n (b) first, then odd multiples of h for h = top/2, top/4, ..., 1
    for k in range(a.shape[0]):
        q[k] = b[k]
    if not _free(q, mf, mi, ws, grp_body, grp_start, grp_bound, grp_env, sph_local, obs, sph_w, bnd_w, done,
                 pairs, sl_body, sl_gstart, sl_groups, sl_bound, sl_env, sl_w, sl_done, bpairs, bp_start, bp_pairs, state):
        return False
    h = top // 2
    while h >= 1:
        i = h
        step = 2 * h
        while i < n:
            t = i / n
            for k in range(a.shape[0]):
                q[k] = a[k] + t * (b[k] - a[k])
            if not _free(q, mf, mi, ws, grp_body, grp_start, grp_bound, grp_env, sph_local, obs, sph_w, bnd_w, done,
                         pairs, sl_body, sl_gstart, sl_groups, sl_bound, sl_env, sl_w, sl_done, bpairs, bp_start, bp_pairs, state):
                return False
            i += step
        h //= 2
    return True


@njit(**_JIT)
def edge_free(ca, a, b, resolution, q):
    """True when the straight joint-space segment a -> b is free at steps <= resolution (rad); a itself is
    not checked (it is known to be free), b is. q: (dof,) scratch."""
    return _edge_free(ca, a, b, resolution, q)


@njit(**_JIT)
def path_free(ca, path, resolution, q):
    """Index of the first colliding segment of path (N, dof) checked at resolution, or -1 (path[0] is
    checked too). q: (dof,) scratch."""
    (mf, mi, ws, grp_body, grp_start, grp_bound, grp_env, sph_local, obs, sph_w, bnd_w, done, pairs, sl_body,
     sl_gstart, sl_groups, sl_bound, sl_env, sl_w, sl_done, bpairs, bp_start, bp_pairs, state) = ca
    if not _free(path[0], mf, mi, ws, grp_body, grp_start, grp_bound, grp_env, sph_local, obs, sph_w, bnd_w, done,
                 pairs, sl_body, sl_gstart, sl_groups, sl_bound, sl_env, sl_w, sl_done, bpairs, bp_start, bp_pairs, state):
        return 0
    for i in range(path.shape[0] - 1):
        if not _edge_free(ca, path[i], path[i + 1], resolution, q):
            return i
    return -1


@njit(**_JIT)
def edges_free(ca, A, B, resolution, out, q):
    """out[e] = edge_free(A[e] -> B[e]) for a batch of edges (E, dof); q: (dof,) scratch."""
    for e in range(A.shape[0]):
        out[e] = _edge_free(ca, A[e], B[e], resolution, q)


@njit(**_JIT)
def configs_free(ca, Q, out):
    """out[i] = config_free(Q[i]) for Q (N, dof)."""
    (mf, mi, ws, grp_body, grp_start, grp_bound, grp_env, sph_local, obs, sph_w, bnd_w, done, pairs, sl_body,
     sl_gstart, sl_groups, sl_bound, sl_env, sl_w, sl_done, bpairs, bp_start, bp_pairs, state) = ca
    for i in range(Q.shape[0]):
        out[i] = _free(Q[i], mf, mi, ws, grp_body, grp_start, grp_bound, grp_env, sph_local, obs, sph_w, bnd_w, done,
                     pairs, sl_body, sl_gstart, sl_groups, sl_bound, sl_env, sl_w, sl_done, bpairs, bp_start, bp_pairs, state)


@njit(**_JIT)
def min_distances(ca, q, out):
    """out[0]: smallest signed distance (m) of an env group's sphere to an obstacle (inf: none);
    out[1]: smallest signed distance between spheres of a self-collision pair (inf: no pair)."""
    set_configuration(ca, q)
    ws, grp_body, grp_start, grp_env, sph_local = ca[2], ca[3], ca[4], ca[6], ca[7]
    obs, sph_w, done, pairs = ca[8], ca[9], ca[11], ca[12]
    d_env = np.inf
    for g in range(grp_env.shape[0]):
        _spheres_of(ws, grp_body, grp_start, sph_local, sph_w, done, g)
        if not grp_env[g]:
            continue
        for s in range(grp_start[g], grp_start[g + 1]):
            for o in range(obs.shape[0]):
                d = sdf_row(obs, o, sph_w[s, 0], sph_w[s, 1], sph_w[s, 2]) - sph_w[s, 3]
                if d < d_env:
                    d_env = d
    d_self = np.inf
    for k in range(pairs.shape[0]):
        g, h = pairs[k, 0], pairs[k, 1]
        for s in range(grp_start[g], grp_start[g + 1]):
            for t in range(grp_start[h], grp_start[h + 1]):
                d = (math.sqrt((sph_w[s, 0] - sph_w[t, 0]) ** 2 + (sph_w[s, 1] - sph_w[t, 1]) ** 2
                               + (sph_w[s, 2] - sph_w[t, 2]) ** 2) - sph_w[s, 3] - sph_w[t, 3])
                if d < d_self:
                    d_self = d
    out[0] = d_env
    out[1] = d_self
