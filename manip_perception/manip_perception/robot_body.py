"""Robot self-filter: the robot's own collision geometry at the current joint values, plus the objects it holds
and the objects to be picked, and the mask of the cloud points outside all of them.

No rclpy import. Frames: the obstacles' base frame is the model's base link (``RobotModel.fk``); every sphere
and box below is in that frame once posed. Units: metres.

Geometry (any robot): the URDF's ``<collision>`` elements of every link below the base, read by
manip_planning.robot_collision.parse_collision_shapes (spheres as they are, boxes/cylinders/capsules as
conservative sphere covers, STL/OBJ/DAE meshes as covers of their surface, cached). A description without
collision elements (the bundled UR5), or whose geometry cannot be read (a mesh that is not found), gets
capsules of ``fallback_radius_m`` along the link chain instead, and says so in :attr:`RobotBody.source`.

Held objects are part of the robot: a box in a link's frame (``AttachedBox``) moves with that link. Objects
to be picked are boxes in the base frame: their points are not obstacles either.

A point is removed when it lies within ``padding`` of a sphere (stereo smear at silhouettes, joint_states
timing) or inside a box grown by its own margin.
"""
from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np


class RobotBodyError(ValueError):
    """Bad input to the self-filter (the message names it)."""


@dataclass(frozen=True)
class Box:
    """A box: pose ``T`` (4, 4: box frame -> parent frame), half extents (3,) in m, a name for the logs.
    The parent is the base frame for objects to pick, or the frame of ``link`` for held objects."""

    T: np.ndarray
    half_extents: np.ndarray
    name: str = ""
    link: str = ""  # "" : the base frame; else a link of the robot model (the box moves with it)

    def __post_init__(self):
        T = np.asarray(self.T, dtype=np.float64)
        h = np.asarray(self.half_extents, dtype=np.float64).reshape(-1)
        if T.shape != (4, 4) or not np.all(np.isfinite(T)):
            raise RobotBodyError(f"box {self.name!r}: pose must be a finite (4, 4) transform")
        if h.shape != (3,) or not np.all(np.isfinite(h)) or np.any(h < 0):
            raise RobotBodyError(f"box {self.name!r}: half extents must be 3 finite numbers >= 0, got {h.tolist()}")
        object.__setattr__(self, 'T', T)
        object.__setattr__(self, 'half_extents', h)


def box_from_pose(position, orientation_xyzw, size, name="", link=""):
    """Box of a pose (position m, quaternion x, y, z, w) and full size (m) along its own axes."""
    from .obstacles import camera_pose_matrix  # same maths: a pose to a (4, 4) matrix
    try:
        T = camera_pose_matrix(position, orientation_xyzw)
    except ValueError as e:
        raise RobotBodyError(f"box {name!r}: {e}") from None
    return Box(T, 0.5 * np.asarray(size, dtype=np.float64), name, link)


# ------------------------------------------------------------------------------------------- kernels
@numba.njit(cache=True, nogil=True)
def _outside_spheres(pts, spheres, starts, bounds, padding, keep):
    """keep[i] &= point i is farther than r + padding from every sphere; spheres grouped per link
    (starts: (G + 1,) offsets), each group tested against its bounding sphere first."""
    n = pts.shape[0]
    G = bounds.shape[0]
    for i in range(n):
        if not keep[i]:
            continue
        x, y, z = pts[i, 0], pts[i, 1], pts[i, 2]
        for g in range(G):
            dx, dy, dz = x - bounds[g, 0], y - bounds[g, 1], z - bounds[g, 2]
            rb = bounds[g, 3] + padding
            if dx * dx + dy * dy + dz * dz > rb * rb:
                continue
            hit = False
            for s in range(starts[g], starts[g + 1]):
                dx, dy, dz = x - spheres[s, 0], y - spheres[s, 1], z - spheres[s, 2]
                r = spheres[s, 3] + padding
                if dx * dx + dy * dy + dz * dz <= r * r:
                    hit = True
                    break
            if hit:
                keep[i] = False
                break


def outside_spheres_mask(points, spheres, starts=None, bounds=None, padding=0.0):
    """Boolean mask (N,) of the points (N, 3) farther than radius + padding (m) from every sphere (S, 4)."""
    pts = np.ascontiguousarray(np.asarray(points, dtype=np.float32).reshape(-1, 3))
    S = np.ascontiguousarray(np.asarray(spheres, dtype=np.float64).reshape(-1, 4))
    if starts is None:
        starts = np.array([0, len(S)], dtype=np.int64)
        bounds = bounding_sphere(S).reshape(1, 4) if len(S) else np.zeros((0, 4))
    keep = np.ones(pts.shape[0], dtype=np.bool_)
    if len(S) and pts.shape[0]:
        _outside_spheres(pts, S, np.ascontiguousarray(starts, dtype=np.int64),
                         np.ascontiguousarray(bounds, dtype=np.float64), float(padding), keep)
    return keep


def outside_boxes_mask(points, boxes, margin=0.0):
    """Boolean mask (N,) of the points (N, 3) outside every box (posed Box in the points' frame) grown by
    ``margin`` (m) on each side."""
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    keep = np.ones(pts.shape[0], dtype=bool)
    for b in boxes:
        R, t = b.T[:3, :3], b.T[:3, 3]
        h = b.half_extents + margin
        local = (pts - t) @ R  # box coordinates
        keep &= ~np.all(np.abs(local) <= h, axis=1)
    return keep


