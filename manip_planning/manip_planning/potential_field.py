"""Obstacle-aware joint path by gradient descent on a potential field (Latombe; Lynch & Park 10.6).

Configuration space: the joints q. Potential U(q) = U_att(q) + U_rep(q):
* U_att: conic-quadratic well at q_goal (joint space): gradient q - q_goal, capped at unit length beyond
  ``attractive_radius`` rad.
* U_rep: for every arm sphere (collision.ArmSpheres) whose clearance c to an obstacle (or the floor) is
  below ``influence_distance`` rho0: 1/2 eta (1/c - 1/rho0)^2. Its joint-space gradient is
  sum_k -eta (1/c_k - 1/rho0) / c_k^2 J_k^T n_k, with J_k the analytic Jacobian of sphere centre k (not
  numerical gradients) and n_k the unit gradient of the distance. eta is set so that one sphere at the
  safety margin pushes ``repulsive_gain`` times as hard as the attraction. Within ``attractive_radius`` of
  the goal the repulsion fades as the squared distance to the goal (Ge & Cui), so that a goal close to an
  obstacle or to the table is still reached (the final clearance check in avoidance.py guards the path).
* Sliding term: a sphere whose repulsion opposes the attraction is also pushed along the obstacle surface,
  in the direction of ``slide_direction`` (default up, +z) projected on the tangent plane: objects on a
  table are passed over, which breaks the classic local minimum in front of a wall.
Descent: normalised steps of ``step`` rad (halved while the direction keeps reversing), clipped to the
joint limits; a step that would go below the safety margin is replaced by its projection on the tangent of
the closest sphere's clearance (sliding along the margin), else by the repulsion alone. No progress towards
the goal for ``stall_iterations`` steps is a local minimum: a random walk of collision-free steps tries to leave it
(randomised potential field, Barraquand & Latombe), at most ``max_escapes`` times, then PlanningError
(PLANNING_FAILED). The descent's samples are the raw path; avoidance.py shortcuts, smooths and checks it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .joint_path import PlanningError

UP = np.array([0.0, 0.0, 1.0])


@dataclass
class FieldOptions:
    safety_margin: float = 0.03        # m, clearance the path must keep
    influence_distance: float = 0.15   # m, rho0: obstacles farther than this do not push
    step: float = 0.02                 # rad per descent step
    attractive_radius: float = 0.5     # rad, quadratic inside, conic outside
    repulsive_gain: float = 3.0        # push of one sphere at the safety margin / attraction
    slide_gain: float = 1.0            # sliding push / repulsion of the same sphere
    slide_direction: tuple = (0.0, 0.0, 1.0)
    max_iterations: int = 2000
    stall_iterations: int = 40
    max_escapes: int = 6
    escape_steps: int = 30
    seed: int = 0


class PotentialField:
    """Potential field over the arm spheres ``arm`` in ``scene`` (collision.Scene) towards q_goal."""

    def __init__(self, arm, scene, q_goal, options=None):
        self.arm = arm
        self.scene = scene
        self.q_goal = np.asarray(q_goal, dtype=np.float64)
        self.o = options or FieldOptions()
        o = self.o
        if not (0.0 < o.safety_margin < o.influence_distance):
            raise PlanningError(PlanningError.INVALID_INPUT,
                                f"need 0 < safety_margin ({o.safety_margin}) < influence_distance "
                                f"({o.influence_distance})")
        self._g_margin = self._g(o.safety_margin)
        self.slide = np.asarray(o.slide_direction, dtype=np.float64)
        n = np.linalg.norm(self.slide)
        self.slide = self.slide / n if n > 0 else self.slide
        self._floor_mask = arm._floor_mask()

    def _g(self, c):
        rho0 = self.o.influence_distance
        c = np.maximum(c, 0.1 * self.o.safety_margin)
        return (1.0 / c - 1.0 / rho0) / (c * c)

    def attraction(self, q):
        e = self.q_goal - q
        return e / max(float(np.linalg.norm(e)), self.o.attractive_radius)

    def force(self, q):
        """(-grad U at q (dof,), min obstacle clearance, min floor clearance); the attraction alone is
        kept in ``last_attraction``."""
        C, J = self.arm.centers_and_jacobians(q)
        r = self.arm.radius
        d, n = self.scene.distances(C)
        c = d - r
        fl = self.scene.floor_distances(C) - r
        fl = np.where(self._floor_mask, fl, np.inf)
        f_att = self.attraction(q)
        self.last_attraction = f_att
        f = f_att.copy()
        rho0 = self.o.influence_distance
        # Goal-near-obstacle fix (Ge & Cui 2000): the repulsion fades as (|q - q_goal| / attractive_radius)^2
        # inside the attractive radius, so the goal stays the minimum when it is itself near an obstacle.
        fade = min(1.0, (float(np.linalg.norm(self.q_goal - q)) / self.o.attractive_radius) ** 2)
        gain = fade * self.o.repulsive_gain / self._g_margin
        near = np.nonzero(c < rho0)[0]
        for k in near:
            w = gain * self._g(c[k])
            push = J[k].T @ n[k]                      # joint direction that increases clearance
            f += w * push
            if self.o.slide_gain > 0.0 and float(f_att @ push) < 0.0:
                t = self.slide - float(self.slide @ n[k]) * n[k]
                tn = np.linalg.norm(t)
                if tn > 1e-6:
                    f += self.o.slide_gain * w * (J[k].T @ (t / tn))
        for k in np.nonzero(fl < rho0)[0]:
            f += gain * self._g(fl[k]) * (J[k].T @ UP)
        # joint-space gradient of the smallest clearance (obstacle or floor), for sliding along the margin
        self.last_worst_gradient = None
        ko, kf = int(np.argmin(c)) if len(c) else -1, int(np.argmin(fl)) if len(fl) else -1
        if ko >= 0 and np.isfinite(c[ko]) and (kf < 0 or c[ko] <= fl[kf]):
            self.last_worst_gradient = J[ko].T @ n[ko]
        elif kf >= 0 and np.isfinite(fl[kf]):
            self.last_worst_gradient = J[kf].T @ UP
        return f, float(np.min(c, initial=np.inf)), float(np.min(fl, initial=np.inf))


def potential_field_path(arm, scene, q_start, q_goal, lower, upper, options=None):
    """Raw descent path (N, dof) from q_start to q_goal (both included); raises PlanningError when stuck.

    Returns (Q, info) with info: iterations, escapes.
    """
    o = options or FieldOptions()
    field = PotentialField(arm, scene, q_goal, o)
    lower = np.asarray(lower, dtype=np.float64)
    upper = np.asarray(upper, dtype=np.float64)
    q = np.clip(np.asarray(q_start, dtype=np.float64), lower, upper)
    goal = field.q_goal
    rng = np.random.default_rng(o.seed)
    path = [q.copy()]
    best = float(np.linalg.norm(goal - q))
    since_best = 0
    escapes = 0
    it = 0
    h = o.step
    prev_dir = None
    while it < o.max_iterations:
        it += 1
        dist = float(np.linalg.norm(goal - q))
        if dist <= o.step:
            path.append(goal.copy())
            return np.array(path), {"iterations": it, "escapes": escapes}
        f, _, _ = field.force(q)
        nf = float(np.linalg.norm(f))
        if nf < 1e-12:
            since_best = o.stall_iterations  # exact equilibrium: a local minimum
        else:
            d = f / nf
            # Oscillation across a ridge of the field: halve the step (down to step / 8), regrow on progress.
            if prev_dir is not None and float(d @ prev_dir) < 0.0:
                h = max(0.125 * o.step, 0.5 * h)
            else:
                h = min(o.step, 1.25 * h)
            prev_dir = d
            # Never step below the safety margin (or below where we are, if already closer): then try the
            # step projected onto the tangent of the closest sphere's clearance (slide along the margin), the
            # repulsion alone, shorter steps; else stay (counts as no progress).
            need = _floors(arm, scene, q, o.safety_margin)
            rep = f - field.last_attraction
            nr = float(np.linalg.norm(rep))
            tries = [d * h]
            g = field.last_worst_gradient
            if g is not None and float(d @ g) < 0.0:
                t = d - float(d @ g) / float(g @ g) * g
                nt = float(np.linalg.norm(t))
                if nt > 1e-9:
                    tries += [t / nt * h, t / nt * 0.5 * h]
            if nr > 1e-12:
                tries += [rep / nr * h * k for k in (1.0, 0.5, 0.25)]
            moved = False
            for dq in tries:
                cand = np.clip(q + dq, lower, upper)
                if _keeps(arm, scene, cand, need):
                    q, moved = cand, True
                    break
            if moved:
                path.append(q.copy())
                dist = float(np.linalg.norm(goal - q))
            if moved and dist < best - 0.5 * o.step:
                best, since_best = dist, 0
            else:
                since_best += 1
        if since_best >= o.stall_iterations:
            if escapes >= o.max_escapes:
                raise PlanningError(PlanningError.PLANNING_FAILED,
                                    f"potential field stuck in a local minimum {dist:.3f} rad from the goal "
                                    f"after {escapes} random-walk escapes ({it} steps)")
            escapes += 1
            q = _random_walk(arm, scene, q, lower, upper, o, rng, path)
            best, since_best = float(np.linalg.norm(goal - q)), 0
    raise PlanningError(PlanningError.PLANNING_FAILED,
                        f"potential field did not reach the goal within {o.max_iterations} steps "
                        f"({float(np.linalg.norm(goal - q)):.3f} rad left)")


def _floors(arm, scene, q, margin):
    """Per-obstacle and floor clearances a step from q must keep: the margin, or what q has if less."""
    c, f = arm.clearances(q, scene)
    return np.minimum(c, margin), min(f, margin)


def _keeps(arm, scene, q, need):
    c, f = arm.clearances(q, scene)
    return bool(np.all(c >= need[0])) and f >= need[1]


def _random_walk(arm, scene, q, lower, upper, o, rng, path):
    """Collision-free random steps (each keeps the safety margin); appended to path; returns the end."""
    for _ in range(o.escape_steps):
        for _try in range(10):
            d = rng.normal(size=q.shape)
            cand = np.clip(q + o.step * d / np.linalg.norm(d), lower, upper)
            if _keeps(arm, scene, cand, _floors(arm, scene, q, o.safety_margin)):
                q = cand
                path.append(q.copy())
                break
    return q
