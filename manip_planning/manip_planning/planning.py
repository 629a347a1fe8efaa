"""Request-level planning (the maths behind the ``plan_trajectory`` service; no rclpy).

``Planner.plan(PlanRequest, obstacles)`` validates a request, picks the goal configuration (closed-form IK
solutions when the arm has them, else numerical IK from the start and, when that one is not clear, from
repeatable random seeds; solutions that put a link origin below the floor are skipped; with obstacles, the
solutions the sampling planner accepts keeping the safety margin, ranked by clearance on the planner's own
collision spheres and then by distance from the start; none: COLLISION naming the obstacle), builds the path
(joint line, Cartesian straight line, or the obstacle-aware path: RRT-Connect over the robot's collision
spheres by default (path_planning.py), or the heuristics of avoidance.py with ``path_planner="heuristics"``;
every clearance check, the heuristics' included, uses those same spheres: robot_spheres.py), time-scales it (cubic, quintic, or
the waypoint profiles trapezoidal, toppra, jerk_limited; a sampling planner's polyline asked with cubic or quintic
and no duration becomes one TOPP-RA motion along its checked spline, not a stop at every corner: _through_corners)
and returns a ``PlanResult`` with an ErrorCode
value and a message; it never raises for bad input. A request may carry a held object (part of the robot
for the sampling planner and the clearance checks; the heuristics do not see it) and objects that are not
obstacles for it (the object about to be picked).
"""
from __future__ import annotations

import copy
import logging
import math
import time
from dataclasses import dataclass, field

import numpy as np

from . import time_scaling as ts
from .avoidance import METHODS, PolylinePath, plan_avoiding
from .cartesian_path import CartesianPath
from .collision import Scene, densify
from .joint_path import LinePath, PlanningError, Trajectory, concatenate, time_scale
from .potential_field import FieldOptions
from . import jerk_limited, topp, trapezoidal
from .path_planning import PATH_PLANNERS, plan_path
from .planning_scene import PlanningScene, pose_matrix
from .robot_collision import CollisionChecker, CollisionModelError, RobotCollisionModel, parse_collision_shapes
from .robot_spheres import RobotSpheres
from .shapes import Shape

# manip_msgs/msg/ErrorCode values
SUCCESS = 0
INVALID_INPUT = -1
UNKNOWN_JOINT = -2
UNKNOWN_LINK = -3
NO_IK_SOLUTION = -4
OUT_OF_LIMITS = -5
PLANNING_FAILED = -6
NOT_READY = -7
COLLISION = -8
EXECUTION_FAILED = -9

PATH_JOINT = "joint"
# Profiles for the waypoints of a joint path (at rest at each polyline corner; TOPP-RA along a spline)
WAYPOINT_PROFILES = (trapezoidal.PROFILE, topp.PROFILE, jerk_limited.PROFILE)
PATH_CARTESIAN = "cartesian"
MAX_POINTS = 200_000
HELD_OBJECT_TOLERANCE_M = 0.02       # an obstacle this close to the held object at the start is that object
ALLOWED_OBJECT_TOLERANCE_M = 0.01    # m: obstacles whose bounding box comes this close to an allowed one's go
GROWN_EXTRA_M = 0.01                 # m: the sampling planner grows the obstacles by the safety margin + this
GOAL_TRIES = 3                       # pose goal: acceptable IK solutions the sampling planner tries, in rank order
log = logging.getLogger(__name__)


@dataclass
class PlanRequest:
    """Start (None: not known), goal_joints or goal_pose ((4, 4) base frame), path and profile names,
    duration (s, 0: shortest), scalings (0: the planner's defaults), avoid_obstacles, sample_period (0:
    default). attached_object: a Shape in the tip link's frame carried by the tool (checked as part of the
    robot; obstacles it overlaps at the start, within HELD_OBJECT_TOLERANCE_M, are the held object as
    perceived and are ignored); allowed_objects: Obstacles (base frame) whose neighbourhood
    (ALLOWED_OBJECT_TOLERANCE_M) is not an obstacle for this request (the object about to be picked)."""

    start: np.ndarray = None
    goal_joints: np.ndarray = None
    goal_pose: np.ndarray = None
    path_type: str = PATH_JOINT
    profile: str = ts.QUINTIC
    duration: float = 0.0
    velocity_scaling: float = 0.0
    acceleration_scaling: float = 0.0
    avoid_obstacles: bool = False
    sample_period: float = 0.0
    attached_object: Shape = None        # held by the tool: a Shape in the tip link's frame, part of the robot
    allowed_objects: tuple = ()          # Obstacles (base frame): obstacles overlapping them are ignored


@dataclass
class PlanResult:
    success: bool
    error_code: int
    message: str
    trajectory: Trajectory = None
    min_obstacle_distance: float = math.inf
    min_floor_distance: float = math.inf
    tip_path: np.ndarray = None          # (N, 3) tip positions of the trajectory samples
    method: str = ""
    planning_time: float = 0.0
    details: dict = field(default_factory=dict)


