"""A small transform buffer without rclpy or tf2: the static transforms and the latest dynamic one of each
frame, and lookups along the tree (chains through common ancestors).

Fed from tf2_msgs/TFMessage-like objects (``transforms``: geometry_msgs/TransformStamped with
``header.frame_id`` = parent, ``child_frame_id``, ``transform.translation`` x, y, z and
``transform.rotation`` x, y, z, w) or from plain (4, 4) matrices. Frame names lose a leading '/'.

Conventions: a transform parent <- child is the pose of the child frame in the parent frame (it maps
child coordinates to parent coordinates), as in tf. :meth:`TransformBuffer.lookup` (target, source) returns
the (4, 4) matrix mapping source coordinates into target coordinates (tf2's lookupTransform(target, source)).
No time interpolation: the latest dynamic transform of a frame is used whatever its stamp (``age`` tells
its stamp), a static one never expires.
"""
import math

import numpy as np


class TransformError(LookupError):
    """No chain of transforms between the two frames, or an invalid transform."""


def _name(frame):
    return str(frame).lstrip('/')


def matrix_from_translation_quaternion(t, q_xyzw):
    """(4, 4) of a translation (3) and a quaternion (x, y, z, w), normalised; TransformError if invalid."""
    x, y, z, w = (float(v) for v in q_xyzw)
    n = math.sqrt(x * x + y * y + z * z + w * w)
    t = [float(v) for v in t]
    if not (n > 1e-9 and all(math.isfinite(v) for v in (x, y, z, w, *t))):
        raise TransformError(f"invalid transform: translation {t}, quaternion (x, y, z, w) {(x, y, z, w)}")
    x, y, z, w = x / n, y / n, z / n, w / n
    T = np.eye(4)
    T[:3, :3] = [[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                 [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                 [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]]
    T[:3, 3] = t
    return T


def invert(T):
    R, p = T[:3, :3], T[:3, 3]
    out = np.eye(4)
    out[:3, :3] = R.T
    out[:3, 3] = -R.T @ p
    return out


class TransformBuffer:
    def __init__(self):
        self._static = {}  # child -> (parent, T)
        self._dynamic = {}  # child -> (parent, T, stamp_s)

    def set_transform(self, parent, child, T, static=False, stamp=None):
        """Store parent <- child (a (4, 4) matrix). A dynamic transform replaces the previous one of the
        child; it takes precedence over a static transform of the same child."""
        parent, child = _name(parent), _name(child)
        if not parent or not child or parent == child:
            raise TransformError(f"transform needs two different frame names, got '{parent}' <- '{child}'")
        T = np.asarray(T, dtype=float).reshape(4, 4)
        if static:
            self._static[child] = (parent, T)
        else:
            self._dynamic[child] = (parent, T, stamp)

    def add_message(self, msg, static=False):
        """Every transform of a TFMessage-like object; returns how many were stored (invalid ones skipped)."""
        n = 0
        for ts in msg.transforms:
            tr, rot = ts.transform.translation, ts.transform.rotation
            try:
                T = matrix_from_translation_quaternion((tr.x, tr.y, tr.z), (rot.x, rot.y, rot.z, rot.w))
                stamp = ts.header.stamp.sec + ts.header.stamp.nanosec * 1e-9
                self.set_transform(ts.header.frame_id, ts.child_frame_id, T, static=static, stamp=stamp)
            except TransformError:
                continue
            n += 1
        return n

    def _parent(self, child):
        if child in self._dynamic:
            return self._dynamic[child][:2]
        return self._static.get(child)

    def _chain(self, frame):
        """[(frame, T_root_frame)] from the frame up to its root (T maps frame coordinates to each one's
        root-most ancestor so far)."""
        out = [(frame, np.eye(4))]
        seen = {frame}
        T = np.eye(4)
        f = frame
        while True:
            up = self._parent(f)
            if up is None:
                return out
            parent, T_pc = up
            if parent in seen:
                raise TransformError(f"the transforms form a loop through '{parent}'")
            seen.add(parent)
            T = T_pc @ T  # coordinates of `frame` in `parent`
            out.append((parent, T))
            f = parent

    def lookup(self, target, source):
        """(4, 4) mapping ``source`` coordinates to ``target`` coordinates; TransformError if unconnected."""
        target, source = _name(target), _name(source)
        if target == source:
            return np.eye(4)
        up_s = dict(self._chain(source))  # ancestor -> T_ancestor_source
        for anc, T_anc_target in self._chain(target):
            if anc in up_s:
                return invert(T_anc_target) @ up_s[anc]
        known = sorted(self.frames())
        raise TransformError(f"no transform chain between '{target}' and '{source}' (known frames: "
                             f"{', '.join(known) if known else 'none'})")

    def poses_in(self, target):
        """{frame: (4, 4) mapping that frame's coordinates to ``target``'s} for every known frame connected to
        ``target`` (target itself included, as the identity); frames of other trees are left out."""
        target = _name(target)
        out = {}
        for f in self.frames() | {target}:
            try:
                out[f] = self.lookup(target, f)
            except TransformError:
                continue
        return out

    def can_transform(self, target, source):
        try:
            self.lookup(target, source)
            return True
        except TransformError:
            return False

    def frames(self):
        out = set()
        for child, (parent, *_rest) in list(self._static.items()) + list(self._dynamic.items()):
            out.update((child, parent))
        return out
