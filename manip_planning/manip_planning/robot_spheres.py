"""The planner's own collision spheres as a clearance model: one model for the sampling planner, the goal
selection, the clearance checks and the heuristics (no rclpy).

``RobotSpheres(robot)`` takes a robot_collision.RobotCollisionModel (the spheres RRT-Connect checks: the URDF's
``<collision>`` geometry, or capsules along the chain for a URDF without any) and gives, at joint values q
(rad), the centres (K, 3) of the spheres that are checked against obstacles (those on links a joint moves,
unless the model also checks fixed links), their radii (K,) (m), the centre Jacobians d centre / dq (K, 3, dof)
(a point p fixed to a link moves with sum over the joints i that move the link of (v_i - p x omega_i) qd_i,
[omega_i; v_i] the columns of the space Jacobian; Lynch & Park 5.1) and signed clearances to each obstacle
of a collision.Scene and to its floor (m; sphere surface to obstacle surface, negative: penetration).
It has the interface of collision.ArmSpheres (``radius`` is then per sphere), so that the lift-over and
potential-field heuristics see the same robot as the planner.
"""
from __future__ import annotations

import numpy as np


class RobotSpheres:
    """See module doc. ``names``: for each sphere the link it is fixed to."""

    tool_length = 0.0

    def __init__(self, robot):
        model = robot.model
        self.model = model
        self.robot = robot
        frames = model._link_frames
        links, local, names = [], [], []
        for link, S in robot.link_spheres.items():
            if len(S) == 0 or (frames[link][0] < 0 and not robot.check_fixed_links):
                continue
            links.append(link)
            local.append(np.asarray(S, dtype=np.float64).reshape(-1, 4))
            names += [link] * len(S)
        self.links = links
        self._count = [len(S) for S in local]
        self._local = np.vstack(local) if local else np.zeros((0, 4))
        self.radius = self._local[:, 3].copy()
        self.names = names
        self._link_index = np.repeat(np.arange(len(links)), self._count) if links else np.zeros(0, dtype=int)
        # joints that move each link's frame (by perturbation: no assumption on the tree layout)
        rng = np.random.default_rng(0)
        lo = np.where(np.isfinite(model.joint_lower), model.joint_lower, -np.pi)
        hi = np.where(np.isfinite(model.joint_upper), model.joint_upper, np.pi)
        masks = np.zeros((len(links), model.dof), dtype=bool)
        for q in (rng.uniform(lo, hi) for _ in range(2)):
            for k, link in enumerate(links):
                T = model.fk(q, link)
                for i in range(model.dof):
                    dq = q.copy()
                    dq[i] += 1e-3
                    if not np.allclose(model.fk(dq, link), T, atol=1e-12):
                        masks[k, i] = True
        self._masks = masks

    def __len__(self):
        return len(self._local)

    def centers(self, q):
        """Sphere centres (K, 3) in the base frame at q."""
        q = np.asarray(q, dtype=np.float64)
        out = np.empty((len(self._local), 3))
        s = 0
        for link, n in zip(self.links, self._count):
            T = self.model.fk(q, link)
            out[s:s + n] = self._local[s:s + n, :3] @ T[:3, :3].T + T[:3, 3]
            s += n
        return out

    def centers_and_jacobians(self, q):
        """(C (K, 3), J (K, 3, dof)): centres and d centre / dq."""
        q = np.asarray(q, dtype=np.float64)
        C = self.centers(q)
        Js = self.model.jacobian_space(q)
        W, V = Js[:3], Js[3:]
        J = V[None, :, :] - np.cross(C[:, :, None], W[None, :, :], axis=1)
        J *= self._masks[self._link_index][:, None, :]
        return C, J

    def _floor_mask(self):
        return np.ones(len(self._local), dtype=bool)

    def clearances(self, q, scene):
        """(clearance to each obstacle of ``scene`` (M,), clearance to its floor) at q (m; inf: no floor)."""
        C = self.centers(q)
        c = np.min(scene.per_obstacle(C) - self.radius[:, None], axis=0) if len(scene) and len(C) else \
            np.full(len(scene), np.inf)
        f = float(np.min(scene.floor_distances(C) - self.radius, initial=np.inf))
        return c, f

    def clearance(self, q, scene):
        """(obstacle clearance, floor clearance) at q (m; inf when none)."""
        c, f = self.clearances(q, scene)
        return float(np.min(c, initial=np.inf)), f

    def obstacle_clearances(self, q, scene):
        return self.clearances(q, scene)[0]

    def closest_link(self, q, obstacle):
        """(link name, clearance m) of the sphere closest to one collision.Obstacle at q."""
        from .collision import Scene
        C = self.centers(q)
        d = Scene([obstacle]).per_obstacle(C)[:, 0] - self.radius
        k = int(np.argmin(d))
        return self.names[k], float(d[k])
