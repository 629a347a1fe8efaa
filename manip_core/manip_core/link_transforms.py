"""Link frames of a whole URDF tree from joint positions, with robot_state_publisher's semantics (no rclpy).

robot_state_publisher (ROS 2) publishes, for every joint of the URDF, the transform of its child link's
frame in its parent link's frame: fixed joints once on ``/tf_static``, every other joint on ``/tf`` each
time ``joint_states`` name it (a joint missing from ``joint_states`` is not published; a mimic joint follows
the joint it mimics: q = multiplier * q_mimicked + offset). Frame ids are the link names, optionally with a
prefix. This module computes those transforms; the ``state_publisher`` node (manip_core/ros) publishes them.

Transforms are 4x4 homogeneous matrices T_parent_child (metres): joint origin times the joint's motion
(revolute/continuous: rotation by q rad about the unit axis; prismatic: translation by q m along it).
Floating and planar joints cannot be expressed by one joint position and are skipped (as by
robot_state_publisher).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import InputError
from .spatial import axis_angle_to_matrix, matrix_to_quat_wxyz
from .tree import KinematicTree
from .urdf import parse_urdf

__all__ = ["LinkTransforms", "FrameTransform", "to_translation_quat_xyzw"]

MOVING_TYPES = ("revolute", "continuous", "prismatic")


@dataclass(frozen=True)
class FrameTransform:
    """T_parent_child (4x4, m) of one joint: the child link's frame in the parent link's frame."""

    joint: str
    parent: str
    child: str
    matrix: np.ndarray


def to_translation_quat_xyzw(T):
    """((x, y, z) m, (x, y, z, w) unit quaternion) of a 4x4 transform (geometry_msgs/Transform order)."""
    w, x, y, z = matrix_to_quat_wxyz(np.asarray(T, dtype=np.float64)[:3, :3])
    if w < 0.0:  # one of the two equivalent quaternions, the one with w >= 0
        w, x, y, z = -w, -x, -y, -z
    return tuple(float(v) for v in T[:3, 3]), (float(x), float(y), float(z), float(w))


class LinkTransforms:
    """The joints of a URDF split as robot_state_publisher does: fixed ones (static) and moving ones."""

    def __init__(self, tree: KinematicTree):
        self.tree = tree
        self.fixed = []    # FrameTransform of each fixed joint
        self.moving = []   # (name, parent, child, origin 4x4, unit axis, type, mimic or None)
        self.skipped = []  # joint names of types that one position cannot describe (floating, planar)
        for name, j in tree.joints.items():
            if j.type == "fixed":
                self.fixed.append(FrameTransform(name, j.parent, j.child, np.array(j.origin, dtype=np.float64)))
            elif j.type in MOVING_TYPES:
                axis = np.asarray(j.axis, dtype=np.float64)
                axis = axis / np.linalg.norm(axis)
                self.moving.append((name, j.parent, j.child, np.array(j.origin, dtype=np.float64), axis, j.type,
                                    j.mimic))
            else:
                self.skipped.append(name)
        self.moving_joint_names = [m[0] for m in self.moving if m[6] is None]

    @classmethod
    def from_urdf(cls, path_or_xml):
        """From a URDF file or text (manip_core.urdf.parse_urdf; ModelError on a bad description)."""
        return cls(parse_urdf(path_or_xml))

    def static_transforms(self):
        """FrameTransform of every fixed joint (for /tf_static)."""
        return list(self.fixed)

    def moving_transforms(self, names, positions):
        """(FrameTransform list, names of moving joints not given) for joint ``names`` and ``positions``
        (rad or m, as in sensor_msgs/JointState; extra names are ignored). A mimic joint is published when
        the joint it mimics is given."""
        if len(names) != len(positions):
            raise InputError(f"{len(names)} joint names for {len(positions)} positions")
        q = {}
        for n, v in zip(names, positions):
            v = float(v)
            if not np.isfinite(v):
                raise InputError(f"position of joint {n} is {v}")
            q[n] = v
        out, missing = [], []
        for name, parent, child, origin, axis, jtype, mimic in self.moving:
            if mimic is not None:
                if mimic.joint not in q:
                    missing.append(name)
                    continue
                value = mimic.multiplier * q[mimic.joint] + mimic.offset
            elif name in q:
                value = q[name]
            else:
                missing.append(name)
                continue
            motion = np.eye(4)
            if jtype == "prismatic":
                motion[:3, 3] = axis * value
            else:
                motion[:3, :3] = axis_angle_to_matrix(axis, value)
            out.append(FrameTransform(name, parent, child, origin @ motion))
        return out, missing