def bounding_sphere(spheres):
    """[x, y, z, r] holding every sphere (K, 4): centred on their axis-aligned box."""
    S = np.asarray(spheres, dtype=np.float64).reshape(-1, 4)
    lo = (S[:, :3] - S[:, 3:]).min(axis=0)
    hi = (S[:, :3] + S[:, 3:]).max(axis=0)
    c = 0.5 * (lo + hi)
    return np.append(c, np.max(np.linalg.norm(S[:, :3] - c, axis=1) + S[:, 3]))


# ------------------------------------------------------------------------------------------- the body
@dataclass
class PosedBody:
    """The robot at one configuration, in the base frame: spheres (S, 4) grouped per link (``starts``,
    ``bounds``: one bounding sphere per group), held boxes and boxes of objects to pick."""

    spheres: np.ndarray
    starts: np.ndarray
    bounds: np.ndarray
    boxes: list

    def mask(self, points, padding, box_margin):
        """Boolean mask of the points (N, 3, base frame) outside the robot (spheres + padding) and outside
        every box (+ box_margin)."""
        keep = outside_spheres_mask(points, self.spheres, self.starts, self.bounds, padding)
        if self.boxes:
            idx = np.flatnonzero(keep)
            keep[idx] = outside_boxes_mask(np.asarray(points).reshape(-1, 3)[idx], self.boxes, box_margin)
        return keep

    def transformed(self, T):
        """The same body with every sphere and box premultiplied by T (4, 4): e.g. from the model's base link
        to another base frame."""
        T = np.asarray(T, dtype=np.float64)

        def move(S):
            out = S.copy()
            out[:, :3] = S[:, :3] @ T[:3, :3].T + T[:3, 3]
            return out

        return PosedBody(spheres=move(self.spheres), starts=self.starts, bounds=move(self.bounds),
                         boxes=[Box(T @ b.T, b.half_extents, b.name) for b in self.boxes])


class RobotBody:
    """Collision spheres of a RobotModel's links (in link frames) and their pose at joint values.

    model: manip_core RobotModel; link_spheres: {link: (K, 4) [x, y, z, r] in the link frame}; links that
    fk cannot pose (above the base link) are left out; source: a phrase for the logs.
    """

    def __init__(self, model, link_spheres, source=""):
        self.model = model
        self.source = source
        known = set(model.link_names)
        self.link_spheres = {k: np.asarray(v, dtype=np.float64).reshape(-1, 4)
                             for k, v in link_spheres.items() if k in known and len(v)}
        self.skipped_links = sorted(k for k in link_spheres if k not in known)

    @classmethod
    def from_description(cls, model, description, fallback_radius_m, mesh_cell_m=0.03):
        """From the URDF (text or path) the model was built from: its collision geometry; capsules of
        ``fallback_radius_m`` along the chain when it has none or it cannot be read (``source`` says why)."""
        from manip_planning.robot_collision import (CollisionModelError, capsule_chain_spheres,
                                                    parse_collision_shapes)
        why = None
        text = str(description)
        if text.lstrip().startswith('{'):
            why = "a kinematic.json description has no collision geometry"
        else:
            try:
                spheres = parse_collision_shapes(description, mesh_cell_m)
            except (CollisionModelError, OSError, ValueError) as e:
                why = f"its collision geometry cannot be used ({e})"
            else:
                body = cls(model, spheres)
                n = sum(len(s) for s in body.link_spheres.values())
                if n:
                    body.source = (f"collision geometry of {len(body.link_spheres)} links ({n} spheres)"
                                   + (f"; links above the base skipped: {', '.join(body.skipped_links)}"
                                      if body.skipped_links else ""))
                    return body
                why = "the description has no <collision> elements below the base link"
        if not fallback_radius_m > 0:
            raise RobotBodyError(f"{why}, and the fallback radius is {fallback_radius_m}")
        body = cls(model, capsule_chain_spheres(model, float(fallback_radius_m)))
        body.source = f"capsules of radius {fallback_radius_m:.3f} m along the link chain: {why}"
        return body

    @property
    def n_spheres(self):
        return sum(len(s) for s in self.link_spheres.values())

    def link_pose(self, q, link):
        """(4, 4) pose of a link in the base frame at q."""
        return self.model.fk(np.asarray(q, dtype=np.float64), link)

    def at(self, q, held=(), to_pick=()):
        """PosedBody at joint values q (model order): the link spheres in the base frame, the boxes of held
        objects and of objects to pick (a Box with ``link`` is posed by that link; without, it is already in
        the base frame)."""
        q = np.asarray(q, dtype=np.float64).reshape(-1)
        if q.shape != (self.model.dof,) or not np.all(np.isfinite(q)):
            raise RobotBodyError(f"joint values must be {self.model.dof} finite numbers "
                                 f"({', '.join(self.model.joint_names)}), got {q.tolist()}")
        groups, poses = [], {}
        for link, S in self.link_spheres.items():
            T = poses[link] = self.link_pose(q, link)
            W = np.empty_like(S)
            W[:, :3] = S[:, :3] @ T[:3, :3].T + T[:3, 3]
            W[:, 3] = S[:, 3]
            groups.append(W)
        boxes = []
        for b in list(held) + list(to_pick):
            if b.link:
                T = poses.get(b.link)
                if T is None:
                    T = poses[b.link] = self.link_pose(q, b.link)
                boxes.append(Box(T @ b.T, b.half_extents, b.name))
            else:
                boxes.append(b)
        spheres = np.vstack(groups) if groups else np.zeros((0, 4))
        starts = np.concatenate([[0], np.cumsum([len(g) for g in groups])]).astype(np.int64)
        bounds = np.array([bounding_sphere(g) for g in groups]).reshape(-1, 4)
        return PosedBody(spheres=spheres, starts=starts, bounds=bounds, boxes=boxes)
