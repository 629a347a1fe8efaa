"""Manipulability measures and ellipsoids from the singular values of a tip Jacobian.

Which Jacobian (``part``):

- ``"full"``: the 6 x dof body Jacobian J_b (tip twist [omega; v] in the tip frame). Its singular values are those
  of the "mixed" Jacobian [R 0; 0 R] J_b (angular velocity and tip-origin velocity in base axes), which gives
  the ellipsoid axes in the base frame. Rows mix rad/s and m/s: the measures depend on the length unit (m).
- ``"position"``: the 3 x dof Jacobian of the tip origin's linear velocity in the base frame (m/s per unit qd),
  R J_b[3:6].
- ``"orientation"``: the 3 x dof angular rows, angular velocity in the base frame (rad/s), R J_b[0:3] = J_s[0:3].

Measures, for the m x n matrix J (m rows of the part, n = dof), with its k = min(m, n) singular values
sigma_1 >= ... >= sigma_k (for an arm with fewer joints than rows, e.g. a planar 2R's 3 x 2 position Jacobian,
these measure the motion along the n directions it can move in):

- Yoshikawa manipulability w = prod(sigma_i) = sqrt(det(J J^T)) (sqrt(det(J^T J)) when n < m) (Yoshikawa 1985),
- minimum singular value sigma_k (distance to the nearest rank-deficient Jacobian in the 2-norm),
- condition number kappa = sigma_1 / sigma_k (inf when sigma_k = 0), isotropy index 1 / kappa in [0, 1],
- velocity ellipsoid {J qd : |qd| <= 1}: semi-axes along the left singular vectors u_i (columns, base frame)
  with lengths sigma_i; force ellipsoid {F : |J^T F| <= 1} (tip wrench [moment; force] for "full"): the same
  axes with lengths 1 / sigma_i (inf along singular directions). When n < m the ellipsoids are flat: the m - n
  axes outside the range of J have length 0 (velocity) and inf (force).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError

PARTS = ("full", "position", "orientation")


@dataclass
class Ellipsoid:
    """Semi-axes of an ellipsoid in task space (base frame axes).

    axes: (m, m) [or (N, m, m)], column i is the unit direction of semi-axis i; lengths: (m,) [or (N, m)],
    the semi-axis lengths, largest first for a velocity ellipsoid (m/s or rad/s per unit joint speed) and
    smallest first for a force ellipsoid (N or N*m per unit joint force). part: which Jacobian.
    """

    axes: np.ndarray
    lengths: np.ndarray
    part: str
    kind: str  # "velocity" or "force"


def _check_part(part):
    if part not in PARTS:
        raise InputError(f"part must be one of {', '.join(PARTS)}, got {part!r}")


def task_jacobians(J_body, T_tip, part):
    """Jacobians (N, m, dof) of ``part`` in base axes from body Jacobians (N, 6, dof) and tip poses (N, 4, 4)."""
    _check_part(part)
    R = T_tip[:, :3, :3]
    if part == "position":
        return R @ J_body[:, 3:6, :]
    if part == "orientation":
        return R @ J_body[:, 0:3, :]
    return np.concatenate([R @ J_body[:, 0:3, :], R @ J_body[:, 3:6, :]], axis=1)


def jacobians(robot, Q, part):
    """Task Jacobians (N, m, dof) of ``part`` (see the module docstring) at the joint vectors Q (N, dof)."""
    _check_part(part)
    # For "full" the singular values of J_b equal those of the mixed Jacobian, whose U is in base axes.
    return task_jacobians(robot.jacobian_body_batch(Q), robot.fk_batch(Q), part)


def singular_values(J):
    """Singular values (N, min(m, n)) of task Jacobians (N, m, n), largest first."""
    return np.linalg.svd(J, compute_uv=False)


def measures_from_sigma(s):
    """Dict of (N,) arrays: manipulability, min_singular_value, max_singular_value, condition_number, isotropy."""
    smin, smax = s[:, -1], s[:, 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        kappa = np.where(smin > 0.0, smax / np.where(smin > 0.0, smin, 1.0), np.inf)
        iso = np.where(smax > 0.0, smin / np.where(smax > 0.0, smax, 1.0), 0.0)
    return {"manipulability": np.prod(s, axis=1), "min_singular_value": smin, "max_singular_value": smax,
            "condition_number": kappa, "isotropy": iso}


def measures_batch(robot, Q, part="full"):
    """All measures (dict of (N,) arrays, see measures_from_sigma) at the joint vectors Q (N, dof)."""
    return measures_from_sigma(singular_values(jacobians(robot, Q, part)))


def solution_part(robot, position_only=False):
    """The part that measures how far an IK solution is from a singularity: "position" when the IK matched the
    tip position only (always for arms with fewer than six joints), else "full"."""
    return "position" if position_only or robot.dof < 6 else "full"


def solution_measures(robot, Q, position_only=False):
    """(part, min_singular_value (N,), manipulability (N,)) of the IK solutions Q (N, dof) of ``robot``, with
    part = solution_part(robot, position_only); see the module docstring for the units. What compute_ik
    reports per solution, and what a goal selection can rank IK candidates by (larger: farther from singular)."""
    part = solution_part(robot, position_only)
    Q = np.asarray(Q, dtype=np.float64).reshape(-1, robot.dof)
    if Q.shape[0] == 0:
        return part, np.zeros(0), np.zeros(0)
    m = measures_batch(robot, Q, part)
    return part, m["min_singular_value"], m["manipulability"]


def ellipsoid_batch(robot, Q, part="full", kind="velocity"):
    """Velocity or force ellipsoids at Q (N, dof): Ellipsoid with axes (N, m, m), lengths (N, m)."""
    if kind not in ("velocity", "force"):
        raise InputError(f"kind must be 'velocity' or 'force', got {kind!r}")
    J = jacobians(robot, Q, part)
    N, m, n = J.shape
    U, s, _ = np.linalg.svd(J, full_matrices=True)
    if n < m:
        s = np.concatenate([s, np.zeros((N, m - n))], axis=1)
    if kind == "velocity":
        return Ellipsoid(U, s, part, kind)
    with np.errstate(divide="ignore"):
        inv = np.where(s > 0.0, 1.0 / np.where(s > 0.0, s, 1.0), np.inf)
    return Ellipsoid(U[:, :, ::-1].copy(), inv[:, ::-1].copy(), part, kind)
