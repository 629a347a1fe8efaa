"""What the viewer draws for a robot at a joint vector, as plain numbers (no viser, no ROS).

``RobotScene`` binds a manip_core RobotModel (and, for a URDF, its visual/collision shapes): link poses in the base
frame from ``RobotModel.fk(q, link=...)``, the skeleton segments between joint origins (for descriptions without
geometry), slider ranges from the joint limits, the tip readout (pose, manipulability, condition number) and a
default camera that frames the whole arm. The viser glue (manip_view.app) only forwards these numbers.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from manip_core import RobotModel
from manip_core.errors import InputError
from manip_core.spatial import matrix_to_quat_wxyz, matrix_to_rpy

from .geometry import parse_link_shapes, segment_pose, shape_mesh, skeleton_radius_m

log = logging.getLogger(__name__)

__all__ = ["RobotScene", "Readout", "load_robot", "CONTINUOUS_RANGE_RAD", "SINGULAR_CONDITION"]

CONTINUOUS_RANGE_RAD = math.pi  # slider range of a joint without limits: [-pi, pi]
SINGULAR_CONDITION = 1e12       # condition numbers above this are shown as "singular"


def load_robot(name_or_path, base_link=None, tip_link=None):
    """(RobotModel, URDF path or None): a bundled name or a .urdf / .kinematic.json path (ModelError if bad)."""
    from manip_core.robots import robot_path

    path = robot_path(name_or_path)
    robot = RobotModel.load(str(path), base_link, tip_link)
    return robot, (Path(path) if str(path).endswith(".urdf") else None)


@dataclass(frozen=True)
class Readout:
    """The tip (robot.tip_link) in the base frame and the Jacobian measures at q (body Jacobian, part="full")."""

    q: np.ndarray                 # rad or m, robot.joint_names order
    position_m: np.ndarray        # (3,) tip origin in the base frame
    rpy_rad: np.ndarray           # (3,) URDF fixed-axis roll, pitch, yaw of the tip in the base frame
    quat_wxyz: np.ndarray         # (4,) the same rotation, (w, x, y, z), w >= 0
    manipulability: float         # Yoshikawa sqrt(det(J J^T)) (see RobotModel.manipulability)
    condition_number: float       # sigma_max / sigma_min of J; inf when singular

    def markdown(self, base_link, tip_link):
        p, r, w = self.position_m, np.degrees(self.rpy_rad), self.quat_wxyz
        cond = ("singular" if not math.isfinite(self.condition_number) or self.condition_number > SINGULAR_CONDITION
                else f"{self.condition_number:.3f}")
        return (f"**{tip_link}** in **{base_link}**\n\n"
                f"position m: x {p[0]:+.4f} y {p[1]:+.4f} z {p[2]:+.4f}\n\n"
                f"rpy deg: {r[0]:+.2f} {r[1]:+.2f} {r[2]:+.2f}\n\n"
                f"quat wxyz: {w[0]:+.4f} {w[1]:+.4f} {w[2]:+.4f} {w[3]:+.4f}\n\n"
                f"manipulability: {self.manipulability:.5f}\n\n"
                f"condition number: {cond}")


class RobotScene:
    """Link poses, skeleton and readout of one RobotModel; ``shapes`` picks "visual" or "collision" URDF shapes."""

    def __init__(self, robot, urdf_path=None):
        self.robot = robot
        self.urdf_path = urdf_path
        tree = robot.tree
        self.links = [robot.base_link] + [n for n in robot.link_names if n != robot.base_link]
        drawn = set(self.links)
        # Tree edges between drawn links: (parent link, child link), one capsule each in the skeleton.
        self.segments = []
        for link in self.links:
            j = tree.parent_joint.get(link)
            if j is not None:
                joint = tree.joints[j] if isinstance(j, str) else j
                if joint.parent in drawn:
                    self.segments.append((joint.parent, link))
        self._shapes = {}
        q0 = self.initial_q()
        poses = self.link_poses(q0)
        lengths = [float(np.linalg.norm(poses[c][:3, 3] - poses[p][:3, 3])) for p, c in self.segments]
        self.skeleton_radius_m = skeleton_radius_m(lengths)

    # ----------------------------------------------------------------------------------- geometry
    def shapes(self, which="visual"):
        """{link: [Shape]} of the URDF (empty for a kinematic.json or a URDF without such elements)."""
        if which not in self._shapes:
            self._shapes[which] = ({} if self.urdf_path is None
                                   else parse_link_shapes(str(self.urdf_path), which))
        return {k: v for k, v in self._shapes[which].items() if k in set(self.links)}

    def meshes(self, which="visual"):
        """{link: [(vertices (V, 3) m in the link frame, faces (F, 3), rgba or None)]} ready to draw.

        A link whose ``which`` shapes cannot be read (e.g. COLLADA visuals without pycollada) gets its shapes of the
        other kind instead, with a warning; a link with neither is left out (the skeleton then shows the arm)."""
        other = "collision" if which == "visual" else "visual"
        out = {}
        for link in self.links:
            for kind in (which, other):
                items = self.shapes(kind).get(link, [])
                try:
                    out[link] = [(*shape_mesh(sh), sh.rgba if kind == which else None) for sh in items]
                except Exception as e:  # noqa: BLE001 - trimesh raises many types for unreadable files
                    log.warning("%s: link %s: cannot read its %s shapes (%s); trying its %s shapes",
                                self.robot.source, link, kind, e, other if kind == which else "skeleton")
                    out.pop(link, None)
                    continue
                if not out[link]:
                    del out[link]
                break
        return out

    def slider_ranges(self):
        """[(name, lower, upper)] per joint (rad or m); unbounded joints get +-CONTINUOUS_RANGE_RAD."""
        out = []
        for name, lo, hi in zip(self.robot.joint_names, self.robot.joint_lower, self.robot.joint_upper):
            lo = float(lo) if math.isfinite(lo) else -CONTINUOUS_RANGE_RAD
            hi = float(hi) if math.isfinite(hi) else CONTINUOUS_RANGE_RAD
            out.append((name, lo, hi))
        return out

    def initial_q(self):
        """Zero clipped into the slider ranges."""
        r = self.slider_ranges()
        return np.array([min(max(0.0, lo), hi) for _, lo, hi in r])

    def clip(self, q):
        """q clipped into the slider ranges (InputError on a wrong length or a NaN)."""
        q = np.asarray(q, dtype=np.float64).reshape(-1)
        if q.shape != (self.robot.dof,) or not np.all(np.isfinite(q)):
            raise InputError(f"q must hold {self.robot.dof} finite joint values, got {q.tolist()}")
        r = self.slider_ranges()
        return np.clip(q, [x[1] for x in r], [x[2] for x in r])

    def link_poses(self, q):
        """{link: T_base_link (4x4, m)} of every drawn link at q (the base link is the identity)."""
        q = np.ascontiguousarray(q, dtype=np.float64)
        out = {self.robot.base_link: np.eye(4)}
        for link in self.links[1:]:
            out[link] = self.robot.fk(q, link=link)
        return out

    def skeleton(self, q, poses=None):
        """[(parent, child, T_base_capsule (4x4), length m)]: capsules (z axis along the segment) at q."""
        poses = self.link_poses(q) if poses is None else poses
        out = []
        for p, c in self.segments:
            T, length = segment_pose(poses[p][:3, 3], poses[c][:3, 3])
            out.append((p, c, T, length))
        return out

    def rigid_segments(self):
        """[(k, parent, T_parent_capsule (4x4), length m)] of the skeleton segments that never move in their parent
        link's frame (the child hangs on a revolute, continuous or fixed joint: its origin is fixed in the parent).
        The viewer draws these under the parent link's frame once; the others (prismatic joints) it redraws."""
        if not hasattr(self, "_rigid"):
            lo, hi = np.array([r[1:] for r in self.slider_ranges()]).T
            samples = [self.initial_q(), lo + 0.37 * (hi - lo), lo + 0.81 * (hi - lo)]
            local = []  # per sample: child origin in the parent frame, per segment
            for q in samples:
                poses = self.link_poses(q)
                local.append([np.linalg.solve(poses[p], poses[c])[:3, 3] for p, c in self.segments])
            self._rigid = []
            for k, (p, _) in enumerate(self.segments):
                if all(np.allclose(x[k], local[0][k], atol=1e-9) for x in local[1:]):
                    T, length = segment_pose(np.zeros(3), local[0][k])
                    self._rigid.append((k, p, T, length))
        return list(self._rigid)

    # ------------------------------------------------------------------------------------ numbers
    def readout(self, q):
        q = np.ascontiguousarray(q, dtype=np.float64)
        T = self.robot.fk(q)
        w = matrix_to_quat_wxyz(T[:3, :3])
        if w[0] < 0:
            w = -w
        # The measures of manip_core.analysis.manipulability (part "full") from one body Jacobian and one SVD: its
        # batch kernels cost ~17 ms a call on a busy machine (thread pool wake-ups), too slow for 30 redraws a second.
        sv = np.linalg.svd(self.robot.jacobian_body(q), compute_uv=False)  # sigma_1 >= ... >= sigma_k
        with np.errstate(all="ignore"):
            cond = float(sv[0] / sv[-1]) if sv[-1] > 0 else math.inf
        return Readout(q.copy(), T[:3, 3].copy(), np.asarray(matrix_to_rpy(T[:3, :3])), np.asarray(w),
                       float(np.prod(sv)), cond)

    def reach_m(self):
        """Sum of the joint-to-joint distances: no link origin is farther than this from the base origin."""
        poses = self.link_poses(self.initial_q())
        return float(sum(np.linalg.norm(poses[c][:3, 3] - poses[p][:3, 3]) for p, c in self.segments))

    def default_camera(self):
        """(position m, look_at m, fov_y rad): looks at the base origin from the +x, -y, +z side, far enough that
        the sphere of radius reach_m (plus the skeleton radius) around it fits the vertical fov at any pose."""
        centre = np.zeros(3)
        radius = max(self.reach_m() + 2 * self.skeleton_radius_m, 0.05)
        fov = math.radians(50.0)
        dist = 1.05 * radius / math.sin(0.5 * fov)
        direction = np.array([1.0, -1.0, 0.6])
        direction /= np.linalg.norm(direction)
        return centre + dist * direction, centre, fov
