"""A robot's reach and a "ready" configuration above its work area, for arms whose user gives none.

No rclpy here. Frames: the model's base frame, z up (REP 103), the work surface at z = 0 of the base frame, the
work area along +x. Units m, rad.

* :func:`horizontal_reach` - the largest horizontal distance (m) of the tip from the base's z axis over random
  configurations within the joint limits whose tip is above the base plane (z >= 0).
* :func:`ready_configuration` - the joint values that put the tip at a point above the work area with the tool
  pointing down (the tip frame's ``approach_axis`` along -z of the base), chosen among the IK solutions found
  (closed form where the arm has one, Levenberg-Marquardt from several seeds and tool yaws otherwise) as the one
  with the best manipulability (Yoshikawa, full body Jacobian) whose link origins all stay above the base plane.
  Deterministic: the same model gives the same configuration in every process (the simulator and pick_place
  derive the same one).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

DEFAULT_APPROACH_AXIS = (0.0, 0.0, 1.0)   # tip-frame axis that points out of the tool (URDF/REP convention)


def _sample_limits(model, n, rng):
    lo = np.where(np.isfinite(model.joint_lower), model.joint_lower, -math.pi)
    hi = np.where(np.isfinite(model.joint_upper), model.joint_upper, math.pi)
    return rng.uniform(lo, hi, size=(n, model.dof))


def horizontal_reach(model, samples=4096, seed=0):
    """Largest horizontal distance (m) of the tip from the base z axis, tip at z >= 0 of the base frame
    (Monte Carlo over ``samples`` configurations within the limits; a slight underestimate)."""
    rng = np.random.default_rng(seed)
    P = model.fk_batch(_sample_limits(model, samples, rng))[:, :3, 3]
    up = P[P[:, 2] >= 0.0]
    P = up if len(up) else P
    return float(np.max(np.hypot(P[:, 0], P[:, 1])))


def tool_down_rotation(approach_axis=DEFAULT_APPROACH_AXIS, yaw=0.0):
    """(3, 3) tip orientation in the base frame whose ``approach_axis`` (tip frame) points along -z of the base,
    turned by ``yaw`` (rad) about the vertical."""
    a = np.asarray(approach_axis, dtype=float)
    a = a / np.linalg.norm(a)
    # R0 maps a -> -z: a rotation by pi about the bisector of a and -z (about x when a = +z)
    down = np.array([0.0, 0.0, -1.0])
    h = a + down
    if np.linalg.norm(h) < 1e-9:          # a = +z: turn about x
        R0 = np.diag([1.0, -1.0, -1.0])
    else:
        h /= np.linalg.norm(h)
        R0 = 2.0 * np.outer(h, h) - np.eye(3)
    c, s = math.cos(yaw), math.sin(yaw)
    Rz = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    return Rz @ R0


@dataclass
class ReadyPose:
    q: np.ndarray             # rad / m, model joint order
    target_m: np.ndarray      # (3,) tip position aimed at, base frame
    manipulability: float
    tool_down: bool           # False: only the position could be reached
    candidates: int           # IK solutions compared
    description: str          # one line saying how it was chosen


def default_work_point(model, reach=None):
    """A point above the middle of the work area: 0.5 reach forward (+x), 0.35 reach up (m, base frame)."""
    reach = horizontal_reach(model) if reach is None else reach
    return np.array([0.5 * reach, 0.0, 0.35 * reach])


def _links_above(model, q, floor):
    for link in model.link_names:
        if model.fk(q, link)[2, 3] < floor:
            return False
    return True


def _wrapped(model, q):
    """q with each revolute angle moved into [-pi, pi) where the limits allow it (same pose, tidier numbers)."""
    w = (q + math.pi) % (2.0 * math.pi) - math.pi
    types = list(getattr(model, "joint_types", ["revolute"] * model.dof))
    ok = np.array([t in ("revolute", "continuous") for t in types]) & (w >= model.joint_lower) & \
        (w <= model.joint_upper)
    return np.where(ok, w, q)


def _solutions(model, T, seeds, position_only):
    sols = []
    try:
        if not position_only:
            sols.extend(np.asarray(s, dtype=float) for s in model.ik_all(T))
    except NotImplementedError:
        pass
    for k, q_seed in enumerate(seeds):
        r = model.ik(T if not position_only else T[:3, 3], q_seed=q_seed, tol_position_m=1e-5,
                     tol_rotation_rad=1e-4, max_restarts=5, seed=k)
        if r.success:
            sols.append(np.asarray(r.q, dtype=float))
    return sols


def tool_down_solutions(model, xyz, approach_axis=DEFAULT_APPROACH_AXIS, yaws=4, seeds=2, floor_m=0.0):
    """IK solutions (list of q) that put the tip at ``xyz`` (m, base frame) with the tool pointing down, at
    ``yaws`` tool yaws, every link origin above ``floor_m``; positions only for arms with fewer than 6 joints."""
    rng = np.random.default_rng(0)
    seed_qs = [None] + list(_sample_limits(model, max(0, seeds - 1), rng))
    out = []
    position_only = model.dof < 6
    for i in range(1 if position_only else yaws):
        T = np.eye(4)
        T[:3, :3] = tool_down_rotation(approach_axis, 2.0 * math.pi * i / yaws)
        T[:3, 3] = xyz
        out.extend(q for q in _solutions(model, T, seed_qs, position_only)
                   if model.within_limits(q, 1e-9) and _links_above(model, q, floor_m))
    return out


def ready_configuration(model, target=None, approach_axis=DEFAULT_APPROACH_AXIS, yaws=8, seeds=4, floor_m=0.0):
    """:class:`ReadyPose` above the work area (see the module docstring). ``target``: (3,) tip position in the
    base frame (default :func:`default_work_point`); ``floor_m``: every link origin must stay above this z."""
    target = default_work_point(model) if target is None else np.asarray(target, dtype=float)
    rng = np.random.default_rng(0)
    seed_qs = [None] + list(_sample_limits(model, seeds - 1, rng)) if seeds > 0 else [None]
    best = None
    count = 0
    for position_only in ((False, True) if model.dof >= 6 else (True,)):
        for i in range(yaws if not position_only else 1):
            T = np.eye(4)
            T[:3, :3] = tool_down_rotation(approach_axis, 2.0 * math.pi * i / yaws)
            T[:3, 3] = target
            for q in _solutions(model, T, seed_qs, position_only):
                q = _wrapped(model, q)
                if not model.within_limits(q, 1e-9) or not _links_above(model, q, floor_m):
                    continue
                count += 1
                w = model.manipulability(q, "full" if model.dof >= 6 else "position")
                if best is None or w > best[1] + 1e-12:
                    best = (q, w)
        if best is not None:
            break
    if best is None:
        q = np.where(np.isfinite(model.joint_lower) & np.isfinite(model.joint_upper),
                     0.5 * (model.joint_lower + model.joint_upper), 0.0)
        return ReadyPose(q, target, float(model.manipulability(q, "full" if model.dof >= 6 else "position")),
                         False, 0, f"no IK solution puts {model.tip_link} at {np.round(target, 3).tolist()} m with "
                                   f"every link above z = {floor_m:g} m: the middle of the joint limits")
    q, w = best
    how = "tool down" if not position_only else "position only (no tool-down solution)"
    return ReadyPose(q, target, float(w), not position_only, count,
                     f"IK of {model.tip_link} at {np.round(target, 3).tolist()} m ({how}), best manipulability "
                     f"{w:.4g} of {count} solutions")
