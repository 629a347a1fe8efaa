"""Singularity check along a joint-space path, for planners and Cartesian paths.

``check_path(robot, Q, threshold)`` walks the straight joint-space segments between the waypoints Q (N, dof),
sampled so that no joint moves more than ``max_step`` (rad or m) between two checked points (a singularity
crossed between two waypoints is not missed), and returns the smallest minimum singular value of the task
Jacobian on the way (``part`` as in manip_core.analysis.manipulability: "full" = 6 x dof body Jacobian,
"position" = tip-origin linear rows in the base frame, "orientation" = angular rows) and where it occurs.
``require_nonsingular`` raises SingularPathError (an InputError naming the waypoint) when it is below the
threshold, and ``warn``-mode callers read ``PathSingularity.below``.

Units: singular values in m/s (position rows) or rad/s (angular rows) per unit joint speed (rad/s or m/s).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from .manipulability import PARTS


class SingularPathError(InputError):
    """A path passes closer to a singularity than the threshold allows."""


@dataclass
class PathSingularity:
    """Result of check_path. min_value: the smallest minimum singular value on the path; segment: the index i
    of the segment Q[i] -> Q[i + 1] where it occurs (0 for a single waypoint), fraction in [0, 1] along it,
    q: the joint vector there; below: min_value < threshold; values (K,) and points (K, dof): every checked
    point, in order along the path."""

    min_value: float
    segment: int
    fraction: float
    q: np.ndarray
    threshold: float
    part: str
    below: bool
    values: np.ndarray
    points: np.ndarray

    def message(self):
        where = f"waypoint {self.segment} -> {self.segment + 1} at {self.fraction:.0%}"
        if self.below:
            return (f"the path comes too close to a singularity: minimum singular value of the {self.part} "
                    f"Jacobian {self.min_value:.3g} < threshold {self.threshold:.3g} between {where}, "
                    f"q = {np.round(self.q, 4).tolist()}")
        return (f"the path stays above the singularity threshold {self.threshold:.3g} (smallest minimum "
                f"singular value {self.min_value:.3g} between {where})")


def _default_part(robot):
    return "full" if robot.dof >= 6 else "position"


def check_path(robot, Q, threshold, part=None, max_step=0.05):
    """PathSingularity of the joint path Q (N, dof) of ``robot`` (a RobotModel), see the module docstring.

    threshold: singular value below which the path counts as too close to a singularity (>= 0); part: "full"
    (default for arms with 6 or more joints), "position" (default otherwise) or "orientation"; max_step: the
    largest joint change (rad or m) between two checked points along a segment (> 0)."""
    part = _default_part(robot) if part is None else part
    if part not in PARTS:
        raise InputError(f"part must be one of {', '.join(PARTS)}, got {part!r}")
    if not (math.isfinite(threshold) and threshold >= 0):
        raise InputError(f"threshold must be a finite singular value >= 0, got {threshold!r}")
    if not (math.isfinite(max_step) and max_step > 0):
        raise InputError(f"max_step must be > 0 (rad or m), got {max_step!r}")
    Q = np.asarray(Q, dtype=float)
    if Q.ndim == 1:
        Q = Q[None, :]
    if Q.ndim != 2 or Q.shape[1] != robot.dof or Q.shape[0] == 0:
        raise InputError(f"Q must have shape (N, {robot.dof}) with N >= 1, got {Q.shape}")
    if not np.all(np.isfinite(Q)):
        raise InputError("Q holds NaN or inf")
    pts, seg, frac = [Q[:1]], [np.zeros(1, dtype=np.int64)], [np.zeros(1)]
    for i in range(Q.shape[0] - 1):
        k = max(1, int(math.ceil(float(np.max(np.abs(Q[i + 1] - Q[i]))) / max_step)))
        t = np.arange(1, k + 1) / k
        pts.append(Q[i] + t[:, None] * (Q[i + 1] - Q[i]))
        seg.append(np.full(k, i, dtype=np.int64))
        frac.append(t)
    P = np.ascontiguousarray(np.concatenate(pts))
    seg, frac = np.concatenate(seg), np.concatenate(frac)
    values = robot.min_singular_value_batch(P, part)
    j = int(np.argmin(values))
    return PathSingularity(min_value=float(values[j]), segment=int(seg[j]), fraction=float(frac[j]), q=P[j].copy(),
                           threshold=float(threshold), part=part, below=bool(values[j] < threshold),
                           values=values, points=P)


def require_nonsingular(robot, Q, threshold, part=None, max_step=0.05):
    """check_path, raising SingularPathError (with the waypoint, the value and q) when the path dips below the
    threshold; returns the PathSingularity otherwise."""
    r = check_path(robot, Q, threshold, part, max_step)
    if r.below:
        raise SingularPathError(r.message())
    return r
