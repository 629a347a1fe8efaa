"""ROS 2 node ``pick_place``: the ``pick_place`` action (manip_msgs/action/PickPlace).

Graph (docs/graph.md): subscribes ``joint_states`` and ``obstacles``; serves the action ``pick_place``; client of the
``plan_trajectory`` service (manip_msgs/srv/PlanTrajectory), the ``joint_trajectory_controller/
execute_trajectory`` action (manip_msgs/action/ExecuteTrajectory; with the ``trajectory_action`` parameter
set, the control_msgs/action/FollowJointTrajectory action it names instead: trajectory client mode, for an arm
whose own ros2_control joint_trajectory_controller executes) and the ``gripper/grasp`` service
(manip_msgs/srv/Grasp). Each goal first waits (server_timeout) for the three servers and fails with a clear
message naming the missing one, then runs pick_place_machine.PickPlaceMachine: reachability of the approach
and grasp poses (tool pointing down, IK of the local robot model) is checked before any motion; feedback per
step (phase, progress, message); the result carries the phase names and durations (s, node clock, so
simulated time with use_sim_time). One goal at a time (a second one is rejected while one runs); cancel
stops the running controller goal and ends the task CANCELED.

A task that ends after its grasp without releasing (the planner or the controller died, a cancel, a failed
motion) leaves the object in the gripper, said in its result ("still holding 'cube'"). The node remembers it and
the next goal places that object instead of picking (pick_place_machine.HeldObject: a straight lift where the
arm stopped, above the goal's place pose, down, release, home; its pick pose is not used; a goal naming another
object is refused, INVALID_GOAL, naming the held one), with a warning line saying so: a new pick would otherwise
fail on the gripper ("already holding"). The memory is the node's: a restarted pick_place does not have it, and a
release through gripper/grasp by another client is not seen.

Nothing assumes an arm (pick_place_machine): the gripper's approach axis is a parameter in the tip frame, home
is optional, reachability uses the arm's own IK (closed form where manip_core has one, numerical else; for an
arm with more than six joints moved along its self-motion toward the previous solution). The ``obstacles``
topic (ObstacleArray, base frame) gives the object's box: not an obstacle on the way to the pick and away from
the place, attached to the tip in every plan request while it is held; published on ``known_objects``
(SceneObjectArray, reliable + transient local, depth 1: the object to pick in the base frame when the task
starts, held in the tip frame after the grasp, an empty set after the release) so that perception drops it.

Parameters: home_positions (rad, model order; unset or empty: the joints at the start of each task, so the
arm returns where it started), approach_axis_tip (unit 3-vector in the tip frame toward the object; default
[0, 0, 1]), grasp_yaw_offsets (rad about the approach axis, tried in order; default [0, pi/2, pi, -pi/2]),
object_match_distance (0.02 m), approach_height (0.10 m), grasp_offset (0.03 m:
the tip origin above the object's origin when grasping and releasing), release_gap (0.005 m: the object is released
this much above its place pose, not pressed into the table), profile ("quintic" | "cubic"),
velocity_scaling / acceleration_scaling (0.5, free motions), cartesian_velocity_scaling /
cartesian_acceleration_scaling (0.2, descents and lifts), execution_retries (1: a failed execution is
re-planned from the current joints and retried), goal_position_tolerance (0.03 rad per joint) and
goal_time_tolerance (2 s) sent with every trajectory (0: the controller's defaults; the held object is not in
the controller's dynamics model: it left ~0.01 rad of steady-state error on the UR5, 0.021 rad on the UR10's
wrist_1 and 0.027 rad on the Kinova's joint 5 in full-graph runs; the next plan starts from the joint_states),
settle_timeout (1 s) and settle_tolerance (0.01 rad: after each trajectory, wait until joint_states are this
close to its last point, so that the next plan starts where the robot is), grasp_max_distance (0 m: the
gripper's default), server_timeout (10 s, also for the robot model, the first joint_states and a planner
that has no model yet), plan_timeout (30 s), execute_timeout_margin (10 s beyond the trajectory duration, in the node's clock: simulated
time with use_sim_time, so that a simulator slower than real time is not cut off),
grasp_timeout (10 s), floor_height (0.0 m: IK solutions with a link below it are skipped), and the robot
model's urdf_path, robot_description, base_link, tip_link (RobotModelSource).
"""
from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import numpy as np
from action_msgs.msg import GoalStatus
from rclpy.action import ActionClient, ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from geometry_msgs.msg import Point, Vector3
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.exceptions import ParameterUninitializedException
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState

