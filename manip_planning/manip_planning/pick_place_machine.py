"""Pick-and-place state machine as a plain class driven by injected callables (no rclpy).

Phases (PickPlace.action): HOME -> ABOVE_PICK -> PICK (descend, attach, lift) -> ABOVE_PLACE (over the
obstacles) -> PLACE (descend, release, lift) -> HOME. Before any motion every pose is checked for
reachability with the tool pointing down: approach and grasp poses at pick and at place, each IK solution
seeded from the previous one (the branch the motions will follow). Descents and lifts are straight tip lines
(Cartesian paths); the other motions are joint-space plans, obstacle-aware when the goal asks.

Injected callables:
  plan(PlanRequest) -> object with success, error_code, message, trajectory (planning.PlanResult-like)
  execute(trajectory) -> (ok, message)
  grasp(attach: bool, object_name: str) -> (ok, message, object_name)
  current_joints() -> joint vector or None
  solve_ik(T, q_near) -> (q or None, reason)
  obstacles() -> list of collision.Obstacle (optional): a place position inside an obstacle (other than one
                 around the pick position, which may be the object itself) is refused before moving
  on_progress(phase, progress 0..1, message) (optional)
  clock() -> seconds (default time.monotonic)
A failed execution is re-planned from the current joints and retried ``execution_retries`` times (default
1: transient controller aborts, e.g. joint_states briefly late on a loaded machine).
Cancel: ``cancel()`` from any thread; checked before every step (an execute callable should also return
early when ``cancel_requested`` becomes true).
"""
from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from .planning import PATH_CARTESIAN, PATH_JOINT, PlanRequest

# PickPlace.Result codes
SUCCESSFUL = 0
UNREACHABLE = -1
PLANNING_FAILED = -2
EXECUTION_FAILED = -3
GRASP_FAILED = -4
CANCELED = -5
INVALID_GOAL = -6

HOME, ABOVE_PICK, PICK, ABOVE_PLACE, PLACE = "HOME", "ABOVE_PICK", "PICK", "ABOVE_PLACE", "PLACE"
PHASES = (HOME, ABOVE_PICK, PICK, ABOVE_PLACE, PLACE, HOME)

TOOL_DOWN = np.diag([1.0, -1.0, -1.0])   # tool z along -z of the base, tool x along base x at yaw 0


@dataclass
class PickPlaceGoal:
    """Object pose at pick and wanted pose at place ((4, 4), base frame), object name ("" nearest),
    approach height (m, 0: the machine's default), avoid_obstacles."""

    pick: np.ndarray
    place: np.ndarray
    object_name: str = ""
    approach_height: float = 0.0
    avoid_obstacles: bool = True


@dataclass
class MachineConfig:
    home: np.ndarray
    approach_height: float = 0.10       # m above the grasp pose of the tool
    grasp_offset: float = 0.03          # m, tool0 above the object's origin when grasping and placing
    release_gap: float = 0.005          # m, released this much above the place pose (not pressed into the table)
    profile: str = "quintic"
    velocity_scaling: float = 0.5
    acceleration_scaling: float = 0.5
    cartesian_velocity_scaling: float = 0.2
    cartesian_acceleration_scaling: float = 0.2
    execution_retries: int = 1          # re-plan from the current joints and retry a failed execution


@dataclass
class PickPlaceOutcome:
    error_code: int
    message: str
    phase_names: list = field(default_factory=list)
    phase_durations: list = field(default_factory=list)

    @property
    def success(self):
        return self.error_code == SUCCESSFUL


class _Abort(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


def tool_down_pose(object_pose, height):
    """Tool pose pointing straight down ``height`` m above the object's origin, yaw of the object's x axis."""
    T = np.asarray(object_pose, dtype=np.float64)
    x = T[:3, 0]
    yaw = math.atan2(x[1], x[0]) if math.hypot(x[0], x[1]) > 1e-6 else 0.0
    c, s = math.cos(yaw), math.sin(yaw)
    out = np.eye(4)
    out[:3, :3] = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]) @ TOOL_DOWN
    out[:3, 3] = T[:3, 3] + np.array([0.0, 0.0, height])
    return out


