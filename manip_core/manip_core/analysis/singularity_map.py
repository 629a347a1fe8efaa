"""Singularity map: the minimum singular value of the tip Jacobian over a plane of the workspace, refined only
where it matters.

At each grid node (a tip position p on the plane, with a fixed tool orientation for 6-DOF arms) the arm's
inverse kinematics gives every configuration that reaches it; the node's value is the best (largest) minimum
singular value over those configurations (``part`` as in manipulability: "full" for arms that are given an
orientation, "position" for position-only arms), NaN where p is out of reach. Nodes:

1. level 0: a coarse grid of ``cells`` x ``cells`` cells; IK by the closed form where the arm has one
   (UR-type 6R, yaw-pitch-pitch, planar 2R: AnalyticIK.solve_batch, numba, every branch), otherwise
   Levenberg-Marquardt from ``random_seeds`` random starts per node (batched, numba);
2. levels 1 .. ``levels``: only the cells *near the threshold* are split in 2 x 2 (a cell is near when the
   threshold band [threshold (1 - band), threshold (1 + band)] overlaps the range of its corner values, or when
   some corners are reachable and others not: the workspace boundary); the new nodes are solved by the closed
   form again where the arm has one, otherwise (or with ``continuation=True``) by Levenberg-Marquardt started
   from every solution of the parent cell's corners (continuation, batched in numba), which follows each IK
   branch from the coarse grid.

This is the refinement scheme of cell-based singularity maps (a coarse map, then subdivision of the cells
where the measure crosses the threshold, step by step); each step's time and number of refined cells are in
``steps``. ``refine_all_levels=False`` with ``levels=0`` and a fine ``cells`` gives the plain full grid.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
from numba import njit, prange

from .. import _ik_kernel
from ..errors import InputError
from .manipulability import PARTS

PLANES = {"xy": (0, 1), "xz": (0, 2), "yz": (1, 2)}


@njit(cache=True, parallel=True, error_model="numpy")
def _lm_batch(mf, mi, targets, seeds, owner, lower, upper, tol_pos, tol_rot, position_only, max_iters, Q, ok):
    """Levenberg-Marquardt without restarts from seeds[k] towards targets[owner[k]], parallel over k."""
    for k in prange(seeds.shape[0]):
        info = np.zeros(5)
        st = _ik_kernel.solve(mf, mi, targets[owner[k]], seeds[k], lower, upper, tol_pos, tol_rot, position_only,
                              max_iters, 0, 0, 1e-12, Q[k], info)
        ok[k] = st == 0 and info[0] == 1.0


@dataclass
class SingularityMap:
    """A refined map. Node (i, j) sits at origin + u_i axis_u + v_j axis_v (m, base frame) with
    u_i = u_range[0] + i du, v_j = v_range[0] + j dv on the finest grid of (cells 2^levels + 1)^2 nodes."""

    robot: str
    part: str
    threshold: float
    origin: np.ndarray
    axis_u: np.ndarray
    axis_v: np.ndarray
    u_range: tuple
    v_range: tuple
    cells: int
    levels: int
    orientation: np.ndarray | None       # (3, 3) tool orientation of the targets, None for position only
    node_values: np.ndarray = field(repr=False)   # (M, M): best min singular value, NaN unreachable/unknown
    node_computed: np.ndarray = field(repr=False)  # (M, M) bool
    cell_values: np.ndarray = field(repr=False)   # (M-1, M-1): min over the leaf cell's corners
    cell_level: np.ndarray = field(repr=False)    # (M-1, M-1): refinement level of the leaf cell covering it
    steps: list = field(default_factory=list)
    time_s: float = 0.0
    ik: str = ""

    @property
    def points_evaluated(self):
        return int(self.node_computed.sum())

    def node_points(self, i, j):
        """Base-frame points (m) of nodes (i, j) (arrays)."""
        M = self.node_values.shape[0]
        u = self.u_range[0] + np.asarray(i) * (self.u_range[1] - self.u_range[0]) / (M - 1)
        v = self.v_range[0] + np.asarray(j) * (self.v_range[1] - self.v_range[0]) / (M - 1)
        return self.origin + u[..., None] * self.axis_u + v[..., None] * self.axis_v

    def summary(self):
        vals = self.node_values[self.node_computed]
        reach = np.isfinite(vals)
        return {
            "robot": self.robot, "part": self.part, "threshold": self.threshold, "ik": self.ik,
            "plane_origin_m": self.origin.tolist(), "axis_u": self.axis_u.tolist(), "axis_v": self.axis_v.tolist(),
            "u_range_m": list(self.u_range), "v_range_m": list(self.v_range), "coarse_cells": self.cells,
            "levels": self.levels, "finest_cell_m": (self.u_range[1] - self.u_range[0]) / (self.cells << self.levels),
            "finest_grid_nodes": int(self.node_values.size), "points_evaluated": self.points_evaluated,
            "reachable_points": int(reach.sum()),
            "below_threshold_points": int(np.sum(vals[reach] < self.threshold)),
            "min_value": float(np.min(vals[reach])) if reach.any() else None,
            "max_value": float(np.max(vals[reach])) if reach.any() else None,
            "time_s": self.time_s, "steps": self.steps,
        }


class _Evaluator:
    """Best min singular value at tip positions, closed-form IK or batched LM (see the module docstring)."""

    def __init__(self, robot, part, orientation, random_seeds, seed, ik):
        self.robot = robot
        self.solver = robot.analytic_ik()
        self.position_only = orientation is None
        self.part = part
        self.R = None if orientation is None else np.asarray(orientation, dtype=float)
        self.random_seeds = random_seeds
        self.rng = np.random.default_rng(seed)
        if ik not in ("auto", "analytic", "numeric"):
            raise InputError(f"ik must be auto, analytic or numeric, got {ik!r}")
        usable = self.solver is not None and (self.position_only or not self.solver.position_only)
        if ik == "analytic" and not usable:
            raise InputError(f"{robot.name}: no closed-form IK for this arm and target kind; use ik='numeric'")
        self.analytic = usable and ik != "numeric"
        self.lo = np.ascontiguousarray(robot.joint_lower)
        self.hi = np.ascontiguousarray(robot.joint_upper)
        self.tol = 1e-9

    def targets(self, P):
        T = np.tile(np.eye(4), (len(P), 1, 1))
        if self.R is not None:
            T[:, :3, :3] = self.R
        T[:, :3, 3] = P
        return T

    def _lm(self, T, seeds, owner):
        n = len(seeds)
        Q = np.empty((n, self.robot.dof))
        ok = np.zeros(n, dtype=np.bool_)
        if n:
            _lm_batch(self.robot._mf, self.robot._mi, T, np.ascontiguousarray(seeds), owner.astype(np.int64),
                      self.lo, self.hi, self.tol, self.tol, self.position_only, 40, Q, ok)
        return Q[ok], owner[ok]

    def _random(self, m):
        lo = np.where(np.isfinite(self.lo), self.lo, -math.pi)
        hi = np.where(np.isfinite(self.hi), self.hi, math.pi)
        return lo + (hi - lo) * self.rng.random((m, self.robot.dof))

    def solve(self, P, seed_sets=None):
        """Solutions for the points P (n, 3): (Q (k, dof), owner (k,)); seed_sets: per point an (s, dof)
        array of starts (continuation) or None (closed form / random starts)."""
        n = len(P)
        T = self.targets(P)
        if seed_sets is None and self.analytic:
            # closed form for all points at once (numba; the same solutions as AnalyticIK.solve)
            Qs, counts = self.solver.solve_batch(T)
            keep = np.arange(Qs.shape[1])[None, :] < counts[:, None]
            return Qs[keep], np.nonzero(keep)[0].astype(np.int64)
        seeds, owner = [], []
        for i in range(n):
            s = self._random(self.random_seeds) if seed_sets is None or seed_sets[i] is None \
                or len(seed_sets[i]) == 0 else seed_sets[i]
            seeds.append(s)
            owner.append(np.full(len(s), i, dtype=np.int64))
        if not seeds:
            return np.zeros((0, self.robot.dof)), np.zeros(0, np.int64)
        return self._lm(T, np.concatenate(seeds), np.concatenate(owner))

    def values(self, P, Q, owner):
        """Best min singular value per point (NaN where no solution)."""
        best = np.full(len(P), np.nan)
        if len(Q):
            s = self.robot.min_singular_value_batch(Q, self.part)
            best_fin = np.full(len(P), -np.inf)
            np.maximum.at(best_fin, owner, s)
            best = np.where(np.isfinite(best_fin), best_fin, np.nan)
        return best


def _distinct(Q, tol=0.2):
    """Rows of Q that differ from every earlier kept row by more than tol (rad or m, max norm)."""
    if len(Q) < 2:
        return Q
    D = np.max(np.abs(Q[:, None, :] - Q[None, :, :]), axis=2)
    keep = np.ones(len(Q), dtype=bool)
    for i in range(1, len(Q)):
        if np.any(D[i, :i][keep[:i]] <= tol):
            keep[i] = False
    return Q[keep]


def _plane_defaults(robot, plane, offset_m, seed):
    """(origin, axis_u, axis_v, u_range, v_range) of the plane: a name (xy/xz/yz through the base origin,
    shifted by offset_m along the normal) or None: the plane of a planar arm, else xz; ranges from the extent
    of sampled tip points (+3 %)."""
    from .workspace import TipSampler
    P, _ = TipSampler(robot, seed=seed)(0, 20000)
    c = P.mean(axis=0)
    ev, vec = np.linalg.eigh((P - c).T @ (P - c) / len(P))
    planar = ev[0] <= 1e-14 * max(ev[2], 1e-300)
    if plane is None and planar:
        eu, ev_ = vec[:, 2], vec[:, 1]
        normal = vec[:, 0]
        origin = normal * float(normal @ c)
    else:
        name = plane or "xz"
        if name not in PLANES:
            raise InputError(f"plane must be one of {', '.join(PLANES)}, got {plane!r}")
        a, b = PLANES[name]
        eu, ev_ = np.eye(3)[a], np.eye(3)[b]
        normal = np.cross(eu, ev_)
        origin = normal * float(offset_m)
    U, V = (P - origin) @ eu, (P - origin) @ ev_
    du, dv = 0.03 * (U.max() - U.min()) + 1e-6, 0.03 * (V.max() - V.min()) + 1e-6
    return origin, eu, ev_, (float(U.min() - du), float(U.max() + du)), (float(V.min() - dv), float(V.max() + dv))


def singularity_map(robot, *, plane=None, offset_m=0.0, u_range=None, v_range=None, cells=32, levels=3,
                    threshold=None, band=0.25, refine_boundary=True, part=None, orientation=None, ik="auto",
                    continuation=None, random_seeds=8, seed=0, progress=None):
    """Minimum-singular-value map of ``robot`` over a plane with refinement near ``threshold``.

    plane: "xy", "xz", "yz" (through the base origin, moved by offset_m along the normal) or None (the arm's own
    plane for planar arms, else "xz"); u_range, v_range: (min, max) m along the plane axes (default: the extent
    of the workspace's tip points); cells: coarse cells per side; levels: refinement steps; threshold: the
    singular value (m/s or rad/s per unit joint speed) around which cells are refined (default: a quarter of the
    median over the reachable coarse nodes); band: relative half-width of the threshold band; part: Jacobian
    part (default "full" for arms with 6 or more joints, else "position"); orientation: (3, 3) tool orientation
    of the targets for "full" maps (default: the tip's orientation at q = 0); ik: "auto" (closed form on the
    coarse grid when the arm has one), "analytic" or "numeric"; continuation: True solves refined nodes by LM from
    the parent corners' solutions, False by the closed form (where the arm has one), None (default): the closed
    form where the arm has one, else LM continuation;
    random_seeds: LM starts per coarse node without a closed form; progress: callable(done, total) per step.
    """
    t_start = time.perf_counter()
    if part is None:
        part = "full" if robot.dof >= 6 else "position"
    if part not in PARTS:
        raise InputError(f"part must be one of {', '.join(PARTS)}, got {part!r}")
    if int(cells) < 1 or int(levels) < 0 or int(levels) > 8 or band < 0:
        raise InputError("cells must be >= 1, levels in 0..8 and band >= 0")
    cells, levels = int(cells), int(levels)
    position_only = robot.dof < 6 and orientation is None
    if not position_only and orientation is None:
        orientation = np.array(robot.home[:3, :3])
    if orientation is not None:
        orientation = np.asarray(orientation, dtype=float)
        if orientation.shape != (3, 3) or not np.allclose(orientation.T @ orientation, np.eye(3), atol=1e-6):
            raise InputError("orientation must be a (3, 3) rotation matrix")
    origin, eu, ev, ur, vr = _plane_defaults(robot, plane, offset_m, seed)
    ur = ur if u_range is None else tuple(map(float, u_range))
    vr = vr if v_range is None else tuple(map(float, v_range))
    if not (ur[1] > ur[0] and vr[1] > vr[0]):
        raise InputError(f"u_range and v_range must be (min, max) with min < max, got {ur}, {vr}")
    ev_ = _Evaluator(robot, part, orientation, random_seeds, seed, ik)
    S = 1 << levels
    M = cells * S + 1
    values = np.full((M, M), np.nan)
    computed = np.zeros((M, M), dtype=bool)
    sols = {}  # flat node index -> (k, dof) solutions
    du, dv = (ur[1] - ur[0]) / (M - 1), (vr[1] - vr[0]) / (M - 1)

    def points(I, J):
        return origin + (ur[0] + I * du)[:, None] * eu + (vr[0] + J * dv)[:, None] * ev

    def evaluate(I, J, seed_sets=None):
        P = points(I, J)
        Q, owner = ev_.solve(P, seed_sets)
        vals = ev_.values(P, Q, owner)
        values[I, J] = vals
        computed[I, J] = True
        order = np.argsort(owner, kind="stable")
        Qs, os_ = Q[order], owner[order]
        bounds = np.searchsorted(os_, np.arange(len(P) + 1))
        for k in range(len(P)):
            sols[int(I[k]) * M + int(J[k])] = Qs[bounds[k]:bounds[k + 1]]

    steps = []
    total_steps = levels + 1
    t0 = time.perf_counter()
    gi, gj = np.meshgrid(np.arange(0, M, S), np.arange(0, M, S), indexing="ij")
    evaluate(gi.ravel(), gj.ravel())
    fin = values[computed]
    fin = fin[np.isfinite(fin)]
    if threshold is None:
        threshold = 0.25 * float(np.median(fin)) if fin.size else 0.0
    threshold = float(threshold)
    steps.append({"level": 0, "cells": cells * cells, "cells_refined": 0, "points_evaluated": int(gi.size),
                  "cell_m": du * S, "time_s": time.perf_counter() - t0})
    if progress:
        progress(1, total_steps)

    cell_values = np.full((M - 1, M - 1), np.nan)
    cell_level = np.zeros((M - 1, M - 1), dtype=np.int16)
    CI, CJ = np.meshgrid(np.arange(0, M - 1, S), np.arange(0, M - 1, S), indexing="ij")
    CI, CJ = CI.ravel(), CJ.ravel()

    def corners(CI, CJ, s):
        return np.stack([values[CI, CJ], values[CI + s, CJ], values[CI, CJ + s], values[CI + s, CJ + s]], axis=1)

    def fill(CI, CJ, s, level):
        c = corners(CI, CJ, s)
        with np.errstate(all="ignore"):
            v = np.nanmin(np.where(np.isnan(c), np.inf, c), axis=1)
        v = np.where(np.isinf(v), np.nan, v)
        for a, b, x in zip(CI, CJ, v):
            cell_values[a:a + s, b:b + s] = x
            cell_level[a:a + s, b:b + s] = level

    fill(CI, CJ, S, 0)
    s = S
    lo_b, hi_b = threshold * (1 - band), threshold * (1 + band)
    for level in range(1, levels + 1):
        t0 = time.perf_counter()
        c = corners(CI, CJ, s)
        reach = np.isfinite(c)
        nreach = reach.sum(axis=1)
        with np.errstate(all="ignore"):
            cmin = np.where(reach, c, np.inf).min(axis=1)
            cmax = np.where(reach, c, -np.inf).max(axis=1)
        near = (nreach > 0) & (cmin <= hi_b) & (cmax >= lo_b)
        if refine_boundary:
            near |= (nreach > 0) & (nreach < 4)
        FI, FJ = CI[near], CJ[near]
        h = s // 2
        # children and their 3 x 3 nodes
        CI = np.concatenate([FI, FI + h, FI, FI + h])
        CJ = np.concatenate([FJ, FJ, FJ + h, FJ + h])
        NI = (FI[:, None] + h * np.array([0, 1, 2, 0, 1, 2, 0, 1, 2])[None, :])
        NJ = (FJ[:, None] + h * np.array([0, 0, 0, 1, 1, 1, 2, 2, 2])[None, :])
        flat = NI * M + NJ
        parent = np.repeat(np.arange(len(FI)), 9)
        flat_r = flat.ravel()
        new_mask = ~computed.ravel()[flat_r]
        uniq, first = np.unique(flat_r[new_mask], return_index=True)
        par = parent[new_mask][first]
        seed_sets = None
        if continuation or not ev_.analytic:
            seed_sets = []
            for p in par:
                a, b = FI[p], FJ[p]
                seed_sets.append(_distinct(np.concatenate([
                    sols.get(int(x) * M + int(y), np.zeros((0, robot.dof)))
                    for x, y in ((a, b), (a + s, b), (a, b + s), (a + s, b + s))])))
        if len(uniq):
            evaluate(uniq // M, uniq % M, seed_sets)
        fill(CI, CJ, h, level)
        s = h
        steps.append({"level": level, "cells": int(len(CI)), "cells_refined": int(len(FI)),
                      "points_evaluated": int(len(uniq)), "cell_m": du * s, "time_s": time.perf_counter() - t0})
        if progress:
            progress(level + 1, total_steps)
    return SingularityMap(
        robot=robot.name, part=part, threshold=threshold, origin=origin, axis_u=eu, axis_v=ev, u_range=ur,
        v_range=vr, cells=cells, levels=levels, orientation=orientation, node_values=values,
        node_computed=computed, cell_values=cell_values, cell_level=cell_level, steps=steps,
        time_s=time.perf_counter() - t_start,
        ik=("closed form" if ev_.analytic else "LM from random starts") + (
            " + LM continuation" if levels and (continuation or not ev_.analytic) else ""))
