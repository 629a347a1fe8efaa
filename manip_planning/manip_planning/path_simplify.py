"""Shortening and smoothing of a collision-free joint-space polyline, every change re-checked (numba).

1. Vertex reduction: from each kept waypoint, jump to the farthest later waypoint reachable by a free edge.
2. Random shortcuts (Geraerts & Overmars 2007): two random points on the path (on different segments) are
   joined when the straight edge between them is free; the part between them is dropped.
3. Corner cutting (Chaikin): each inner corner is replaced by the points at 1/4 and 3/4 of its two edges
   when the new edges are free, for a few rounds, then vertex reduction again.
Edges are checked at ``resolution`` (rad). The result starts exactly at the start and ends exactly at the goal.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .collision_kernels import edge_free

_JIT = dict(cache=True, nogil=True, error_model="numpy")


@njit(**_JIT)
def _seg_len(P, i, j):
    s = 0.0
    for k in range(P.shape[1]):
        s += (P[j, k] - P[i, k]) ** 2
    return math.sqrt(s)


@njit(**_JIT)
def path_length(P):
    """Sum of the Euclidean joint-space lengths of the segments (rad)."""
    s = 0.0
    for i in range(P.shape[0] - 1):
        s += _seg_len(P, i, i + 1)
    return s


@njit(**_JIT)
def reduce_vertices(ca, P, resolution):
    """Greedy farthest-visible waypoint skipping; returns a new (K, dof) path."""
    n = P.shape[0]
    keep = np.zeros(n, dtype=np.int64)
    scratch = np.empty(P.shape[1])
    m = 0
    keep[m] = 0
    m += 1
    i = 0
    while i < n - 1:
        j = n - 1
        while j > i + 1:
            if edge_free(ca, P[i], P[j], resolution, scratch):
                break
            j -= 1
        keep[m] = j
        m += 1
        i = j
    out = np.empty((m, P.shape[1]))
    for k in range(m):
        out[k] = P[keep[k]]
    return out


@njit(**_JIT)
def shortcut(ca, P, resolution, attempts, max_failures):
    """Random shortcuts between points on different segments; stops after attempts or max_failures in a
    row. Uses numba's random stream (seed it with rrt_connect._seed)."""
    dof = P.shape[1]
    cap = P.shape[0] + 2 * attempts + 2
    Q = np.empty((cap, dof))
    n = P.shape[0]
    Q[:n] = P
    a = np.empty(dof)
    b = np.empty(dof)
    scratch = np.empty(dof)
    fails = 0
    for _ in range(attempts):
        if n < 3 or fails >= max_failures:
            break
        i = np.random.randint(0, n - 1)
        j = np.random.randint(0, n - 1)
        if i == j:
            fails += 1
            continue
        if i > j:
            i, j = j, i
        ta = np.random.random()
        tb = np.random.random()
        for k in range(dof):
            a[k] = Q[i, k] + ta * (Q[i + 1, k] - Q[i, k])
            b[k] = Q[j, k] + tb * (Q[j + 1, k] - Q[j, k])
        if not edge_free(ca, a, b, resolution, scratch):
            fails += 1
            continue
        fails = 0
        # new path: Q[0..i], a, b, Q[j+1..n-1]  (a, b dropped when they coincide with the ends)
        tail = Q[j + 1:n].copy()
        m = i + 1
        Q[m] = a
        m += 1
        Q[m] = b
        m += 1
        Q[m:m + tail.shape[0]] = tail
        n = m + tail.shape[0]
    return Q[:n].copy()


@njit(**_JIT)
def cut_corners(ca, P, resolution, rounds):
    """Chaikin corner cutting with a re-check: a corner is cut only when its three new edges are free."""
    dof = P.shape[1]
    scratch = np.empty(dof)
    for _ in range(rounds):
        n = P.shape[0]
        if n < 3:
            return P
        out = np.empty((2 * n, dof))
        out[0] = P[0]
        m = 1
        prev = P[0].copy()
        changed = False
        for i in range(1, n - 1):
            u = 0.75 * P[i] + 0.25 * P[i - 1]
            v = 0.75 * P[i] + 0.25 * P[i + 1]
            if (edge_free(ca, prev, u, resolution, scratch) and edge_free(ca, u, v, resolution, scratch)
                    and edge_free(ca, v, P[i + 1], resolution, scratch)):
                out[m] = u
                out[m + 1] = v
                m += 2
                prev = v
                changed = True
            else:
                out[m] = P[i]
                m += 1
                prev = P[i].copy()
        out[m] = P[n - 1]
        m += 1
        P = out[:m].copy()
        if not changed:
            break
    return P


@njit(**_JIT)
def simplify_kernel(ca, P, resolution, attempts, max_failures, corner_rounds):
    P = reduce_vertices(ca, P, resolution)
    if P.shape[0] > 2:
        P = shortcut(ca, P, resolution, attempts, max_failures)
        P = reduce_vertices(ca, P, resolution)
    if corner_rounds > 0 and P.shape[0] > 2:
        P = cut_corners(ca, P, resolution, corner_rounds)
    return P


def simplify(checker, path, resolution=1.0 / 32.0, attempts=20, max_failures=5, corner_rounds=0):
    """A shorter free path with the same ends (see module doc); path (N, dof) rad, a free polyline."""
    P = np.ascontiguousarray(path, dtype=np.float64)
    if len(P) <= 2:
        return P.copy()
    return simplify_kernel(checker.ca, P, float(resolution), int(attempts), int(max_failures), int(corner_rounds))
