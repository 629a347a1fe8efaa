"""What the viewer draws besides the arm, as plain numbers (no viser, no ROS): a planned trajectory's tool path
and ghost poses, obstacle boxes, a decimated point cloud in the base frame, the goal pose's IK branches.

Units: m, rad, s; every point is in the robot's base frame unless its name says otherwise.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from manip_core.errors import InputError

__all__ = ["PlanView", "plan_view", "ghost_indices", "stick_segments", "cloud_from_fields", "decimate",
           "transform_points", "IKBranches", "solve_ik_offline"]

FLOAT32 = 7  # sensor_msgs/PointField.FLOAT32


def ghost_indices(n_points, count):
    """Indices of ``count`` waypoints spread evenly over n_points (first and last included; all if fewer)."""
    if n_points <= 0:
        return []
    count = max(2, int(count))
    return sorted({int(round(i)) for i in np.linspace(0, n_points - 1, min(count, n_points))})


def stick_segments(scene, q, poses=None):
    """(K, 2, 3) m: a segment per skeleton edge (parent link origin -> child link origin) at q: a ghost arm."""
    poses = scene.link_poses(q) if poses is None else poses
    return np.array([[poses[p][:3, 3], poses[c][:3, 3]] for p, c in scene.segments]).reshape(-1, 2, 3)


@dataclass(frozen=True)
class PlanView:
    """A joint trajectory seen from the base frame."""

    times_s: np.ndarray       # (N,) time from start
    positions: np.ndarray     # (N, dof) rad or m, model joint order
    tool_path_m: np.ndarray   # (N, 3) tip origin per point
    ghosts: list              # [(index, (K, 2, 3) stick segments)] at the chosen waypoints

    @property
    def duration_s(self):
        return float(self.times_s[-1] - self.times_s[0]) if len(self.times_s) else 0.0

    @property
    def path_length_m(self):
        return float(np.sum(np.linalg.norm(np.diff(self.tool_path_m, axis=0), axis=1)))

    def summary(self):
        return (f"{len(self.times_s)} points, {self.duration_s:.2f} s, tool path {self.path_length_m:.3f} m")


def plan_view(scene, joint_names, times_s, positions, ghosts=5):
    """PlanView of a trajectory given by name (reordered to the model's joints; InputError on a joint the
    trajectory lacks, a wrong shape or a NaN)."""
    robot = scene.robot
    positions = np.asarray(positions, dtype=np.float64)
    times_s = np.asarray(times_s, dtype=np.float64).reshape(-1)
    names = list(joint_names)
    missing = [n for n in robot.joint_names if n not in names]
    if missing:
        raise InputError(f"trajectory lacks joints {missing}")
    if positions.ndim != 2 or positions.shape != (len(times_s), len(names)) or len(times_s) == 0:
        raise InputError(f"trajectory positions {positions.shape} do not match {len(times_s)} times x "
                         f"{len(names)} joints")
    if not (np.all(np.isfinite(positions)) and np.all(np.isfinite(times_s))):
        raise InputError("trajectory holds NaN or inf")
    Q = np.ascontiguousarray(positions[:, [names.index(n) for n in robot.joint_names]])
    tool = robot.fk_batch(Q)[:, :3, 3].copy()
    return PlanView(times_s, Q, tool, [(i, stick_segments(scene, Q[i])) for i in ghost_indices(len(Q), ghosts)])


def cloud_from_fields(data, fields, point_step, n_points, is_bigendian=False, every=1):
    """(points (N, 3) float32, colours (N, 3) uint8 or None) of a PointCloud2's bytes: every ``every``-th point
    (decimation before decoding: the others are never read).

    ``fields``: [(name, offset, datatype, count)]; x, y, z must be FLOAT32; an ``rgb``/``rgba`` FLOAT32 or UINT32
    field is read as 0x00RRGGBB (the PCL convention). Non-finite points are dropped. Vectorised: strided views of
    the bytes, one copy per output array (no per-point Python)."""
    by_name = {f[0]: f for f in fields}
    if not all(k in by_name and by_name[k][2] == FLOAT32 for k in "xyz"):
        raise InputError(f"point cloud needs float32 x, y, z fields, got {[f[0] for f in fields]}")
    try:
        buf = np.frombuffer(data, dtype=np.uint8)
    except (TypeError, ValueError):  # a list of ints
        buf = np.frombuffer(bytes(data), dtype=np.uint8)
    n_points, every = int(n_points), max(1, int(every))
    if point_step <= 0 or len(buf) < point_step * n_points:
        raise InputError(f"point cloud holds {len(buf)} bytes, fewer than {n_points} points x {point_step}")
    offsets = [by_name[k][1] for k in "xyz"]
    if point_step < max(offsets) + 4:
        raise InputError(f"point cloud: point_step {point_step} B is shorter than its x, y, z fields {offsets}")
    rows = buf[:point_step * n_points].reshape(n_points, point_step)[::every]  # (M, point_step) bytes, a view
    f4 = np.dtype(">f4" if is_bigendian else "<f4")
    o = offsets[0]
    if offsets == [o, o + 4, o + 8]:  # x, y, z side by side (every layout seen so far): one strided copy
        pts = rows[:, o:o + 12].view(f4).astype(np.float32)
    else:
        pts = np.empty((len(rows), 3), np.float32)
        for k, ok in enumerate(offsets):
            pts[:, k] = rows[:, ok:ok + 4].view(f4)[:, 0]
    finite = np.isfinite(pts).all(axis=1)
    keep = None if finite.all() else finite
    if keep is not None:
        pts = pts[keep]
    cols = None
    rgb_field = by_name.get("rgb") or by_name.get("rgba")
    if rgb_field is not None:
        r = rgb_field[1]
        if point_step < r + 4:
            raise InputError(f"point cloud: point_step {point_step} B is shorter than its rgb field at {r}")
        # 0x00RRGGBB as bytes: B G R 0 (little endian) or 0 R G B (big endian)
        cols = rows[:, [r + 1, r + 2, r + 3] if is_bigendian else [r + 2, r + 1, r]]
        if keep is not None:
            cols = cols[keep]
    return pts, cols


def decimate(points, colors, max_points):
    """Every k-th point so that at most max_points remain (k = ceil(N / max_points)); colours alike."""
    n = len(points)
    if max_points <= 0 or n <= max_points:
        return points, colors
    k = -(-n // int(max_points))
    return points[::k], (None if colors is None else colors[::k])


def transform_points(T, points):
    """(N, 3) float32: points mapped by the 4x4 T (source frame -> target frame)."""
    T = np.asarray(T, dtype=np.float32)
    return (np.asarray(points, dtype=np.float32) @ T[:3, :3].T + T[:3, 3]).astype(np.float32)


@dataclass(frozen=True)
class IKBranches:
    """IK solutions of a goal pose (each within the joint limits), the first the one closest to the seed."""

    solutions: list           # [np.ndarray (dof,)] rad or m
    message: str = ""

    def markdown(self, joint_names):
        if not self.solutions:
            return f"**IK: no solution**: {self.message}"
        lines = [f"**IK: {len(self.solutions)} solution{'s' if len(self.solutions) > 1 else ''}**"
                 + (f" ({self.message})" if self.message else "")]
        for k, q in enumerate(self.solutions):
            lines.append(f"{k}: [" + ", ".join(f"{v:+.4f}" for v in q) + "]")
        return "\n\n".join(lines)


def solve_ik_offline(robot, T, q_seed):
    """IKBranches of the 4x4 T: every closed-form branch where the arm has a closed form (closest to q_seed
    first), else the numerical solution from q_seed."""
    q_seed = np.asarray(q_seed, dtype=np.float64)
    try:
        sols = robot.ik_all(T)
        sols = sorted(sols, key=lambda q: float(np.linalg.norm(np.asarray(q) - q_seed)))
        return IKBranches([np.asarray(q, float) for q in sols],
                          "closed form" if sols else (robot.last_ik_all_reason or "unreachable"))
    except NotImplementedError:
        r = robot.ik(T, q_seed=q_seed)
        if r.success:
            return IKBranches([np.asarray(r.q, float)], "numerical")
        return IKBranches([], "numerical IK did not converge within the tolerances")
