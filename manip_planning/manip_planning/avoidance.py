"""Obstacle-aware joint paths: straight line, potential field or lift-over waypoints, then shortcut and smooth.

``plan_avoiding`` tries, in the order of ``methods`` (default ``METHODS``: straight, lift_over,
potential_field):
* straight: the straight joint line, when it keeps the clearance;
* lift_over: tip up (same x, y, orientation) to a height above the obstacles, over to above the goal, down;
  the two "up" poses come from vertical Cartesian lines from the start and from the goal (same IK branch,
  no jump); the height starts at the highest obstacle top + margin + sphere radius and rises in steps.
  Cheap (0.1-0.5 s) and predictable; it solves the demo scene with the true pillar and also with the larger
  box that stereo perception reports for it (where the potential field got stuck), but it fails where the
  arm cannot reach that high above the start or goal;
* potential_field: gradient descent of potential_field.py (bends the path just enough; solved the demo
  scene and 23 of 26 randomised harder table-top scenes, several of them beyond the lift-over's reach).
The raw waypoints are then shortcut (greedy, every straight joint segment checked), smoothed (a C2 cubic
spline through the remaining waypoints, else a shape-preserving PCHIP, else the polyline with stops at the
corners) and checked again: the result is the first smoothed path whose clearance, sampled at most
``check_step`` rad apart, stays at or above the required clearance. Required clearance, per obstacle: the
safety margin, or less when the start or goal itself is closer to that obstacle (then the path must not come
closer to it than they are). Floor (table top): kept at the same clearance, with the same relaxation.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .cartesian_path import CartesianPath
from .collision import densify
from .joint_path import LinePath, PlanningError, SplinePath
from .potential_field import FieldOptions, potential_field_path

METHODS = ("straight", "lift_over", "potential_field")


@dataclass
class AvoidanceResult:
    path: object                 # LinePath / SplinePath / PolylinePath
    waypoints: np.ndarray        # (N, dof) after shortcutting
    method: str                  # which method produced it
    smoothing: str               # "line", "cubic", "pchip" or "polyline"
    min_clearance: float         # m, obstacles, over the dense samples of the final path
    min_floor_clearance: float   # m
    required_clearance: float    # m
    attempts: list = field(default_factory=list)   # (method, outcome) of every method tried


class PolylinePath:
    """Straight joint segments through waypoints; stops at every corner (s(t) per segment)."""

    def __init__(self, waypoints):
        self.waypoints = np.asarray(waypoints, dtype=np.float64)
        self.segments = [LinePath(a, b) for a, b in zip(self.waypoints[:-1], self.waypoints[1:])]


class Checker:
    """Clearance of configurations and of joint paths against a scene, with a required clearance per
    obstacle (the safety margin, relaxed by relax_for) and for the floor."""

    def __init__(self, arm, scene, safety_margin, check_step=0.01):
        self.arm, self.scene = arm, scene
        self.margin = float(safety_margin)
        self.check_step = float(check_step)
        self.required = np.full(len(scene), self.margin)
        self.required_floor = self.margin

    def relax_for(self, *qs):
        """Lower each obstacle's requirement to what the given configurations (start, goal) already have."""
        for q in qs:
            c, f = self.clearances(q)
            self.required = np.minimum(self.required, c - 1e-9)
            self.required_floor = min(self.required_floor, f - 1e-9)

    @property
    def required_min(self):
        return float(min(np.min(self.required, initial=self.margin), self.margin))

    def clearances(self, q):
        """(per-obstacle clearance (M,), floor clearance) of the arm at q (m)."""
        return self.arm.clearances(q, self.scene)

    def configs_ok(self, Q):
        """(ok, min obstacle clearance, min floor clearance) over configurations Q."""
        mo, mf = np.inf, np.inf
        for q in Q:
            c, f = self.clearances(q)
            mo, mf = min(mo, float(np.min(c, initial=np.inf))), min(mf, f)
            if np.any(c < self.required) or f < self.required_floor:
                return False, mo, mf
        return True, mo, mf

    def segment_ok(self, a, b):
        return self.configs_ok(densify([a, b], self.check_step))[0]

    def path_samples(self, path):
        """Configurations along a path object, at most check_step rad apart."""
        if isinstance(path, PolylinePath):
            return densify(path.waypoints, self.check_step)
        d1, _ = path.bounds()
        n = max(2, int(math.ceil(float(np.max(d1)) / self.check_step)) + 1)
        return path.derivatives(np.linspace(0.0, 1.0, n))[0]


def shortcut(checker, Q):
    """Greedy shortcut: from each kept waypoint jump to the farthest one reachable by a clear segment."""
    Q = np.asarray(Q, dtype=np.float64)
    out = [Q[0]]
    i = 0
    n = len(Q)
    while i < n - 1:
        lo, hi = i + 1, n - 1
        if checker.segment_ok(Q[i], Q[hi]):
            j = hi
        else:
            j = lo
            # bisection for a far clear segment (not exact: clearance is not monotone along the path)
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if checker.segment_ok(Q[i], Q[mid]):
                    lo = j = mid
                else:
                    hi = mid
        out.append(Q[j])
        i = j
    return np.array(out)