from manip_msgs.action import ExecuteTrajectory, PickPlace
from manip_msgs.msg import JointTolerance, Obstacle, ObstacleArray, SceneObject, SceneObjectArray
from manip_msgs.srv import Grasp, PlanTrajectory

from manip_core.ros.conversions import matrix_to_pose, pose_to_matrix
from manip_core.ros.model_source import RobotModelSource

from . import pick_place_machine as ppm
from .joint_path import PlanningError
from .planner_node import duration_msg, obstacles_from_msg, run_node
from .planning import NOT_READY, PATH_CARTESIAN, Planner, PlannerSettings

Result = PickPlace.Result
Req = PlanTrajectory.Request


class _Wait:
    """Wait on an rclpy future from a callback thread (MultiThreadedExecutor), with timeout and cancel."""

    def __init__(self, future):
        self.future = future
        self._event = threading.Event()
        future.add_done_callback(lambda _f: self._event.set())

    def wait(self, timeout, cancel=None, clock=None):
        """True when done; False on timeout or when cancel() becomes true. clock: seconds of the clock the
        timeout is in (the node's clock: simulated time, which runs slower than the wall on a loaded machine);
        default the wall clock. With a clock, the wall time is also capped at 10 x timeout (a clock that stops)."""
        end = time.monotonic() + (10.0 * timeout if clock is not None else timeout)
        end_clock = clock() + timeout if clock is not None else None
        while not self._event.wait(0.02):
            if cancel is not None and cancel():
                return False
            if time.monotonic() > end or (clock is not None and clock() > end_clock):
                return False
        return True


