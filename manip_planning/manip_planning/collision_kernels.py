"""numba CPU kernels: forward kinematics of the robot's collision spheres, configuration and edge checks.

Everything a kernel needs travels in one tuple ``ca`` (see CollisionChecker), in this order:
  0 mf, 1 mi, 2 ws  manip_core's packed chain and a scratch workspace (manip_core._kernels layout)
  3 grp_body (G,)   body index of each collision group (a link, or the attached object); -1: fixed to the base
  4 grp_start (G+1,) the group's spheres are sph_local[grp_start[g]:grp_start[g + 1]]
  5 grp_bound (G, 4) bounding sphere [x, y, z, r] of the group in its body frame (m)
  6 grp_env (G,)    1 when the group is checked against obstacles
  7 sph_local (S, 4) spheres [x, y, z, r] in their body frame (m)
  8 obs (O, 23)     obstacles packed by shapes.pack (planning frame)
  9 sph_w (S, 4), 10 bnd_w (G, 4), 11 done (G,)   scratch: world spheres, world bounds, "spheres placed"
  12 pairs (P, 2)   group pairs checked for self-collision
A configuration is free when no sphere of an env group touches an obstacle (signed distance <= 0) and no
sphere of one group of a pair touches one of the other. Checks go bounding sphere first (the group's, then
the obstacle's bounding radius) and stop at the first collision. Edges are checked at configurations at most
``resolution`` apart (Euclidean norm in joint space, rad), in bisection order (coarse first) so that a
colliding edge is usually rejected after a few checks.
"""
import math

import numpy as np
from numba import njit

from manip_core._kernels import abs_transforms, rel_transforms, to_phys
from manip_core._layout import W_PABS, W_RABS, WS_STRIDE

from .shapes import aabb_misses, sdf_row

_JIT = dict(cache=True, nogil=True, error_model="numpy")


@njit(inline="always", **_JIT)
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


@njit(**_JIT)
def set_configuration(ca, q):
    """Body poses at joint values q, group bounds placed, spheres marked as not yet placed."""
    mf, mi, ws, grp_body, grp_bound = ca[0], ca[1], ca[2], ca[3], ca[5]
    bnd_w, done = ca[10], ca[11]
    nb = mi[0]
    qp = ws[nb * WS_STRIDE:nb * WS_STRIDE + nb]
    to_phys(mf, mi, q, True, qp)
    rel_transforms(mf, mi, qp, ws)
    abs_transforms(mi, ws)
    for g in range(grp_body.shape[0]):
        _place(ws, grp_body[g], grp_bound, g, bnd_w, g)
        done[g] = 0


@njit(inline="always", **_JIT)
def _spheres_of(ws, grp_body, grp_start, sph_local, sph_w, done, g):
    if done[g] == 0:
        b = grp_body[g]
        for s in range(grp_start[g], grp_start[g + 1]):
            _place(ws, b, sph_local, s, sph_w, s)
        done[g] = 1


# The helpers take arrays, not the tuple ca: passing ca to a function costs a reference count update per
# array (tens of ns each), more than the geometry itself.
@njit(**_JIT)
def env_hit(ws, grp_body, grp_start, grp_env, sph_local, obs, sph_w, bnd_w, done):
    """True when a sphere of an env group touches an obstacle (spheres placed lazily)."""
    for o in range(obs.shape[0]):
        for g in range(grp_body.shape[0]):
            if not grp_env[g]:
                continue
            bx, by, bz, br = bnd_w[g, 0], bnd_w[g, 1], bnd_w[g, 2], bnd_w[g, 3]
            if aabb_misses(obs, o, bx, by, bz, br):
                continue
            if sdf_row(obs, o, bx, by, bz) > br:
                continue
            _spheres_of(ws, grp_body, grp_start, sph_local, sph_w, done, g)
            for s in range(grp_start[g], grp_start[g + 1]):
                x, y, z, r = sph_w[s, 0], sph_w[s, 1], sph_w[s, 2], sph_w[s, 3]
                if not aabb_misses(obs, o, x, y, z, r) and sdf_row(obs, o, x, y, z) <= r:
                    return True
    return False


@njit(**_JIT)
def self_hit(ws, grp_body, grp_start, sph_local, sph_w, bnd_w, done, pairs):
    """True when two spheres of a self-collision pair of groups touch."""
    for k in range(pairs.shape[0]):
        g, h = pairs[k, 0], pairs[k, 1]
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
def config_free(ca, q):
    """True when configuration q (rad) is collision-free (see module doc)."""
    set_configuration(ca, q)
    ws, grp_body, grp_start, grp_env, sph_local = ca[2], ca[3], ca[4], ca[6], ca[7]
    obs, sph_w, bnd_w, done, pairs = ca[8], ca[9], ca[10], ca[11], ca[12]
    if env_hit(ws, grp_body, grp_start, grp_env, sph_local, obs, sph_w, bnd_w, done):
        return False
    return not self_hit(ws, grp_body, grp_start, sph_local, sph_w, bnd_w, done, pairs)


@njit(**_JIT)
def n_steps(a, b, resolution):
    """Number of equal steps (>= 1) so that consecutive configurations are at most resolution apart."""
    s = 0.0
    for i in range(a.shape[0]):
        d = b[i] - a[i]
        s += d * d
    return max(1, int(math.ceil(math.sqrt(s) / resolution - 1e-12)))


@njit(**_JIT)
def edge_free(ca, a, b, resolution, q):
    """True when the straight joint-space segment a -> b is free at steps <= resolution (rad); a itself is
    not checked (it is known to be free), b is. q: (dof,) scratch."""
    n = n_steps(a, b, resolution)
    top = 1
    while top < n:
        top *= 2
    # index n (b) first, then odd multiples of h for h = top/2, top/4, ..., 1
    h = top
    first = True
    while h >= 1:
        i = n if first else h
        step = 2 * h
        while i <= n:
            t = i / n
            for k in range(a.shape[0]):
                q[k] = a[k] + t * (b[k] - a[k])
            if not config_free(ca, q):
                return False
            if first:
                break
            i += step
        if first:
            first = False
            continue
        h //= 2
    return True


@njit(**_JIT)
def path_free(ca, path, resolution):
    """Index of the first colliding segment of path (N, dof) checked at resolution, or -1 (path[0] is
    checked too)."""
    q = np.empty(path.shape[1])
    if not config_free(ca, path[0]):
        return 0
    for i in range(path.shape[0] - 1):
        if not edge_free(ca, path[i], path[i + 1], resolution, q):
            return i
    return -1


@njit(**_JIT)
def edges_free(ca, A, B, resolution, out):
    """out[e] = edge_free(A[e] -> B[e]) for a batch of edges (E, dof)."""
    q = np.empty(A.shape[1])
    for e in range(A.shape[0]):
        out[e] = edge_free(ca, A[e], B[e], resolution, q)


@njit(**_JIT)
def configs_free(ca, Q, out):
    """out[i] = config_free(Q[i]) for Q (N, dof)."""
    for i in range(Q.shape[0]):
        out[i] = config_free(ca, Q[i])


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
