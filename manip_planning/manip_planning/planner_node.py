"""ROS 2 node ``planner``: the ``plan_trajectory`` service (manip_msgs/srv/PlanTrajectory).

Graph (docs/graph.md): subscribes ``joint_states`` (sensor_msgs/JointState, by joint name; the start when
start_positions is empty) and ``obstacles`` (manip_msgs/ObstacleArray, base frame; the latest message is
used when avoid_obstacles is set, and for min_obstacle_distance); publishes ``planned_path``
(visualization_msgs/MarkerArray: a LINE_STRIP of the tip path and a SPHERE per obstacle used, in the base
frame); serves ``plan_trajectory``. Bad requests get success false, an ErrorCode and a message; the node keeps
serving. A request's attached object (a box in the tip frame) is part of the robot for that plan, and its
allowed objects are not obstacles for it (planning.PlanRequest).

Parameters: sample_period (0.02 s, when the request says 0), default_velocity_scaling and
default_acceleration_scaling (1.0, when the request says 0), acceleration_limits (rad/s^2, one value or one
per joint; default [4.0]), safety_margin (0.03 m), influence_distance (0.15 m), link_radius (0.06 m, capsule
around each link segment when the URDF has no <collision> elements: the robot's collision geometry is otherwise
the one model of every check), tool_length (0.0 m, extra capsule along the tip z axis, capsules only), floor_height (0.0 m, the
table top; NaN: no floor), avoidance_methods (["straight", "lift_over", "potential_field"], tried in order),
max_joint_step (0.1 rad, Cartesian jump threshold), obstacle_timeout (0 s: obstacles never expire),
singularity_threshold (0.01: the smallest minimum singular value of the Jacobian along every planned path,
manip_core.analysis.path_singularity; 0: not checked) and singularity_action ("warn": success, the message and
the log say so; "refuse": PLANNING_FAILED),
and the robot model's urdf_path, robot_description, base_link, tip_link (RobotModelSource).

The maths lives in planning.py (no rclpy).
"""
from __future__ import annotations

import math
import threading
from types import SimpleNamespace

import numpy as np
from builtin_interfaces.msg import Duration as DurationMsg
from geometry_msgs.msg import Point
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rcl_interfaces.msg import ParameterDescriptor
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
from visualization_msgs.msg import Marker, MarkerArray

from manip_msgs.msg import ErrorCode, ObstacleArray
from manip_msgs.srv import PlanTrajectory

from manip_core.ros.conversions import pose_to_matrix
from manip_core.ros.model_source import RobotModelSource

from .avoidance import METHODS
from .collision import Obstacle
from .shapes import Shape
from .planning import (INVALID_INPUT, NOT_READY, PATH_CARTESIAN, PATH_JOINT, UNKNOWN_LINK, PlannerSettings,
                       PlanRequest, Planner, collision_model_for)

Req = PlanTrajectory.Request
PROFILES = {Req.PROFILE_CUBIC: "cubic", Req.PROFILE_QUINTIC: "quintic"}
PATHS = {Req.PATH_JOINT: PATH_JOINT, Req.PATH_CARTESIAN: PATH_CARTESIAN}
# An ObstacleArray with more obstacles is refused (the previous obstacles are kept): every plan checks every
# obstacle, and 20,000 of them made one plan take minutes (issue 12 fuzzing). Perception sends tens.
MAX_OBSTACLES = 1000


def duration_msg(seconds):
    s = max(0.0, float(seconds))
    sec = int(math.floor(s))
    ns = int(round((s - sec) * 1e9))
    if ns >= 1_000_000_000:
        sec, ns = sec + 1, ns - 1_000_000_000
    return DurationMsg(sec=sec, nanosec=ns)


def trajectory_msg(traj, frame_id=""):
    """trajectory_msgs/JointTrajectory of a joint_path.Trajectory (header.stamp zero: start on receipt)."""
    msg = JointTrajectory()
    msg.header.frame_id = frame_id
    msg.joint_names = list(traj.joint_names)
    for t, q, qd, qdd in zip(traj.times, traj.positions, traj.velocities, traj.accelerations):
        msg.points.append(JointTrajectoryPoint(positions=[float(x) for x in q], velocities=[float(x) for x in qd],
                                               accelerations=[float(x) for x in qdd],
                                               time_from_start=duration_msg(t)))
    return msg


