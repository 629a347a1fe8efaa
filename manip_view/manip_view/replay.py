"""A recorded run for ``manip-view --bag BAG``: the bag's joint states, plans (the planner's tip path markers),
obstacles, point clouds and left images, looked up by time (no ROS graph: the bag is read with manip_core.bag and
decoded with rclpy's serialization).

Times are seconds from the bag's first message. ``Run.at(t)`` gives what was last received at or before t.
"""
from __future__ import annotations

import bisect
import importlib
from dataclasses import dataclass, field

import numpy as np

from manip_core.bag import BagError, read_bag

from .overlays import cloud_from_fields, decimate

__all__ = ["Run", "Snapshot", "load_run", "TOPICS"]

# What the replay shows: topic name (any namespace: matched by its last parts) -> message type
TOPICS = {"joint_states": "sensor_msgs/msg/JointState", "planned_path": "visualization_msgs/msg/MarkerArray",
          "obstacles": "manip_msgs/msg/ObstacleArray", "stereo/points2": "sensor_msgs/msg/PointCloud2",
          "stereo/left/image_rect": "sensor_msgs/msg/Image", "robot_description": "std_msgs/msg/String",
          "tf_static": "tf2_msgs/msg/TFMessage"}


def _msg_class(msgtype):
    pkg, kind, name = msgtype.split("/")
    return getattr(importlib.import_module(f"{pkg}.{kind}"), name)


@dataclass
class Snapshot:
    """What the page shows at one time of the run (None: nothing received yet)."""

    t_s: float
    q: np.ndarray | None = None
    tool_path_m: np.ndarray | None = None
    obstacles: list | None = None
    cloud: tuple | None = None
    image: np.ndarray | None = None


@dataclass
class Run:
    duration_s: float
    joint_names: list
    t_joints: np.ndarray              # (N,) s
    Q: np.ndarray                     # (N, dof) in joint_names order (NaN where a message lacked a joint)
    streams: dict = field(default_factory=dict)   # kind -> ([t_s], [value]) in time order
    description: str | None = None    # the last robot_description text in the bag, if any
    tf: object = None                 # manip_perception TransformBuffer of the bag's /tf_static

    def cloud_in(self, base_frame, cloud):
        """(points (N, 3) in base_frame, colours) of a snapshot's cloud; None when /tf_static lacks its frame."""
        from .overlays import transform_points

        pts, cols, frame = cloud
        if not frame or frame.lstrip("/") == base_frame:
            return pts, cols
        try:
            return transform_points(self.tf.lookup(base_frame, frame), pts), cols
        except LookupError:
            return None

    def _latest(self, kind, t):
        ts, vals = self.streams.get(kind, ([], []))
        k = bisect.bisect_right(ts, t) - 1
        return vals[k] if k >= 0 else None

    def at(self, t_s, names=None):
        """Snapshot at t_s; q reordered to ``names`` (a joint the run lacks: None for q)."""
        k = int(np.searchsorted(self.t_joints, t_s, side="right")) - 1
        q = None
        if k >= 0:
            q = self.Q[k]
            if names is not None:
                idx = {n: i for i, n in enumerate(self.joint_names)}
                q = None if any(n not in idx for n in names) else np.array([q[idx[n]] for n in names])
            if q is not None and not np.all(np.isfinite(q)):
                q = None
        image = self._latest("image", t_s)
        return Snapshot(t_s, q, self._latest("path", t_s), self._latest("obstacles", t_s),
                        self._latest("cloud", t_s), image() if image is not None else None)


def _match(topic):
    t = topic.lstrip("/")
    for key in TOPICS:
        if t == key or t.endswith("/" + key):
            return key
    return None


def load_run(path, max_cloud_points=50_000):
    """Run of a rosbag2 folder (BagError when it cannot be read or holds no joint_states)."""
    from rclpy.serialization import deserialize_message

    info, start, end, messages = read_bag(path)
    chosen = {t.name: _match(t.name) for t in info if _match(t.name) and TOPICS[_match(t.name)] == t.msgtype}
    if not any(k == "joint_states" for k in chosen.values()):
        raise BagError(f"{path}: no sensor_msgs/msg/JointState joint_states topic (it has "
                       f"{', '.join(sorted(t.name for t in info))})")
    classes = {k: _msg_class(v) for k, v in TOPICS.items()}
    names, rows, t_joints = [], [], []
    streams = {k: ([], []) for k in ("path", "obstacles", "cloud", "image")}
    description = None
    from manip_perception.tf_buffer import TransformBuffer
    tf = TransformBuffer()
    for topic, t_ns, raw in messages():
        key = chosen.get(topic)
        if key is None:
            continue
        t = (t_ns - start) * 1e-9
        msg = deserialize_message(raw, classes[key])
        if key == "joint_states":
            for n in msg.name:
                if n not in names:
                    names.append(n)
            pos = dict(zip(msg.name, msg.position))
            rows.append(pos)
            t_joints.append(t)
        elif key == "planned_path":
            for m in msg.markers:
                if m.ns == "tip_path" and m.type == 4 and m.action == 0:  # LINE_STRIP, ADD
                    streams["path"][0].append(t)
                    streams["path"][1].append(np.array([[p.x, p.y, p.z] for p in m.points]).reshape(-1, 3))
        elif key == "obstacles":
            streams["obstacles"][0].append(t)
            streams["obstacles"][1].append([(np.array([o.center.x, o.center.y, o.center.z]),
                                             np.array([o.size.x, o.size.y, o.size.z])) for o in msg.obstacles])
        elif key == "stereo/points2":
            fields = [(f.name, f.offset, f.datatype, f.count) for f in msg.fields]
            pts, cols = cloud_from_fields(msg.data, fields, msg.point_step, msg.width * msg.height,
                                          msg.is_bigendian)
            streams["cloud"][0].append(t)
            streams["cloud"][1].append((*decimate(pts, cols, max_cloud_points), msg.header.frame_id))
        elif key == "stereo/left/image_rect":
            streams["image"][0].append(t)
            streams["image"][1].append(_image_loader(msg))
        elif key == "robot_description":
            description = msg.data
        elif key == "tf_static":
            tf.add_message(msg, static=True)
    Q = np.array([[r.get(n, np.nan) for n in names] for r in rows], dtype=np.float64).reshape(len(rows), len(names))
    return Run(max(0.0, (end - start) * 1e-9), names, np.array(t_joints), Q, streams, description, tf)


def _image_loader(msg):
    """A function giving the image as (H, W, 3) uint8 (decoded when shown: a run holds many)."""
    def load():
        from manip_perception.image_conversion import image_to_numpy

        a = image_to_numpy(msg)
        if msg.encoding in ("bgr8", "bgra8"):
            a = a[..., 2::-1]
        elif a.ndim == 2:
            a = np.repeat(a[..., None], 3, axis=2)
        return np.ascontiguousarray(a[..., :3]).astype(np.uint8)
    return load
