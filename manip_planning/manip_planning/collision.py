"""Arm approximated by spheres, obstacles as boxes or spheres, signed clearances and their gradients.

Arm: capsules of radius ``radius`` around the segments between consecutive link origins of the chain
(``fk(q, link)``), each covered by spheres ``spacing`` apart (default radius / 2) whose radius is
sqrt(radius^2 + (spacing / 2)^2), so that the union of the spheres contains the whole capsule. A segment
that no joint moves (base -> shoulder) is left out. Optional ``tool_length`` adds a segment from the tip
along its z axis (a tool or a held object). Sphere-centre Jacobians are analytic:
the velocity of a point p fixed to link L is sum over the joints i that move L of (v_i - p x omega_i) qd_i,
with [omega_i; v_i] the columns of the space Jacobian at q (Lynch & Park 5.1).

Obstacles (base frame): an axis-aligned box (center, size) or a sphere (center, radius). Clearance = signed
distance from a sphere's surface to the obstacle's surface (m; negative: penetration). An optional floor
(the table top, a plane z = floor_height) is handled separately, because the obstacle clearance is reported
on its own (PlanTrajectory.min_obstacle_distance).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass
class Obstacle:
    """Box (``size`` > 0 on all axes: an axis-aligned box) or sphere (``radius``), in the base frame (m)."""

    center: np.ndarray
    size: np.ndarray = None
    radius: float = 0.0

    def __post_init__(self):
        self.center = np.asarray(self.center, dtype=np.float64).reshape(3)
        self.size = np.zeros(3) if self.size is None else np.asarray(self.size, dtype=np.float64).reshape(3)
        self.radius = float(self.radius)
        if not (np.all(np.isfinite(self.center)) and np.all(np.isfinite(self.size)) and math.isfinite(self.radius)):
            raise ValueError("obstacle holds NaN or inf")
        if np.any(self.size < 0) or self.radius < 0:
            raise ValueError("obstacle size and radius must be >= 0")

    @property
    def is_box(self):
        return bool(np.all(self.size > 0.0))

    @property
    def top(self):
        """Highest z of the obstacle (m)."""
        return float(self.center[2] + (0.5 * self.size[2] if self.is_box else self.radius))

    def bounding_radius(self):
        return float(0.5 * np.linalg.norm(self.size)) if self.is_box else self.radius


class Scene:
    """Obstacles (boxes and spheres) and an optional floor plane; vectorised signed distances of points."""

    def __init__(self, obstacles=(), floor_height=None):
        self.obstacles = list(obstacles)
        boxes = [o for o in self.obstacles if o.is_box]
        spheres = [o for o in self.obstacles if not o.is_box]
        self.box_c = np.array([o.center for o in boxes]).reshape(-1, 3)
        self.box_h = np.array([0.5 * o.size for o in boxes]).reshape(-1, 3)
        self.sph_c = np.array([o.center for o in spheres]).reshape(-1, 3)
        self.sph_r = np.array([o.radius for o in spheres]).reshape(-1)
        self.floor_height = None if floor_height is None or not math.isfinite(floor_height) else float(floor_height)

    def __len__(self):
        return len(self.obstacles)

    def distances(self, P):
        """(d, n): signed distance (m) of each point P (K, 3) to the nearest obstacle surface and the unit
        gradient of that distance (K, 3); d = inf and n = 0 without obstacles."""
        P = np.asarray(P, dtype=np.float64).reshape(-1, 3)
        K = len(P)
        best = np.full(K, np.inf)
        grad = np.zeros((K, 3))
        if len(self.box_c):
            D = P[:, None, :] - self.box_c[None, :, :]                # (K, B, 3)
            A = np.abs(D) - self.box_h[None, :, :]
            out = np.maximum(A, 0.0)
            out_n = np.linalg.norm(out, axis=2)
            inside = np.minimum(np.max(A, axis=2), 0.0)
            sd = out_n + inside                                       # (K, B)
            sgn = np.where(D >= 0.0, 1.0, -1.0)
            g_out = sgn * out / np.maximum(out_n, 1e-12)[..., None]
            ax = np.argmax(A, axis=2)
            g_in = np.zeros_like(D)
            np.put_along_axis(g_in, ax[..., None], np.take_along_axis(sgn, ax[..., None], axis=2), axis=2)
            g = np.where((out_n > 0.0)[..., None], g_out, g_in)
            j = np.argmin(sd, axis=1)
            d = sd[np.arange(K), j]
            better = d < best
            best = np.where(better, d, best)
            grad[better] = g[np.arange(K), j][better]
        if len(self.sph_c):
            D = P[:, None, :] - self.sph_c[None, :, :]
            n = np.linalg.norm(D, axis=2)
            sd = n - self.sph_r[None, :]
            g = D / np.maximum(n, 1e-12)[..., None]
            j = np.argmin(sd, axis=1)
            d = sd[np.arange(K), j]
            better = d < best
            best = np.where(better, d, best)
            grad[better] = g[np.arange(K), j][better]
        return best, grad

    def per_obstacle(self, P):
        """Signed distances (K, M) of points P (K, 3) to each obstacle (in the order of ``obstacles``)."""
        P = np.asarray(P, dtype=np.float64).reshape(-1, 3)
        out = np.empty((len(P), len(self.obstacles)))
        for j, o in enumerate(self.obstacles):
            if o.is_box:
                A = np.abs(P - o.center) - 0.5 * o.size
                out[:, j] = np.linalg.norm(np.maximum(A, 0.0), axis=1) + np.minimum(np.max(A, axis=1), 0.0)
            else:
                out[:, j] = np.linalg.norm(P - o.center, axis=1) - o.radius
        return out

    def subset(self, keep):
        """Scene with the obstacles whose indices are in ``keep`` (same floor)."""
        return Scene([self.obstacles[i] for i in keep], self.floor_height)

    def floor_distances(self, P):
        """Height of each point above the floor (m), inf without a floor."""
        P = np.asarray(P, dtype=np.float64).reshape(-1, 3)
        if self.floor_height is None:
            return np.full(len(P), np.inf)
        return P[:, 2] - self.floor_height


class ArmSpheres:
    """Spheres covering capsules of ``capsule_radius`` (m) around the arm's link segments (see module doc).

    ``radius`` is the radius of each sphere (slightly larger than capsule_radius)."""

    def __init__(self, model, capsule_radius=0.06, spacing=None, tool_length=0.0, links=None):
        self.model = model
        self.capsule_radius = float(capsule_radius)
        self.tool_length = float(tool_length)
        spacing = 0.5 * self.capsule_radius if spacing is None else float(spacing)
        if not (self.capsule_radius > 0.0 and spacing > 0.0):
            raise ValueError("capsule radius and sphere spacing must be positive")
        self.spacing = spacing
        self.radius = math.hypot(self.capsule_radius, 0.5 * spacing)
        names = list(links) if links is not None else list(model.link_names)
        rng = np.random.default_rng(0)
        lo = np.where(np.isfinite(model.joint_lower), model.joint_lower, -math.pi)
        hi = np.where(np.isfinite(model.joint_upper), model.joint_upper, math.pi)
        q_test = [np.clip(rng.uniform(-math.pi, math.pi, model.dof), lo, hi) for _ in range(3)]
        # Which joints move each link's frame (by perturbation: no assumption on the tree layout).
        self._moved_by = {}          # joints that move the link's frame
        self._origin_moves = {}      # whether any joint moves the link's origin
        for name in names:
            mask = np.zeros(model.dof, dtype=bool)
            moves = False
            for q in q_test:
                T = model.fk(q, name)
                for i in range(model.dof):
                    dq = q.copy()
                    dq[i] += 1e-3
                    Ti = model.fk(dq, name)
                    if not np.allclose(Ti, T, atol=1e-12):
                        mask[i] = True
                    if np.linalg.norm(Ti[:3, 3] - T[:3, 3]) > 1e-12:
                        moves = True
            self._moved_by[name] = mask
            self._origin_moves[name] = moves
        # Distinct link origins along the chain (drop a link whose origin coincides with the previous one).
        points = []
        for name in names:
            if points:
                same = all(np.linalg.norm(model.fk(q, name)[:3, 3] - model.fk(q, points[-1])[:3, 3]) < 1e-9
                           for q in q_test)
                if same:
                    continue
            points.append(name)
        self.points = points                   # link names whose origins are the segment ends
        segs = []
        for a, b in zip(points[:-1], points[1:]):
            if not (self._origin_moves[a] or self._origin_moves[b]):
                continue                      # fixed to the base (a joint may turn it about itself)
            length = np.linalg.norm(model.fk(q_test[0], b)[:3, 3] - model.fk(q_test[0], a)[:3, 3])
            n = max(1, math.ceil(length / spacing))
            for k in range(n + 1):
                if segs and k == 0 and segs[-1][1] == a and segs[-1][2] == 1.0:
                    continue                  # shared end point, already there
                segs.append((a, b, k / n))
        self.tool_link = points[-1]
        if self.tool_length > 0.0:
            n = max(1, math.ceil(self.tool_length / spacing))
            for k in range(1, n + 1):
                segs.append((self.tool_link, None, k / n))
        self.spheres = segs                   # (link a, link b or None for the tool axis, fraction)
        self.link_of_sphere = [b if b is not None and f > 0.5 else a for a, b, f in segs]
        self._ia = np.array([points.index(a) for a, _, _ in segs])
        self._ib = np.array([points.index(b) if b is not None else -1 for _, b, _ in segs])
        self._f = np.array([f for _, _, f in segs])
        self._masks = np.array([self._moved_by[n] for n in points])   # (P, dof)

    def __len__(self):
        return len(self.spheres)

    def _frames(self, q):
        return [self.model.fk(q, name) for name in self.points]

    def centers(self, q, frames=None):
        """Sphere centres (K, 3) in the base frame at q."""
        F = self._frames(q) if frames is None else frames
        P = np.array([T[:3, 3] for T in F])
        tip = F[-1]
        pb = np.where((self._ib >= 0)[:, None], P[np.maximum(self._ib, 0)],
                      P[self._ia] + self.tool_length * tip[:3, 2])
        return (1.0 - self._f)[:, None] * P[self._ia] + self._f[:, None] * pb

    def centers_and_jacobians(self, q):
        """(C (K, 3), J (K, 3, dof)): centres and d centre / dq."""
        q = np.asarray(q, dtype=np.float64)
        F = self._frames(q)
        P = np.array([T[:3, 3] for T in F])
        Js = self.model.jacobian_space(q)
        W, V = Js[:3], Js[3:]                                         # (3, dof)
        # velocity of point p on link L: (V - p x W) masked by the joints moving L
        Jp = np.empty((len(P), 3, self.model.dof))
        for k, p in enumerate(P):
            Jp[k] = (V - np.cross(p[:, None], W, axis=0)) * self._masks[k][None, :]
        tip = F[-1]
        if self.tool_length > 0.0:
            z = tip[:3, 2]
            pt = P[-1] + self.tool_length * z
            Jt = (V - np.cross(pt[:, None], W, axis=0)) * self._masks[-1][None, :]
        else:
            pt, Jt = P[-1], Jp[-1]
        has_b = self._ib >= 0
        Pb = np.where(has_b[:, None], P[np.maximum(self._ib, 0)], pt)
        Jb = np.where(has_b[:, None, None], Jp[np.maximum(self._ib, 0)], Jt)
        f = self._f
        C = (1.0 - f)[:, None] * P[self._ia] + f[:, None] * Pb
        J = (1.0 - f)[:, None, None] * Jp[self._ia] + f[:, None, None] * Jb
        return C, J

    def clearance(self, q, scene):
        """(obstacle clearance, floor clearance) of the arm at q (m; inf when none)."""
        C = self.centers(q)
        d, _ = scene.distances(C)
        fl = scene.floor_distances(C[self._floor_mask()])
        return float(np.min(d) - self.radius), float(np.min(fl, initial=np.inf) - self.radius)

    def obstacle_clearances(self, q, scene):
        """Clearance (m) of the arm at q to each obstacle of the scene, (M,)."""
        return self.clearances(q, scene)[0]

    def clearances(self, q, scene):
        """(clearance to each obstacle (M,), clearance to the floor) of the arm at q (m; inf: no floor)."""
        C = self.centers(q)
        c = (np.min(scene.per_obstacle(C), axis=0) - self.radius) if len(scene) else np.zeros(0)
        f = float(np.min(scene.floor_distances(C[self._floor_mask()]), initial=np.inf) - self.radius)
        return c, f

    def _floor_mask(self):
        # Spheres of segments whose start moves (not the base column, which stands on the floor).
        if not hasattr(self, "_fm"):
            self._fm = np.array([self._origin_moves[a] for a, _, _ in self.spheres])
        return self._fm


def densify(Q, max_step=0.01):
    """Joint waypoints Q (N, dof) with straight segments subdivided so no joint moves more than max_step."""
    Q = np.asarray(Q, dtype=np.float64)
    out = [Q[0]]
    for a, b in zip(Q[:-1], Q[1:]):
        n = max(1, math.ceil(float(np.max(np.abs(b - a))) / max_step))
        for k in range(1, n + 1):
            out.append(a + (b - a) * (k / n))
    return np.array(out)


def path_clearance(arm, scene, Q):
    """(min obstacle clearance, min floor clearance, index of the worst obstacle sample) over configurations Q."""
    best_o, best_f, worst = np.inf, np.inf, 0
    for i, q in enumerate(Q):
        o, f = arm.clearance(q, scene)
        if o < best_o:
            best_o, worst = o, i
        best_f = min(best_f, f)
    return best_o, best_f, worst
