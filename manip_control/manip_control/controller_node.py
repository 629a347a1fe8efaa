"""ROS 2 node ``controller``: joint trajectory controller with computed-torque (or PD) control.

Graph (docs/graph.md): subscribes ``joint_states`` (sensor_msgs/JointState, reordered by name, extra joints
ignored) and ``joint_trajectory_controller/joint_trajectory`` (trajectory_msgs/JointTrajectory: replaces the
current trajectory, starting at header.stamp or now when it is zero; one without points stops at the current
position); publishes ``effort_controller/commands`` (std_msgs/Float64MultiArray, model joint order, within the
effort limits) and ``joint_trajectory_controller/controller_state`` (manip_msgs/ControllerState) at every
tick; serves the action ``joint_trajectory_controller/execute_trajectory`` (manip_msgs/ExecuteTrajectory,
FollowJointTrajectory semantics). Subscribes ``target_pose`` (geometry_msgs/PoseStamped, base frame): a tip
pose target for laws that take one (osc), reported as task_errors in the state.

Parameters: control_law (pd | pid | computed_torque | robust | adaptive | osc, manip_control.laws; the
selected law's own parameters as <law>.<name>), state_estimator (none | kalman, with kalman.*), rate_hz (250),
executor_threads (1), kp, kd (double arrays, one value or one per joint; unset or empty: the law's
defaults), state_timeout (0.1 s),
path_tolerance.position,
path_tolerance.velocity, goal_tolerance.position, goal_tolerance.velocity (double arrays, one value or one
per joint, 0 = not checked), goal_time_tolerance (s, 0 = no limit), start_tolerance (rad or m, 0.05: a first
point farther from the measured position than this plus what the velocity limits cover by its time is refused,
INVALID_GOAL; 0 = not checked), and urdf_path, robot_description,
base_link, tip_link (manip_core.ros.model_source.RobotModelSource).

Goals: every goal is accepted, then checked; one that fails the checks ends at once, ABORTED with error_code
INVALID_GOAL, INVALID_JOINTS or OLD_HEADER_TIMESTAMP and the reason in error_string (rclpy's goal response has
no field for a reason). A valid goal preempts the running one (ABORTED, INVALID_GOAL, "preempted by a new
goal", as ros2_control's controller does), as does a trajectory on the topic. A canceled goal ends CANCELED
(error_code SUCCESSFUL, as ros2_control) with the robot holding its current position. When joint_states go
stale the running goal is aborted with PATH_TOLERANCE_VIOLATED (the path can no longer be checked). Feedback
is published by the control tick every 0.05 s of the node clock.

No callback ever waits: the control tick supervises the goal and, when it ends, hands it to the action
server's execute callback (goal_handle.execute()), which only reports the result. A goal therefore stays in
status ACCEPTED (not EXECUTING) while it runs. Callback groups: the tick and the two subscriptions share one
mutually exclusive group, the action server has a reentrant one. The executor is a SingleThreadedExecutor
by default (executor_threads = 1): on this project's 2-core machines rclpy's MultiThreadedExecutor took 2-4
times the CPU and, with use_sim_time and a 500 Hz /clock, fired a bare 250 Hz timer only 50-185 times per
second where the single-threaded one fired it 237-250 times; executor_threads > 1 selects it.

Timing: the control tick is a timer on the node clock (follows use_sim_time). A joint state is stale when the
node clock is more than state_timeout past its header stamp (its time of receipt when the stamp is zero, or
more than state_timeout ahead of the node clock, which a use_sim_time mismatch gives; warned once): the
controller then commands g(q) at the last good position (MODE_STALE_HOLD), and holds the measured position
when joint_states come back. Before the first joint_states nothing is commanded. SIGINT/SIGTERM end the node
cleanly: running goals are aborted ("shutting down") and their results sent before the context goes down,
and the control-period statistics are logged.

The maths lives in trajectory_sampler, control_laws and tolerances (no rclpy).
"""
from __future__ import annotations

import array
import gc
import math
import sys
import threading
import time

import numpy as np
import rclpy
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.exceptions import ParameterException
try:
    from rclpy.exceptions import ParameterUninitializedException
except ImportError:  # pragma: no cover (an rclpy without statically typed, uninitialized parameters)
    class ParameterUninitializedException(ParameterException):
        pass
from rcl_interfaces.msg import ParameterDescriptor
from builtin_interfaces.msg import Duration as DurationMsg
from geometry_msgs.msg import PoseStamped
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from control_msgs.action import FollowJointTrajectory
from manip_msgs.action import ExecuteTrajectory
from manip_msgs.msg import ControllerState

from manip_core.ros.model_source import RobotModelSource

from . import tolerances as tol
from .command_interfaces import COMMAND_TOPICS, check_interface, position_command, velocity_command
from .follow_joint_trajectory import JTC_TEXTS, MANIP_TEXTS, PartialGoalError, feedback_index, fill_partial_goal
from .control_laws import CONTROL_LAWS, gravity_hold
from .kalman import KALMAN_PARAMETERS, check_estimator, make_estimator
from .laws import law_class, make_law
from .trajectory_sampler import InvalidJoints, InvalidTrajectory, Trajectory, TrajectorySampler, check_start, validate

Result = ExecuteTrajectory.Result
FEEDBACK_PERIOD_NS = 50_000_000  # ~20 Hz of the node clock
# With executor_threads > 1 the executor's threads hand the GIL to each other; the default 5 ms switch
# interval would add up to 5 ms of latency to the control tick whenever another callback runs.
GIL_SWITCH_INTERVAL_S = 0.0005


