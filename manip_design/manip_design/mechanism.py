"""Mechanism: the numeric form of a structure, with closed-chain FK (passive joints solved) and IK.

Joint values q (rad for revolute, m for prismatic) are ordered as ``variable_names``; ``actuated_names`` is
the subset the user commands. Poses are 4x4 homogeneous transforms of the end-effector frame in the ground
frame (m). FK solves the loop-closure constraints (welds of Merge) for the passive joints by
Levenberg-Marquardt from the home assembly (or a seed), so it follows one assembly branch;
``fk_branches`` lists the distinct branches found from random seeds (choose one, then follow it with
``fk(..., seed=q)``). IK solves closure + target together by Levenberg-Marquardt (``method='lm'``) or cyclic coordinate descent (``method='ccd'``), with the joint limits
as bounds, and declares success only when FK of the returned actuator values, solved again from the home
assembly, reaches the target.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from . import _kernels as K
from .errors import DesignError

TABLE_SEEDS = 4  # IK attempts from the nearest table entries, before the home assembly and random restarts
# IK seed table of a closed chain: a grid of k^dof actuator values, k = floor(64^(1/dof)) (8 x 8 for the
# five-bar, 4^3 for the Delta); on the benchmark's 1,000 five-bar targets 64 points left 0.6-1.2 % of the IK
# calls needing a restart, 121-256 points 4-5 % (denser grids put more entries next to the boundary where FK
# from the home assembly changes branch), 16 points 7-8 %
SEED_TABLE_SIZE = 64
SEED_TABLE_MAX_DOF = 3  # a table only up to 3 actuators (at least 4 grid points each)


@dataclass
class FKResult:
    """pose: end-effector pose (4, 4) in the ground frame (m); q: every joint value; closure_error: max
    |loop-closure residual| (m or rad); success: closure_error <= tolerance; iterations: LM steps."""

    pose: np.ndarray
    q: np.ndarray
    success: bool
    closure_error: float
    iterations: int


@dataclass
class IKResult:
    """actuated: {name: value (rad or m)}; q: every joint value; success: FK of the actuated values (from the
    home assembly) reaches the target within the tolerances; position_error_m / rotation_error_rad: errors
    of that FK pose (rotation only when an orientation was asked); iterations: solver steps (LM iterations or
    CCD sweeps) over all attempts; restarts: random restarts used; method: 'lm' or 'ccd'."""

    actuated: dict
    q: np.ndarray
    success: bool
    position_error_m: float
    rotation_error_rad: float
    iterations: int
    restarts: int = 0
    method: str = "lm"
    message: str = ""
    pose: np.ndarray = field(default=None, repr=False)


def _rot_angle(Ra, Rb):
    c = 0.5 * (np.trace(Ra @ Rb.T) - 1.0)
    return float(math.acos(min(1.0, max(-1.0, c))))


def rpy_to_matrix(roll, pitch, yaw):
    from .structure import rpy_matrix
    return rpy_matrix(roll, pitch, yaw)


class Mechanism:
    """Numeric elements, variables and welds of a structure (see :mod:`._kernels` for the layout)."""

    def __init__(self, structure, elems, variables, welds, ee_frame, masses, frame_names, values):
        self.structure = structure
        self.source = structure.source
        self.values = dict(values)
        ne = len(elems)
        self.ep = np.array([e[0] for e in elems], dtype=np.int64)
        self.eT = np.ascontiguousarray(np.array([e[1] for e in elems], dtype=float).reshape(ne, 4, 4))
        self.ety = np.array([e[2] for e in elems], dtype=np.int64)
        self.eax = np.ascontiguousarray(np.array([e[3] for e in elems], dtype=float).reshape(ne, 3))
        self.ev = np.array([e[4] for e in elems], dtype=np.int64)
        self.nf = ne + 1
        self.variables = variables
        self.nv = len(variables)
        self.variable_names = [v["name"] for v in variables]
        self.ev_elem = np.zeros(self.nv, dtype=np.int64)
        for e in range(ne):
            if self.ev[e] >= 0:
                self.ev_elem[self.ev[e]] = e
        # anc[e, f]: element e moves frame f (f is frame e + 1 or one of its descendants); parents come first
        anc = np.zeros((self.nf, max(ne, 1)), dtype=np.bool_)  # transposed while built: row f
        for f in range(1, self.nf):
            anc[f] = anc[self.ep[f - 1]]
            anc[f, f - 1] = True
        self.anc = np.ascontiguousarray(anc.T)
        self.welds = np.array(welds, dtype=np.int64).reshape(-1, 2)
        self.ee = int(ee_frame)
        self.masses = masses
        self.frame_names = frame_names
        self.lo = np.array([v["lo"] for v in variables], dtype=float)
        self.hi = np.array([v["hi"] for v in variables], dtype=float)
        self.actuated = np.array([i for i, v in enumerate(variables) if v["actuated"]], dtype=np.int64)
        self.passive = np.array([i for i, v in enumerate(variables) if not v["actuated"]], dtype=np.int64)
        self.all_vars = np.arange(self.nv, dtype=np.int64)
        self.actuated_names = [self.variable_names[i] for i in self.actuated]
        self.n_closure = 6 * len(self.welds)
        self._no_target = np.zeros(6)
        self._eye = np.eye(4)
        self._rng = np.random.default_rng(0)
        self._table = None
        self.seed_table_seconds = 0.0
        # home: every variable at 0, or at the middle of its limits when 0 is outside them
        q = np.zeros(self.nv)
        out = (q < self.lo) | (q > self.hi)
        q[out] = 0.5 * (self.lo[out] + self.hi[out])
        self.q_home = self._assemble(q)

    # ---------------------------------------------------------------------------------- helpers
    def _solve(self, q, free, Tt, wt, nrows, tol, max_iter, method="lm"):
        fn = K.solve_lm if method == "lm" else K.solve_ccd
        return fn(self.ep, self.eT, self.ety, self.eax, self.ev, self.ev_elem, self.anc, self.welds, self.ee,
                  Tt, wt, free, self.lo, self.hi, q, nrows, tol, max_iter)

    def _assemble(self, q):
        if not len(self.welds):
            return q
        best = None
        for attempt in range(20):
            qa = q.copy()
            if attempt:
                qa[self.passive] = self._random(self.passive, spread=0.5 * attempt)
            err, _ = self._solve(qa, self.passive, self._eye, self._no_target, self.n_closure, 1e-11, 200)
            if err <= 1e-9:
                return qa
            if best is None or err < best[0]:
                best = (err, qa)
        raise DesignError(f"the structure cannot be assembled at the home actuator values (closure error "
                          f"{best[0]:.3g}): check the lengths, anchors and merges", self.source)

    def _random(self, idx, spread=math.pi):
        lo = np.where(np.isfinite(self.lo[idx]), self.lo[idx], -spread)
        hi = np.where(np.isfinite(self.hi[idx]), self.hi[idx], spread)
        return self._rng.uniform(lo, hi)

    def frames(self, q):
        """Every frame's pose (nf, 4, 4) in the ground frame at joint values q."""
        Tf = np.empty((self.nf, 4, 4))
        K.frames(self.ep, self.eT, self.ety, self.eax, self.ev, np.asarray(q, float), Tf)
        return Tf

    def _act_vector(self, actuated):
        if isinstance(actuated, dict):
            missing = [n for n in self.actuated_names if n not in actuated]
            unknown = [n for n in actuated if n not in self.actuated_names]
            if missing or unknown:
                raise DesignError(f"actuated values: missing {missing}, unknown {unknown} (expected "
                                  f"{', '.join(self.actuated_names)})", self.source)
            actuated = [actuated[n] for n in self.actuated_names]
        a = np.asarray(actuated, dtype=float).reshape(-1)
        if a.shape != (len(self.actuated),):
            raise DesignError(f"expected {len(self.actuated)} actuated values ({', '.join(self.actuated_names)}),"
                              f" got {a.size}", self.source)
        if not np.all(np.isfinite(a)):
            raise DesignError("actuated values hold NaN or inf", self.source)
        lo, hi = self.lo[self.actuated], self.hi[self.actuated]
        bad = np.flatnonzero((a < lo - 1e-12) | (a > hi + 1e-12))
        if bad.size:
            i = bad[0]
            raise DesignError(f"actuated value {self.actuated_names[i]} = {a[i]:g} is outside its range "
                              f"({lo[i]:g}, {hi[i]:g})", self.source)
        return a

    # ------------------------------------------------------------------------------------- FK
    def fk(self, actuated, seed=None, tol=1e-10, max_iter=100):
        """End-effector pose for the actuated values (sequence in ``actuated_names`` order or dict), passive
        joints solved by LM from the seed (default: the home assembly); when that does not close, by
        continuation from the seed's actuator values in 4, 16, 64 steps (following the seed's branch)."""
        a = self._act_vector(actuated)
        q, err, it = self._fk_q(a, seed, tol, max_iter)
        return FKResult(self.frames(q)[self.ee], q, bool(err <= max(tol, 1e-9)), float(err), int(it))

    def fk_branches(self, actuated, attempts=32, rng_seed=0, tol=1e-10, max_iter=100, pose_tol=1e-7):
        """Every distinct assembly branch found for the actuated values: a list of :class:`FKResult`, the
        home-branch one (what :meth:`fk` returns) first when it closes, then the others by distance of their
        end-effector position from it (m).

        Closed chains have several assemblies per actuator vector (the five-bar's tip above or below its
        elbows, the Stewart platform's up to 40); :meth:`fk` follows the one continuous with the home
        assembly (or ``seed``). Here the passive joints are also solved from ``attempts`` random seeds
        (uniform within their limits, +-pi where unlimited; ``rng_seed`` makes it repeatable), and solutions
        whose end-effector poses agree within ``pose_tol`` (m, and rad for the rotation) count once. A
        branch not found from any seed is missed, so the list is a lower bound on the assembly count. To
        follow a chosen branch afterwards, pass its ``q`` as ``fk(..., seed=q)``."""
        a = self._act_vector(actuated)
        home = self._fk_q(a, None, tol, max_iter)
        cands = [home]
        if len(self.welds):
            rng = np.random.default_rng(rng_seed)
            lo = np.where(np.isfinite(self.lo[self.passive]), self.lo[self.passive], -math.pi)
            hi = np.where(np.isfinite(self.hi[self.passive]), self.hi[self.passive], math.pi)
            for _ in range(attempts):
                q = self.q_home.copy()
                q[self.actuated] = a
                q[self.passive] = rng.uniform(lo, hi)
                err, it = self._solve(q, self.passive, self._eye, self._no_target, self.n_closure, tol, max_iter)
                cands.append((q, err, it))
        out = []
        for q, err, it in cands:
            if err > max(tol, 1e-9):
                continue
            T = self.frames(q)[self.ee]
            if any(np.linalg.norm(T[:3, 3] - r.pose[:3, 3]) <= pose_tol and
                   _rot_angle(T[:3, :3], r.pose[:3, :3]) <= pose_tol for r in out):
                continue
            out.append(FKResult(T, q, True, float(err), int(it)))
        if out and cands[0][1] <= max(tol, 1e-9):
            p0 = out[0].pose[:3, 3]
            out[1:] = sorted(out[1:], key=lambda r: float(np.linalg.norm(r.pose[:3, 3] - p0)))
        return out

    def _fk_q(self, a, seed=None, tol=1e-10, max_iter=100):
        """(q, closure error, iterations) of FK without input checks."""
        q = (self.q_home if seed is None else np.asarray(seed, float)).copy()
        q[self.actuated] = a
        if not len(self.welds):
            return q, 0.0, 0
        q0 = q.copy()
        err, it = self._solve(q, self.passive, self._eye, self._no_target, self.n_closure, tol, max_iter)
        steps = 4
        while err > max(tol, 1e-9) and steps <= 64:
            # continuation: move the actuators from the seed's values in small steps, so the passive
            # joints follow the seed's assembly branch instead of jumping (or failing) in one LM solve
            q = q0.copy()
            a0 = q0[self.actuated].copy()
            for k in range(1, steps + 1):
                q[self.actuated] = a0 + (a - a0) * (k / steps)
                err, i2 = self._solve(q, self.passive, self._eye, self._no_target, self.n_closure, tol, max_iter)
                it += i2
            steps *= 4
        return q, err, it

    def pose(self, q):
        """End-effector pose (4, 4) for a full joint vector q (no closure solved)."""
        return self.frames(q)[self.ee]

    # ------------------------------------------------------------------------------------- IK
    def ik(self, xyz, rpy=None, seed=None, method="lm", tol_position_m=1e-6, tol_rotation_rad=1e-6,
           restarts=10, max_iter=None):
        """Actuator values that put the end effector at xyz (m) [and orientation rpy (rad), R = Rz Ry Rx].

        LM (or CCD) on closure + target from the seed, then up to ``restarts`` further attempts. Without a
        seed the attempts start from the TABLE_SEEDS entries of :meth:`seed_table` nearest the target (a
        closed chain of up to SEED_TABLE_MAX_DOF actuators), then the home assembly, then random seeds
        (:meth:`_restart_seed`). An attempt whose solver residual (m or rad) stays above the tolerances
        restarts at once, otherwise success is decided by :meth:`_check`."""
        xyz = np.asarray(xyz, dtype=float).reshape(-1)
        if xyz.shape != (3,) or not np.all(np.isfinite(xyz)):
            raise DesignError("the target position must be 3 finite numbers (x, y, z in m)", self.source)
        Tt = np.eye(4)
        Tt[:3, 3] = xyz
        wt = np.ones(6)
        if rpy is None:
            wt[3:] = 0.0
        else:
            rpy = np.asarray(rpy, dtype=float).reshape(-1)
            if rpy.shape != (3,) or not np.all(np.isfinite(rpy)):
                raise DesignError("the target orientation must be 3 finite numbers (roll, pitch, yaw in rad)",
                                  self.source)
            Tt[:3, :3] = rpy_to_matrix(*rpy)
        if max_iter is None:
            max_iter = 200 if method == "lm" else 500
        nrows = self.n_closure + 6
        first = [np.asarray(seed, float)] if seed is not None else \
            self._table_seeds(Tt, rpy is not None, TABLE_SEEDS) + [self.q_home]
        total, used = 0, 0
        res = None
        for attempt in range(restarts + 1):
            if attempt:
                used += 1
            if attempt < len(first):
                q = first[attempt].copy()
            else:
                q = self._restart_seed(attempt)
            err, it = self._solve(q, self.all_vars, Tt, wt, nrows, 1e-12, max_iter, method)
            total += it
            if err > max(tol_position_m, tol_rotation_rad) and attempt < restarts:
                continue  # the solver stalled (local minimum, often pressed against a limit): restart
            res = self._check(q, Tt, rpy is not None, tol_position_m, tol_rotation_rad)
            if res[0]:
                break
        ok, pe, re_, msg, T = res
        return IKResult({n: float(q[i]) for n, i in zip(self.actuated_names, self.actuated)}, q, ok, pe, re_,
                        total, used, method, msg, T)

    def seed_table(self):
        """The IK seed table of a closed chain, built on first use: (q (n, nv), position (n, 3) m, rotation
        (n, 9)) of FK from the home assembly (as the honest check solves it) on a grid of actuator values,
        cell centres over each actuator's range (+-pi where unlimited), about SEED_TABLE_SIZE points; points
        where FK needs more than one LM solve from the home assembly (continuation) or does not close are left
        out. None for a serial structure or more than SEED_TABLE_MAX_DOF actuators. ``seed_table_seconds`` is
        the time its build took (wall-clock, s): a one-time cost of the first IK call."""
        if self._table is None and len(self.welds) and 0 < len(self.actuated) <= SEED_TABLE_MAX_DOF:
            t0 = time.perf_counter()
            dof = len(self.actuated)
            k = max(2, int(SEED_TABLE_SIZE ** (1.0 / dof) + 1e-9))
            lo = np.where(np.isfinite(self.lo[self.actuated]), self.lo[self.actuated], -math.pi)
            hi = np.where(np.isfinite(self.hi[self.actuated]), self.hi[self.actuated], math.pi)
            cells = (np.arange(k) + 0.5) / k
            grid = np.stack(np.meshgrid(*[lo[i] + cells * (hi[i] - lo[i]) for i in range(dof)],
                                        indexing="ij"), -1).reshape(-1, dof)
            qs, ps, rs = [], [], []
            for a in grid:
                q = self.q_home.copy()
                q[self.actuated] = a
                err, _it = self._solve(q, self.passive, self._eye, self._no_target, self.n_closure, 1e-10, 100)
                if err <= 1e-9:  # what FK (and so the honest check) gives when it needs no continuation
                    T = self.pose(q)
                    qs.append(q)
                    ps.append(T[:3, 3])
                    rs.append(T[:3, :3].reshape(9))
            if qs:
                P = np.array(ps)
                scale_m = float(np.sqrt(np.mean(np.sum((P - P.mean(0)) ** 2, 1)))) or 1.0
                self._table = (np.array(qs), P, np.array(rs), scale_m)
            else:
                self._table = ()
            self.seed_table_seconds = time.perf_counter() - t0
        return self._table or None

    def _table_seeds(self, Tt, with_rot, count):
        """Joint values of the ``count`` seed-table entries nearest the target, nearest first (position, plus
        the rotation's Frobenius distance times the table's spread in m when an orientation is asked); []
        without a table."""
        table = self.seed_table()
        if table is None:
            return []
        qs, P, R, scale_m = table
        d = P - Tt[:3, 3]
        cost = np.einsum("ij,ij->i", d, d)
        if with_rot:
            e = R - Tt[:3, :3].reshape(9)
            cost += scale_m * scale_m * np.einsum("ij,ij->i", e, e)
        if count >= len(cost):
            idx = np.argsort(cost)
        else:
            idx = np.argpartition(cost, count)[:count]
            idx = idx[np.argsort(cost[idx])]
        return [qs[i] for i in idx]

    def _restart_seed(self, attempt):
        """Seed of IK restart ``attempt`` (>= 1): every variable random within its limits (passive joints
        too, so the restart can land on any assembly / working-mode branch: a five-bar elbow whose sign must
        flip is not reached from seeds that keep the home branch), on odd attempts first assembled (closure
        solved for the passive joints), on even attempts left unassembled for the joint LM to close."""
        q = self.q_home.copy()
        q[self.actuated] = self._random(self.actuated)
        if len(self.passive):
            q[self.passive] = self._random(self.passive)
            if attempt % 2 and len(self.welds):
                self._solve(q, self.passive, self._eye, self._no_target, self.n_closure, 1e-11, 200)
        return q

    def _check(self, q, Tt, with_rot, tol_p, tol_r):
        """Honest success: FK of q's actuator values from the home assembly must reach the target."""
        _qf, err, _it = self._fk_q(q[self.actuated])
        T = self.frames(_qf)[self.ee]
        d = T[:3, 3] - Tt[:3, 3]
        pe = math.sqrt(d @ d)
        re_ = _rot_angle(T[:3, :3], Tt[:3, :3]) if with_rot else 0.0
        if err > 1e-9:
            return False, pe, re_, f"FK of the solution does not close (closure error {err:.3g})", T
        if pe > tol_p or re_ > tol_r:
            return False, pe, re_, (f"target missed: position error {pe:.3g} m, rotation error {re_:.3g} rad "
                                    "(unreachable, or reached only on another assembly branch)"), T
        return True, pe, re_, "", T

    # ------------------------------------------------------------------------------------ misc
    def closure_jacobian(self, q):
        """Jacobian (6 * welds, nv) of the loop-closure residual at q."""
        Tf = self.frames(q)
        J = np.zeros((self.n_closure, self.nv))
        K.jacobian(Tf, self.ety, self.eax, self.ev_elem, self.anc, self.welds, self.ee, self._no_target,
                   self.all_vars, J)
        return J

    def ee_jacobian(self, q):
        """Geometric Jacobian (6, nv) of the end effector, rows [omega; v_origin] in the ground frame."""
        Tf = self.frames(q)
        J = np.zeros((self.n_closure + 6, self.nv))
        K.jacobian(Tf, self.ety, self.eax, self.ev_elem, self.anc, self.welds, self.ee, np.ones(6),
                   self.all_vars, J)
        return np.vstack([J[-3:], J[-6:-3]])

    def axes_world(self, q):
        """(kind, unit axis in ground frame, point on axis) of every variable at q."""
        Tf = self.frames(q)
        out = []
        for v in range(self.nv):
            e = self.ev_elem[v]
            F = Tf[e + 1]
            out.append((self.variables[v]["kind"], F[:3, :3] @ self.eax[e], F[:3, 3].copy()))
        return out