@dataclass
class PlannerSettings:
    acceleration_limits: tuple = ()          # rad/s^2 per joint; empty: default_acceleration_limit each
    default_acceleration_limit: float = 4.0
    default_velocity_scaling: float = 1.0
    default_acceleration_scaling: float = 1.0
    default_sample_period: float = 0.02
    safety_margin: float = 0.03              # m
    influence_distance: float = 0.15         # m
    link_radius: float = 0.06                # m, capsule radius around the link segments
    tool_length: float = 0.0                 # m, extra capsule along the tip z axis
    floor_height: float = 0.0                # m; NaN: no floor
    avoidance_methods: tuple = METHODS
    max_joint_step: float = 0.1              # rad, Cartesian jump threshold between samples
    cartesian_position_step: float = 0.005   # m
    cartesian_rotation_step: float = 0.02    # rad
    limit_tolerance: float = 1e-3            # rad, start slightly outside the limits is clipped
    path_planner: str = "rrt_connect"        # with obstacles: a PATH_PLANNERS name, or "heuristics"
    planning_time_limit: float = 1.0         # s, for the sampling planner
    planner_seed: int = 0                    # random stream of the sampling planner (repeatable plans)
    backend: str = "cpu"                     # collision checks: "cpu" or "cuda" (batched re-checks on the GPU)
    jerk_limits: tuple = ()                  # rad/s^3 per joint for the jerk_limited profile; empty: 50 each
    # m: IK goals ranked by clearance up to this (at least safety_margin + GROWN_EXTRA_M), then nearest the start;
    # 0.06 made the UR5 take a flipped-wrist branch near a singularity for 2 cm more clearance (the demo failed)
    goal_clearance: float = 0.0
    ik_seeds: int = 16                       # extra numerical IK seeds (random, repeatable) when choosing a goal
    # singularity check of every planned path (manip_core.analysis.path_singularity): the smallest minimum singular
    # value of the Jacobian ("full" 6 x dof body Jacobian for 6+ joints, else "position") along the trajectory;
    # below singularity_threshold (0: not checked) the path is refused (PLANNING_FAILED) or reported ("warn")
    singularity_threshold: float = 0.01
    singularity_action: str = "warn"         # "warn" or "refuse"


HEURISTICS = "heuristics"
SINGULARITY_ACTIONS = ("warn", "refuse")


def collision_model_for(model, urdf=None, settings=None):
    """The robot's collision model for planning: the URDF's <collision> geometry when it has some, else
    capsules of settings.link_radius around the link chain (plus settings.tool_length along the tip's z).
    Links that no joint moves are not checked against obstacles (the base stands on the floor)."""
    s = settings or PlannerSettings()
    if urdf:
        try:
            if parse_collision_shapes(urdf):
                return RobotCollisionModel.from_urdf(urdf, model=model, check_fixed_links=False)
            log.warning("the URDF has no <collision> elements: planning with capsules of radius %.3f m (link_radius) "
                        "along the chain", s.link_radius)
        except CollisionModelError as e:
            log.warning("collision geometry of the URDF not usable (%s): planning with capsules instead", e)
    return RobotCollisionModel.capsules(model, s.link_radius, tool_length_m=s.tool_length)


def _aabb(o):
    """(lo, hi) corners of an Obstacle's axis-aligned bounding box (m, base frame)."""
    h = 0.5 * o.size if o.is_box else np.full(3, o.radius)
    return o.center - h, o.center + h


