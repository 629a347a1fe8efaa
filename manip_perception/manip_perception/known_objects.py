"""Objects the task knows about, from a manip_msgs/SceneObjectArray (the ``known_objects`` topic of
stereo_obstacles), as boxes for the self-filter (robot_body). No rclpy import.

Each message replaces the whole set (an empty array clears it). Per object (``SceneObject``):

* ``kind`` KIND_OBJECT, ``attached`` true: **held** by the robot, part of the robot: its points are dropped
  wherever the arm takes it. Its pose is in ``header.frame_id``: a link of the robot model (e.g. the tip link:
  the box then moves with that link), or any other frame (the base frame, "" = the base frame, a tf frame):
  the pose at the message's stamp, fixed to the model's tip link with the joint values of that stamp.
* ``kind`` KIND_OBJECT, ``attached`` false: **to pick**: not an obstacle, its points are dropped where it is
  (pose in ``header.frame_id`` as above; a robot link makes it move with the link).
* other kinds (KIND_OBSTACLE, KIND_SUPPORT): ignored (obstacles stay obstacles; the support plane is fitted).

Box: ``pose`` (centre, quaternion x, y, z, w) and ``size`` (m, along the object's own axes; spheres and
cylinders: diameter, diameter, height: their bounding box).
"""
import math

import numpy as np

from .robot_body import Box, box_from_pose

KIND_OBJECT = 0  # manip_msgs/SceneObject constants (checked against the message in the tests)
KNOWN_OBJECTS_QOS_DEPTH = 1


class _Entry:
    __slots__ = ('name', 'attached', 'frame', 'T', 'size', 'stamp', 'fixed')

    def __init__(self, name, attached, frame, T, size, stamp):
        self.name, self.attached, self.frame, self.T, self.size, self.stamp = name, attached, frame, T, size, stamp
        self.fixed = None  # held object given outside the robot's links: its Box on the tip link, once computed


class KnownObjects:
    def __init__(self):
        self.entries = []

    def set(self, msg, base_frame):
        """Replace the set with a SceneObjectArray; ValueError (naming the object) when one is malformed."""
        out = []
        for k, o in enumerate(msg.objects):
            if o.kind != KIND_OBJECT:
                continue
            name = o.name or f"#{k}"
            p, q = o.pose.position, o.pose.orientation
            size = np.array([o.size.x, o.size.y, o.size.z], dtype=float)
            if not np.all(np.isfinite(size)) or np.any(size < 0):
                raise ValueError(f"object {name!r}: size must be finite and >= 0, got {size.tolist()}")
            if not all(math.isfinite(v) for v in (p.x, p.y, p.z, q.x, q.y, q.z, q.w)) or \
                    q.x * q.x + q.y * q.y + q.z * q.z + q.w * q.w < 1e-12:
                raise ValueError(f"object {name!r}: pose must be finite with a non-zero quaternion")
            box = box_from_pose([p.x, p.y, p.z], [q.x, q.y, q.z, q.w], size, name)
            frame = o.header.frame_id or msg.header.frame_id or base_frame
            stamp = o.header.stamp.sec + o.header.stamp.nanosec * 1e-9
            if stamp <= 0:
                stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
            out.append(_Entry(name, bool(o.attached), frame, box.T, size, stamp))
        self.entries = out

    def describe(self):
        if not self.entries:
            return "none"
        return ", ".join(f"{e.name} ({'held' if e.attached else 'to pick'}, in {e.frame})" for e in self.entries)

    def boxes(self, model, q, frame_pose, joints_at):
        """(held, to_pick): Box lists for RobotBody.at, in the model's base frame or on a link.

        frame_pose(frame, q): (4, 4) pose of a frame in the model's base frame at joint values q (robot links
        by forward kinematics, others by tf; raises when unknown); joints_at(stamp_s): joint values (model
        order) at a time, or None."""
        links = set(model.link_names)
        held, to_pick = [], []
        for e in self.entries:
            half = 0.5 * e.size
            if e.frame in links and e.frame != model.base_link:
                (held if e.attached else to_pick).append(Box(e.T, half, e.name, link=e.frame))
            elif not e.attached:
                to_pick.append(Box(frame_pose(e.frame, q) @ e.T, half, e.name))
            else:
                if e.fixed is None:
                    q0 = joints_at(e.stamp)
                    if q0 is None:
                        raise ValueError(f"held object {e.name!r}: no joint_states at its stamp yet")
                    T_tip = model.fk(np.asarray(q0, dtype=float), model.tip_link)
                    e.fixed = Box(np.linalg.inv(T_tip) @ frame_pose(e.frame, q0) @ e.T, half, e.name,
                                  link=model.tip_link)
                held.append(e.fixed)
        return held, to_pick
