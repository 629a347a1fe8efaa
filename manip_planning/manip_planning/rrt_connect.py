"""Bidirectional RRT-Connect in joint space (Kuffner & LaValle, ICRA 2000), compiled with numba.

Two trees grow from the start and the goal. Each iteration samples a configuration uniformly within the
joint limits, extends one tree towards it by at most ``range_rad`` (Euclidean joint distance, rad; 1 by
default), then greedily connects the other tree to the new node. The tree extended is the smaller one
(``balanced``; on the MotionBenchMaker cage problems this cut the median search time about 3x against
alternating, a goal inside a cage keeps growing its tree until it finds the way out); ``balanced=False``
alternates. Every edge is checked with collision_kernels.edge_free at steps of at most ``resolution_rad``
(default 1/32 rad). The direct edge start -> goal is tried first.

Dynamic domain (Yershova, Jaillet, Simeon & LaValle, ICRA 2005; as VAMP's RRT-Connect: radius 4, alpha
1e-4): once an extension from a node fails, the node only serves samples within ``dynamic_domain_rad`` of it
(shrinking by alpha per failure down to a quarter, growing by alpha per success), so samples that a tree
boxed in by obstacles cannot use cost a nearest-neighbour search, not edge checks (MotionBenchMaker cage
problems, search CPU time: median 7.1 -> 4.4 ms UR5 and 3.5 -> 2.8 ms Panda, p95 23 -> 15 ms and 14 -> 10 ms;
the other scenarios unchanged); 0 turns it off.

The search runs in chunks of iterations so that the time limit (s) is honoured from Python; the random
stream is numba's, seeded with ``seed`` (same seed, same scene: same path).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
from numba import njit

from .collision_kernels import config_free, edge_free

_JIT = dict(cache=True, nogil=True, error_model="numpy")
DEFAULT_RESOLUTION = 1.0 / 32.0
DD_ALPHA = 1e-4          # dynamic domain: radius growth on success, shrink on failure (relative)
DD_MIN_FRACTION = 0.25   # dynamic domain: smallest radius, as a fraction of dynamic_domain_rad


@dataclass
class SearchResult:
    """path: (N, dof) waypoints from start to goal (None when not found); iterations; nodes in both trees;
    time_s: wall time of the search; message: why it failed."""

    path: np.ndarray
    iterations: int
    nodes: int
    time_s: float
    message: str = ""

    @property
    def success(self):
        return self.path is not None


@njit(**_JIT)
def _seed(seed):
    np.random.seed(seed)


@njit(inline="always", **_JIT)
def _nearest(T, n, q):
    best, bi = np.inf, 0
    dof = q.shape[0]
    for i in range(n):
        d = 0.0
        for k in range(dof):
            e = T[i, k] - q[k]
            d += e * e
            if d >= best:
                break
        if d < best:
            best, bi = d, i
    return bi


@njit(inline="always", **_JIT)
def _steer(a, b, range_rad, out):
    """out = a + (b - a) min(1, range / |b - a|); returns True when out reached b."""
    d = 0.0
    for k in range(a.shape[0]):
        d += (b[k] - a[k]) ** 2
    d = math.sqrt(d)
    if d <= range_rad:
        for k in range(a.shape[0]):
            out[k] = b[k]
        return True
    t = range_rad / d
    for k in range(a.shape[0]):
        out[k] = a[k] + t * (b[k] - a[k])
    return False


@njit(**_JIT)
def grow(ca, lo, hi, trees, parents, sizes, range_rad, resolution, n_iter, state, balanced):
    """Run up to n_iter iterations. trees (2, M, dof) (tree 0 rooted at the start, 1 at the goal), parents
    (2, M), sizes (2,), state [iterations done, swap flag, connection node in tree 0, in tree 1].
    Returns 1 when the trees connected, 0 when not yet, -1 when a tree is full."""
    scratch = np.empty((3, lo.shape[0]))
    domain = np.full((2, trees.shape[1]), np.inf)   # no dynamic domain (RRTConnect.solve keeps one)
    return _grow(ca, lo, hi, trees, parents, sizes, range_rad, resolution, n_iter, state, balanced, scratch,
                 domain, 0.0)


@njit(_nrt=False, **_JIT)
def _grow(ca, lo, hi, trees, parents, sizes, range_rad, resolution, n_iter, state, balanced, work, domain, dd_rad):
    """grow without reference counting (no allocation: work (3, dof) is the scratch), so that passing the
    collision tuple ca to an edge check costs nothing per array."""
    dof = lo.shape[0]
    M = trees.shape[1]
    qr, qn, scratch = work[0], work[1], work[2]
    for _ in range(n_iter):
        state[0] += 1
        if balanced:   # extend the smaller tree (a tree trapped in a pocket keeps growing)
            a = 0 if sizes[0] <= sizes[1] else 1
        else:
            a = state[1]
            state[1] = 1 - a
        b = 1 - a
        if sizes[0] >= M - 1 or sizes[1] >= M - 1:
            return -1
        for k in range(dof):
            qr[k] = lo[k] + np.random.random() * (hi[k] - lo[k])
        Ta, Tb = trees[a], trees[b]
        i = _nearest(Ta, sizes[a], qr)
        if dd_rad > 0.0:   # dynamic domain: a node whose extension failed only serves samples near it
            d2 = 0.0
            for k in range(dof):
                d2 += (Ta[i, k] - qr[k]) ** 2
            if d2 > domain[a, i] * domain[a, i]:
                continue
        _steer(Ta[i], qr, range_rad, qn)
        if not edge_free(ca, Ta[i], qn, resolution, scratch):
            if dd_rad > 0.0:
                domain[a, i] = dd_rad if domain[a, i] == np.inf else max(domain[a, i] * (1.0 - DD_ALPHA),
                                                                         DD_MIN_FRACTION * dd_rad)
            continue
        if domain[a, i] < np.inf:
            domain[a, i] *= 1.0 + DD_ALPHA
        na = sizes[a]
        for k in range(dof):
            Ta[na, k] = qn[k]
        parents[a, na] = i
        domain[a, na] = np.inf
        sizes[a] += 1
        # connect tree b to qn
        j = _nearest(Tb, sizes[b], qn)
        while True:
            if sizes[b] >= M - 1:
                return -1
            nb = sizes[b]
            reached = _steer(Tb[j], qn, range_rad, Tb[nb])
            if not edge_free(ca, Tb[j], Tb[nb], resolution, scratch):
                break
            parents[b, nb] = j
            domain[b, nb] = np.inf
            sizes[b] += 1
            j = nb
            if reached:
                state[2 + a] = na
                state[2 + b] = nb
                return 1
    return 0


def _trace(tree, parents, node):
    out = []
    while node >= 0:
        out.append(tree[node])
        node = parents[node]
    return out


class RRTConnect:
    """RRT-Connect over a CollisionChecker (robot_collision.py). range_rad: largest extension step (rad);
    resolution_rad: edge checking step (rad); max_nodes: per tree; balanced: extend the smaller tree;
    dynamic_domain_rad: dynamic-domain radius (rad, joint-space distance; 0: off)."""

    name = "rrt_connect"

    def __init__(self, checker, range_rad=1.0, resolution_rad=DEFAULT_RESOLUTION, max_nodes=20000, chunk=64,
                 balanced=True, dynamic_domain_rad=4.0):
        self.checker = checker
        self.dd_rad = float(dynamic_domain_rad)
        self.balanced = bool(balanced)
        self.range_rad = float(range_rad)
        self.resolution = float(resolution_rad)
        self.max_nodes = int(max_nodes)
        self.chunk = int(chunk)
        lo = np.array(checker.lower, dtype=np.float64)
        hi = np.array(checker.upper, dtype=np.float64)
        # unbounded (continuous) joints are sampled over one turn around zero
        self.lo = np.where(np.isfinite(lo), lo, -math.pi)
        self.hi = np.where(np.isfinite(hi), hi, math.pi)

    def solve(self, start, goal, time_limit_s=1.0, seed=0):
        """SearchResult for start -> goal (both (dof,), rad); the caller checks that both are free."""
        ch = self.checker
        dof = ch.dof
        work = np.empty((3, dof))
        # compiles the kernels on first use (tens of seconds on a loaded machine), outside the time limit
        _grow(ch.ca, self.lo, self.hi, np.zeros((2, 2, dof)), np.zeros((2, 2), dtype=np.int64),
              np.ones(2, dtype=np.int64), self.range_rad, self.resolution, 0, np.zeros(4, dtype=np.int64),
              self.balanced, work, np.full((2, 2), np.inf), self.dd_rad)
        t0 = time.perf_counter()
        q0 = np.ascontiguousarray(start, dtype=np.float64).reshape(dof)
        q1 = np.ascontiguousarray(goal, dtype=np.float64).reshape(dof)
        if edge_free(ch.ca, q0, q1, self.resolution, np.empty(dof)):
            return SearchResult(np.array([q0, q1]), 0, 2, time.perf_counter() - t0)
        _seed(int(seed) & 0x7FFFFFFF)
        M = self.max_nodes
        trees = np.empty((2, M, dof))
        parents = np.empty((2, M), dtype=np.int64)   # set as nodes are added; the roots have none
        parents[:, 0] = -1
        trees[0, 0], trees[1, 0] = q0, q1
        sizes = np.array([1, 1], dtype=np.int64)
        state = np.zeros(4, dtype=np.int64)
        domain = np.empty((2, M))
        domain[:, 0] = np.inf
        deadline = t0 + float(time_limit_s)
        while True:
            st = _grow(ch.ca, self.lo, self.hi, trees, parents, sizes, self.range_rad, self.resolution,
                       self.chunk, state, self.balanced, work, domain, self.dd_rad)
            if st == 1:
                a = _trace(trees[0], parents[0], state[2])[::-1]
                b = _trace(trees[1], parents[1], state[3])
                path = np.array(a + b[1:])  # the connection node is in both
                return SearchResult(path, int(state[0]), int(sizes.sum()), time.perf_counter() - t0)
            if st == -1:
                return SearchResult(None, int(state[0]), int(sizes.sum()), time.perf_counter() - t0,
                                    f"the trees reached {M} nodes without connecting")
            if time.perf_counter() > deadline:
                return SearchResult(None, int(state[0]), int(sizes.sum()), time.perf_counter() - t0,
                                    f"no path within {time_limit_s:g} s ({int(state[0])} iterations, "
                                    f"{int(sizes.sum())} nodes)")