class Planner:
    """Plans for one RobotModel (see module doc). collision_model: a RobotCollisionModel for the sampling
    planner (default: collision_model_for(model))."""

    def __init__(self, model, settings=None, collision_model=None):
        self.model = model
        self.s = settings or PlannerSettings()
        s = self.s
        if s.path_planner not in PATH_PLANNERS and s.path_planner != HEURISTICS:
            raise ValueError(f"path_planner {s.path_planner!r} unknown (known: {', '.join(PATH_PLANNERS)}, "
                             f"{HEURISTICS})")
        from .robot_collision import BACKENDS
        if s.backend not in BACKENDS:
            raise ValueError(f"backend {s.backend!r} unknown (known: {', '.join(BACKENDS)})")
        if s.singularity_action not in SINGULARITY_ACTIONS:
            raise ValueError(f"singularity_action {s.singularity_action!r} unknown (known: "
                             f"{', '.join(SINGULARITY_ACTIONS)})")
        if not (math.isfinite(s.singularity_threshold) and s.singularity_threshold >= 0):
            raise ValueError(f"singularity_threshold must be a finite singular value >= 0, got "
                             f"{s.singularity_threshold!r}")
        self.collision_model = collision_model if collision_model is not None else collision_model_for(model,
                                                                                                       settings=s)
        n = model.dof
        acc = np.asarray(s.acceleration_limits, dtype=np.float64).reshape(-1)
        if acc.size == 0:
            acc = np.full(n, float(s.default_acceleration_limit))
        elif acc.size == 1:
            acc = np.full(n, float(acc[0]))
        if acc.size != n or not np.all(acc > 0):
            raise ValueError(f"acceleration_limits needs 1 or {n} positive values")
        self.acceleration_limits = acc
        vel = np.array(model.velocity_limits, dtype=np.float64)
        vel = np.where(np.isfinite(vel) & (vel > 0), vel, 1.0)
        self.velocity_limits = vel
        # one robot for the sampling planner, the goal choice, the clearance checks and the heuristics
        self.arm = RobotSpheres(self.collision_model)
        frames = model._link_frames
        self._moving_links = [name for name in model.link_names if frames[name][0] >= 0]
        self.floor = None if s.floor_height is None or not math.isfinite(s.floor_height) else float(s.floor_height)

    # --------------------------------------------------------------------------------------- helpers
    def _scene(self, obstacles):
        return Scene(obstacles, self.floor)

    def _joint_vector(self, x, what):
        n = self.model.dof
        q = np.asarray(x, dtype=np.float64).reshape(-1)
        if q.size != n:
            raise PlanningError(INVALID_INPUT, f"{what} has {q.size} values; the robot has {n} joints "
                                               f"({', '.join(self.model.joint_names)})")
        if not np.all(np.isfinite(q)):
            raise PlanningError(INVALID_INPUT, f"{what} holds NaN or inf")
        lo, hi = self.model.joint_lower, self.model.joint_upper
        tol = self.s.limit_tolerance
        bad = np.nonzero((q < lo - tol) | (q > hi + tol))[0]
        if len(bad):
            j = int(bad[0])
            raise PlanningError(OUT_OF_LIMITS, f"{what}: joint '{self.model.joint_names[j]}' = {q[j]:.4f} is "
                                               f"outside its limits [{lo[j]:.4f}, {hi[j]:.4f}]")
        return np.clip(q, lo, hi)

    def links_above_floor(self, q, slack=0.0):
        """True when every moving link origin is at or above the floor (skips the check without a floor)."""
        if self.floor is None:
            return True
        for name in self._moving_links:
            if self.model.fk(q, name)[2, 3] < self.floor - slack:
                return False
        return True

    def ik_candidates(self, T, q_near, more=False):
        """Joint solutions for tip pose T, nearest q_near first: every closed-form branch when the arm has them,
        else numerical IK seeded from q_near (with ``more``: also from ``ik_seeds`` repeatable random seeds); for an
        arm with more than six joints each numerical solution is moved along its self-motion toward q_near
        (posture_ik.toward_posture; with ``more`` the unmoved ones from the random seeds are kept as well).
        Duplicates (within 1e-3 rad) are dropped."""
        model = self.model
        sols = []
        self.last_ik_reason = ""
        try:
            solver = model.analytic_ik()
            if solver is not None:
                sols, self.last_ik_reason = solver.solve(T, near=q_near)
                sols = list(sols)
        except (NotImplementedError, ValueError):
            sols = []
        if not sols:
            res = model.ik(T, q_seed=q_near)
            if res.success:
                sols = [res.q]
            elif not self.last_ik_reason:
                self.last_ik_reason = res.message
            for seed in range(1, 4):
                if sols:
                    break
                res = model.ik(T, seed=seed)
                if res.success:
                    sols = [res.q]
            if sols and more:
                lo = np.where(np.isfinite(model.joint_lower), model.joint_lower, -math.pi)
                hi = np.where(np.isfinite(model.joint_upper), model.joint_upper, math.pi)
                rng = np.random.default_rng(0)
                for _ in range(int(self.s.ik_seeds)):
                    res = model.ik(T, q_seed=rng.uniform(lo, hi), max_restarts=0)
                    if res.success:
                        sols.append(res.q)
            if sols and model.dof > 6:
                # redundant arm: of the self-motion of each solution, the posture nearest q_near (with ``more``,
                # the solutions as found too: a posture near the start may come closer to an obstacle)
                from .posture_ik import toward_posture
                sols = [toward_posture(model, q, T, q_near)[0] for q in sols] + (sols[1:] if more else [])
        unique = []
        for q in (self._nearest_turn(q, q_near) for q in sols):
            if all(np.max(np.abs(q - u)) > 1e-3 for u in unique):
                unique.append(q)
        unique.sort(key=lambda q: float(np.linalg.norm(q - q_near)))
        return unique

    def _nearest_turn(self, q, q_near):
        """q with each revolute joint whose range spans more than a turn (continuous joints: infinite limits)
        moved by whole turns (2 pi rad) to the value nearest q_near within its limits (the same pose)."""
        q = np.array(q, dtype=np.float64)
        lo, hi = self.model.joint_lower, self.model.joint_upper
        types = getattr(self.model, "joint_types", None)
        for i in range(len(q)):
            if types is not None and str(types[i]).lower().startswith("p"):
                continue       # prismatic
            if not hi[i] - lo[i] > 2.0 * math.pi:
                continue
            v = q[i] + 2.0 * math.pi * round((q_near[i] - q[i]) / (2.0 * math.pi))
            if lo[i] <= v <= hi[i]:
                q[i] = v
        return q

    def choose_ik(self, T, q_near, scene=None, required=None):
        """A joint solution of tip pose T with every link above the floor. Without a scene (or ``required``):
        the one nearest q_near. With them: the solutions that the sampling planner accepts as a goal keeping the
        safety margin (free in its own collision model, the held object included, with every obstacle grown by
        the margin: ``growth``; failing that, a goal that keeps the margin exactly but is near an edge of a box,
        which the planner then grows by half the margin), ranked by
        their clearance to the obstacles (RobotSpheres: the same spheres) up to ``goal_clearance`` and then by
        joint distance from q_near; when none is free, PlanningError(COLLISION) naming the obstacle, the link and
        the clearance of the clearest one. No solution: PlanningError(NO_IK_SOLUTION) with the reason.
        ``last_goal_choice`` says which was taken; ``goal_alternatives`` holds the other acceptable solutions in
        rank order, as (joint values, description) (for the sampling planner when it finds no path to the first)."""
        clearing = scene is not None and len(scene) and required is not None
        sols = self._above_floor(self.ik_candidates(T, q_near))
        self.goal_alternatives = []
        if not clearing:
            self.last_goal_choice = f"IK solution nearest the start ({len(sols)} found)"
            return sols[0]
        enough = max(float(required), float(self.s.goal_clearance))
        # the floor as for the plan from q_near: lowered to what the start already reaches (a cover of a link at
        # the base that dips below the table top)
        ch = self._checker(scene, 0.0, min(0.0, self._clearances(q_near, scene)[1] - 0.002), at=(q_near,))
        margin = self.s.safety_margin

        def free_of_self(q):
            if ch.is_free(q):
                return True
            # a contact of the model between links at most two joints apart (a conservative mesh cover) is
            # tolerated in a goal; the plan then leaves that pair unchecked (touching at the goal)
            from .self_contact import near_pairs, touching_pairs, without_pairs
            pairs = touching_pairs(ch.robot, [q])
            return bool(pairs) and near_pairs(ch.robot, pairs) == pairs and \
                CollisionChecker(without_pairs(ch.robot, pairs), ch.scene).is_free(q)

        def rate(qs):
            """(clearances, tiers): tier 0 the sampling planner keeps the margin around the goal; 1 the goal keeps
            it but a box grown as a box by the margin reaches it at an edge or corner, so that the planner grows
            that box by half the margin; 2 not acceptable."""
            clear = [float(np.min(self._clearances(q, scene)[0])) for q in qs]
            tiers = []
            for c, q in zip(clear, qs):
                g = float(np.min(self.growth(scene, [q]), initial=margin)) if c >= margin else -1.0
                tiers.append(2 if g < 0.5 * margin - 1e-12 or not free_of_self(q) else (0 if g >= margin else 1))
            return clear, tiers

        clear, tier = rate(sols)
        if not (tier[0] == 0 and clear[0] >= enough) and self.model.analytic_ik() is None:   # more seeds, postures
            sols = self._above_floor(self.ik_candidates(T, q_near, more=True))
            clear, tier = rate(sols)
        order = sorted(range(len(sols)), key=lambda i: (tier[i], -min(clear[i], enough), i))
        best = order[0]
        if tier[best] == 2:
            best = max(range(len(sols)), key=lambda i: clear[i])
            c = self._clearances(sols[best], scene)[0]
            j = int(np.argmin(c))
            od, sd = ch.distances(sols[best])
            why = ""
            if sd < 0:
                from .self_contact import touching_pairs
                why = (f"; in self-collision in the model ({sd:.3f} m: "
                       f"{', '.join(sorted('-'.join(sorted(p)) for p in touching_pairs(ch.robot, [sols[best]])))})")
            elif od < 0:
                why = f"; touching the floor or an obstacle in the model ({od:.3f} m)"
            raise PlanningError(COLLISION, f"goal pose: none of the {len(sols)} IK solutions keeps the safety margin "
                                           f"{margin:.3f} m from the obstacles in the planner's collision model "
                                           f"(boxes grown as boxes); the clearest comes {c[j]:.3f} m from "
                                           f"{self._describe(scene, j, sols[best])}{why}")
        def choice(i):
            return (f"IK solution {i + 1} of {len(sols)} (by clearance up to {enough:.3f} m, then nearest the start), "
                    f"clearance {clear[i]:.3f} m" + ("" if tier[i] == 0 else " (an obstacle's edge is near: the "
                                                                              "planner grows that box by half the "
                                                                              "margin only)"))

        self.last_goal_choice = choice(best)
        self.goal_alternatives = [(sols[i], choice(i)) for i in order if i != best and tier[i] < 2]
        return sols[best]

    def _checker(self, scene, inflate_m, floor_offset_m=0.0, at=()):
        """The sampling planner's CollisionChecker (held object attached) for the obstacles grown by inflate_m
        (planning_scene). Self-collision pairs that already touch in the model at the configurations ``at``
        (start, goal: where the real arm is) are not checked (self_contact.py); they are kept in
        ``_ignored_pairs``."""
        robot = self.collision_model
        if self._held_shape is not None:
            robot = copy.copy(robot)
            robot.attach(self._held_shape)
        if len(at) and len(robot.pairs):
            from .self_contact import touching_pairs, without_pairs
            pairs = touching_pairs(robot, at)
            if pairs:
                robot = without_pairs(robot, pairs)
                self._ignored_pairs |= pairs
        return CollisionChecker(robot, self.planning_scene(scene, inflate_m, floor_offset_m), backend=self.s.backend)

    def _above_floor(self, sols):
        if not sols:
            reason = self.last_ik_reason or "IK found no solution"
            raise PlanningError(NO_IK_SOLUTION, f"goal pose unreachable: {reason}")
        above = [q for q in sols if self.links_above_floor(q)]
        if not above:
            raise PlanningError(NO_IK_SOLUTION, f"all {len(sols)} IK solutions of the goal pose put a link below "
                                                f"the floor (z = {self.floor})")
        return above

    def _describe(self, scene, j, q=None):
        """'obstacle #j (box 0.1 x 0.1 x 0.3 m at [x, y, z] m)' and, given q, the closest link of the robot."""
        o = scene.obstacles[j]
        what = (f"box {' x '.join(f'{v:.3f}' for v in o.size)} m" if o.is_box else f"sphere r {o.radius:.3f} m")
        text = f"obstacle #{j} ({what} at {np.round(o.center, 3).tolist()} m)"
        if q is not None and len(self.arm):
            text += f", closest link '{self.arm.closest_link(q, o)[0]}'"
        return text

    # ------------------------------------------------------------------- held and handled objects
    _held = None          # (K, 4) spheres of the held object in the tip frame during one request, else None
    _held_shape = None    # the same object as a Shape (tip frame), for the sampling planner's collision model
    _ignored_pairs = frozenset()   # self-collision pairs touching at the start or goal of this request

    def _clearances(self, q, scene):
        """RobotSpheres.clearances with the held object's spheres (when one is attached) counted as the arm."""
        c, f = self.arm.clearances(q, scene)
        if self._held is None:
            return c, f
        T = self.model.fk(q)
        P = self._held[:, :3] @ T[:3, :3].T + T[:3, 3]
        r = self._held[:, 3]
        if len(scene):
            c = np.minimum(c, np.min(scene.per_obstacle(P) - r[:, None], axis=0))
        f = min(f, float(np.min(scene.floor_distances(P) - r, initial=np.inf)))
        return c, f

    def _handled_objects(self, req, obstacles, q0):
        """(obstacles without the allowed and held objects, held spheres (K, 4) in the tip frame or None,
        number of obstacles dropped)."""
        held = None
        keep = list(obstacles)
        if req.attached_object is not None:
            if not isinstance(req.attached_object, Shape):
                raise PlanningError(INVALID_INPUT, "attached_object must be a Shape in the tip link's frame")
            held = req.attached_object.sphere_cover()
            if keep:
                T = self.model.fk(q0)
                P = held[:, :3] @ T[:3, :3].T + T[:3, 3]
                d = np.min(Scene(keep).per_obstacle(P) - held[:, 3:4], axis=0)
                keep = [o for o, dj in zip(keep, d) if dj > HELD_OBJECT_TOLERANCE_M]
        for a in req.allowed_objects or ():
            lo_a, hi_a = _aabb(a)
            tol = ALLOWED_OBJECT_TOLERANCE_M
            keep = [o for o in keep if not (np.all(_aabb(o)[0] <= hi_a + tol) and np.all(_aabb(o)[1] >= lo_a - tol))]
        return keep, held, len(obstacles) - len(keep)

    def _min_clearance(self, Q, scene):
        """(min obstacle clearance, min floor clearance, per-obstacle minima) over configurations Q."""
        per = np.full(len(scene), np.inf)
        mf = math.inf
        for q in Q:
            c, f = self._clearances(q, scene)
            per = np.minimum(per, c)
            mf = min(mf, f)
        return float(np.min(per, initial=np.inf)), mf, per

    def _check_kept(self, scene, per, q0, q1, what, need=None):
        """COLLISION when the path comes closer to an obstacle than ``need`` (per obstacle, m; default
        min(margin, start, goal clearance))."""
        margin = self.s.safety_margin
        if need is None:
            need = np.minimum(np.minimum(self._clearances(q0, scene)[0], self._clearances(q1, scene)[0]), margin)
        bad = np.nonzero(per < need - 1e-6)[0]
        if len(bad):
            j = int(bad[0])
            raise PlanningError(COLLISION, f"{what} comes {per[j]:.3f} m from {self._describe(scene, j)} (required "
                                           f"{need[j]:.3f} m, safety margin {margin:.3f} m)")

    # ------------------------------------------------------------------------------------------ plan
    def plan(self, req, obstacles=()):
        t0 = time.perf_counter()
        try:
            res = self._plan(req, list(obstacles))
        except PlanningError as e:
            res = PlanResult(False, e.code, e.message)
        except (ValueError, FloatingPointError, np.linalg.LinAlgError) as e:
            res = PlanResult(False, INVALID_INPUT, f"invalid request: {e}")
        finally:
            self._held = self._held_shape = None
        res.planning_time = time.perf_counter() - t0
        return res

    def warm_up(self):
        """Compile (or load from numba's cache) the sampling planner's kernels now, not in the first request:
        a few seconds cold; call it from a background thread at start-up. Never raises (logs instead)."""
        try:
            self._warm_up()
        except Exception as e:  # noqa: BLE001 - a failed warm-up only means the first request compiles
            log.warning("planner warm-up failed (%s: %s); the first plan compiles the kernels", type(e).__name__, e)

    def _warm_up(self):
        from .path_simplify import simplify
        from .rrt_connect import RRTConnect
        far = PlanningScene([Shape("sphere", (0.01,), pose_matrix((1e3, 1e3, 1e3)), "warm-up")])
        ch = CollisionChecker(self.collision_model, far, backend=self.s.backend)
        lo = np.where(np.isfinite(self.model.joint_lower), self.model.joint_lower, -1.0)
        hi = np.where(np.isfinite(self.model.joint_upper), self.model.joint_upper, 1.0)
        q0, q1 = lo + 0.4 * (hi - lo), lo + 0.6 * (hi - lo)
        RRTConnect(ch, max_nodes=16).solve(q0, q1, 0.01, 0)
        from .rrt_connect import grow
        t = np.zeros((2, 4, len(q0)))
        t[0, 0], t[1, 0] = q0, q1
        grow(ch.ca, lo, hi, t, np.full((2, 4), -1, dtype=np.int64), np.ones(2, dtype=np.int64), 1.0, 1.0, 1,
             np.zeros(4, dtype=np.int64), True)
        simplify(ch, np.array([q0, 0.5 * (q0 + q1), q1]))
        ch.first_colliding_segment(np.array([q0, q1]), 0.5)

    def planning_scene(self, scene, inflate_m, floor_offset_m=0.0):
        """PlanningScene of the obstacles (boxes, spheres) grown by inflate_m (m: one value, or one per obstacle;
        negative shrinks; an obstacle shrunk to nothing is left out), and the floor as a slab whose top is
        floor_offset_m above the floor height."""
        shapes = []
        grow = np.broadcast_to(np.asarray(inflate_m, dtype=np.float64), (len(scene.obstacles),))
        for o, d in zip(scene.obstacles, grow):
            T = pose_matrix(o.center)
            if o.is_box:
                half = 0.5 * o.size + d
                if np.all(half > 1e-6):
                    shapes.append(Shape("box", half, T, "obstacle"))
            elif o.radius + d > 1e-6:
                shapes.append(Shape("sphere", (o.radius + d,), T, "obstacle"))
        if self.floor is not None:
            top = self.floor + float(floor_offset_m)
            shapes.append(Shape("box", (50.0, 50.0, 0.5), pose_matrix((0.0, 0.0, top - 0.5)), "floor"))
        return PlanningScene(shapes)

    def growth(self, scene, qs):
        """Per obstacle, how much (m) the sampling planner grows it: the safety margin + GROWN_EXTRA_M, or, when
        the configurations ``qs`` (start and goal) are not free of it so grown (a box grown as a box reaches
        farther at its edges and corners than that distance), the first of the margin, half of it, and their
        exact clearance / sqrt(3) - 2 mm (a box grown by d stays within d sqrt(3) of it) that they are free
        of; negative (the obstacle shrunk) when they touch it. The path then keeps about what they have."""
        margin = self.s.safety_margin
        top = margin + GROWN_EXTRA_M
        grow = np.full(len(scene), top)
        if not len(scene):
            return grow
        c = np.min([self._clearances(q, scene)[0] for q in qs], axis=0)
        robot = self.collision_model
        if self._held_shape is not None:
            robot = copy.copy(robot)
            robot.attach(self._held_shape)
        for j, o in enumerate(scene.obstacles):
            if c[j] >= top * math.sqrt(3.0):
                continue
            last = c[j] / math.sqrt(3.0) - 0.002 if c[j] > 0 else c[j] - 0.002
            for g in (top, margin, 0.5 * margin):
                if g <= last:
                    break
                one = Scene([o])
                shapes = self.planning_scene(one, g)
                shapes = PlanningScene([sh for sh in shapes.shapes if sh.name != "floor"])
                ch = CollisionChecker(robot, shapes)
                if all(ch.distances(q)[0] >= 0.0 for q in qs):
                    last = g
                    break
            grow[j] = min(top, last)
        return grow

    def _sampled_path(self, scene, q0, q1):
        """(PolylinePath, method, details) from the sampling planner, obstacles grown by the safety margin
        plus GROWN_EXTRA_M (the edges are checked at discrete steps): see ``growth`` for an obstacle that the
        start or the goal is too close to. Raises PlanningError(COLLISION) naming what start or goal collides
        with when they are still not free (self-collision), PLANNING_FAILED when no path is found within the
        time limit."""
        margin = self.s.safety_margin
        grow = self.growth(scene, (q0, q1))
        # the floor likewise, when start or goal already reach below it (a tool that touches the table)
        f = min(self._clearances(q0, scene)[1], self._clearances(q1, scene)[1])
        floor_offset = min(0.0, f - 0.002)
        # what the path is then guaranteed to keep (a box grown by d keeps d at its faces; edges checked 5 mm finer)
        self._path_need = np.where(grow < margin + GROWN_EXTRA_M, np.minimum(grow - 0.005, margin), margin)
        ch = self._checker(scene, grow, floor_offset, at=(q0, q1))
        robot = ch.robot
        self._last_checker = ch
        res = plan_path(ch, q0, q1, planner=self.s.path_planner, time_limit_s=self.s.planning_time_limit,
                        seed=self.s.planner_seed)
        if not res.valid:
            bad = [(what, q) for what, q in (("start", q0), ("goal", q1)) if not ch.is_free(q)]
            what, q = bad[0] if bad else ("start", q0)
            obstacle_d, self_d = ch.distances(q)
            raise PlanningError(COLLISION, f"{self.s.path_planner}: the {what} configuration is in collision in the "
                                           f"planner's model ({robot.source or 'collision spheres'}): obstacle "
                                           f"distance {obstacle_d:.3f} m, self distance {self_d:.3f} m")
        if not res.success:
            raise PlanningError(PLANNING_FAILED, f"{self.s.path_planner}: {res.message}")
        info = dict(waypoints=len(res.path), smoothing="polyline", search_time=res.planning_time_s,
                    simplification_time=res.simplification_time_s, path_length_rad=res.path_length_rad,
                    iterations=res.iterations)
        path = LinePath(res.path[0], res.path[-1]) if len(res.path) == 2 else PolylinePath(res.path)
        return path, self.s.path_planner, info

    def _sampled_path_to_any(self, scene, q0, goals):
        """(_sampled_path result, goal, its description) for the first of ``goals`` ((joint values, description),
        acceptable IK solutions of a pose goal in rank order) that the sampling planner finds a path to within its
        time limit (each try has the whole limit): a solution in another branch of the arm (shoulder, elbow or
        wrist turned over) can be far harder to reach than its rank says. The last failure is raised."""
        missed = []
        for k, (q1, what) in enumerate(goals):
            self._ignored_pairs = set()
            try:
                out = self._sampled_path(scene, q0, q1)
            except PlanningError as e:
                if e.code != PLANNING_FAILED or k == len(goals) - 1:
                    if missed:
                        e.message = f"{e.message} (also no path to {'; '.join(missed)})"
                    raise
                missed.append(what.split(" (")[0])
                log.info("goal pose: no path to %s (%s); trying the next IK solution", what, e.message)
                continue
            if missed:
                what = f"{what}, after no path to {'; '.join(missed)} within the time limit"
            return out, q1, what

    def _singularity(self, Q):
        """manip_core.analysis.path_singularity.check_path of the joint samples Q (None when not checked)."""
        if not self.s.singularity_threshold > 0:
            return None
        from manip_core.analysis.path_singularity import check_path
        return check_path(self.model, Q, float(self.s.singularity_threshold))

    def _settings_of(self, req):
        vs = float(req.velocity_scaling)
        as_ = float(req.acceleration_scaling)
        for name, v in (("velocity_scaling", vs), ("acceleration_scaling", as_)):
            if not math.isfinite(v) or v < 0.0 or v > 1.0:
                raise PlanningError(INVALID_INPUT, f"{name} must be in (0, 1] (0: default), got {v}")
        vs = vs or self.s.default_velocity_scaling
        as_ = as_ or self.s.default_acceleration_scaling
        dt = float(req.sample_period)
        if not math.isfinite(dt) or dt < 0.0:
            raise PlanningError(INVALID_INPUT, f"sample_period must be >= 0 (0: default), got {dt}")
        dt = dt or self.s.default_sample_period
        dur = float(req.duration)
        if not math.isfinite(dur) or dur < 0.0:
            raise PlanningError(INVALID_INPUT, f"duration must be >= 0 (0: shortest), got {dur}")
        if dur > 0 and dur / dt > MAX_POINTS:
            raise PlanningError(INVALID_INPUT, f"duration / sample_period gives more than {MAX_POINTS} points")
        if req.profile not in ts.PROFILES + WAYPOINT_PROFILES:
            raise PlanningError(INVALID_INPUT, f"unknown profile {req.profile!r} (known: "
                                               f"{', '.join(ts.PROFILES + WAYPOINT_PROFILES)})")
        if req.profile in WAYPOINT_PROFILES and dur > 0:
            raise PlanningError(INVALID_INPUT, f"profile {req.profile!r} gives the shortest motion; it takes no "
                                               f"duration (got {dur} s)")
        if req.path_type not in (PATH_JOINT, PATH_CARTESIAN):
            raise PlanningError(INVALID_INPUT, f"unknown path type {req.path_type!r}")
        return vs, as_, dt, dur

    def _waypoint_profile(self, path, req, vs, as_, dt):
        """Trajectory of a joint path's waypoints with a WAYPOINT_PROFILES profile (TOPP-RA falls back to the
        trapezoidal polyline when its spline would collide with the last sampled-planner scene)."""
        if isinstance(path, PolylinePath):
            W = path.waypoints
        elif isinstance(path, LinePath):
            W = np.array([path.q0, path.q1])
        elif hasattr(path, "waypoints"):
            W = path.waypoints
        else:
            raise PlanningError(INVALID_INPUT, f"profile {req.profile!r} needs a joint path through waypoints")
        v, a = self.velocity_limits * vs, self.acceleration_limits * as_
        names = list(self.model.joint_names)
        if req.profile == topp.PROFILE:
            traj = topp.toppra_trajectory(W, v, a, dt, names, checker=getattr(self, "_last_checker", None))
            if traj is not None:
                return traj
            log.info("TOPP-RA spline through the waypoints collides: trapezoidal profile on the polyline")
        if req.profile == jerk_limited.PROFILE:
            j = np.asarray(self.s.jerk_limits, dtype=np.float64).reshape(-1)
            j = np.full(len(v), 50.0) if j.size == 0 else (np.full(len(v), j[0]) if j.size == 1 else j)
            return jerk_limited.jerk_limited_trajectory(W, v, a, j, dt, names)
        return trapezoidal.trapezoidal_trajectory(W, v, a, dt, names)

    def _through_corners(self, path, vs, as_, dt):
        """One motion along the sampling planner's polyline, without a stop at every corner (a cubic/quintic
        s(t) per straight segment stops at each): TOPP-RA (topp.py) along the C2 spline through its waypoints,
        time-optimal within the scaled limits and at rest only at both ends, when that spline is free on the
        planner's collision model (checked as the planner checked the segments) and within the joint limits.
        None otherwise (or for a path the sampling planner did not make): the caller stops at the corners."""
        checker = getattr(self, "_last_checker", None)
        if checker is None or len(path.waypoints) < 3:
            return None
        try:
            traj = topp.toppra_trajectory(path.waypoints, self.velocity_limits * vs, self.acceleration_limits * as_,
                                          dt, list(self.model.joint_names), checker=checker)
        except PlanningError as exc:
            log.info("polyline of %d waypoints: %s; stopping at each corner", len(path.waypoints), exc.message)
            return None
        if traj is None:
            log.info("the spline through the %d waypoints collides: stopping at each corner", len(path.waypoints))
            return None
        lo, hi = np.asarray(self.model.joint_lower), np.asarray(self.model.joint_upper)
        if np.any(traj.positions < lo - 1e-9) or np.any(traj.positions > hi + 1e-9):
            log.info("the spline through the %d waypoints leaves the joint limits: stopping at each corner",
                     len(path.waypoints))
            return None
        return traj

    def _time_scale(self, path, req, vs, as_, dt, dur):
        if req.profile in WAYPOINT_PROFILES:
            return self._waypoint_profile(path, req, vs, as_, dt)
        kw = dict(velocity_limits=self.velocity_limits, acceleration_limits=self.acceleration_limits,
                  velocity_scaling=vs, acceleration_scaling=as_, sample_period=dt,
                  joint_names=list(self.model.joint_names),
                  position_limits=(self.model.joint_lower, self.model.joint_upper))
        if isinstance(path, PolylinePath):
            traj = self._through_corners(path, vs, as_, dt) if dur == 0.0 else None
            if traj is not None:
                return traj
            parts = [time_scale(seg, req.profile, **kw) for seg in path.segments]
            traj = concatenate(parts)
            if dur > 0:
                if dur < traj.duration * (1 - 1e-9):
                    raise PlanningError(INVALID_INPUT, f"duration {dur:.3f} s is shorter than the "
                                                       f"{traj.duration:.3f} s this path needs within the limits")
                k = traj.duration / dur
                traj = concatenate([time_scale(seg, req.profile, duration=p.duration / k, **kw)
                                    for seg, p in zip(path.segments, parts)])
            return traj
        d1, _ = path.bounds()
        if dur == 0.0:
            T_est = ts.path_minimum_duration(d1, path.bounds()[1], self.velocity_limits * vs,
                                             self.acceleration_limits * as_, req.profile)
            if T_est / dt > MAX_POINTS:
                raise PlanningError(INVALID_INPUT, f"the trajectory would have more than {MAX_POINTS} points; "
                                                   f"raise sample_period or the scalings")
        return time_scale(path, req.profile, duration=dur, **kw)

    def _plan(self, req, obstacles):
        model = self.model
        vs, as_, dt, dur = self._settings_of(req)
        if req.start is None:
            raise PlanningError(NOT_READY, "no start configuration: start_positions is empty and no "
                                           "joint_states have been received")
        q0 = self._joint_vector(req.start, "start_positions")
        obstacles, self._held, dropped = self._handled_objects(req, obstacles, q0)
        self._held_shape = req.attached_object
        scene = self._scene(obstacles)
        margin = self.s.safety_margin
        goal_T = None
        if req.goal_joints is not None:
            q1 = self._joint_vector(req.goal_joints, "goal_positions")
        elif req.goal_pose is not None:
            goal_T = np.asarray(req.goal_pose, dtype=np.float64)
            if goal_T.shape != (4, 4) or not np.all(np.isfinite(goal_T)):
                raise PlanningError(INVALID_INPUT, "goal pose must be a finite (4, 4) transform")
            q1 = None
        else:
            raise PlanningError(INVALID_INPUT, "no goal (goal_joints or goal_pose)")
        details = {}
        self._last_checker = None
        self._path_need = None
        self._ignored_pairs = set()
        if req.path_type == PATH_CARTESIAN:
            T_goal = goal_T if goal_T is not None else model.fk(q1)
            path = CartesianPath(model, q0, T_goal, max_joint_step=self.s.max_joint_step,
                                 position_step=self.s.cartesian_position_step,
                                 rotation_step=self.s.cartesian_rotation_step)
            if q1 is not None and np.max(np.abs(path.q_goal - q1)) > 1e-3:
                raise PlanningError(PLANNING_FAILED,
                                    "the straight tip line from the start reaches the goal pose in another IK "
                                    "branch than goal_positions (joints differ by "
                                    f"{np.max(np.abs(path.q_goal - q1)):.3f} rad); plan to the pose instead")
            q1 = path.q_goal
            method = "cartesian"
            if req.avoid_obstacles and len(scene):
                per = self._min_clearance(densify(path.q_grid, 0.01), scene)[2]
                self._check_kept(scene, per, q0, q1, "the straight tip line (a Cartesian line cannot bend around "
                                                     "obstacles: plan in joint space with avoid_obstacles)")
        else:
            goals = []
            if q1 is None:
                q1 = self.choose_ik(goal_T, q0, scene if req.avoid_obstacles else None, margin + GROWN_EXTRA_M)
                details["goal"] = self.last_goal_choice
                log.info("goal pose: %s", self.last_goal_choice)
                goals = [(q1, self.last_goal_choice)] + self.goal_alternatives[:GOAL_TRIES - 1]
            sampled = None
            if req.avoid_obstacles and len(scene) and self.s.path_planner != HEURISTICS:
                if len(goals) > 1:
                    sampled, q1, details["goal"] = self._sampled_path_to_any(scene, q0, goals)
                else:
                    sampled = self._sampled_path(scene, q0, q1)
            if sampled is not None:
                path, method, info = sampled
                details.update(info)
            elif req.avoid_obstacles and (len(scene) or self.floor is not None):
                fo = FieldOptions(safety_margin=margin, influence_distance=self.s.influence_distance)
                av = plan_avoiding(model, self.arm, scene, q0, q1, safety_margin=margin,
                                   methods=tuple(self.s.avoidance_methods), field_options=fo)
                path = av.path
                method = av.method
                details.update(smoothing=av.smoothing, waypoints=len(av.waypoints), attempts=av.attempts,
                               required_clearance=av.required_clearance)
            else:
                path = LinePath(q0, q1)
                method = "joint"
        traj = self._time_scale(path, req, vs, as_, dt, dur)
        tips = np.array([model.fk(q)[:3, 3] for q in traj.positions])
        mo, mf = math.inf, math.inf
        if len(scene) or self.floor is not None:
            mo, mf, per = self._min_clearance(densify(traj.positions, 0.01), scene)
            if req.avoid_obstacles and len(scene):
                self._check_kept(scene, per, q0, traj.positions[-1], "the trajectory", self._path_need)
        sing = self._singularity(traj.positions)
        if sing is not None:
            details["singularity"] = dict(min_singular_value=sing.min_value, threshold=sing.threshold,
                                          part=sing.part, below=sing.below)
            if sing.below and self.s.singularity_action == "refuse":
                raise PlanningError(PLANNING_FAILED, f"{method} path refused (singularity_action refuse): "
                                                     f"{sing.message()}")
            if sing.below:
                log.warning("planned %s path: %s", method, sing.message())
        msg = (f"{method} path, {traj.profile}, {traj.duration:.3f} s, {len(traj)} points"
               + (f", min obstacle clearance {mo:.3f} m" if math.isfinite(mo) else "")
               + (", holding an object" if self._held is not None else "")
               + (f"; {dropped} obstacle(s) ignored (the held or allowed object)" if dropped else "")
               + (f"; goal: {details['goal']}" if "goal" in details else "")
               + (f"; self-collision pair(s) not checked (touching in the collision model at the start or goal): "
                  f"{', '.join(sorted('-'.join(sorted(p)) for p in self._ignored_pairs))}" if self._ignored_pairs
                  else "")
               + (f"; warning: {sing.message()}" if sing is not None and sing.below else ""))
        if req.avoid_obstacles and len(scene):
            close = [j for j in range(len(scene)) if min(self._clearances(q0, scene)[0][j],
                                                         self._clearances(q1, scene)[0][j]) < margin]
            if close:
                where = ", ".join(f"at {np.round(scene.obstacles[j].center, 3).tolist()} m" for j in close)
                msg += (f"; {len(close)} obstacle(s) already closer than the margin at the start or goal ({where}; "
                        f"a held object, or the arm itself as perceived): the path keeps at least their clearance "
                        f"there")
        return PlanResult(True, SUCCESS, msg, traj, mo, mf, tips, method, details=details)