def smooth(checker, W):
    """(path, smoothing, min clearance, min floor clearance) of the first clear smoothing of waypoints W."""
    if len(W) == 2:
        path = LinePath(W[0], W[1])
        ok, mo, mf = checker.configs_ok(checker.path_samples(path))
        if ok:
            return path, "line", mo, mf
    for kind in ("cubic", "pchip"):
        path = SplinePath(W, kind=kind)
        ok, mo, mf = checker.configs_ok(checker.path_samples(path))
        if ok:
            return path, kind, mo, mf
    path = PolylinePath(W)
    ok, mo, mf = checker.configs_ok(checker.path_samples(path))
    if ok:
        return path, "polyline", mo, mf
    return None, "", mo, mf


def _finish(checker, Q, method, attempts):
    W = shortcut(checker, Q)
    path, kind, mo, mf = smooth(checker, W)
    if path is None:
        raise PlanningError(PlanningError.COLLISION, f"{method}: no smoothing of the path keeps the clearance")
    return AvoidanceResult(path, W, method, kind, mo, mf, checker.required_min, attempts)


def lift_over_waypoints(model, checker, q_start, q_goal, *, lift_step=0.05, max_lift=0.6, cartesian_options=None):
    """Joint waypoints [q_start, q_up, q_over, q_goal] (tip straight up, over, down) that keep the clearance.

    Tries heights from the highest obstacle top + margin + sphere radius (at least the higher end) in steps
    of lift_step up to that + max_lift; raises PlanningError when none works.
    """
    T_s, T_g = model.fk(q_start), model.fk(q_goal)
    arm = checker.arm
    tops = [o.top for o in checker.scene.obstacles]
    r = float(np.max(arm.radius, initial=0.0))      # one radius (ArmSpheres) or one per sphere (RobotSpheres)
    base_z = max(tops) + checker.margin + r + arm.tool_length if tops else max(T_s[2, 3], T_g[2, 3])
    base_z = max(base_z, T_s[2, 3], T_g[2, 3])
    reasons = []
    z = base_z
    while z <= base_z + max_lift + 1e-9:
        try:
            ups = []
            for q, T in ((q_start, T_s), (q_goal, T_g)):
                Tu = T.copy()
                Tu[2, 3] = z
                if abs(z - T[2, 3]) < 1e-6:
                    ups.append(np.asarray(q, dtype=np.float64))
                    continue
                ups.append(CartesianPath(model, q, Tu, **(cartesian_options or {})).q_goal)
            Q = np.array([q_start, ups[0], ups[1], q_goal])
            if all(checker.segment_ok(a, b) for a, b in zip(Q[:-1], Q[1:])):
                return Q, z
            reasons.append(f"z = {z:.2f} m: a segment comes too close")
        except PlanningError as e:
            reasons.append(f"z = {z:.2f} m: {e.message}")
        z += lift_step
    raise PlanningError(PlanningError.PLANNING_FAILED,
                        "lift-over found no clear height (" + "; ".join(reasons[-3:]) + ")")


def plan_avoiding(model, arm, scene, q_start, q_goal, *, safety_margin=0.03, methods=METHODS, field_options=None,
                  check_step=0.01, lift_step=0.05, max_lift=0.6):
    """Collision-aware joint path from q_start to q_goal (see module doc); raises PlanningError."""
    q_start = np.asarray(q_start, dtype=np.float64)
    q_goal = np.asarray(q_goal, dtype=np.float64)
    checker = Checker(arm, scene, safety_margin, check_step)
    checker.relax_for(q_start, q_goal)
    attempts = []
    last = None
    for method in methods:
        try:
            if method == "straight":
                if not checker.segment_ok(q_start, q_goal):
                    attempts.append((method, "the straight joint line comes too close"))
                    continue
                path = LinePath(q_start, q_goal)
                mo, mf = checker.configs_ok(checker.path_samples(path))[1:]
                attempts.append((method, "ok"))
                return AvoidanceResult(path, np.array([q_start, q_goal]), method, "line", mo, mf,
                                       checker.required_min, attempts)
            if method == "lift_over":
                Q, z = lift_over_waypoints(model, checker, q_start, q_goal, lift_step=lift_step, max_lift=max_lift)
                res = _finish(checker, Q, method, attempts)
                attempts.append((method, f"ok (tip lifted to z = {z:.2f} m)"))
                return res
            if method == "potential_field":
                o = field_options or FieldOptions(safety_margin=safety_margin)
                Q, info = potential_field_path(arm, scene, q_start, q_goal, model.joint_lower, model.joint_upper, o)
                res = _finish(checker, Q, method, attempts)
                attempts.append((method, f"ok ({info['iterations']} steps, {info['escapes']} escapes)"))
                return res
            raise PlanningError(PlanningError.INVALID_INPUT, f"unknown avoidance method {method!r}")
        except PlanningError as e:
            if e.code == PlanningError.INVALID_INPUT:
                raise
            attempts.append((method, e.message))
            last = e
    why = "; ".join(f"{m}: {r}" for m, r in attempts)
    code = last.code if last is not None and last.code == PlanningError.COLLISION else PlanningError.PLANNING_FAILED
    raise PlanningError(code, f"no path keeps {checker.required_min:.3f} m from the obstacles ({why})")
