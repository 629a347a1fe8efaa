"""The world a planner avoids: oriented boxes, cylinders, spheres and capsules in the robot's root frame.

Loaders: a MoveIt ``PlanningScene`` YAML (``world.collision_objects[]`` with an optional ``pose``,
``primitives`` box [x, y, z] full sizes / cylinder [height, radius] / sphere [radius] / cone (covered by its
cylinder) and ``primitive_poses`` relative to ``pose``; quaternions [x, y, z, w]), manip_msgs ObstacleArray
(axis-aligned boxes), manip_msgs SceneObjectArray (oriented boxes), and a point cloud (occupied voxels as
boxes). Lengths in metres; the frame is the planning frame (the URDF root / the robot base).
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from .shapes import Shape, ShapeError, pack


class SceneError(ValueError):
    """A scene file or message that cannot be read; the message names it."""


def quat_xyzw_to_matrix(q):
    """Rotation (3, 3) of a quaternion [x, y, z, w] (normalised first)."""
    x, y, z, w = (float(v) for v in q)
    n = math.sqrt(x * x + y * y + z * z + w * w)
    if not n > 0 or not math.isfinite(n):
        raise ValueError(f"quaternion {list(q)} has no direction")
    x, y, z, w = x / n, y / n, z / n, w / n
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def pose_matrix(position=(0, 0, 0), orientation_xyzw=(0, 0, 0, 1)):
    T = np.eye(4)
    T[:3, :3] = quat_xyzw_to_matrix(orientation_xyzw)
    T[:3, 3] = np.asarray(position, dtype=np.float64).reshape(3)
    return T


class PlanningScene:
    """A list of Shape obstacles (planning frame) and their packed form for the kernels."""

    def __init__(self, shapes=()):
        self.shapes = list(shapes)
        self._packed = None

    def __len__(self):
        return len(self.shapes)

    def add(self, shape):
        self.shapes.append(shape)
        self._packed = None
        return self

    def extend(self, other):
        for s in (other.shapes if isinstance(other, PlanningScene) else other):
            self.add(s)
        return self

    @property
    def packed(self):
        """(N, OBS_STRIDE) float64 rows (see shapes.py)."""
        if self._packed is None:
            self._packed = pack(self.shapes)
        return self._packed

    def signed_distance(self, points):
        """Signed distance (m) of points (N, 3) to the nearest obstacle; +inf without obstacles."""
        P = np.asarray(points, dtype=np.float64).reshape(-1, 3)
        d = np.full(len(P), np.inf)
        for s in self.shapes:
            d = np.minimum(d, s.signed_distance(P))
        return d

    # ------------------------------------------------------------------------------------- loaders
    @classmethod
    def from_moveit_yaml(cls, path_or_dict):
        """Scene of a MoveIt PlanningScene YAML file (or its parsed dict); raises SceneError naming the file."""
        src = "<dict>"
        data = path_or_dict
        if not isinstance(path_or_dict, dict):
            import yaml
            src = str(path_or_dict)
            try:
                data = yaml.safe_load(Path(path_or_dict).read_text())
            except (OSError, yaml.YAMLError) as e:
                raise SceneError(f"{src}: cannot read the planning scene: {str(e).splitlines()[0]}") from None
        if not isinstance(data, dict):
            raise SceneError(f"{src}: not a MoveIt PlanningScene (expected a mapping)")
        world = data.get("world") or {}
        objs = world.get("collision_objects") or []
        scene = cls()
        try:
            for k, obj in enumerate(objs):
                scene.extend(_collision_object(obj, k))
        except (ShapeError, ValueError, TypeError, KeyError, IndexError) as e:
            raise SceneError(f"{src}: {e}") from None
        return scene

    @classmethod
    def from_obstacle_array(cls, msg):
        """manip_msgs/ObstacleArray: each obstacle as its axis-aligned box (a sphere when the box is empty)."""
        scene = cls()
        for o in msg.obstacles:
            c = (o.center.x, o.center.y, o.center.z)
            size = np.array([o.size.x, o.size.y, o.size.z], dtype=np.float64)
            T = pose_matrix(c)
            if np.all(size > 0):
                scene.add(Shape("box", 0.5 * size, T, f"obstacle{o.id}"))
            elif o.radius > 0:
                scene.add(Shape("sphere", (o.radius,), T, f"obstacle{o.id}"))
        return scene

    @classmethod
    def from_scene_objects(cls, msg, kinds=None, skip_attached=True):
        """manip_msgs/SceneObjectArray: oriented boxes of the objects' pose and size (kinds: the SceneObject
        KIND_* values to keep, default all; attached objects are skipped: they move with the robot)."""
        scene = cls()
        for o in msg.objects:
            if kinds is not None and o.kind not in kinds:
                continue
            if skip_attached and o.attached:
                continue
            p, q = o.pose.position, o.pose.orientation
            T = pose_matrix((p.x, p.y, p.z), (q.x, q.y, q.z, q.w))
            size = np.array([o.size.x, o.size.y, o.size.z], dtype=np.float64)
            if np.all(size > 0):
                scene.add(Shape("box", 0.5 * size, T, o.name))
        return scene

    @classmethod
    def from_point_cloud(cls, points, voxel_size_m=0.02, min_points=1):
        """Occupied voxels of a point cloud (N, 3) (planning frame) as boxes of side voxel_size_m; a voxel
        needs min_points points (to drop isolated noise)."""
        P = np.asarray(points, dtype=np.float64).reshape(-1, 3)
        P = P[np.all(np.isfinite(P), axis=1)]
        if voxel_size_m <= 0:
            raise SceneError(f"voxel_size_m must be > 0, got {voxel_size_m}")
        scene = cls()
        if len(P) == 0:
            return scene
        keys = np.floor(P / voxel_size_m).astype(np.int64)
        uniq, counts = np.unique(keys, axis=0, return_counts=True)
        h = 0.5 * voxel_size_m
        for k in uniq[counts >= min_points]:
            scene.add(Shape("box", (h, h, h), pose_matrix((k + 0.5) * voxel_size_m), "voxel"))
        return scene


def _collision_object(obj, k):
    name = str(obj.get("id", f"object{k}"))
    T_obj = np.eye(4)
    if obj.get("pose"):
        pz = obj["pose"]
        T_obj = pose_matrix(pz.get("position", (0, 0, 0)), pz.get("orientation", (0, 0, 0, 1)))
    prims = obj.get("primitives") or []
    poses = obj.get("primitive_poses") or []
    if obj.get("meshes"):
        raise ValueError(f"collision object '{name}': meshes are not supported in scenes (use primitives)")
    if len(poses) < len(prims):
        raise ValueError(f"collision object '{name}': {len(prims)} primitives but {len(poses)} primitive_poses")
    out = []
    for prim, pp in zip(prims, poses):
        T = T_obj @ pose_matrix(pp.get("position", (0, 0, 0)), pp.get("orientation", (0, 0, 0, 1)))
        t = str(prim.get("type", "")).lower()
        d = [float(x) for x in prim.get("dimensions", [])]
        if t == "box" and len(d) == 3:
            out.append(Shape("box", (0.5 * d[0], 0.5 * d[1], 0.5 * d[2]), T, name))
        elif t in ("cylinder", "cone") and len(d) == 2:   # [height, radius]; a cone inside its cylinder
            out.append(Shape("cylinder", (d[1], 0.5 * d[0]), T, name))
        elif t == "sphere" and len(d) == 1:
            out.append(Shape("sphere", (d[0],), T, name))
        else:
            raise ValueError(f"collision object '{name}': unsupported primitive {t!r} with dimensions {d}")
    return out