class PickPlaceNode(Node):
    def __init__(self, **kwargs):
        super().__init__("pick_place", **kwargs)
        p = self._param
        home = self._array_param("home_positions", "home configuration (rad, model order); unset or empty: the "
                                                   "joints at the start of each task")
        self.home = np.array(home, dtype=float) if home else None
        axis = self._array_param("approach_axis_tip", "unit vector in the tip frame along which the gripper moves "
                                                      "toward the object (default [0, 0, 1]: the tip's z axis)")
        yaws = self._array_param("grasp_yaw_offsets", "rad about the approach axis added to the object's yaw, tried "
                                                      "in order until every pose is reachable (default [0, pi/2, pi, "
                                                      "-pi/2])")
        self.cfg = ppm.MachineConfig(
            home=self.home,
            approach_axis_tip=tuple(axis) if axis else (0.0, 0.0, 1.0),
            grasp_yaw_offsets=tuple(yaws) if yaws else ppm.DEFAULT_YAW_OFFSETS,
            object_match_distance=p("object_match_distance", 0.02, "m: the obstacle this close to the pick position "
                                                                   "is the object (allowed near the tool, attached "
                                                                   "while held)"),
            approach_height=p("approach_height", 0.10, "m above the grasp pose (goal's 0)"),
            grasp_offset=p("grasp_offset", 0.03, "m: the tip origin above the object's origin at grasp and release"),
            release_gap=p("release_gap", 0.005, "m: released this much above the place pose"),
            profile=p("profile", "quintic", "time scaling: quintic or cubic"),
            velocity_scaling=p("velocity_scaling", 0.5, "free motions"),
            acceleration_scaling=p("acceleration_scaling", 0.5, "free motions"),
            cartesian_velocity_scaling=p("cartesian_velocity_scaling", 0.2, "descents and lifts"),
            cartesian_acceleration_scaling=p("cartesian_acceleration_scaling", 0.2, "descents and lifts"),
            execution_retries=p("execution_retries", 1, "re-plan and retry a failed execution this many times"),
        )
        if self.cfg.profile not in ("quintic", "cubic"):
            raise ValueError(f"profile must be quintic or cubic, got {self.cfg.profile!r}")
        ppm.approach_frame(self.cfg.approach_axis_tip)      # ValueError naming approach_axis_tip: FATAL at start
        self.grasp_max_distance = p("grasp_max_distance", 0.0, "m (0: the gripper's default)")
        self.server_timeout = p("server_timeout", 10.0, "s to wait for each server")
        self.plan_timeout = p("plan_timeout", 30.0, "s")
        self.execute_margin = p("execute_timeout_margin", 10.0, "s beyond the trajectory duration")
        self.grasp_timeout = p("grasp_timeout", 10.0, "s")
        self.floor_height = p("floor_height", 0.0, "m: IK solutions with a link below are skipped")
        self.goal_position_tolerance = p("goal_position_tolerance", 0.03,
                                         "rad per joint sent with every trajectory (0: the controller's default)")
        self.goal_time_tolerance = p("goal_time_tolerance", 2.0,
                                     "s after a trajectory's end to reach it (0: the controller's default)")
        self.settle_timeout = p("settle_timeout", 1.0, "s to wait for joint_states at a trajectory's end")
        self.settle_tolerance = p("settle_tolerance", 0.01, "rad: joint_states this close to the end count")
        self._group = ReentrantCallbackGroup()
        self._lock = threading.Lock()
        self._joint_state = None
        self._busy = False
        self._machine = None
        self._held = None        # pick_place_machine.HeldObject still in the gripper after the last task
        self.planner = None
        # a different robot on robot_description is refused while a task runs (model_source)
        self.source = RobotModelSource(self, on_model=self._on_model,
                                       busy=lambda: "a pick-and-place task is running" if self._busy else None)
        self.create_subscription(JointState, "joint_states", self._on_joint_state, 10, callback_group=self._group)
        self._obstacles = []
        self.create_subscription(ObstacleArray, "obstacles", self._on_obstacles, 10, callback_group=self._group)
        # what the task knows about its object, for perception (docs/graph.md, known_objects)
        self.known_pub = self.create_publisher(SceneObjectArray, "known_objects",
                                               QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                                                          durability=DurabilityPolicy.TRANSIENT_LOCAL))
        self._known = None
        self._object_name = ""
        self.plan_client = self.create_client(PlanTrajectory, "plan_trajectory", callback_group=self._group)
        self.grasp_client = self.create_client(Grasp, "gripper/grasp", callback_group=self._group)
        # trajectory execution: manip's controller (ExecuteTrajectory), or any FollowJointTrajectory server
        # (trajectory client mode: an arm whose own ros2_control stack executes)
        self.trajectory_action = p("trajectory_action", "",
                                   "FollowJointTrajectory action that executes the trajectories (e.g. "
                                   "/arm_controller/follow_joint_trajectory); empty: manip's controller "
                                   "(joint_trajectory_controller/execute_trajectory, ExecuteTrajectory)")
        if self.trajectory_action:
            from control_msgs.action import FollowJointTrajectory
            from control_msgs.msg import JointTolerance as FjtJointTolerance
            self._exec_types = (FollowJointTrajectory, FjtJointTolerance)
            self._exec_name = self.trajectory_action
        else:
            self._exec_types = (ExecuteTrajectory, JointTolerance)
            self._exec_name = "joint_trajectory_controller/execute_trajectory"
        self.exec_client = ActionClient(self, self._exec_types[0], self._exec_name, callback_group=self._group)
        self.server = ActionServer(self, PickPlace, "pick_place", execute_callback=self._execute,
                                   goal_callback=self._on_goal, cancel_callback=self._on_cancel,
                                   callback_group=self._group)
        self.get_logger().info(f"pick_place ready; trajectories go to {self._exec_types[0].__name__} action "
                               f"'{self._exec_name}'")

    def _array_param(self, name, description):
        """A double array that may be unset (declared dynamically typed, as the controller's gains); [] unset."""
        if not self.has_parameter(name):
            self.declare_parameter(name, None, ParameterDescriptor(description=description, dynamic_typing=True))
        try:
            value = self.get_parameter(name).value
        except ParameterUninitializedException:
            value = None
        if value is None:
            return []
        if isinstance(value, (str, bool)) or (isinstance(value, (list, tuple)) and
                                              any(isinstance(x, (str, bool)) for x in value)):
            raise ValueError(f"parameter {name} must be an array of numbers, got {value!r}")
        out = [float(value)] if isinstance(value, (int, float)) else [float(x) for x in value]
        if not np.all(np.isfinite(out)):
            raise ValueError(f"parameter {name} must be finite, got {out}")
        return out

    def _param(self, name, default, description):
        if not self.has_parameter(name):
            self.declare_parameter(name, default, ParameterDescriptor(description=description))
        v = self.get_parameter(name).value
        return list(v) if isinstance(default, list) else v

    def _now(self):
        return self.get_clock().now().nanoseconds * 1e-9

    # ------------------------------------------------------------------------------------ inputs
    def _on_model(self, model, _urdf):
        if self.home is not None and self.home.size != model.dof:
            self.get_logger().error(f"home_positions has {self.home.size} values, the robot {model.dof} joints")
        self.planner = Planner(model, PlannerSettings(floor_height=self.floor_height))

    def _on_joint_state(self, msg):
        with self._lock:
            self._joint_state = (list(msg.name), list(msg.position))

    def _on_obstacles(self, msg):
        planner = self.planner
        frame = msg.header.frame_id.lstrip("/")
        if planner is not None and frame not in ("", planner.model.base_link):
            return          # the planner logs obstacles in another frame
        obs = obstacles_from_msg(msg)
        with self._lock:
            self._obstacles = obs

    def current_obstacles(self):
        with self._lock:
            return list(self._obstacles)

    def _announce(self, state, obj):
        """Publish known_objects (on change): the object to pick (base frame), the held one (tip frame), none."""
        model = self.planner.model
        arr = SceneObjectArray()
        arr.header.frame_id = model.base_link
        arr.header.stamp = self.get_clock().now().to_msg()
        if state in ("pick", "held"):
            o = SceneObject(name=self._object_name or "object", kind=SceneObject.KIND_OBJECT,
                            attached=state == "held")
            if state == "pick":
                o.header.frame_id = model.base_link
                o.pose.position = Point(x=float(obj.center[0]), y=float(obj.center[1]), z=float(obj.center[2]))
                o.pose.orientation.w = 1.0
                size = obj.size if obj.is_box else np.full(3, 2.0 * obj.radius)
            else:
                o.header.frame_id = model.tip_link
                o.pose = matrix_to_pose(obj.T)
                size = 2.0 * np.asarray(obj.dims)
            o.header.stamp = arr.header.stamp
            o.size = Vector3(x=float(size[0]), y=float(size[1]), z=float(size[2]))
            arr.objects.append(o)
        key = (state, None if obj is None else repr(getattr(obj, "T", getattr(obj, "center", None))))
        if key == self._known:
            return
        self._known = key
        self.known_pub.publish(arr)
        self.get_logger().info(f"known_objects: {state}" + (f" '{arr.objects[0].name}'" if arr.objects else ""))

    def current_joints(self):
        planner = self.planner
        with self._lock:
            js = self._joint_state
        if planner is None or js is None:
            return None
        names, pos = js
        try:
            return np.array([pos[names.index(j)] for j in planner.model.joint_names], dtype=float)
        except (ValueError, IndexError):
            return None

    # ------------------------------------------------------------------------------------- action
    def _on_goal(self, _goal):
        with self._lock:
            if self._busy:
                self.get_logger().warning("pick_place goal rejected: another goal is running")
                return GoalResponse.REJECT
            self._busy = True
        return GoalResponse.ACCEPT

    def _on_cancel(self, _handle):
        m = self._machine
        if m is not None:
            m.cancel()
        return CancelResponse.ACCEPT

    def _execute(self, handle):
        try:
            return self._run(handle)
        finally:
            with self._lock:
                self._busy = False
                self._machine = None

    def _finish(self, handle, code, message, names=(), durations=()):
        res = Result(error_code=int(code), message=message, phase_names=list(names),
                     phase_durations=[float(d) for d in durations])
        if code == Result.SUCCESSFUL:
            handle.succeed()
            self.get_logger().info(f"pick_place: {message}")
        elif code == Result.CANCELED and handle.is_cancel_requested:
            handle.canceled()
            self.get_logger().info(f"pick_place: {message}")
        else:
            handle.abort()
            self.get_logger().error(f"pick_place failed ({code}): {message}")
        return res

    def _pose(self, stamped, what):
        planner = self.planner
        frame = stamped.header.frame_id.lstrip("/")
        if frame not in ("", planner.model.base_link):
            raise ValueError(f"{what}.header.frame_id '{stamped.header.frame_id}' is not the base frame "
                             f"'{planner.model.base_link}'")
        try:
            return pose_to_matrix(stamped.pose)
        except ValueError as e:
            raise ValueError(f"{what}: {e}") from None

    def _wait_for(self, ready):
        """Poll ready() every 20 ms until it is true or server_timeout has passed; its last value."""
        end = time.monotonic() + self.server_timeout
        while not ready() and time.monotonic() < end:
            time.sleep(0.02)
        return ready()

    def _run(self, handle):
        goal = handle.request
        # a goal may come while the model that was just received is still being set up (on_model): wait for it
        if not self._wait_for(lambda: self.planner is not None):
            return self._finish(handle, Result.PLANNING_FAILED,
                                f"no robot model within {self.server_timeout:g} s (urdf_path / robot_description "
                                "parameters or the robot_description topic)")
        if self.home is not None and self.home.size != self.planner.model.dof:
            return self._finish(handle, Result.INVALID_GOAL, f"home_positions has {self.home.size} values, the robot "
                                                             f"{self.planner.model.dof} joints "
                                                             f"({', '.join(self.planner.model.joint_names)})")
        try:
            T_pick = self._pose(goal.pick_pose, "pick_pose")
            T_place = self._pose(goal.place_pose, "place_pose")
        except ValueError as e:
            return self._finish(handle, Result.INVALID_GOAL, str(e))
        # the three servers, before anything moves
        waits = ((self.plan_client.wait_for_service, "service 'plan_trajectory' (planner)", Result.PLANNING_FAILED),
                 (self.exec_client.wait_for_server, f"action '{self._exec_name}' (controller)",
                  Result.EXECUTION_FAILED),
                 (self.grasp_client.wait_for_service, "service 'gripper/grasp' (simulator or gripper driver)",
                  Result.GRASP_FAILED))
        for wait, what, code in waits:
            if not wait(timeout_sec=self.server_timeout):
                return self._finish(handle, code, f"{what} not available after {self.server_timeout:g} s")
        if not self._wait_for(lambda: self.current_joints() is not None):
            return self._finish(handle, Result.PLANNING_FAILED, f"no joint_states with every joint of the robot "
                                                                f"within {self.server_timeout:g} s")

        def progress(phase, value, text):
            fb = PickPlace.Feedback(phase=phase, progress=float(value), message=text)
            handle.publish_feedback(fb)

        machine = ppm.PickPlaceMachine(plan=self._plan, execute=self._execute_trajectory, grasp=self._grasp,
                                       current_joints=self.current_joints, solve_ik=self._solve_ik, config=self.cfg,
                                       obstacles=self.current_obstacles, on_progress=progress, clock=self._now,
                                       announce=self._announce, tip_pose=self.planner.model.fk)
        held = self._held
        self._object_name = held.name if held is not None else goal.object_name
        self._machine = machine
        if held is not None:
            self.get_logger().warning(f"pick_place: the gripper still holds '{held.name}' from the last task, which "
                                      f"ended without releasing it: this goal places it at its place pose (lift, "
                                      f"above the place, down, release, home), no pick")
        if handle.is_cancel_requested:
            machine.cancel()
        out = machine.run(ppm.PickPlaceGoal(T_pick, T_place, goal.object_name, goal.approach_height,
                                            bool(goal.avoid_obstacles)), held=held)
        self._held = machine.held_object
        return self._finish(handle, out.error_code, out.message, out.phase_names, out.phase_durations)

    # ----------------------------------------------------------------------- machine's callables
    def _solve_ik(self, T, q_near):
        try:
            return self.planner.choose_ik(T, np.asarray(q_near, dtype=float)), ""
        except PlanningError as e:
            return None, e.message

    def _cancelled(self):
        m = self._machine
        return m is not None and m.cancel_requested

    def _plan(self, req):
        r = Req()
        r.start_positions = [float(x) for x in req.start]
        if req.goal_joints is not None:
            r.goal_type = Req.GOAL_JOINTS
            r.goal_positions = [float(x) for x in req.goal_joints]
        else:
            r.goal_type = Req.GOAL_POSE
            r.goal_pose.header.frame_id = self.planner.model.base_link
            r.goal_pose.pose = matrix_to_pose(req.goal_pose)
        r.path_type = Req.PATH_CARTESIAN if req.path_type == PATH_CARTESIAN else Req.PATH_JOINT
        r.profile = Req.PROFILE_CUBIC if req.profile == "cubic" else Req.PROFILE_QUINTIC
        r.velocity_scaling = float(req.velocity_scaling)
        r.acceleration_scaling = float(req.acceleration_scaling)
        r.avoid_obstacles = bool(req.avoid_obstacles)
        held = getattr(req, "attached_object", None)
        if held is not None:
            r.attached_object_pose = matrix_to_pose(held.T)
            r.attached_object_size = Vector3(x=2.0 * held.dims[0], y=2.0 * held.dims[1], z=2.0 * held.dims[2])
        for o in getattr(req, "allowed_objects", ()):
            r.allowed_objects.append(Obstacle(center=Point(x=float(o.center[0]), y=float(o.center[1]),
                                                           z=float(o.center[2])),
                                              size=Vector3(x=float(o.size[0]), y=float(o.size[1]),
                                                           z=float(o.size[2])), radius=float(o.radius)))
        # a planner that has no model yet (it arrives on the topic as ours did) answers NOT_READY: ask again
        # until server_timeout
        not_ready_until = time.monotonic() + self.server_timeout
        while True:
            w = _Wait(self.plan_client.call_async(r))
            if not w.wait(self.plan_timeout, self._cancelled):
                why = "canceled" if self._cancelled() else f"no answer within {self.plan_timeout:g} s"
                return SimpleNamespace(success=False, error_code=-6, message=f"plan_trajectory: {why}",
                                       trajectory=None)
            resp = w.future.result()
            if resp.error_code.val != NOT_READY or time.monotonic() > not_ready_until or self._cancelled():
                break
            time.sleep(0.2)
        return SimpleNamespace(success=resp.success, error_code=resp.error_code.val, message=resp.message,
                               trajectory=resp.trajectory)

    def _execute_trajectory(self, trajectory):
        if not trajectory.points:
            return True, "nothing to do"
        last = trajectory.points[-1].time_from_start
        duration = last.sec + 1e-9 * last.nanosec
        if len(trajectory.points) == 1 or duration == 0.0:
            return True, "already there"
        action, tolerance = self._exec_types
        goal = action.Goal(trajectory=trajectory)
        if self.goal_position_tolerance > 0:
            goal.goal_tolerance = [tolerance(name=j, position=float(self.goal_position_tolerance))
                                   for j in trajectory.joint_names]
        if self.goal_time_tolerance > 0:
            goal.goal_time_tolerance = duration_msg(self.goal_time_tolerance)
        w = _Wait(self.exec_client.send_goal_async(goal))
        if not w.wait(self.server_timeout, self._cancelled):
            # a controller that accepts it later (a respawned one catching up on a loaded machine) must not run a
            # trajectory this task gave up on: the next plan starts from where the arm is
            w.future.add_done_callback(_cancel_if_accepted)
            return False, "the controller did not answer the goal" if not self._cancelled() else "canceled"
        gh = w.future.result()
        if not gh.accepted:
            return False, "the controller rejected the trajectory"
        wr = _Wait(gh.get_result_async())
        if not wr.wait(duration + self.execute_margin, self._cancelled, clock=self._now):
            _Wait(gh.cancel_goal_async()).wait(2.0)
            if self._cancelled():
                return False, "canceled"
            return False, f"no result within {duration + self.execute_margin:.1f} s (node clock)"
        result = wr.future.result()
        if result.status != GoalStatus.STATUS_SUCCEEDED or result.result.error_code != 0:
            return False, f"controller: {result.result.error_string or 'status ' + str(result.status)}"
        self._settle(trajectory)
        return True, "done"

    def _settle(self, trajectory):
        """Wait (at most settle_timeout) until joint_states report the trajectory's last point within
        settle_tolerance, so that the next plan starts from where the robot is, not from a joint_states
        message that left before the motion ended."""
        names = list(trajectory.joint_names)
        model_names = self.planner.model.joint_names
        try:
            end_q = np.array([trajectory.points[-1].positions[names.index(j)] for j in model_names])
        except ValueError:
            return
        deadline = time.monotonic() + self.settle_timeout
        while time.monotonic() < deadline:
            q = self.current_joints()
            if q is not None and np.max(np.abs(q - end_q)) <= self.settle_tolerance:
                return
            time.sleep(0.01)

    def _grasp(self, attach, name):
        req = Grasp.Request(attach=bool(attach), object_name=name, max_distance=float(self.grasp_max_distance))
        w = _Wait(self.grasp_client.call_async(req))
        if not w.wait(self.grasp_timeout):
            return False, f"gripper/grasp: no answer within {self.grasp_timeout:g} s", ""
        resp = w.future.result()
        return bool(resp.success), resp.message, resp.object_name


def _cancel_if_accepted(future):
    """Done callback of a goal request given up on: cancel the goal if the server accepted it after all."""
    try:
        handle = future.result()
    except Exception:  # noqa: BLE001 (no goal, nothing to cancel)
        return
    if handle is not None and handle.accepted:
        handle.cancel_goal_async()


def _cancel_task(node):
    if node._machine is not None:      # stop a running task before the context goes away
        node._machine.cancel()


def main(args=None):
    return run_node(args, "pick_place", PickPlaceNode, lambda: MultiThreadedExecutor(num_threads=4),
                    _cancel_task)


if __name__ == "__main__":
    raise SystemExit(main())
