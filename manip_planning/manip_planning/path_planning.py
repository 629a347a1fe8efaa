"""The path stage of the planning pipeline: start and goal configurations -> a collision-free, simplified
joint-space polyline.

Planners are registered in PATH_PLANNERS (name -> class with ``solve(start, goal, time_limit_s, seed)``
returning rrt_connect.SearchResult); add one with a module and one line here. After the search the path is
simplified (path_simplify.py) and re-checked at ``validate_resolution_rad`` (0.005 rad by default); should
the fine re-check find a collision that the coarser edge checks missed, the raw search path is re-checked
instead, and when that collides too the search is repeated with a finer edge resolution.
Times are wall (``*_time_s``) and the calling thread's CPU time (``*_cpu_s``, what the planner itself used on
a machine shared with other work).
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
    resolution): wall times (s); *_cpu_s: the same stages in thread CPU time (s); path_length_rad: Euclidean
    joint length."""

    valid: bool
    success: bool
    path: np.ndarray = None
    planning_time_s: float = 0.0
    simplification_time_s: float = 0.0
    path_length_rad: float = float("nan")
    message: str = ""
    iterations: int = 0
    validation_time_s: float = 0.0
    planning_cpu_s: float = 0.0
    simplification_cpu_s: float = 0.0
    validation_cpu_s: float = 0.0


class _Clock:
    """Wall (perf_counter) and thread CPU time (thread_time) of the stages, in s."""

    def __init__(self):
        self.wall = dict(plan=0.0, simplify=0.0, validate=0.0)
        self.cpu = dict(plan=0.0, simplify=0.0, validate=0.0)
        self._stage = None

    def start(self, stage):
        self._stage = stage
        self._w, self._c = time.perf_counter(), time.thread_time()

    def stop(self):
        self.wall[self._stage] += time.perf_counter() - self._w
        self.cpu[self._stage] += time.thread_time() - self._c

    def fields(self):
        w, c = self.wall, self.cpu
        return dict(planning_time_s=w["plan"], simplification_time_s=w["simplify"], validation_time_s=w["validate"],
                    planning_cpu_s=c["plan"], simplification_cpu_s=c["simplify"], validation_cpu_s=c["validate"])


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
    clock = _Clock()
    iters = 0
    vres = float(validate_resolution_rad)
    for attempt in range(4):
        clock.start("plan")
        search = PATH_PLANNERS[planner](checker, resolution_rad=res, **planner_options)
        out = search.solve(q0, q1, max(deadline - time.perf_counter(), 1e-3), seed + attempt)
        clock.stop()
        iters += out.iterations
        if not out.success:
            return PathPlan(True, False, None, message=out.message, iterations=iters, **clock.fields())
        clock.start("simplify")
        P = out.path
        if simplify_path:
            P = simplify(checker, P, res, corner_rounds=corner_rounds)
        P[0], P[-1] = q0, q1
        clock.stop()
        clock.start("validate")
        bad = checker.first_colliding_segment(P, vres)
        if bad >= 0 and simplify_path:   # the raw search path (short edges) when the simplified one collides
            P = out.path
            bad = checker.first_colliding_segment(P, vres)
        clock.stop()
        if bad < 0:
            return PathPlan(True, True, P, path_length_rad=float(path_length(P)), iterations=iters,
                            **clock.fields())
        res *= 0.25
        if time.perf_counter() > deadline:
            break
    return PathPlan(True, False, None, iterations=iters, **clock.fields(),
                    message=f"every path found collided when re-checked at {validate_resolution_rad} rad")
