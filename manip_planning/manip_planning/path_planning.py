"""The path stage of the planning pipeline: start and goal configurations -> a collision-free, simplified
joint-space polyline.

Planners are registered in PATH_PLANNERS (name -> class with ``solve(start, goal, time_limit_s, seed)``
returning rrt_connect.SearchResult); add one with a module and one line here. After the search the path is
simplified (path_simplify.py) and re-checked at ``validate_resolution_rad`` (0.005 rad by default); should
the fine re-check find a collision that the coarser edge checks missed, the search is repeated with a finer
edge resolution.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .path_simplify import path_length, simplify
from .rrt_connect import DEFAULT_RESOLUTION, RRTConnect

PATH_PLANNERS = {RRTConnect.name: RRTConnect}
VALIDATE_RESOLUTION = 0.005


@dataclass
class PathPlan:
    """valid: start and goal are collision-free; success: path found; path (N, dof) rad from start to goal;
    planning_time_s / simplification_time_s / validation_time_s (the final re-check at the validation
    resolution): wall times (s); path_length_rad: Euclidean joint length."""

    valid: bool
    success: bool
    path: np.ndarray = None
    planning_time_s: float = 0.0
    simplification_time_s: float = 0.0
    path_length_rad: float = float("nan")
    message: str = ""
    iterations: int = 0
    validation_time_s: float = 0.0


def plan_path(checker, start, goal, planner=RRTConnect.name, time_limit_s=1.0, seed=0,
              resolution_rad=DEFAULT_RESOLUTION, validate_resolution_rad=VALIDATE_RESOLUTION, simplify_path=True,
              corner_rounds=0, **planner_options):
    """PathPlan from start to goal (both (dof,), rad) for a CollisionChecker (see module doc)."""
    if planner not in PATH_PLANNERS:
        raise ValueError(f"unknown path planner {planner!r} (known: {', '.join(PATH_PLANNERS)})")
    t0 = time.perf_counter()
    q0 = np.ascontiguousarray(start, dtype=np.float64)
    q1 = np.ascontiguousarray(goal, dtype=np.float64)
    bad = [what for what, q in (("start", q0), ("goal", q1)) if not checker.is_free(q)]
    if bad:
        return PathPlan(False, False, planning_time_s=time.perf_counter() - t0,
                        message=f"{' and '.join(bad)} in collision")
    res = resolution_rad
    deadline = t0 + float(time_limit_s)
    plan_time = simp_time = check_time = 0.0
    iters = 0
    for attempt in range(4):
        ts = time.perf_counter()
        search = PATH_PLANNERS[planner](checker, resolution_rad=res, **planner_options)
        out = search.solve(q0, q1, max(deadline - ts, 1e-3), seed + attempt)
        plan_time += time.perf_counter() - ts
        iters += out.iterations
        if not out.success:
            return PathPlan(True, False, None, plan_time, simp_time, message=out.message, iterations=iters)
        ts = time.perf_counter()
        P = out.path
        if simplify_path:
            P = simplify(checker, P, res, corner_rounds=corner_rounds)
        P[0], P[-1] = q0, q1
        simp_time += time.perf_counter() - ts
        ts = time.perf_counter()
        ok = checker.first_colliding_segment(P, validate_resolution_rad) < 0
        if not ok and simplify_path:   # keep the raw search path when only the simplified one fails
            P = out.path
            ok = checker.first_colliding_segment(P, validate_resolution_rad) < 0
        check_time += time.perf_counter() - ts
        if ok:
            return PathPlan(True, True, P, plan_time, simp_time, float(path_length(P)), iterations=iters,
                            validation_time_s=check_time)
        res *= 0.25
        if time.perf_counter() > deadline:
            break
    return PathPlan(True, False, None, plan_time, simp_time, iterations=iters, validation_time_s=check_time,
                    message=f"every path found collided when re-checked at {validate_resolution_rad} rad")
