"""Pick-and-place state machine as a plain class driven by injected callables (no rclpy).

Phases (PickPlace.action): HOME -> ABOVE_PICK -> PICK (descend, attach, lift) -> ABOVE_PLACE (over the
obstacles) -> PLACE (descend, release, lift) -> HOME. Before any motion every pose is checked for
reachability with the tool pointing down: approach and grasp poses at pick and at place, each IK solution
seeded from the previous one. Descents and lifts are straight tip lines (Cartesian paths); the other motions
are joint-space plans, obstacle-aware when the goal asks. The motions to above the pick and above the place
send the approach pose itself: the planner chooses its IK solution with its own collision model and obstacles
(clear of them by its margin, the held object included), so that the arm does not arrive pressed against an
obstacle next to the object.

Nothing here assumes an arm: "the tool pointing down" means the tip frame's ``approach_axis_tip`` (a unit
3-vector in the tip frame, the direction in which the gripper moves toward the object; (0, 0, 1) for the
ROS tool0 / flange convention) along -z of the base; the tip frame's axis closest to its x axis and
perpendicular to the approach axis follows the object's yaw (plus the first of ``grasp_yaw_offsets`` rad
for which every pose is reachable: a suction cup or a parallel gripper on a box takes any of them). Home:
``config.home``, or when None the joints at the start of the task (the arm comes back where it started).

The object itself: with the ``obstacles`` callable, the obstacle at the pick position (the object as
perceived, within ``object_match_distance``) gives the object's box; the approach to the pick (ABOVE_PICK,
PICK) and the depart from the place (the last HOME) send it as an allowed object (not an obstacle), and
while the object is held every plan request carries it as an attached object (a box in the tip frame,
measured at the grasp pose): the planner checks it as part of the robot.

Injected callables:
  plan(PlanRequest) -> object with success, error_code, message, trajectory (planning.PlanResult-like)
  execute(trajectory) -> (ok, message)
  grasp(attach: bool, object_name: str) -> (ok, message, object_name)
  current_joints() -> joint vector or None
  solve_ik(T, q_near) -> (q or None, reason)
  obstacles() -> list of collision.Obstacle (optional): the object's box (see above); a place position
                 inside an obstacle (other than the object) is refused before moving
  announce(state, obj) (optional): what the task knows about the object, for perception (the node publishes
                 it as ``known_objects``): ("pick", Obstacle in the base frame) once the object's box is known,
                 ("held", Shape in the tip frame) after the grasp, ("none", None) after the release and at the
                 end of a task that holds nothing
  on_progress(phase, progress 0..1, message) (optional)
  clock() -> seconds (default time.monotonic)
  tip_pose(q) -> (4, 4) tip pose in the base frame (optional): for the lift of an object held from an earlier
                 task (below)
A failed execution is re-planned from the current joints and retried ``execution_retries`` times (default
1: transient controller aborts, e.g. joint_states briefly late on a loaded machine).

An object still held from an earlier task (``run(goal, held=HeldObject)``): a task that fails after its grasp
(the planner or the controller died, a cancel) leaves the object in the gripper, and a new pick would fail on
the gripper ("already holding"). The caller passes what is held (``held_object`` of the failed task's machine)
to the next task, which then places it instead of picking: ABOVE_PLACE (first a straight lift of
``approach_height`` from where the arm stopped, with the object attached to the tip in the plan, since it may
still touch the table; a lift the planner refuses is skipped and said in the result), PLACE (descend, release,
retreat), HOME (``config.home``, or when None where the lift ended). The goal's pick pose is not used; a goal for
another object is refused (INVALID_GOAL) naming the held one, since the gripper cannot take a second object.
Cancel: ``cancel()`` from any thread; checked before every step (an execute callable should also return
early when ``cancel_requested`` becomes true).
"""
from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from .collision import Obstacle, Scene
from .planning import PATH_CARTESIAN, PATH_JOINT, PlanRequest
from .shapes import Shape

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

DEFAULT_YAW_OFFSETS = (0.0, math.pi / 2, math.pi, -math.pi / 2)   # rad, tried in this order


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
class HeldObject:
    """What the gripper still holds after a task that ended after its grasp: the object's name and its box in the
    tip frame (a Shape measured at the grasp; None when the object's size was not perceived)."""

    name: str
    shape: Shape = None


