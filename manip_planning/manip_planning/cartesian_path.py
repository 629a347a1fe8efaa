"""Straight-line motion of the tip in the base frame, as a joint path that never jumps.

Pose interpolation (decoupled, Lynch & Park 9.2): p(s) = p0 + s (p1 - p0) and R(s) = R0 exp([w] s) with
[w] = log(R0^T R1), s in [0, 1]: the tip origin moves on the straight segment p0 -> p1 while the orientation
turns about one fixed axis at a constant rate. (The screw motion exp(log(T0^-1 T1) s) is the same path when
the orientation does not change; with a rotation it would move the tip on a helix, not on a line.)

Joints: IK at each sample, seeded from the previous sample and without random restarts (no branch
switches). A step whose joints move more than ``max_joint_step`` is bisected down to ``max_bisections``
levels; what still jumps then is a discontinuity (a singularity crossed, a branch switch, a joint limit)
and the path is refused with the place and the joint named, as is a sample that IK cannot reach (with the
smallest singular value of the Jacobian there, to tell a singularity from the edge of the workspace). Path
derivatives q'(s) are central differences of the IK solutions themselves (what is actually commanded; the
Jacobian inverse is ill-conditioned exactly where it matters).
"""
from __future__ import annotations

import math

import numpy as np

from manip_core.spatial import axis_angle_to_matrix, log3

from .joint_path import PlanningError


def interpolate_pose(T0, T1, s):
    """Pose (4, 4) at s in [0, 1] of the decoupled straight line T0 -> T1."""
    T0 = np.asarray(T0, dtype=np.float64)
    T1 = np.asarray(T1, dtype=np.float64)
    w = log3(T0[:3, :3].T @ T1[:3, :3])
    out = np.eye(4)
    th = float(np.linalg.norm(w))
    R = np.eye(3) if th < 1e-15 else axis_angle_to_matrix(w / th, th * s)
    out[:3, :3] = T0[:3, :3] @ R
    out[:3, 3] = T0[:3, 3] + s * (T1[:3, 3] - T0[:3, 3])
    return out