def _sec(stamp):
    return stamp.sec + 1e-9 * stamp.nanosec


def _duration_msg(seconds):
    s = max(0.0, float(seconds))
    sec = int(math.floor(s))
    return DurationMsg(sec=sec, nanosec=min(int(round((s - sec) * 1e9)), 999_999_999))


def _floats(a):
    """array.array('d') of a vector: message fields take it without a per-element check."""
    return array.array("d", np.ascontiguousarray(a, dtype=np.float64).tobytes())


class _Rejected(Exception):
    def __init__(self, code, text):
        super().__init__(text)
        self.code = code
        self.text = text


class _Goal:
    """One goal from acceptance to its report. The control tick (or a preemption, a cancel, the stale
    watchdog, shutdown) finishes it; the action server's execute callback then reports the result."""

    def __init__(self, handle, traj=None, path_tol=None, goal_tol=None, goal_time=math.inf, action=None):
        self.handle = handle
        # the action type (Result/Feedback classes) and its result strings (follow_joint_trajectory.GoalTexts)
        self.action = action if action is not None else ExecuteTrajectory
        self.texts = JTC_TEXTS if self.action is FollowJointTrajectory else MANIP_TEXTS
        self.key = bytes(handle.goal_id.uuid)
        self.id = self.key.hex()[:8]
        self.traj = traj
        self.path_tol = path_tol
        self.goal_tol = goal_tol
        self.goal_time = goal_time
        self.done = False
        self.dispatched = False
        self.cancel_requested = False
        self.code = None
        self.text = ""
        self.canceled = False
        self.final_error = None
        self.t0_ns = 0     # start of its trajectory (node clock, ns) and the last point's time (s), set
        self.end = 0.0     # when the trajectory is over

    def finish(self, code, text, final_error=None, canceled=False):
        """Record the outcome once (caller holds the node's lock); False when already finished."""
        if self.done:
            return False
        self.code, self.text, self.final_error, self.canceled = code, text, final_error, canceled
        self.done = True
        return True


class _Active:
    """The trajectory being followed: start time on the node clock (ns), sampler (made at the first tick)."""

    def __init__(self, traj, t0_ns, goal=None):
        self.traj = traj
        self.t0_ns = t0_ns
        self.goal = goal
        self.sampler = None