def obstacles_from_msg(msg):
    """collision.Obstacle list of an ObstacleArray (box when every size > 0, else the sphere of radius)."""
    out = []
    for o in msg.obstacles:
        c = (o.center.x, o.center.y, o.center.z)
        s = (o.size.x, o.size.y, o.size.z)
        vals = np.array(c + s + (o.radius,), dtype=float)
        if not np.all(np.isfinite(vals)) or np.any(vals[3:] < 0):
            continue
        if not (np.all(vals[3:6] > 0) or o.radius > 0):
            continue
        out.append(Obstacle(c, s, o.radius))
    return out


def handled_objects(request):
    """(attached Shape in the tip frame or None, allowed Obstacles) of a PlanTrajectory request; ValueError
    naming the field for a bad one."""
    s = request.attached_object_size
    size = np.array([s.x, s.y, s.z], dtype=float)
    attached = None
    if not np.all(np.isfinite(size)) or np.any(size < 0):
        raise ValueError(f"attached_object_size must be finite and >= 0, got {size.tolist()}")
    if np.any(size > 0):
        try:
            T = pose_to_matrix(request.attached_object_pose)
        except ValueError as e:
            raise ValueError(f"attached_object_pose: {e}") from None
        attached = Shape("box", 0.5 * size, T, "attached object")
    allowed = obstacles_from_msg(SimpleNamespace(obstacles=request.allowed_objects))
    return attached, tuple(allowed)