class CartesianPath:
    """Joint path of a straight tip line from q_start's pose to T_goal (see module doc); raises PlanningError.

    Attributes after construction: s_grid (M,), q_grid (M, dof) (the validated dense samples),
    T_start, T_goal, length_m, angle_rad, and derivatives(s) / bounds() for time_scale.
    """

    def __init__(self, model, q_start, T_goal, *, max_joint_step=0.1, position_step=0.005, rotation_step=0.02,
                 min_samples=20, max_bisections=7, tolerance=1e-9, ik_iterations=100):
        self.model = model
        self.dof = model.dof
        self.q_start = np.asarray(q_start, dtype=np.float64).reshape(-1).copy()
        if self.q_start.shape != (self.dof,) or not np.all(np.isfinite(self.q_start)):
            raise PlanningError(PlanningError.INVALID_INPUT, f"start must be {self.dof} finite joint values")
        self.T_start = model.fk(self.q_start)
        self.T_goal = np.asarray(T_goal, dtype=np.float64).copy()
        self.max_joint_step = float(max_joint_step)
        self.max_bisections = int(max_bisections)
        self.tolerance = float(tolerance)
        self.ik_iterations = int(ik_iterations)
        self._dp = self.T_goal[:3, 3] - self.T_start[:3, 3]
        self._wb = log3(self.T_start[:3, :3].T @ self.T_goal[:3, :3])
        self.length_m = float(np.linalg.norm(self._dp))
        self.angle_rad = float(np.linalg.norm(self._wb))
        n = max(int(min_samples), math.ceil(self.length_m / position_step), math.ceil(self.angle_rad / rotation_step))
        s_grid, q_grid = self._chain(np.linspace(0.0, 1.0, n + 1), self.q_start)
        self.s_grid, self.q_grid = s_grid, q_grid
        if len(s_grid) > 2:
            self._d1 = np.gradient(q_grid, s_grid, axis=0, edge_order=2)
            self._d2 = np.gradient(self._d1, s_grid, axis=0, edge_order=2)
        else:
            self._d1 = np.diff(q_grid, axis=0).repeat(2, axis=0) / max(s_grid[-1] - s_grid[0], 1e-12)
            self._d2 = np.zeros_like(self._d1)

    # ------------------------------------------------------------------------------------------ samples
    def pose(self, s):
        return interpolate_pose(self.T_start, self.T_goal, s)

    def _ik(self, s, seed):
        res = self.model.ik(self.pose(s), q_seed=seed, tol_position_m=self.tolerance,
                            tol_rotation_rad=self.tolerance, max_iterations=self.ik_iterations, max_restarts=0,
                            position_only=False)
        return res

    def _fail_ik(self, s, res, q_last=None):
        p = self.pose(s)[:3, 3]
        extra = ""
        if q_last is not None:
            sv = np.linalg.svd(self.model.jacobian_space(q_last), compute_uv=False)
            extra = f"; smallest Jacobian singular value at the last reached sample {sv[-1]:.2g}"
            if sv[-1] < 1e-2:
                extra += " (near a singularity)"
        raise PlanningError(PlanningError.NO_IK_SOLUTION,
                            f"the straight line leaves the reachable workspace at s = {s:.3f} (tip at "
                            f"[{p[0]:.3f}, {p[1]:.3f}, {p[2]:.3f}] m): IK from the previous sample misses it by "
                            f"{res.position_error_m:.2g} m / {res.rotation_error_rad:.2g} rad (out of reach, past a "
                            f"joint limit, or at a singularity){extra}")

    def _fail_jump(self, s_a, s_b, qa, qb):
        j = int(np.argmax(np.abs(qb - qa)))
        p = self.pose(0.5 * (s_a + s_b))[:3, 3]
        raise PlanningError(PlanningError.PLANNING_FAILED,
                            f"the straight line needs a joint jump near s = {0.5 * (s_a + s_b):.4f} (tip at "
                            f"[{p[0]:.3f}, {p[1]:.3f}, {p[2]:.3f}] m): joint '{self.model.joint_names[j]}' moves "
                            f"{abs(qb[j] - qa[j]):.3f} rad within ds = {s_b - s_a:.2g} (a singularity or a branch "
                            f"switch on the way); refused instead of returning a jumping path")

    def _refine(self, s_a, q_a, s_b, depth, out_s, out_q):
        """Append samples from s_a (excluded) to s_b (included) to out_*, bisecting until no step jumps."""
        res = self._ik(s_b, q_a)
        if res.success and np.max(np.abs(res.q - q_a)) <= self.max_joint_step:
            out_s.append(s_b)
            out_q.append(res.q)
            return res.q
        if depth >= self.max_bisections:
            if not res.success:
                self._fail_ik(s_b, res, q_a)
            self._fail_jump(s_a, s_b, q_a, res.q)
        s_m = 0.5 * (s_a + s_b)
        q_m = self._refine(s_a, q_a, s_m, depth + 1, out_s, out_q)
        return self._refine(s_m, q_m, s_b, depth + 1, out_s, out_q)

    def _chain(self, s_values, q0):
        out_s, out_q = [float(s_values[0])], [q0.copy()]
        q = q0  # the start configuration itself is the first sample (its pose is the line's start)
        for s in s_values[1:]:
            q = self._refine(out_s[-1], q, float(s), 0, out_s, out_q)
        return np.array(out_s), np.array(out_q)

    def _sample(self, si, k):
        """q at si by IK seeded from grid sample k (at or below si), refused if it leaves the grid's branch."""
        if si == self.s_grid[k]:
            return self.q_grid[k]
        res = self._ik(si, self.q_grid[k])
        if not res.success:
            self._fail_ik(si, res)
        k1 = min(k + 1, len(self.s_grid) - 1)
        bound = 2.0 * float(np.max(np.abs(self.q_grid[k1] - self.q_grid[k]))) + 1e-6
        if np.max(np.abs(res.q - self.q_grid[k])) > bound:
            self._fail_jump(float(self.s_grid[k]), si, self.q_grid[k], res.q)
        return res.q

    # ------------------------------------------------------------------------------- path interface
    def derivatives(self, s, h=1e-4):
        """(q, q', q'') at the path parameters s (each (len(s), dof)).

        q by IK seeded from the validated dense grid; q' by central differences of IK solutions at s -+ h
        (the derivative of the joints actually commanded, also where the Jacobian is near singular); q'' by
        interpolation of the grid's second differences.
        """
        s = np.clip(np.asarray(s, dtype=np.float64).reshape(-1), 0.0, 1.0)
        Q = np.empty((len(s), self.dof))
        D1 = np.empty_like(Q)
        D2 = np.empty_like(Q)
        last = len(self.s_grid) - 1
        for i, si in enumerate(s):
            k = int(np.clip(np.searchsorted(self.s_grid, si, side="right") - 1, 0, last))
            q = self._sample(si, k)
            lo, hi = max(0.0, si - h), min(1.0, si + h)
            q_lo = q if lo == si else self._near(lo, q)
            q_hi = q if hi == si else self._near(hi, q)
            Q[i] = q
            D1[i] = (q_hi - q_lo) / (hi - lo)
        for j in range(self.dof):
            D2[:, j] = np.interp(s, self.s_grid, self._d2[:, j])
        return Q, D1, D2

    def _near(self, s, q_seed):
        res = self._ik(s, q_seed)
        if not res.success or np.max(np.abs(res.q - q_seed)) > self.max_joint_step:
            self._fail_ik(s, res) if not res.success else self._fail_jump(s, s, q_seed, res.q)
        return res.q

    def bounds(self):
        return np.max(np.abs(self._d1), axis=0) * 1.02, np.max(np.abs(self._d2), axis=0) * 1.05

    @property
    def q_goal(self):
        return self.q_grid[-1].copy()


def cartesian_line_trajectory(model, q_start, T_goal, profile="quintic", *, path_options=None, **kwargs):
    """Time-scaled straight tip line (kwargs: see joint_path.time_scale; path_options: CartesianPath's)."""
    from .joint_path import time_scale

    path = CartesianPath(model, q_start, T_goal, **(path_options or {}))
    return time_scale(path, profile, **kwargs), path