class PickPlaceMachine:
    """See module doc."""

    def __init__(self, *, plan, execute, grasp, current_joints, solve_ik, config, obstacles=None,
                 on_progress=None, clock=time.monotonic):
        self._plan = plan
        self._execute = execute
        self._grasp = grasp
        self._current = current_joints
        self._solve_ik = solve_ik
        self._obstacles = obstacles
        self._progress_cb = on_progress
        self._clock = clock
        self.config = config
        self._cancel = threading.Event()
        self.phase = ""
        self.holding = ""
        self.holding_last = ""
        self.solutions = {}
        self.retries = []

    # ------------------------------------------------------------------------------------------ api
    def cancel(self):
        self._cancel.set()

    @property
    def cancel_requested(self):
        return self._cancel.is_set()

    def run(self, goal):
        """Run the whole task; returns a PickPlaceOutcome (never raises for task failures)."""
        self._cancel.clear()
        self.retries = []
        self._names, self._durations = [], []
        self._phase_start = None
        self._done_steps = 0
        try:
            plan = self._prepare(goal)
            self._total_steps = sum(len(steps) for _, steps in plan)
            for phase, steps in plan:
                self._begin(phase)
                for kind, arg, text in steps:
                    self._report(text)
                    self._check_cancel()
                    if kind == "move":
                        self._move(*arg)
                    else:
                        self._do_grasp(*arg)
                    self._done_steps += 1
                self._end()
            self._report("done", progress=1.0)
            msg = "picked and placed" + (f" '{self.holding_last}'" if self.holding_last else "")
            if self.retries:
                msg += f" ({len(self.retries)} execution(s) retried: {'; '.join(self.retries)})"
            return PickPlaceOutcome(SUCCESSFUL, msg, self._names, self._durations)
        except _Abort as e:
            self._end()
            msg = e.message
            if self.holding:
                msg += f" (still holding '{self.holding}')"
            return PickPlaceOutcome(e.code, msg, self._names, self._durations)

    # ------------------------------------------------------------------------------------- checks
    def _prepare(self, goal):
        cfg = self.config
        for name, T in (("pick_pose", goal.pick), ("place_pose", goal.place)):
            T = np.asarray(T, dtype=np.float64)
            if T.shape != (4, 4) or not np.all(np.isfinite(T)):
                raise _Abort(INVALID_GOAL, f"{name} must be a finite pose")
        h = float(goal.approach_height) if goal.approach_height else cfg.approach_height
        if not math.isfinite(h) or h <= 0.0:
            raise _Abort(INVALID_GOAL, f"approach_height must be > 0 (0: default {cfg.approach_height} m), got "
                                       f"{goal.approach_height}")
        home = np.asarray(cfg.home, dtype=np.float64)
        q_now = self._current()
        if q_now is None:
            raise _Abort(PLANNING_FAILED, "no joint state received yet")
        if home.shape != np.shape(q_now) or not np.all(np.isfinite(home)):
            raise _Abort(INVALID_GOAL, f"home configuration has {home.size} values, the robot {np.size(q_now)}")
        off = cfg.grasp_offset
        T_pick = tool_down_pose(goal.pick, off)
        T_above_pick = tool_down_pose(goal.pick, off + h)
        T_place = tool_down_pose(goal.place, off + cfg.release_gap)
        T_above_place = tool_down_pose(goal.place, off + cfg.release_gap + h)
        q = home
        sol = {}
        for key, T, what in (("above_pick", T_above_pick, "the approach pose above the pick"),
                             ("pick", T_pick, "the grasp pose at the pick"),
                             ("above_place", T_above_place, "the approach pose above the place"),
                             ("place", T_place, "the release pose at the place")):
            seed = sol["above_pick"] if key == "above_place" else q
            qk, reason = self._solve_ik(T, seed)
            if qk is None:
                p = T[:3, 3]
                raise _Abort(UNREACHABLE, f"{what} at [{p[0]:.3f}, {p[1]:.3f}, {p[2]:.3f}] m (tool pointing down) "
                                          f"is not reachable: {reason}")
            sol[key] = q = np.asarray(qk, dtype=np.float64)
        self.solutions = sol
        if self._obstacles is not None:
            self._check_place_free(np.asarray(goal.pick)[:3, 3], np.asarray(goal.place)[:3, 3])
        name = goal.object_name
        avoid = bool(goal.avoid_obstacles)
        self.holding_last = ""
        return [
            (HOME, [("move", ("joint", home, avoid), "to home")]),
            (ABOVE_PICK, [("move", ("joint", sol["above_pick"], avoid), "above the pick")]),
            (PICK, [("move", ("cartesian", T_pick, False), "down to the object"),
                    ("grasp", (True, name), "attach"),
                    ("move", ("cartesian", T_above_pick, False), "lift")]),
            (ABOVE_PLACE, [("move", ("joint", sol["above_place"], avoid), "over to above the place")]),
            (PLACE, [("move", ("cartesian", T_place, False), "down to the place"),
                     ("grasp", (False, name), "release"),
                     ("move", ("cartesian", T_above_place, False), "retreat up")]),
            (HOME, [("move", ("joint", home, avoid), "back home")]),
        ]

    def _check_place_free(self, p_pick, p_place):
        from .collision import Scene
        obs = [o for o in (self._obstacles() or [])
               if not (Scene([o]).distances(p_pick[None, :])[0][0] <= 0.0)]   # skip the object itself
        if obs:
            d = Scene(obs).distances(p_place[None, :])[0][0]
            if d <= 0.0:
                raise _Abort(UNREACHABLE, f"the place position [{p_place[0]:.3f}, {p_place[1]:.3f}, "
                                          f"{p_place[2]:.3f}] m is inside an obstacle")

    # -------------------------------------------------------------------------------------- steps
    def _check_cancel(self):
        if self._cancel.is_set():
            raise _Abort(CANCELED, f"canceled during {self.phase}")

    def _move(self, kind, target, avoid):
        for attempt in range(self.config.execution_retries + 1):
            ok, msg = self._plan_and_execute(kind, target, avoid)
            if ok:
                return
            self.retries.append(f"{self.phase}: {msg}")
            self._check_cancel()
        raise _Abort(EXECUTION_FAILED, f"{self.phase}: execution failed: {msg}"
                     + (f" (after {self.config.execution_retries} re-planned retries)"
                        if self.config.execution_retries else ""))

    def _plan_and_execute(self, kind, target, avoid):
        cfg = self.config
        q0 = self._current()
        if q0 is None:
            raise _Abort(EXECUTION_FAILED, "lost the joint states")
        if kind == "joint":
            req = PlanRequest(start=np.asarray(q0, dtype=np.float64), goal_joints=np.asarray(target),
                              path_type=PATH_JOINT, profile=cfg.profile, velocity_scaling=cfg.velocity_scaling,
                              acceleration_scaling=cfg.acceleration_scaling, avoid_obstacles=avoid)
        else:
            req = PlanRequest(start=np.asarray(q0, dtype=np.float64), goal_pose=np.asarray(target),
                              path_type=PATH_CARTESIAN, profile=cfg.profile,
                              velocity_scaling=cfg.cartesian_velocity_scaling,
                              acceleration_scaling=cfg.cartesian_acceleration_scaling, avoid_obstacles=avoid)
        res = self._plan(req)
        self._check_cancel()           # a plan interrupted by the cancel is a cancel, not a planning failure
        if not res.success:
            raise _Abort(PLANNING_FAILED, f"{self.phase}: planning failed (error {res.error_code}): {res.message}")
        ok, msg = self._execute(res.trajectory)
        self._check_cancel()
        return ok, msg

    def _do_grasp(self, attach, name):
        ok, msg, obj = self._grasp(attach, name)
        if attach and ok:
            self.holding = self.holding_last = obj or name
        self._check_cancel()
        if not ok:
            raise _Abort(GRASP_FAILED, f"{self.phase}: {'attach' if attach else 'release'} failed: {msg}")
        if not attach:
            self.holding = ""

    # ------------------------------------------------------------------------------- bookkeeping
    def _begin(self, phase):
        self.phase = phase
        self._phase_start = self._clock()
        self._names.append(phase)
        self._durations.append(0.0)

    def _end(self):
        if self._phase_start is not None and self._durations:
            self._durations[-1] = float(self._clock() - self._phase_start)
        self._phase_start = None

    def _report(self, text, progress=None):
        if self._progress_cb is None:
            return
        if progress is None:
            progress = self._done_steps / max(1, self._total_steps)
        self._progress_cb(self.phase, float(progress), text)