@dataclass
class MachineConfig:
    home: np.ndarray = None             # rad, model order; None: the joints at the start of the task
    approach_axis_tip: tuple = (0.0, 0.0, 1.0)   # unit vector in the tip frame toward the object
    grasp_yaw_offsets: tuple = DEFAULT_YAW_OFFSETS   # rad about the approach axis, tried in order
    object_match_distance: float = 0.02  # m: the obstacle this close to the pick position is the object
    approach_height: float = 0.10       # m above the grasp pose of the tool
    grasp_offset: float = 0.03          # m, tip origin above the object's origin when grasping and placing
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


def approach_frame(approach_axis_tip):
    """(3, 3) rotation whose columns are, in the tip frame: the unit approach axis a, the reference axis b
    (the tip's x axis made perpendicular to a; its y axis when x is nearly parallel to a) and a x b.
    Raises ValueError for a zero or non-finite axis."""
    a = np.asarray(approach_axis_tip, dtype=np.float64).reshape(-1)
    if a.size != 3 or not np.all(np.isfinite(a)) or np.linalg.norm(a) < 1e-9:
        raise ValueError(f"approach_axis_tip must be a non-zero 3-vector, got {list(a)}")
    a = a / np.linalg.norm(a)
    ref = np.array([1.0, 0.0, 0.0]) if abs(a[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    b = ref - a * float(ref @ a)
    b /= np.linalg.norm(b)
    return np.column_stack([a, b, np.cross(a, b)])


def tool_down_pose(object_pose, height, approach_axis_tip=(0.0, 0.0, 1.0), yaw_offset=0.0):
    """Tip pose (4, 4) ``height`` m above the object's origin with the tip's approach axis pointing straight
    down (base -z) and its reference axis (approach_frame) at the yaw of the object's x axis + yaw_offset."""
    T = np.asarray(object_pose, dtype=np.float64)
    x = T[:3, 0]
    yaw = (math.atan2(x[1], x[0]) if math.hypot(x[0], x[1]) > 1e-6 else 0.0) + float(yaw_offset)
    c, s = math.cos(yaw), math.sin(yaw)
    down, ref = np.array([0.0, 0.0, -1.0]), np.array([c, s, 0.0])
    world = np.column_stack([down, ref, np.cross(down, ref)])      # where a, b, a x b must point (base)
    out = np.eye(4)
    out[:3, :3] = world @ approach_frame(approach_axis_tip).T
    out[:3, 3] = T[:3, 3] + np.array([0.0, 0.0, height])
    return out


class PickPlaceMachine:
    """See module doc."""

    def __init__(self, *, plan, execute, grasp, current_joints, solve_ik, config, obstacles=None,
                 on_progress=None, clock=time.monotonic, announce=None, tip_pose=None):
        self._announce = announce
        self._tip_pose = tip_pose
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
        self.notes = []
        self.home = None
        self.object_box = None
        self._allowed, self._attached = {}, None

    # ------------------------------------------------------------------------------------------ api
    def cancel(self):
        self._cancel.set()

    @property
    def cancel_requested(self):
        return self._cancel.is_set()

    @property
    def held_object(self):
        """HeldObject when the gripper holds the object after run() (a task that failed after its grasp), else None."""
        return HeldObject(self.holding, self._attached) if self.holding else None

    def run(self, goal, held=None):
        """Run the whole task; returns a PickPlaceOutcome (never raises for task failures). held: a HeldObject
        still in the gripper from an earlier task: this task places it instead of picking (module doc)."""
        self._cancel.clear()
        self.holding = held.name if held is not None else ""
        self.retries, self.notes = [], []
        self._names, self._durations = [], []
        self._phase_start = None
        self._done_steps = 0
        try:
            plan = self._prepare(goal, held)
            self._total_steps = sum(len(steps) for _, steps in plan)
            for phase, steps in plan:
                self._begin(phase)
                for kind, arg, text in steps:
                    self._report(text)
                    self._check_cancel()
                    if kind == "move":
                        self._move(*arg)
                    elif kind == "lift":
                        self._lift(arg)
                    else:
                        self._do_grasp(*arg)
                    self._done_steps += 1
                self._end()
            self._tell("none", None)
            self._report("done", progress=1.0)
            name = f" '{self.holding_last}'" if self.holding_last else ""
            msg = (f"placed{name}, held from an earlier task (no pick)" if held is not None
                   else f"picked and placed{name}")
            if self.notes:
                msg += f" ({'; '.join(self.notes)})"
            if self.retries:
                msg += f" ({len(self.retries)} execution(s) retried: {'; '.join(self.retries)})"
            return PickPlaceOutcome(SUCCESSFUL, msg, self._names, self._durations)
        except _Abort as e:
            self._end()
            msg = e.message
            if self.holding:
                msg += f" (still holding '{self.holding}')"
            else:
                self._tell("none", None)
            return PickPlaceOutcome(e.code, msg, self._names, self._durations)

    # ------------------------------------------------------------------------------------- checks
    def _prepare(self, goal, held=None):
        cfg = self.config
        for name, T in (("pick_pose", goal.pick), ("place_pose", goal.place)):
            T = np.asarray(T, dtype=np.float64)
            if T.shape != (4, 4) or not np.all(np.isfinite(T)):
                raise _Abort(INVALID_GOAL, f"{name} must be a finite pose")
        h = float(goal.approach_height) if goal.approach_height else cfg.approach_height
        if not math.isfinite(h) or h <= 0.0:
            raise _Abort(INVALID_GOAL, f"approach_height must be > 0 (0: default {cfg.approach_height} m), got "
                                       f"{goal.approach_height}")
        try:
            approach_frame(cfg.approach_axis_tip)
        except ValueError as e:
            raise _Abort(INVALID_GOAL, str(e)) from None
        q_now = self._current()
        if q_now is None:
            raise _Abort(PLANNING_FAILED, "no joint state received yet")
        home = np.asarray(q_now if cfg.home is None else cfg.home, dtype=np.float64).copy()
        if home.shape != np.shape(q_now) or not np.all(np.isfinite(home)):
            raise _Abort(INVALID_GOAL, f"home configuration has {home.size} values, the robot {np.size(q_now)}")
        self.home = home
        if held is not None:
            return self._prepare_held(goal, held, h, np.asarray(q_now, dtype=np.float64), home)
        poses = self._solve_over_yaws(goal, h, home)
        T_pick, T_above_pick, T_place, T_above_place = (poses[k] for k in ("pick", "above_pick", "place",
                                                                         "above_place"))
        p_pick, p_place = np.asarray(goal.pick)[:3, 3], np.asarray(goal.place)[:3, 3]
        self.object_box = None
        if self._obstacles is not None:
            obstacles = list(self._obstacles() or [])
            self.object_box = self._find_object(obstacles, p_pick)
            self._check_place_free(obstacles, p_place)
        # the handled object: allowed near the tool on the way to the pick and away from the place,
        # attached to the tip (a box in the tip frame at the grasp pose) while held
        self._allowed, self._attached = {}, None
        if self.object_box is not None:
            ob = self.object_box
            at_place = Obstacle(ob.center + (p_place - p_pick), ob.size, ob.radius)
            self._allowed = {"pick": [ob], "place": [at_place]}
            T_obj = np.eye(4)
            T_obj[:3, 3] = ob.center
            half = 0.5 * ob.size if ob.is_box else np.full(3, ob.radius / math.sqrt(3.0))
            self._attached = Shape("box", half, np.linalg.inv(T_pick) @ T_obj, "held object")
            self._tell("pick", ob)
        name = goal.object_name
        avoid = bool(goal.avoid_obstacles)
        self.holding_last = ""
        return [
            (HOME, [("move", ("joint", home, avoid, None), "to home")]),
            (ABOVE_PICK, [("move", ("pose", T_above_pick, avoid, "pick"), "above the pick")]),
            (PICK, [("move", ("cartesian", T_pick, False, "pick"), "down to the object"),
                    ("grasp", (True, name), "attach"),
                    ("move", ("cartesian", T_above_pick, False, None), "lift")]),
            (ABOVE_PLACE, [("move", ("pose", T_above_place, avoid, None), "over to above the place")]),
            (PLACE, [("move", ("cartesian", T_place, False, None), "down to the place"),
                     ("grasp", (False, name), "release"),
                     ("move", ("cartesian", T_above_place, False, "place"), "retreat up")]),
            (HOME, [("move", ("joint", home, avoid, "place"), "back home")]),
        ]

    def _solve_over_yaws(self, goal, h, seed, keys=("above_pick", "pick", "above_place", "place")):
        """The task's poses at the first grasp yaw offset whose poses (``keys``: those only) all have IK solutions
        (seeded from ``seed``); sets grasp_yaw_offset and solutions; UNREACHABLE naming the first failure."""
        failures = []
        yaws = tuple(self.config.grasp_yaw_offsets or (0.0,))
        for yaw in yaws:
            poses = self._poses(goal, h, yaw)
            sol, failure = self._solve_all(poses, seed, keys)
            if sol is not None:
                self.grasp_yaw_offset = float(yaw)
                self.solutions = sol
                return poses
            failures.append(failure)
        raise _Abort(UNREACHABLE, failures[0] + (f" (also with the tool turned by {len(yaws) - 1} other yaw "
                                                 f"offset(s))" if len(yaws) > 1 else ""))

    def _prepare_held(self, goal, held, h, q_now, home):
        """The steps of a task that starts with ``held`` in the gripper: lift, above the place, place, home."""
        if goal.object_name and goal.object_name != held.name:
            raise _Abort(INVALID_GOAL, f"the gripper still holds '{held.name}' from an earlier task; a goal for "
                                       f"'{goal.object_name}' cannot pick with it held: send a goal for "
                                       f"'{held.name}' (or an empty object_name), which places it at its place pose")
        poses = self._solve_over_yaws(goal, h, q_now, ("above_place", "place"))
        T_place, T_above_place = poses["place"], poses["above_place"]
        self.object_box = None
        if self._obstacles is not None:
            self._check_place_free(list(self._obstacles() or []), np.asarray(goal.place)[:3, 3])
        # the held object: attached to the tip in every plan, allowed at the place on the way back home
        self._attached, self._allowed = held.shape, {}
        if held.shape is not None:
            T_obj = T_place @ held.shape.T
            size = 2.0 * np.asarray(held.shape.dims) if held.shape.kind == "box" else \
                np.full(3, 2.0 * held.shape.bounding_radius())
            self._allowed = {"place": [Obstacle(T_obj[:3, 3], size)]}
            self._tell("held", held.shape)
        self.holding_last = held.name
        avoid = bool(goal.avoid_obstacles)
        steps = []
        if self._tip_pose is not None:
            T_up = np.asarray(self._tip_pose(q_now), dtype=np.float64).copy()
            T_up[2, 3] += h
            steps.append(("lift", T_up, f"lift the held '{held.name}'"))
        return [
            (ABOVE_PLACE, steps + [("move", ("pose", T_above_place, avoid, None), "over to above the place")]),
            (PLACE, [("move", ("cartesian", T_place, False, None), "down to the place"),
                     ("grasp", (False, held.name), "release"),
                     ("move", ("cartesian", T_above_place, False, "place"), "retreat up")]),
            # home is the array the lift updates (config.home None: where the lift ended)
            (HOME, [("move", ("joint", home, avoid, "place"), "back home")]),
        ]

    def _poses(self, goal, h, yaw):
        cfg = self.config
        off, a = cfg.grasp_offset, cfg.approach_axis_tip
        return {"above_pick": tool_down_pose(goal.pick, off + h, a, yaw),
                "pick": tool_down_pose(goal.pick, off, a, yaw),
                "above_place": tool_down_pose(goal.place, off + cfg.release_gap + h, a, yaw),
                "place": tool_down_pose(goal.place, off + cfg.release_gap, a, yaw)}

    def _solve_all(self, poses, home, keys=("above_pick", "pick", "above_place", "place")):
        """({key: q}, None) when the poses (default all four) are reachable, each seeded from the previous one
        (above the place from above the pick), else (None, the first failure's message)."""
        q = home
        sol = {}
        what_of = {"above_pick": "the approach pose above the pick", "pick": "the grasp pose at the pick",
                   "above_place": "the approach pose above the place", "place": "the release pose at the place"}
        for key in keys:
            what = what_of[key]
            T = poses[key]
            seed = sol.get("above_pick", q) if key == "above_place" else q
            qk, reason = self._solve_ik(T, seed)
            if qk is None:
                p = T[:3, 3]
                return None, (f"{what} at [{p[0]:.3f}, {p[1]:.3f}, {p[2]:.3f}] m (tool pointing down) is not "
                              f"reachable: {reason}")
            sol[key] = q = np.asarray(qk, dtype=np.float64)
        return sol, None

    def _find_object(self, obstacles, p_pick):
        """The obstacle nearest the pick position within object_match_distance (the object as perceived)."""
        if not obstacles:
            return None
        d = Scene(obstacles).per_obstacle(p_pick[None, :])[0]
        j = int(np.argmin(d))
        return obstacles[j] if d[j] <= self.config.object_match_distance else None

    def _check_place_free(self, obstacles, p_place):
        obs = [o for o in obstacles if o is not self.object_box]   # skip the object itself
        if obs:
            d = Scene(obs).distances(p_place[None, :])[0][0]
            if d <= 0.0:
                raise _Abort(UNREACHABLE, f"the place position [{p_place[0]:.3f}, {p_place[1]:.3f}, "
                                          f"{p_place[2]:.3f}] m is inside an obstacle")

    # -------------------------------------------------------------------------------------- steps
    def _check_cancel(self):
        if self._cancel.is_set():
            raise _Abort(CANCELED, f"canceled during {self.phase}")

    def _move(self, kind, target, avoid, allowed):
        for attempt in range(self.config.execution_retries + 1):
            ok, msg = self._plan_and_execute(kind, target, avoid, allowed)
            if ok:
                return
            self.retries.append(f"{self.phase}: {msg}")
            self._check_cancel()
        raise _Abort(EXECUTION_FAILED, f"{self.phase}: execution failed: {msg}"
                     + (f" (after {self.config.execution_retries} re-planned retries)"
                        if self.config.execution_retries else ""))

    def _lift(self, T_up):
        """The first motion with an object held from an earlier task: straight up (it may still touch the table).
        A lift the planner refuses is skipped (said in the result); with config.home None, home is where the arm
        is afterwards."""
        try:
            self._move("cartesian", T_up, False, None)
        except _Abort as e:
            if e.code != PLANNING_FAILED:
                raise
            self.notes.append(f"lift skipped: {e.message}")
        q = self._current()
        if self.config.home is None and q is not None:
            self.home[:] = np.asarray(q, dtype=np.float64)

    def _plan_and_execute(self, kind, target, avoid, allowed):
        cfg = self.config
        q0 = self._current()
        if q0 is None:
            raise _Abort(EXECUTION_FAILED, "lost the joint states")
        if kind == "joint" and np.max(np.abs(np.asarray(q0, dtype=np.float64) - target), initial=0.0) < 1e-6:
            return True, "already there"          # nothing to plan (the first HOME when the task starts there)
        if kind == "joint":
            req = PlanRequest(start=np.asarray(q0, dtype=np.float64), goal_joints=np.asarray(target),
                              path_type=PATH_JOINT, profile=cfg.profile, velocity_scaling=cfg.velocity_scaling,
                              acceleration_scaling=cfg.acceleration_scaling, avoid_obstacles=avoid)
        elif kind == "pose":      # joint-space motion to a pose: the planner chooses the IK solution
            req = PlanRequest(start=np.asarray(q0, dtype=np.float64), goal_pose=np.asarray(target),
                              path_type=PATH_JOINT, profile=cfg.profile, velocity_scaling=cfg.velocity_scaling,
                              acceleration_scaling=cfg.acceleration_scaling, avoid_obstacles=avoid)
        else:
            req = PlanRequest(start=np.asarray(q0, dtype=np.float64), goal_pose=np.asarray(target),
                              path_type=PATH_CARTESIAN, profile=cfg.profile,
                              velocity_scaling=cfg.cartesian_velocity_scaling,
                              acceleration_scaling=cfg.cartesian_acceleration_scaling, avoid_obstacles=avoid)
        req.allowed_objects = tuple(self._allowed.get(allowed, ()))
        req.attached_object = self._attached if self.holding else None
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
            if self._attached is not None:
                self._tell("held", self._attached)
        self._check_cancel()
        if not ok:
            raise _Abort(GRASP_FAILED, f"{self.phase}: {'attach' if attach else 'release'} failed: {msg}")
        if not attach:
            self.holding = ""
            self._tell("none", None)

    # ------------------------------------------------------------------------------- bookkeeping
    def _tell(self, state, obj):
        if self._announce is not None:
            self._announce(state, obj)

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