class ControllerNode(Node):
    def __init__(self, **kwargs):
        super().__init__("controller", **kwargs)
        self._lock = threading.Lock()
        self._closing = False
        self._goals = {}            # goal id -> _Goal, from acceptance until its result is reported
        self._last_feedback_ns = 0
        self._model = None
        self._law = None
        self._state = None          # (q, qd, time of the state ns: header stamp or receipt) in model order
        self._prev_js = None        # (q, time ns) for velocities by finite differences
        self._js_index = None       # (joint_states names, model, indices of the model's joints)
        self._hold = None           # set point while holding
        self._active = None         # _Active or None
        self._goal = None           # _Goal waiting for its goal check after the trajectory ended
        self._stale = False
        self._snapshot = None       # last tick: stamp, desired (q, qd, qdd), actual (q, qd), error (e, ed)
        self._warned = set()
        self._tick_stats = [0, 0.0, 0.0, 0.0]  # count, sum dt, sum dt^2, max |dt - period|

        self.control_law = self._param("control_law", "computed_torque",
                                       "control law: pd, pid, computed_torque, robust (sliding mode), adaptive "
                                       "(Slotine-Li) or osc (operational space); manip_control.laws")
        if self.control_law not in CONTROL_LAWS:
            raise ValueError(f"parameter control_law must be one of {', '.join(CONTROL_LAWS)}, got "
                             f"'{self.control_law}'")
        # the selected law's own parameters, <law>.<name> (control_laws.Param), checked before any model
        self._law_params = {p.name: self._param(f"{self.control_law}.{p.name}", p.default, p.description)
                            for p in law_class(self.control_law).PARAMETERS}
        law_class(self.control_law).check_params(self._law_params)
        self.state_estimator = self._param("state_estimator", "none",
                                           "none (joint_states as they come) or kalman (positions filtered by "
                                           "manip_control.kalman; velocities from the filter)")
        self._kalman_params = {k: self._param(f"kalman.{k}", v, d) for k, v, d in KALMAN_PARAMETERS}
        check_estimator(self.state_estimator, self._kalman_params)
        self._estimator = None
        self.rate_hz = float(self._param("rate_hz", 250.0, "control rate (Hz) on the node clock"))
        self.executor_threads = int(self._param("executor_threads", 1,
                                                "1: SingleThreadedExecutor; more: MultiThreadedExecutor with "
                                                "this many threads"))
        if self.executor_threads < 1:
            raise ValueError(f"parameter executor_threads must be >= 1, got {self.executor_threads}")
        if not (math.isfinite(self.rate_hz) and self.rate_hz > 0.0):
            raise ValueError(f"parameter rate_hz must be > 0, got {self.rate_hz}")
        self.kp = self._array_param("kp", "position gains per joint (computed_torque: 1/s^2, pd: N*m/rad); "
                                          "unset or empty: critically damped defaults")
        self.kd = self._array_param("kd", "velocity gains per joint (computed_torque: 1/s, pd: N*m*s/rad); "
                                          "unset or empty: critically damped defaults")
        self.state_timeout = float(self._param("state_timeout", 0.1, "joint_states older than this (s) "
                                                                     "-> hold position (MODE_STALE_HOLD)"))
        self._tol_params = {
            "path_tolerance.position": self._param("path_tolerance.position", [0.0],
                                                   "default path position tolerance (rad), one or per joint; "
                                                   "0 = not checked"),
            "path_tolerance.velocity": self._param("path_tolerance.velocity", [0.0],
                                                   "default path velocity tolerance (rad/s); 0 = not checked"),
            "goal_tolerance.position": self._param("goal_tolerance.position", [0.01],
                                                   "default goal position tolerance (rad); 0 = not checked"),
            "goal_tolerance.velocity": self._param("goal_tolerance.velocity", [0.05],
                                                   "default goal velocity tolerance (rad/s); 0 = not checked"),
        }
        self.command_interface = check_interface(self._param(
            "command_interface", "effort",
            "effort (effort_controller/commands), position (forward_position_controller/commands) or velocity "
            "(forward_velocity_controller/commands)"))
        self.velocity_command_gain = float(self._param(
            "velocity_command_gain", 10.0, "1/s: velocity command = desired velocity + gain * position error"))
        self.allow_partial_joints_goal = bool(self._param(
            "allow_partial_joints_goal", False,
            "accept trajectories naming a subset of the joints; the others hold their set point "
            "(ros2_control's joint_trajectory_controller parameter)"))
        self.goal_time_tolerance = float(self._param("goal_time_tolerance", 1.0,
                                                     "default time (s) after the trajectory's end to reach "
                                                     "the goal tolerance; 0 = no limit"))
        self.start_tolerance = float(self._param(
            "start_tolerance", 0.05,
            "rad or m: a trajectory whose first point is farther than this from the measured position, plus "
            "what the joint's velocity limit covers until that point's time, is refused (the arm would jump; "
            "trajectory_sampler.check_start); 0 = not checked (ros2_control's behaviour)"))

        # The control tick and the inputs it reads share one mutually exclusive group (they would only queue
        # on the lock otherwise); the action server has its own reentrant group. No callback waits.
        self._cb_control = MutuallyExclusiveCallbackGroup()
        self._cb_action = ReentrantCallbackGroup()
        # the driver's command topic (command_interfaces.COMMAND_TOPICS): efforts, positions or velocities
        self._effort_pub = self.create_publisher(Float64MultiArray, COMMAND_TOPICS[self.command_interface], 10)
        self._state_pub = self.create_publisher(ControllerState, "joint_trajectory_controller/controller_state",
                                                10)
        self._js_sub = self.create_subscription(JointState, "joint_states", self._on_joint_states, 1,
                                                callback_group=self._cb_control)
        self._traj_sub = self.create_subscription(JointTrajectory, "joint_trajectory_controller/joint_trajectory",
                                                  self._on_trajectory, 10, callback_group=self._cb_control)
        self._action = ActionServer(self, ExecuteTrajectory, "joint_trajectory_controller/execute_trajectory",
                                    execute_callback=self._report_goal,
                                    goal_callback=lambda _g: GoalResponse.ACCEPT,
                                    handle_accepted_callback=self._on_goal_accepted,
                                    cancel_callback=self._on_cancel_request,
                                    callback_group=self._cb_action)
        # control_msgs/FollowJointTrajectory under ros2_control's name: the same goals, with
        # joint_trajectory_controller's goal checks (invalid goals REJECTED) and result strings.
        self._fjt_action = ActionServer(self, FollowJointTrajectory, "joint_trajectory_controller/follow_joint_trajectory",
                                        execute_callback=self._report_goal,
                                        goal_callback=self._check_fjt_goal,
                                        handle_accepted_callback=self._on_goal_accepted,
                                        cancel_callback=self._on_cancel_request,
                                        callback_group=self._cb_action)
        self._pose_sub = self.create_subscription(PoseStamped, "target_pose", self._on_target_pose, 10,
                                                  callback_group=self._cb_control)
        # a different robot on robot_description is refused while a trajectory runs (model_source)
        self._source = RobotModelSource(self, on_model=self._on_model, busy=self._model_change_blocker)
        self._period_s = 1.0 / self.rate_hz
        self._timer = self.create_timer(self._period_s, self._tick, callback_group=self._cb_control)
        executor = ("SingleThreadedExecutor" if self.executor_threads == 1
                    else f"MultiThreadedExecutor, {self.executor_threads} threads")
        self.get_logger().info(f"controller: {self.control_law} at {self.rate_hz:g} Hz, state_timeout "
                               f"{self.state_timeout:g} s, {executor}")

    # ------------------------------------------------------------------------------------ parameters
    def _param(self, name, default, description):
        self.declare_parameter(name, default, ParameterDescriptor(description=description))
        return self.get_parameter(name).value

    def _array_param(self, name, description):
        """A double array that may be unset: declared NOT_SET and dynamically typed (a statically typed,
        uninitialized parameter makes get_parameters, i.e. `ros2 param dump`, answer nothing at all).
        One number counts as a one-element array."""
        self.declare_parameter(name, None, ParameterDescriptor(description=description, dynamic_typing=True))
        try:
            value = self.get_parameter(name).value
        except ParameterUninitializedException:
            value = None
        if value is None:
            return []
        if isinstance(value, str) or isinstance(value, bool):
            raise ValueError(f"parameter {name} must be a number or an array of numbers, got {value!r}")
        return [float(value)] if isinstance(value, (int, float)) else [float(x) for x in value]

    def _model_change_blocker(self):
        """Why the robot model may not change now (RobotModelSource's ``busy``), or None."""
        if self._active is not None or self._goal is not None:
            return "a trajectory is being followed"
        return None

    def _warn_once(self, key, text):
        if key not in self._warned:
            self._warned.add(key)
            self.get_logger().warning(text)

    # --------------------------------------------------------------------------------------- model
    def _on_model(self, model, *_urdf_text):
        n = model.dof
        try:
            law = make_law(self.control_law, model, self.kp, self.kd, 1.0 / self.rate_hz, self._law_params)
            estimator = make_estimator(self.state_estimator, n, self._kalman_params)
            defaults = {
                "path": tol.defaults_from_params(n, self._tol_params["path_tolerance.position"],
                                                 self._tol_params["path_tolerance.velocity"], (), "path_tolerance"),
                "goal": tol.defaults_from_params(n, self._tol_params["goal_tolerance.position"],
                                                 self._tol_params["goal_tolerance.velocity"], (), "goal_tolerance"),
            }
        except ValueError as e:
            self.get_logger().error(f"robot model {model.name} not usable with these parameters: {e}")
            return
        if not np.all(np.isfinite(model.effort_limits) & (np.asarray(model.effort_limits) > 0)):
            bad = [j for j, e in zip(model.joint_names, model.effort_limits) if not (math.isfinite(e) and e > 0)]
            self.get_logger().warning(f"no effort limit for joint(s) {', '.join(bad)}: their efforts are not "
                                      f"clipped")
        # first calls load the compiled kernels (tens of ms): do it here, not in the first control tick
        q = np.clip(np.zeros(n), model.joint_lower, model.joint_upper)
        law.compute(q, np.zeros(n), q, np.zeros(n), np.zeros(n))
        gravity_hold(model, q)
        with self._lock:
            same = self._model is not None and list(self._model.joint_names) == list(model.joint_names)
            if not same:
                self._reset_locked("the robot model changed")
            self._model, self._law, self._default_tol = model, law, defaults
            self._estimator = estimator
        self._dispatch_finished()
        self.get_logger().info(f"controlling {n} joints ({', '.join(model.joint_names)}) with {law.name}: "
                               f"kp {np.array2string(law.kp, precision=4)}, kd {np.array2string(law.kd, precision=4)}")

    def _reset_locked(self, why):
        for g in self._goals.values():
            g.finish(Result.INVALID_GOAL, f"aborted: {why}")
        self._state = self._prev_js = self._hold = self._active = self._goal = None
        self._stale = False

    # ----------------------------------------------------------------------------------- inputs
    def _joint_index(self, names, model):
        """Positions of the model's joints in a joint_states name list (cached per list), or None."""
        key = tuple(names)
        cached = self._js_index
        if cached is not None and cached[0] == key and cached[1] is model:
            return cached[2]
        try:
            idx = np.array([key.index(j) for j in model.joint_names], dtype=np.intp)
        except ValueError:
            missing = [j for j in model.joint_names if j not in key]
            self._warn_once("js_missing", f"joint_states lack joint(s) {', '.join(missing)}: ignored")
            return None
        self._js_index = (key, model, idx)
        return idx

    def _on_joint_states(self, msg):
        model = self._model
        if model is None:
            return
        n_names = len(msg.name)
        if len(msg.position) != n_names:
            self._warn_once("js_len", f"joint_states with {len(msg.position)} positions for {n_names} names: "
                                      f"ignored")
            return
        idx = self._joint_index(msg.name, model)
        if idx is None:
            return
        q = np.asarray(msg.position, dtype=np.float64)[idx]
        # the state's time: its header stamp, or the time of receipt when the publisher leaves it zero or
        # stamps from another clock (ahead of this node's by more than state_timeout: use_sim_time mismatch)
        t_state = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        now = self.get_clock().now().nanoseconds
        if t_state - now > self.state_timeout * 1e9:
            self._warn_once("js_future", f"joint_states stamped {(t_state - now) * 1e-9:.3f} s ahead of this node's "
                                         f"clock (use_sim_time set alike on both sides?): using the time of "
                                         f"receipt")
            t_state = now
        elif t_state == 0:
            t_state = now
        if len(msg.velocity) == n_names:
            qd = np.asarray(msg.velocity, dtype=np.float64)[idx]
        else:
            self._warn_once("js_vel", "joint_states carry no velocities: using finite differences of positions")
            prev = self._prev_js
            qd = np.zeros_like(q)
            if prev is not None and t_state > prev[1]:
                qd = (q - prev[0]) / ((t_state - prev[1]) * 1e-9)
        if not (np.all(np.isfinite(q)) and np.all(np.isfinite(qd))):
            self._warn_once("js_nan", "joint_states hold NaN or inf: ignored")
            return
        with self._lock:
            if self._model is model:
                self._prev_js = (q, t_state)
                if self._estimator is not None:  # state_estimator: kalman (positions in, q and qd out)
                    q, qd = self._estimator.update(q, t_state * 1e-9)
                self._state = (q, qd, t_state)

    def _on_trajectory(self, msg):
        now = self.get_clock().now().nanoseconds
        with self._lock:
            if self._model is None or self._state is None:
                self.get_logger().warning("trajectory rejected: no robot model or joint_states yet")
                return
            empty = not msg.points
            if empty:
                self._preempt_locked("preempted by an empty trajectory on the topic")
                self._active = None
                self._hold = self._state[0].copy()
            else:
                try:
                    traj, t0 = self._check_trajectory_locked(msg, now)
                except _Rejected as r:
                    self.get_logger().warning(f"trajectory rejected: {r.text}")
                    return
                self._preempt_locked("preempted by a trajectory on the topic")
                self._active = _Active(traj, t0)
        if empty:
            self.get_logger().info("empty trajectory: stopping at the current position")
        else:
            self.get_logger().info(f"trajectory accepted (topic): {self._describe(traj, t0, now)}")
        self._dispatch_finished()

    def _describe(self, traj, t0, now):
        start = "now" if t0 <= now else f"in {(t0 - now) * 1e-9:.3f} s"
        return (f"{len(traj.times)} points, {traj.duration:.3f} s, {traj.interpolation} interpolation, "
                f"starting {start}")

    def _check_trajectory_locked(self, msg, now_ns):
        """Trajectory (model order) and start time (ns) of a JointTrajectory; raises _Rejected."""
        model = self._model
        if self._stale:
            raise _Rejected(Result.INVALID_GOAL, "joint_states are stale; the controller holds position")
        names, points = msg.joint_names, msg.points
        if self.allow_partial_joints_goal:  # the joints it does not name hold their set point
            hold = self._snapshot[2][0] if self._snapshot is not None else self._state[0]
            try:
                names, points = fill_partial_goal(names, points, model.joint_names, hold)
            except PartialGoalError as e:
                raise _Rejected(Result.INVALID_GOAL, str(e)) from None
        try:
            traj = validate(Trajectory.from_points(names, points), model.joint_names,
                            model.joint_lower, model.joint_upper)
        except InvalidJoints as e:
            raise _Rejected(Result.INVALID_JOINTS, str(e)) from None
        except InvalidTrajectory as e:
            raise _Rejected(Result.INVALID_GOAL, str(e)) from None
        stamp_ns = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        t0_ns = now_ns if stamp_ns == 0 else stamp_ns
        if stamp_ns != 0:
            end_ns = stamp_ns + int(traj.duration * 1e9)
            if end_ns < now_ns:
                raise _Rejected(Result.OLD_HEADER_TIMESTAMP,
                                f"the trajectory starts at header.stamp {stamp_ns * 1e-9:.3f} s and ends "
                                f"{(now_ns - end_ns) * 1e-9:.3f} s in the past")
        try:  # a first point far from the arm, due at once (or sooner than the velocity limits allow): no jump
            check_start(traj, self._state[0], (t0_ns - now_ns) * 1e-9 + float(traj.times[0]),
                        model.velocity_limits, self.start_tolerance)
        except InvalidTrajectory as e:
            raise _Rejected(Result.INVALID_GOAL, str(e)) from None
        return traj, t0_ns

    def _on_target_pose(self, msg):
        """A tip pose target (base frame) for laws that take one (osc: set_target_pose); it preempts the
        trajectory, the joints' set point (the null-space posture) becomes the measured position."""
        with self._lock:
            law, model, state = self._law, self._model, self._state
            if law is None or state is None or not hasattr(law, "set_target_pose"):
                self._warn_once("pose_law", f"target_pose ignored: control law {self.control_law} takes no pose "
                                            f"targets (or no model/joint_states yet); use control_law:=osc")
                return
            frame = msg.header.frame_id
            if frame and frame != model.base_link:
                self.get_logger().warning(f"target_pose ignored: frame '{frame}' is not the base frame "
                                          f"'{model.base_link}'")
                return
            try:
                T = pose_matrix(msg.pose)
                self._preempt_locked("preempted by a target_pose")
                law.set_target_pose(T)
            except ValueError as e:
                self.get_logger().warning(f"target_pose ignored: {e}")
                return
            self._active = self._goal = None
            self._hold = state[0].copy()
        p = T[:3, 3]
        self.get_logger().info(f"target_pose: tip to ({p[0]:.3f}, {p[1]:.3f}, {p[2]:.3f}) m in {model.base_link}")

    def _preempt_locked(self, why):
        if hasattr(self._law, "set_target_pose"):
            self._law.set_target_pose(None)  # a trajectory (or a new pose target) replaces the pose target
        for g in (self._goal, self._active.goal if self._active else None):
            if g is not None:
                g.finish(Result.INVALID_GOAL, g.texts.preempted(why))
        self._goal = None
        if self._active is not None:
            self._active.goal = None

    # ------------------------------------------------------------------------------------ action
    def goals_in_flight(self):
        """Goals accepted whose result has not been reported yet."""
        with self._lock:
            return len(self._goals)

    def _check_goal_locked(self, req, now):
        """(trajectory, start ns, path tolerances, goal tolerances, goal time s) of a goal; raises _Rejected."""
        if self._model is None or self._state is None:
            raise _Rejected(Result.INVALID_GOAL, "the controller has no robot model or joint_states yet")
        traj, t0 = self._check_trajectory_locked(req.trajectory, now)
        names = self._model.joint_names
        try:
            path_tol = tol.resolve(names, req.path_tolerance, self._default_tol["path"], "path_tolerance")
            goal_tol = tol.resolve(names, req.goal_tolerance, self._default_tol["goal"], "goal_tolerance")
            goal_time = tol.resolve_goal_time(_sec(req.goal_time_tolerance), self.goal_time_tolerance)
        except tol.ToleranceError as e:
            raise _Rejected(Result.INVALID_GOAL, str(e)) from None
        return traj, t0, path_tol, goal_tol, goal_time

    def _check_fjt_goal(self, request):
        """Goal callback of FollowJointTrajectory: as joint_trajectory_controller, an invalid goal is REJECTED
        (the reason goes to the log: a goal response has no field for it)."""
        now = self.get_clock().now().nanoseconds
        with self._lock:
            try:
                self._check_goal_locked(request, now)
            except _Rejected as r:
                self.get_logger().warning(f"FollowJointTrajectory goal rejected ({_code_name(r.code)}): {r.text}")
                return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    def _on_goal_accepted(self, handle):
        """Check a new goal; a valid one replaces the running trajectory, an invalid one is reported at once."""
        req = handle.request
        action = FollowJointTrajectory if isinstance(req, FollowJointTrajectory.Goal) else ExecuteTrajectory
        now = self.get_clock().now().nanoseconds
        with self._lock:
            try:
                traj, t0, path_tol, goal_tol, goal_time = self._check_goal_locked(req, now)
            except _Rejected as r:
                goal = _Goal(handle, action=action)
                goal.finish(r.code, r.text)
                self._goals[goal.key] = goal
                self.get_logger().warning(f"goal {goal.id} rejected ({_code_name(r.code)}): {r.text}")
            else:
                goal = _Goal(handle, traj, path_tol, goal_tol, goal_time, action=action)
                self._goals[goal.key] = goal
                self._preempt_locked("preempted by a new goal")
                self._active = _Active(traj, t0, goal)
                self.get_logger().info(f"goal {goal.id} accepted: {self._describe(traj, t0, now)}")
        self._dispatch_finished()

    def _on_cancel_request(self, handle):
        with self._lock:
            goal = self._goals.get(bytes(handle.goal_id.uuid))
            if goal is None or goal.done:
                return CancelResponse.REJECT
            goal.cancel_requested = True  # the next tick stops it and holds the current position
        return CancelResponse.ACCEPT

    def _dispatch_finished(self):
        """Hand every finished goal to the action server's execute callback (once each)."""
        with self._lock:
            ready = [g for g in self._goals.values() if g.done and not g.dispatched]
            for g in ready:
                g.dispatched = True
        for g in ready:
            try:
                g.handle.execute()
            except Exception as e:  # the context may be going down
                if not self._closing:
                    self.get_logger().error(f"goal {g.id}: could not report the result: {e}")

    def _stop_goal_locked(self, goal):
        """Hold the measured position if ``goal`` still owns the trajectory (or waits for its goal check)."""
        owns = (self._active is not None and self._active.goal is goal) or self._goal is goal
        if self._active is not None and self._active.goal is goal:
            self._active = None
        if self._goal is goal:
            self._goal = None
        if owns and self._state is not None:
            self._hold = self._state[0].copy()

    def _report_goal(self, handle):
        """Execute callback of the action server: sets the terminal state of a finished goal, returns its result."""
        with self._lock:
            goal = self._goals.pop(bytes(handle.goal_id.uuid), None)
            snapshot = self._snapshot
        if goal is None:  # not ours (cannot happen: every goal goes through _on_goal_accepted)
            handle.abort()
            return Result(error_code=Result.INVALID_GOAL, error_string="unknown goal")
        res = goal.action.Result(error_code=int(goal.code), error_string=goal.text)
        fe = goal.final_error
        if fe is None and snapshot is not None and goal.traj is not None:
            fe = snapshot[4]  # errors at the latest tick
        detail = ""
        if fe is not None:
            j = int(np.argmax(np.abs(fe[0])))
            detail = (f"; final errors: max |position| {abs(fe[0][j]):.3g} rad ({goal.traj.joint_names[j]}), "
                      f"max |velocity| {np.max(np.abs(fe[1])):.3g} rad/s")
        log = self.get_logger()
        if goal.canceled and handle.is_cancel_requested:
            handle.canceled()
            log.info(f"goal {goal.id} canceled: holding the current position{detail}")
        elif goal.code == Result.SUCCESSFUL and not goal.canceled:
            handle.succeed()
            log.info(f"goal {goal.id} succeeded{detail}")
        else:
            handle.abort()
            if goal.traj is not None:  # (rejected goals were logged when they arrived)
                log.warning(f"goal {goal.id} aborted ({_code_name(goal.code)}): {goal.text}{detail}")
        return res

    def _feedback_locked(self, now_ns, stamp, t_rel, desired, actual, error):
        """Feedback of the goal that owns the trajectory, every FEEDBACK_PERIOD_NS of the node clock."""
        goal = self._active.goal if self._active is not None else self._goal
        if goal is None or goal.done or now_ns - self._last_feedback_ns < FEEDBACK_PERIOD_NS:
            return
        self._last_feedback_ns = now_ns
        (q_d, qd_d, qdd_d), (q, qd), (e, ed) = desired, actual, error
        fb = goal.action.Feedback()
        fb.header.stamp = stamp
        fb.joint_names = list(goal.traj.joint_names)
        tfs = _duration_msg(t_rel)
        fb.desired = JointTrajectoryPoint(positions=_floats(q_d), velocities=_floats(qd_d),
                                          accelerations=_floats(qdd_d), time_from_start=tfs)
        fb.actual = JointTrajectoryPoint(positions=_floats(q), velocities=_floats(qd), time_from_start=tfs)
        fb.error = JointTrajectoryPoint(positions=_floats(e), velocities=_floats(ed), time_from_start=tfs)
        if hasattr(fb, "index"):  # control_msgs >= 6.3 (Kilted): the point the trajectory heads to
            fb.index = feedback_index(goal.traj.times, t_rel)
        try:
            goal.handle.publish_feedback(fb)
        except Exception:  # the goal handle is going away
            pass

    # -------------------------------------------------------------------------------- control loop
    def _tick(self):
        self._tick_timing()
        self._control_step()
        self._dispatch_finished()

    def _control_step(self):
        now_msg = self.get_clock().now()
        now = now_msg.nanoseconds
        with self._lock:
            law, model, state = self._law, self._model, self._state
            if law is None:
                return
            if state is None:
                self._warn_once("no_js", "waiting for joint_states (nothing is commanded before the first one)")
                return
            q, qd, t_state = state
            n = model.dof
            zero = np.zeros(n)
            age = (now - t_state) * 1e-9
            if age > self.state_timeout:
                if not self._stale:
                    self._stale = True
                    self.get_logger().warning(f"joint_states are stale ({age:.3f} s old > state_timeout "
                                              f"{self.state_timeout:g} s): holding with gravity compensation "
                                              f"at the last position")
                    for g in (self._goal, self._active.goal if self._active else None):
                        if g is not None:
                            g.finish(Result.PATH_TOLERANCE_VIOLATED, f"joint_states went stale ({age:.3f} s old)")
                    self._active = self._goal = None
                    self._hold = q.copy()
                out = gravity_hold(model, q)
                self._publish(now_msg, ControllerState.MODE_STALE_HOLD, (q, zero, zero), (q, qd), (zero, zero),
                              out, 0.0)
                return
            if self._stale:
                self._stale = False
                self._hold = q.copy()
                self.get_logger().info("joint_states are back: holding the current position")
            if self._hold is None:
                self._hold = q.copy()  # before the first trajectory: hold the first measured position
                self.get_logger().info("first joint_states: holding the measured position")
            for g in list(self._goals.values()):
                last_errors = self._snapshot[4] if self._snapshot is not None else None
                if g.cancel_requested and g.finish(Result.SUCCESSFUL, g.texts.canceled(),
                                                   last_errors, canceled=True):
                    self._stop_goal_locked(g)
            mode = ControllerState.MODE_HOLD
            t_rel = 0.0
            desired = None
            act = self._active
            if act is not None:
                t_rel = (now - act.t0_ns) * 1e-9
                if act.sampler is None:  # first tick of this trajectory: interpolate from the measured state
                    act.sampler = TrajectorySampler(act.traj, (q, qd), start_time=max(0.0, t_rel))
                if t_rel < act.traj.duration:
                    desired = act.sampler.sample(t_rel)
                    if t_rel >= 0.0:
                        mode = ControllerState.MODE_TRACKING
                else:  # over: hold the last point; a goal now waits for its goal tolerance
                    self._hold = np.array(act.traj.positions[-1], dtype=np.float64)
                    self._active = None
                    self._goal = act.goal
                    if act.goal is not None:
                        act.goal.t0_ns, act.goal.end = act.t0_ns, act.traj.duration
            elif self._goal is not None:
                t_rel = (now - self._goal.t0_ns) * 1e-9
            if desired is None:
                desired = (self._hold, zero, zero)
            e, ed = law.errors(q, qd, desired[0], desired[1])
            self._supervise_locked(q, e, ed, t_rel)
            out = law.compute(q, qd, *desired)
            self._publish(now_msg, mode, desired, (q, qd), (e, ed), out, t_rel)

    def _supervise_locked(self, q, e, ed, t_rel):
        """Path tolerances while a goal's trajectory runs, goal tolerances after its end."""
        names = self._model.joint_names
        act = self._active
        if act is not None and act.goal is not None:
            v = tol.check(act.goal.path_tol, names, e, ed)
            if v is not None and act.goal.finish(Result.PATH_TOLERANCE_VIOLATED,
                                                 act.goal.texts.path_violation(t_rel, v),
                                                 (e.copy(), ed.copy())):
                self._active = None
                self._hold = q.copy()
            return
        g = self._goal
        if g is None:
            return
        end = g.end
        within = tol.check(g.goal_tol, names, e, ed)
        outcome = tol.goal_outcome(t_rel, end, g.goal_time, within is None)
        if outcome == tol.SUCCEEDED:
            g.finish(Result.SUCCESSFUL, g.texts.succeeded(), (e.copy(), ed.copy()))
            self._goal = None
        elif outcome == tol.TIMED_OUT:
            g.finish(Result.GOAL_TOLERANCE_VIOLATED, g.texts.goal_time_exceeded(t_rel - end, g.goal_time, within),
                     (e.copy(), ed.copy()))
            self._goal = None
            self._hold = q.copy()

    def _command_msg(self, q_d, qd_d, q, out):
        """The command of the selected interface: efforts, desired positions, or velocities (model order)."""
        model = self._model
        if self.command_interface == "position":
            cmd = position_command(q_d, model.joint_lower, model.joint_upper)
        elif self.command_interface == "velocity":
            cmd = velocity_command(q_d, qd_d, q, self.velocity_command_gain, model.velocity_limits)
        else:
            cmd = out.tau
        return Float64MultiArray(data=_floats(cmd))

    def _publish(self, now_msg, mode, desired, actual, error, out, t_rel):
        model = self._model
        try:
            self._effort_pub.publish(self._command_msg(desired[0], desired[1], actual[0], out))
        except Exception:
            if self.context.ok():
                raise
            return  # shutting down
        stamp = now_msg.to_msg()
        msg = ControllerState()
        msg.header.stamp = stamp
        msg.joint_names = list(model.joint_names)
        msg.mode = mode
        msg.control_law = self.control_law
        msg.desired_positions, msg.desired_velocities, msg.desired_accelerations = (_floats(x) for x in desired)
        msg.actual_positions, msg.actual_velocities = _floats(actual[0]), _floats(actual[1])
        msg.position_errors, msg.velocity_errors = _floats(error[0]), _floats(error[1])
        msg.efforts = _floats(out.tau)
        msg.saturated = out.any_saturated
        if out.task_error is not None:
            msg.task_errors = _floats(out.task_error)
        try:
            self._state_pub.publish(msg)
        except Exception:
            if self.context.ok():
                raise
        self._snapshot = (stamp, t_rel, desired, actual, error)
        self._feedback_locked(now_msg.nanoseconds, stamp, t_rel, desired, actual, error)

    def _tick_timing(self):
        t = time.monotonic()
        last = getattr(self, "_last_tick_wall", None)
        self._last_tick_wall = t
        if last is None:
            return
        dt = t - last
        s = self._tick_stats
        s[0] += 1
        s[1] += dt
        s[2] += dt * dt
        s[3] = max(s[3], abs(dt - self._period_s))

    def timing_summary(self):
        """Text with the control period's mean, standard deviation and worst deviation (wall clock)."""
        n, s1, s2, worst = self._tick_stats
        if n < 2:
            return "control loop: too few ticks for statistics"
        mean = s1 / n
        std = math.sqrt(max(0.0, s2 / n - mean * mean))
        return (f"control loop (wall clock): {n} periods, mean {mean * 1e3:.3f} ms (nominal "
                f"{self._period_s * 1e3:.3f} ms of the node clock), std {std * 1e3:.3f} ms, worst deviation "
                f"{worst * 1e3:.3f} ms")

    def close(self):
        """Abort the running goals ("shutting down") and hand them to the action server for their results."""
        self._closing = True
        with self._lock:
            for g in self._goals.values():
                g.finish(Result.INVALID_GOAL, "the controller is shutting down")
            self._active = self._goal = None
        self._dispatch_finished()

    def publish_hold(self):
        """The last command before exit (main): gravity compensation at the last measured position, whatever
        was running. False when nothing can be commanded (no model or no joint_states yet)."""
        with self._lock:
            model, state = self._model, self._state
            if model is None or state is None:
                return False
            self._hold = state[0].copy()
            out = gravity_hold(model, self._hold)
            self._effort_pub.publish(self._command_msg(self._hold, np.zeros_like(self._hold), state[0], out))
        self.get_logger().info("last command: hold at the last measured position (gravity compensation)")
        return True