class PlannerNode(Node):
    def __init__(self, **kwargs):
        super().__init__("planner", **kwargs)
        self._lock = threading.Lock()
        p = self._param
        self.settings = PlannerSettings(
            acceleration_limits=tuple(p("acceleration_limits", [4.0],
                                        "rad/s^2 (or m/s^2): one value for every joint or one per joint")),
            default_velocity_scaling=p("default_velocity_scaling", 1.0, "used when the request's is 0"),
            default_acceleration_scaling=p("default_acceleration_scaling", 1.0, "used when the request's is 0"),
            default_sample_period=p("sample_period", 0.02, "s between trajectory points when the request says 0"),
            safety_margin=p("safety_margin", 0.03, "m: clearance kept from obstacles with avoid_obstacles"),
            influence_distance=p("influence_distance", 0.15, "m: obstacles farther than this do not push"),
            link_radius=p("link_radius", 0.06, "m: capsule radius around each link segment (only for a URDF without "
                                               "<collision> elements)"),
            tool_length=p("tool_length", 0.0, "m: extra capsule from the tip along its z axis (tool, held object)"),
            floor_height=p("floor_height", 0.0, "m: z of the table top the arm must stay above (NaN: none)"),
            avoidance_methods=tuple(p("avoidance_methods", list(METHODS),
                                      "tried in order: straight, lift_over, potential_field")),
            max_joint_step=p("max_joint_step", 0.1, "rad: largest joint change between Cartesian samples"),
            path_planner=p("path_planner", "rrt_connect", "with obstacles: rrt_connect, or heuristics (the methods "
                                                          "of avoidance_methods)"),
            planning_time_limit=p("planning_time_limit", 1.0, "s: time limit of the sampling planner"),
            planner_seed=p("planner_seed", 0, "seed of the sampling planner's random stream (repeatable plans)"),
            backend=p("backend", "cpu", "collision checks: cpu, or cuda (batched re-checks on the GPU)"),
            singularity_threshold=p("singularity_threshold", 0.01,
                                    "minimum singular value of the Jacobian (full body Jacobian for 6+ joints, else "
                                    "position rows) below which a planned path counts as singular (0: no check)"),
            singularity_action=p("singularity_action", "warn", "singular path: warn (success, the message says so) "
                                                               "or refuse (PLANNING_FAILED)"),
        )
        self.obstacle_timeout = p("obstacle_timeout", 0.0, "s: ignore obstacles older than this (0: never)")
        bad = [m for m in self.settings.avoidance_methods if m not in METHODS]
        if bad:
            raise ValueError(f"avoidance_methods: unknown {bad} (known: {', '.join(METHODS)})")
        self.planner = None
        self._joint_state = None
        self._obstacles = []
        self._obstacles_time = None
        self._obstacle_frames_warned = set()
        self.source = RobotModelSource(self, on_model=self._on_model)
        self.create_subscription(JointState, "joint_states", self._on_joint_state, 10)
        self.create_subscription(ObstacleArray, "obstacles", self._on_obstacles, 10)
        self.path_pub = self.create_publisher(MarkerArray, "planned_path", 10)
        self.create_service(PlanTrajectory, "plan_trajectory", self._on_plan)
        self.get_logger().info("planner ready: serving plan_trajectory")

    def _param(self, name, default, description):
        if not self.has_parameter(name):
            self.declare_parameter(name, default, ParameterDescriptor(description=description))
        v = self.get_parameter(name).value
        return list(v) if isinstance(default, list) else v

    # ------------------------------------------------------------------------------------ inputs
    def _on_model(self, model, urdf):
        try:
            planner = Planner(model, self.settings, collision_model_for(model, urdf, self.settings))
        except ValueError as e:
            self.get_logger().error(f"planner not ready: {e}")
            return
        with self._lock:
            self.planner = planner
        # numba compiles the sampling planner's kernels on first use (seconds with a cold cache): do it now
        threading.Thread(target=planner.warm_up, name="planner-warm-up", daemon=True).start()

    def _on_joint_state(self, msg):
        with self._lock:
            self._joint_state = (list(msg.name), list(msg.position))

    def _base_frames(self):
        model = self.planner.model if self.planner else None
        return {"", model.base_link if model else "", "/" + (model.base_link if model else "")}

    def _on_obstacles(self, msg):
        frame = msg.header.frame_id
        if self.planner is not None and frame not in self._base_frames():
            if frame not in self._obstacle_frames_warned:
                self._obstacle_frames_warned.add(frame)
                self.get_logger().warning(f"obstacles in frame '{frame}' ignored: expected the base frame "
                                          f"'{self.planner.model.base_link}' (no tf here)")
            return
        if len(msg.obstacles) > MAX_OBSTACLES:
            self.get_logger().warning(f"obstacles message with {len(msg.obstacles)} obstacles refused: more than "
                                      f"{MAX_OBSTACLES}; keeping the previous {len(self._obstacles)}")
            return
        obs = obstacles_from_msg(msg)
        with self._lock:
            self._obstacles = obs
            self._obstacles_time = self.get_clock().now()

    def current_obstacles(self):
        with self._lock:
            obs, t = list(self._obstacles), self._obstacles_time
        if obs and self.obstacle_timeout > 0 and t is not None:
            age = (self.get_clock().now() - t).nanoseconds * 1e-9
            if age > self.obstacle_timeout:
                return []
        return obs

    def _start_from_joint_states(self, model):
        with self._lock:
            js = self._joint_state
        if js is None:
            return None, "no joint_states received yet"
        names, pos = js
        try:
            return np.array([pos[names.index(j)] for j in model.joint_names], dtype=float), ""
        except (ValueError, IndexError):
            missing = [j for j in model.joint_names if j not in names]
            return None, f"joint_states lack {', '.join(missing) or 'positions'}"

    # ----------------------------------------------------------------------------------- service
    def _on_plan(self, request, response):
        try:
            self._plan(request, response)
        except Exception as e:  # keep serving whatever happens
            self.get_logger().error(f"plan_trajectory failed unexpectedly: {e!r}")
            response.success = False
            response.error_code = ErrorCode(val=ErrorCode.PLANNING_FAILED)
            response.message = f"internal error: {e!r}"
            response.trajectory = JointTrajectory()
        return response

    def _fail(self, response, code, message):
        response.success = False
        response.error_code = ErrorCode(val=int(code))
        response.message = message
        response.min_obstacle_distance = math.inf
        self.get_logger().warning(f"plan_trajectory: {message}")
        return response

    def _plan(self, request, response):
        planner = self.planner
        if planner is None:
            return self._fail(response, NOT_READY, "no robot model yet (urdf_path / robot_description parameters "
                                                   "or the robot_description topic)")
        model = planner.model
        if request.profile not in PROFILES:
            return self._fail(response, INVALID_INPUT, f"unknown profile {request.profile} (0 cubic, 1 quintic)")
        if request.path_type not in PATHS:
            return self._fail(response, INVALID_INPUT, f"unknown path_type {request.path_type} (0 joint, 1 Cartesian)")
        req = PlanRequest(path_type=PATHS[request.path_type], profile=PROFILES[request.profile],
                          duration=request.duration, velocity_scaling=request.velocity_scaling,
                          acceleration_scaling=request.acceleration_scaling,
                          avoid_obstacles=bool(request.avoid_obstacles), sample_period=request.sample_period)
        if request.goal_type == Req.GOAL_JOINTS:
            req.goal_joints = np.array(request.goal_positions, dtype=float)
        elif request.goal_type == Req.GOAL_POSE:
            frame = request.goal_pose.header.frame_id
            if frame not in self._base_frames():
                code = INVALID_INPUT if frame.lstrip("/") in model.link_names else UNKNOWN_LINK
                return self._fail(response, code, f"goal_pose.header.frame_id '{frame}' is not the base frame "
                                                  f"'{model.base_link}' (leave it empty or name the base link)")
            try:
                req.goal_pose = pose_to_matrix(request.goal_pose.pose)
            except ValueError as e:
                return self._fail(response, INVALID_INPUT, f"goal_pose: {e}")
        else:
            return self._fail(response, INVALID_INPUT, f"unknown goal_type {request.goal_type} (0 joints, 1 pose)")
        try:
            req.attached_object, req.allowed_objects = handled_objects(request)
        except ValueError as e:
            return self._fail(response, INVALID_INPUT, str(e))
        if len(request.start_positions):
            req.start = np.array(request.start_positions, dtype=float)
        else:
            req.start, why = self._start_from_joint_states(model)
            if req.start is None:
                return self._fail(response, NOT_READY, f"start_positions is empty and {why}")
        obstacles = self.current_obstacles()
        res = planner.plan(req, obstacles)
        response.min_obstacle_distance = float(res.min_obstacle_distance)
        if not res.success:
            return self._fail(response, res.error_code, res.message)
        response.success = True
        response.error_code = ErrorCode(val=ErrorCode.SUCCESS)
        response.message = res.message
        response.trajectory = trajectory_msg(res.trajectory, model.base_link)
        self.get_logger().info(f"plan_trajectory: {res.message} (planned in {res.planning_time * 1e3:.0f} ms)")
        self._publish_markers(res.tip_path, obstacles if req.avoid_obstacles else [], model.base_link)
        return response

    def _publish_markers(self, tips, obstacles, frame):
        stamp = self.get_clock().now().to_msg()
        arr = MarkerArray()
        clear = Marker(action=Marker.DELETEALL)
        clear.header.frame_id = frame
        arr.markers.append(clear)
        line = Marker(type=Marker.LINE_STRIP, action=Marker.ADD, ns="tip_path", id=0)
        line.header.frame_id, line.header.stamp = frame, stamp
        line.pose.orientation.w = 1.0
        line.scale.x = 0.005
        line.color.g, line.color.a = 0.8, 1.0
        line.points = [Point(x=float(p[0]), y=float(p[1]), z=float(p[2])) for p in tips]
        arr.markers.append(line)
        for i, o in enumerate(obstacles):
            m = Marker(type=Marker.SPHERE, action=Marker.ADD, ns="obstacles", id=i + 1)
            m.header.frame_id, m.header.stamp = frame, stamp
            m.pose.position = Point(x=float(o.center[0]), y=float(o.center[1]), z=float(o.center[2]))
            m.pose.orientation.w = 1.0
            d = 2.0 * (o.radius if o.radius > 0 else o.bounding_radius())
            m.scale.x = m.scale.y = m.scale.z = d
            m.color.r, m.color.a = 0.9, 0.4
            arr.markers.append(m)
        self.path_pub.publish(arr)


def run_node(args, name, make_node, make_executor, on_stop=None):
    """Main loop of a node of this package (manip_core.ros.node_main.run_node: SIGINT/SIGTERM at any moment
    -> exit 0, no traceback; a bad parameter (ValueError) -> FATAL, exit 2)."""
    from manip_core.ros.node_main import run_node as _run_node
    return _run_node(args, name, make_node, make_executor, on_stop=on_stop)


def main(args=None):
    return run_node(args, "planner", PlannerNode, SingleThreadedExecutor)


if __name__ == "__main__":
    raise SystemExit(main())