def pose_matrix(pose):
    """4x4 transform of a geometry_msgs/Pose (quaternion x, y, z, w; normalised); ValueError when it is
    not finite or the quaternion is zero."""
    p, o = pose.position, pose.orientation
    x, y, z, w = o.x, o.y, o.z, o.w
    nq = math.sqrt(x * x + y * y + z * z + w * w)
    if not (math.isfinite(nq) and nq > 1e-9 and all(math.isfinite(v) for v in (p.x, p.y, p.z))):
        raise ValueError("pose holds NaN/inf or a zero quaternion")
    x, y, z, w = x / nq, y / nq, z / nq, w / nq
    T = np.eye(4)
    T[:3, :3] = [[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                 [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                 [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]]
    T[:3, 3] = (p.x, p.y, p.z)
    return T


def _code_name(code):
    for name in ("SUCCESSFUL", "INVALID_GOAL", "INVALID_JOINTS", "OLD_HEADER_TIMESTAMP", "PATH_TOLERANCE_VIOLATED",
                 "GOAL_TOLERANCE_VIOLATED"):
        if getattr(Result, name) == code:
            return name
    return str(code)


def main(argv=None):
    # SIGINT/SIGTERM at any moment (start-up included) set `stop`: exit 0, no traceback; the last command
    # before exit is a hold (publish_hold). manip_core.ros.node_main has the details.
    from manip_core.ros.node_main import StartupInterrupted, init_rclpy, interruptible_startup
    stop = init_rclpy(argv)
    if stop.is_set():
        rclpy.try_shutdown()
        return 0
    try:
        with interruptible_startup():
            node = ControllerNode()
    except StartupInterrupted:
        rclpy.try_shutdown()
        return 0
    except (ValueError, ParameterException) as e:  # e.g. rate_hz:=250 (an integer) or control_law:=lqr
        rclpy.logging.get_logger("controller").fatal(f"{type(e).__name__}: {e}")
        rclpy.try_shutdown()
        return 2
    if node.executor_threads > 1:
        sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
        executor = MultiThreadedExecutor(num_threads=node.executor_threads)
    else:
        executor = SingleThreadedExecutor()
    executor.add_node(node)
    gc.freeze()  # objects made at start-up are never collected: shorter collector pauses in the loop
    try:
        while not stop.is_set() and rclpy.ok():
            executor.spin_once(timeout_sec=0.1)
        if rclpy.ok():
            # finish the running goals and let their results go out while the context is still valid
            node.close()
            deadline = time.monotonic() + 1.0
            while node.goals_in_flight() and time.monotonic() < deadline:
                executor.spin_once(timeout_sec=0.05)
            for _ in range(10):
                executor.spin_once(timeout_sec=0.01)
            node.publish_hold()  # after the last spin: no tick can follow it
            node.get_logger().info(node.timing_summary())
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.close()
        executor.shutdown(timeout_sec=1.0)
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
