"""ROS 2 node ``viewer``: the arm on the ROS graph in the browser, live, what it plans and sees, and controls that
drive it.

The robot comes from the usual parameters / the ``robot_description`` topic (manip_core.ros.model_source); the page
(manip_view.app + manip_view.panels, served on ``host``:``port``, 127.0.0.1 by default, a warning for any other
address) draws the arm at the newest ``joint_states`` (taken ``redraw_rate_hz`` times a second on a fixed cadence from
a subscription no executor spins, manip_view.polled: nothing queues, a pose already drawn is not sent again, the
readout at most ``readout_rate_hz``), the planner's published tip path (``planned_path``), the perceived
``obstacles``, the stereo point cloud (decimated to ``max_cloud_points``, placed in the base frame with /tf_static
and /tf; the newest cloud, taken ``redraw_rate_hz`` times a second), the left image and the controller's tracking error
(commanded minus actual positions from its controller_state).

Commands, each through the same validated interface any client uses:
- a slider moved in the page sends a short trajectory (manip_view.command.slider_move: a quintic from the measured
  position, at most ``speed_fraction`` of each velocity limit, never a jump) on ``trajectory_topic``;
- the goal gizmo asks ``compute_ik`` for every solution branch (model_server; solved locally when no such
  service answers, said so in the page);
- Plan calls ``plan_trajectory`` to the chosen branch (the path appears, or the error code and message);
- Execute (after a confirmation in the page) sends the plan to ``execute_action`` (ExecuteTrajectory);
- the pick-and-place form sends a PickPlace goal to ``pick_place_action``;
- Stop cancels the running goals and sends the empty trajectory (the controller holds the measured position).
No move is sent before a joint_states message names every joint of the robot.
"""
from __future__ import annotations

import threading
import time
from collections import deque

import numpy as np
from builtin_interfaces.msg import Duration
from geometry_msgs.msg import Point, Pose, PoseStamped, Quaternion
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.action import ActionClient
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import Image, JointState, PointCloud2
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
from visualization_msgs.msg import Marker, MarkerArray

from manip_core.errors import InputError
from manip_core.ros.model_source import RobotModelSource
from manip_msgs.action import ExecuteTrajectory, PickPlace
from manip_msgs.msg import ControllerState, ObstacleArray
from manip_msgs.srv import ComputeIK, PlanTrajectory

from .analysis_layers import MARKER_LAYERS, marker_points
from .app import OfflineViewer, is_loopback
from .command import slider_move
from .overlays import IKBranches, cloud_from_fields, plan_view, solve_ik_offline, transform_points
from .panels import Panels
from .polled import PolledSubscriptions
from .scene import RobotScene

NEWEST = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT, history=HistoryPolicy.KEEP_LAST)
NEWEST_RELIABLE = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST)
QUEUED = QoSProfile(depth=100, history=HistoryPolicy.KEEP_LAST)  # taken every redraw: 100 > 250 Hz / redraw rate
LATCHED = QoSProfile(depth=100, durability=DurabilityPolicy.TRANSIENT_LOCAL)
ERROR_NAMES = {0: "SUCCESS", -1: "INVALID_INPUT", -2: "UNKNOWN_JOINT", -3: "UNKNOWN_LINK", -4: "NO_IK_SOLUTION",
               -5: "OUT_OF_LIMITS", -6: "PLANNING_FAILED", -7: "NOT_READY", -8: "COLLISION", -9: "EXECUTION_FAILED"}


def _duration(t_s):
    sec = int(t_s)
    return Duration(sec=sec, nanosec=int(round((t_s - sec) * 1e9)))


def _seconds(d):
    return d.sec + 1e-9 * d.nanosec


def _lower_priority(by, idle=False):
    """Add ``by`` to the nice value of every thread of this process (on Linux nice is per thread; threads started
    later inherit their creator's) and, with ``idle``, put each under SCHED_IDLE (it runs only on CPU time no other
    thread wants, and a waking thread of another policy preempts it at once); the new nice value of this thread."""
    import os

    for tid in os.listdir("/proc/self/task"):
        try:
            t = int(tid)
            if by:
                os.setpriority(os.PRIO_PROCESS, t, min(19, os.getpriority(os.PRIO_PROCESS, t) + by))
            if idle:
                os.sched_setscheduler(t, os.SCHED_IDLE, os.sched_param(0))
        except (OSError, ValueError):  # a thread that ended meanwhile
            pass
    return os.getpriority(os.PRIO_PROCESS, 0)


def _wait(future, timeout_s):
    """The future's result, or None after timeout_s (the executor completes it on its own thread)."""
    done = threading.Event()
    future.add_done_callback(lambda _: done.set())
    if not done.wait(timeout_s):
        return None
    return future.result()


class Viewer(Node):
    def __init__(self):
        super().__init__("viewer")
        d = ParameterDescriptor
        p = self.declare_parameter
        self.host = p("host", "127.0.0.1", d(description="address of the page (a non-loopback one lets anyone who "
                                                          "reaches it move the arm)")).value
        self.port = p("port", 8080, d(description="TCP port of the page")).value
        self.speed_fraction = p("speed_fraction", 0.25,
                                d(description="slider moves: fraction of each joint's velocity limit")).value
        self.redraw_rate_hz = p("redraw_rate_hz", 40.0, d(description="redraws of the arm per second (the newest "
                                                                           "joint_states, on a fixed cadence)")).value
        if not self.redraw_rate_hz > 0:
            raise ValueError(f"redraw_rate_hz must be > 0 (redraws of the arm per second), got {self.redraw_rate_hz}")
        self.readout_rate_hz = p("readout_rate_hz", 5.0, d(description="updates per second of the FK / "
                                                                        "manipulability readout (text)")).value
        if not self.readout_rate_hz > 0:
            raise ValueError(f"readout_rate_hz must be > 0 (readout updates per second), got {self.readout_rate_hz}")
        self.max_cloud_points = p("max_cloud_points", 50000,
                                  d(description="point cloud: at most this many points drawn (every k-th)")).value
        self.plan_velocity_scaling = p("plan_velocity_scaling", 0.5,
                                       d(description="Plan button: fraction of the velocity limits")).value
        self.service_timeout = p("service_timeout", 30.0,
                                 d(description="s to wait for compute_ik / plan_trajectory / a goal's result")).value
        names = {
            "trajectory_topic": ("joint_trajectory_controller/joint_trajectory", "slider moves and Stop"),
            "cloud_topic": ("stereo/points2", "PointCloud2 drawn in the base frame"),
            "image_topic": ("stereo/left/image_rect", "Image shown in the panel"),
            "obstacles_topic": ("obstacles", "ObstacleArray drawn as boxes"),
            "planned_path_topic": ("planned_path", "MarkerArray of the planner: its tip path LINE_STRIP"),
            "analysis_markers_topic": ("analysis_markers", "MarkerArray of the analysis_markers node: workspace and "
                                                           "singularity map, drawn in the Analysis layers"),
            "controller_state_topic": ("joint_trajectory_controller/controller_state", "tracking error plot"),
            "ik_service": ("compute_ik", "ComputeIK for the goal gizmo"),
            "plan_service": ("plan_trajectory", "PlanTrajectory for the Plan button"),
            "execute_action": ("joint_trajectory_controller/execute_trajectory", "ExecuteTrajectory for Execute"),
            "pick_place_action": ("pick_place", "PickPlace for the form"),
        }
        n = {k: p(k, v, d(description=why)).value for k, (v, why) in names.items()}
        if not is_loopback(self.host):
            self.get_logger().warning(f"listening on {self.host}: anyone who reaches this address can move the arm")
        self._nice = int(p("nice", 10, d(description="added to the nice value of the viewer's process once its page "
                                                      "is up (10: on a busy machine the control loop goes first, on "
                                                      "an idle one the viewer still gets the idle CPU; 0: unchanged)"
                                      )).value)
        self._sched_idle = bool(p("sched_idle", False, d(description="once its page is up, every thread of the viewer "
                                                                     "under SCHED_IDLE (Linux): only CPU time that no "
                                                                     "other process wants")).value)
        group = ReentrantCallbackGroup()
        self._pub = self.create_publisher(JointTrajectory, n["trajectory_topic"], 10)
        self._ik = self.create_client(ComputeIK, n["ik_service"], callback_group=group)
        self._plan_client = self.create_client(PlanTrajectory, n["plan_service"], callback_group=group)
        self._exec = ActionClient(self, ExecuteTrajectory, n["execute_action"], callback_group=group)
        self._pp = ActionClient(self, PickPlace, n["pick_place_action"], callback_group=group)
        self._lock = threading.Lock()
        self._goals = []          # goal handles that Stop cancels
        self.q_measured = None
        self.viewer = self.panels = None
        self.trajectory = None    # the last plan (JointTrajectory), what Execute sends
        self._tf = None
        self._tracking = deque(maxlen=2000)
        self._last_plot = 0.0
        self._drawn_q = None      # the arm pose last sent to the page
        self._readout_s = 0.0     # monotonic time of the last readout update
        self._tf_shown_s = 0.0    # monotonic time the tf frames were last drawn (when asked for)
        self._analysis_msg = None  # the last MarkerArray of the analysis (latched)
        self._readout_stale = False
        self.stats = {"joint_states_drawn": 0, "clouds_drawn": 0, "images_drawn": 0, "readouts": 0}
        # The streams (joint_states 100 Hz or more, controller_state 250 Hz, /tf at the joint_states rate, the
        # cloud) are taken from subscriptions that no executor spins (manip_view.polled) by two drawing threads,
        # each redraw_rate_hz times a second: the arm's (joint_states, controller_state, /tf) and the cloud's (the
        # newest cloud; decoding one may take longer than a period). The executor wakes only for the rarer messages
        # below. Nothing queues: each turn draws the newest message.
        self._polled = PolledSubscriptions(self)
        self._js_key = self._polled.subscribe(JointState, "joint_states", NEWEST_RELIABLE)
        self._cs_key = self._polled.subscribe(ControllerState, n["controller_state_topic"], QUEUED)
        self._cloud_key = self._polled.subscribe(PointCloud2, n["cloud_topic"], NEWEST)
        self._tf_key = None
        self.create_subscription(ObstacleArray, n["obstacles_topic"], self._on_obstacles, 10)
        self.create_subscription(MarkerArray, n["planned_path_topic"], self._on_markers, 10)
        self.create_subscription(MarkerArray, n["analysis_markers_topic"], self._on_analysis_markers, LATCHED)
        self.create_subscription(Image, n["image_topic"], self._on_image, qos_profile_sensor_data)
        try:
            from tf2_msgs.msg import TFMessage

            from manip_perception.tf_buffer import TransformBuffer
            self._tf = TransformBuffer()
            self.create_subscription(TFMessage, "/tf_static", self._on_tf_static, LATCHED)
            self._tf_key = self._polled.subscribe(TFMessage, "/tf", QUEUED)
        except ImportError:  # tf2_msgs not installed: clouds only when they are in the base frame
            self.get_logger().warning("tf2_msgs not installed: point clouds only in the base frame")
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._every, args=(fn,), name=name, daemon=True)
                         for fn, name in ((self._poll_arm, "manip-view-arm"), (self._poll_cloud, "manip-view-cloud"))]
        for t in self._threads:
            t.start()
        self.source = RobotModelSource(self, on_model=self._on_model)

    # --------------------------------------------------------------------------------------- model / page
    def _on_model(self, model, text):
        urdf = text if text.lstrip("\ufeff \t\r\n").startswith("<") else None
        if self.panels is not None:
            self.panels.close()
        if self.viewer is not None:
            self.viewer.stop()
        self.q_measured = self._drawn_q = None
        self.viewer = OfflineViewer(RobotScene(model, urdf), host=self.host, port=self.port,
                                    on_target=self.send_target, on_stop=self.stop)
        self.panels = Panels(self.viewer, solve_ik=self.solve_ik, plan=self.plan, execute=self.execute,
                             pick_place=self.pick_place, max_cloud_points=self.max_cloud_points)
        if self._nice or self._sched_idle:  # once, after the start-up (imports, model, page: a few CPU s that a low
            # priority would stretch)
            nice = _lower_priority(self._nice, self._sched_idle)
            self.get_logger().info(f"nice value {nice}{', SCHED_IDLE' if self._sched_idle else ''}: the viewer yields "
                                   "the CPU to the control loop")
            self._nice, self._sched_idle = 0, False
        if self._analysis_msg is not None:
            self._on_analysis_markers(self._analysis_msg)
        self.get_logger().info(f"{model.name}: page at {self.viewer.url}")

    @property
    def base_frame(self):
        return self.viewer.scene.robot.base_link if self.viewer is not None else ""

    def _to_base(self, frame):
        """T_base_frame (4x4) or None when tf does not know it."""
        if not frame or frame.lstrip("/") == self.base_frame:
            return np.eye(4)
        if self._tf is None:
            return None
        try:
            return self._tf.lookup(self.base_frame, frame)
        except LookupError:
            return None

    # ------------------------------------------------------------------------------------------- inputs
    def _on_tf_static(self, msg):
        n = self._tf.add_message(msg, static=True)
        self.get_logger().info(f"/tf_static: {n} transform(s) ("
                               + ", ".join(f"{t.header.frame_id} -> {t.child_frame_id}" for t in msg.transforms[:4])
                               + (", ..." if len(msg.transforms) > 4 else "") + ")")

    def _every(self, turn):
        """A drawing thread: turn() redraw_rate_hz times a second (fixed cadence; after a late turn the cadence
        starts anew: no burst) until close()."""
        period_s, next_s = 1.0 / self.redraw_rate_hz, time.monotonic()
        while not self._stop.is_set():
            try:
                turn()
            except Exception as e:  # noqa: BLE001 - a failed turn is logged; the page stays up
                self.get_logger().error(f"viewer {turn.__name__} failed: {type(e).__name__}: {e}",
                                        throttle_duration_sec=10.0)
            now = time.monotonic()
            next_s = next_s + period_s if next_s + period_s > now else now + period_s
            self._stop.wait(next_s - now)

    def _poll_cloud(self):
        msg = self._polled.take(self._cloud_key)
        if msg is not None and self.panels is not None:
            self._draw_cloud(msg)

    def _poll_arm(self):
        if self._tf_key is not None:
            for m in self._polled.take_all(self._tf_key):
                self._tf.add_message(m)
        msg = self._polled.take(self._js_key)
        states = self._polled.take_all(self._cs_key)
        viewer = self.viewer
        if viewer is None:
            return
        now = time.monotonic()
        readout_due = now - self._readout_s >= 1.0 / self.readout_rate_hz
        if msg is not None:
            self._on_joint_states(viewer, msg, readout_due)
        if (self._tf is not None and self.panels is not None and now - self._tf_shown_s >= 1.0 / self.readout_rate_hz
                and self.panels.tf_frames_wanted):  # the frames on tf, at the readout's rate
            self._tf_shown_s = now
            self.panels.show_tf_frames(self._tf.poses_in(self.base_frame))
        if self._readout_stale and readout_due:  # the arm stopped (or moves slowly): its pose in the readout
            viewer.show_readout()
            self._readout_stale, self._readout_s = False, now
            self.stats["readouts"] += 1
        if states:
            self._on_controller_states(states)

    def _on_joint_states(self, viewer, msg, readout_due):
        """The arm at the message's positions in the page, unless that pose is the one already shown."""
        index = {n: i for i, n in enumerate(msg.name)}
        names = viewer.scene.robot.joint_names
        if any(n not in index for n in names) or len(msg.position) != len(msg.name):
            return
        q = np.array([msg.position[index[n]] for n in names])
        if not np.all(np.isfinite(q)):
            return
        first = self.q_measured is None
        with self._lock:
            self.q_measured = q
        if first:
            viewer.set_sliders(q)
        if self._drawn_q is not None and np.array_equal(q, self._drawn_q):
            return
        viewer.update(q, readout=readout_due)
        self._drawn_q = q
        self.stats["joint_states_drawn"] += 1
        if readout_due:
            self._readout_s, self._readout_stale = time.monotonic(), False
            self.stats["readouts"] += 1
        else:
            self._readout_stale = True

    def _on_obstacles(self, msg):
        if self.panels is None:
            return
        T = self._to_base(msg.header.frame_id)
        if T is None:
            self.get_logger().warning(f"obstacles in '{msg.header.frame_id}': no transform to {self.base_frame}",
                                      throttle_duration_sec=10.0)
            return
        boxes = []
        for o in msg.obstacles:
            c = T[:3, :3] @ np.array([o.center.x, o.center.y, o.center.z]) + T[:3, 3]
            size = np.array([o.size.x, o.size.y, o.size.z])
            if np.all(np.isfinite(c)) and np.all(np.isfinite(size)):
                boxes.append((c, size))
        self.panels.show_obstacles(boxes)

    def _on_markers(self, msg):
        if self.panels is None:
            return
        for m in msg.markers:
            if m.type == Marker.LINE_STRIP and m.action == Marker.ADD and m.ns == "tip_path":
                T = self._to_base(m.header.frame_id)
                if T is not None:
                    self.panels.show_tool_path(transform_points(T, marker_points(m)[0]))

    def _on_analysis_markers(self, msg):
        """The workspace and singularity map published by the analysis (manip_core's analysis_markers node): each
        namespace's points, in the base frame, as the Analysis folder's layer of the same kind."""
        self._analysis_msg = msg  # latched: it may come before the page; drawn then (_on_model)
        if self.panels is None:
            return
        layers = {}
        for m in msg.markers:
            layer = MARKER_LAYERS.get(m.ns)
            if layer is None or m.action != Marker.ADD or m.type not in (Marker.CUBE_LIST, Marker.SPHERE_LIST,
                                                                          Marker.POINTS):
                continue
            T = self._to_base(m.header.frame_id)
            if T is None:
                self.get_logger().warning(f"analysis markers in '{m.header.frame_id}': no transform to "
                                          f"{self.base_frame}", throttle_duration_sec=10.0)
                continue
            P, C = marker_points(m)
            layers.setdefault(layer, []).append((transform_points(T, P), C))
        for layer, parts in layers.items():
            P, C = np.concatenate([p for p, _ in parts]), np.concatenate([c for _, c in parts])
            ok = np.all(np.isfinite(P) & (np.abs(P) < 1e6), axis=1)
            if not ok.any():
                self.get_logger().warning(f"analysis markers: {layer} has no finite point; not drawn",
                                          throttle_duration_sec=10.0)
                continue
            self.panels.analysis.draw(layer, P[ok], C[ok])
            self.panels.analysis.status[layer].content = f"{int(ok.sum())} points published by the analysis"
            self.get_logger().info(f"analysis markers: {layer}, {int(ok.sum())} points")

    def _draw_cloud(self, msg):
        """The cloud in the page: every k-th point (at most max_cloud_points read and sent), in its own frame, the
        page's cloud node placed at T_base_cloud (the page moves the points: no per-point work here)."""
        T = self._to_base(msg.header.frame_id)
        if T is None:
            self.get_logger().warning(f"point cloud in '{msg.header.frame_id}': no transform to {self.base_frame} "
                                      "on /tf_static or /tf yet", throttle_duration_sec=10.0)
            return
        n = msg.width * msg.height
        every = max(1, -(-n // self.max_cloud_points)) if self.max_cloud_points > 0 else 1
        try:
            fields = [(f.name, f.offset, f.datatype, f.count) for f in msg.fields]
            pts, cols = cloud_from_fields(msg.data, fields, msg.point_step, n, msg.is_bigendian, every=every)
        except InputError as e:
            self.get_logger().warning(f"point cloud not drawn: {e}", throttle_duration_sec=10.0)
            return
        self.panels.show_cloud(pts, cols, received=n, pose=T)
        if self.stats["clouds_drawn"] == 0:
            self.get_logger().info(f"first point cloud: {n} points in '{msg.header.frame_id}', {len(pts)} drawn")
        self.stats["clouds_drawn"] += 1

    def _on_image(self, msg):
        if self.panels is None:
            return
        from manip_perception.image_conversion import ImageConversionError, image_to_numpy

        try:
            a = image_to_numpy(msg)
        except ImageConversionError as e:
            self.get_logger().warning(f"image not shown: {e}", throttle_duration_sec=10.0)
            return
        if msg.encoding in ("bgr8", "bgra8"):
            a = a[..., 2::-1]
        elif a.ndim == 2 or a.shape[-1] == 1:
            a = np.repeat(a.reshape(a.shape[0], a.shape[1], 1), 3, axis=2)
        self.panels.show_image(np.ascontiguousarray(a[..., :3]).astype(np.uint8))
        self.stats["images_drawn"] += 1

    def _on_controller_states(self, msgs):
        if self.panels is None:
            return
        dof = self.viewer.scene.robot.dof
        for msg in msgs:
            if len(msg.position_errors) == dof:
                self._tracking.append((_seconds(msg.header.stamp), np.asarray(msg.position_errors, dtype=float)))
        now = time.monotonic()
        if not self._tracking:
            return
        if now - self._last_plot >= 0.5:
            self._last_plot = now
            data = list(self._tracking)
            times = np.array([x[0] for x in data])
            self.panels.show_tracking(times - times[-1], np.array([x[1] for x in data]))

    # ----------------------------------------------------------------------------------------- commands
    def _publish(self, times, positions, velocities):
        msg = JointTrajectory()
        msg.joint_names = list(self.viewer.scene.robot.joint_names)
        for t, p, v in zip(times, positions, velocities):
            msg.points.append(JointTrajectoryPoint(positions=p.tolist(), velocities=v.tolist(),
                                                   time_from_start=_duration(float(t))))
        self._pub.publish(msg)

    def send_target(self, q_target):
        """A slider moved in the page: a short move from the measured position (nothing before joint_states)."""
        with self._lock:
            q = self.q_measured
        if q is None:
            self.get_logger().warning("slider moved before joint_states named every joint: nothing sent")
            return
        r = self.viewer.scene.robot
        t, p, v = slider_move(q, q_target, r.joint_lower, r.joint_upper, r.velocity_limits, self.speed_fraction)
        self._publish(t, p, v)
        self.get_logger().info(f"move to {np.round(p[-1], 4).tolist()} over {t[-1] - t[0]:.2f} s")

    def stop(self):
        """Stop: cancel the running goals, then the empty trajectory (ros2_control semantics: hold where it is)."""
        with self._lock:
            goals, self._goals = self._goals, []
        for gh in goals:
            gh.cancel_goal_async()
        self._publish([], [], [])
        self.get_logger().info(f"stop: {len(goals)} goal(s) canceled, empty trajectory sent (the controller holds "
                               "the current position)")

    send_hold = stop

    def solve_ik(self, T, q_seed):
        """IKBranches of the gizmo's pose from compute_ik (all_solutions), or solved here when it does not answer."""
        robot = self.viewer.scene.robot
        if not self._ik.wait_for_service(timeout_sec=1.0):
            br = solve_ik_offline(robot, T, q_seed)
            return IKBranches(br.solutions, f"{br.message}; solved in the viewer: no compute_ik service")
        from manip_core.spatial import matrix_to_quat_wxyz

        w = matrix_to_quat_wxyz(T[:3, :3])
        req = ComputeIK.Request(seed=[float(v) for v in q_seed], all_solutions=True)
        req.target = PoseStamped(pose=Pose(position=Point(x=float(T[0, 3]), y=float(T[1, 3]), z=float(T[2, 3])),
                                           orientation=Quaternion(w=float(w[0]), x=float(w[1]), y=float(w[2]),
                                                                  z=float(w[3]))))
        req.target.header.frame_id = robot.base_link
        res = _wait(self._ik.call_async(req), self.service_timeout)
        if res is None:
            return IKBranches([], f"compute_ik: no answer in {self.service_timeout} s")
        if not res.success:
            return IKBranches([], f"compute_ik: {ERROR_NAMES.get(res.error_code.val, res.error_code.val)}: "
                                  f"{res.message}")
        sols = []
        for js in res.solutions:
            index = {n: i for i, n in enumerate(js.name)}
            if all(n in index for n in robot.joint_names):
                sols.append(np.array([js.position[index[n]] for n in robot.joint_names]))
        return IKBranches(sols, f"compute_ik: {res.message}" if res.message else "compute_ik")

    def plan(self, q_goal, avoid_obstacles):
        """(PlanView or None, text): plan_trajectory from the measured position to q_goal (joint goal)."""
        if not self._plan_client.wait_for_service(timeout_sec=2.0):
            return None, "no plan_trajectory service on the graph"
        req = PlanTrajectory.Request(goal_type=PlanTrajectory.Request.GOAL_JOINTS,
                                     goal_positions=[float(v) for v in q_goal],
                                     path_type=PlanTrajectory.Request.PATH_JOINT,
                                     profile=PlanTrajectory.Request.PROFILE_QUINTIC,
                                     velocity_scaling=float(self.plan_velocity_scaling),
                                     avoid_obstacles=bool(avoid_obstacles))
        res = _wait(self._plan_client.call_async(req), self.service_timeout)
        if res is None:
            return None, f"plan_trajectory: no answer in {self.service_timeout} s"
        if not res.success:
            self.get_logger().info(f"plan failed: {res.message}")
            return None, f"failed: {ERROR_NAMES.get(res.error_code.val, res.error_code.val)}: {res.message}"
        tr = res.trajectory
        try:
            view = plan_view(self.viewer.scene, tr.joint_names, [_seconds(p.time_from_start) for p in tr.points],
                             [list(p.positions) for p in tr.points])
        except InputError as e:
            return None, f"the planner's trajectory cannot be drawn: {e}"
        self.trajectory = tr
        clearance = (f", clearance {res.min_obstacle_distance:.3f} m" if np.isfinite(res.min_obstacle_distance)
                     else "")
        text = f"{view.summary()}{clearance}"
        self.get_logger().info(f"plan: {text}")
        return view, text

    def _run_goal(self, client, goal, what, timeout_s):
        if not client.wait_for_server(timeout_sec=2.0):
            return None, f"no {what} action server on the graph"
        gh = _wait(client.send_goal_async(goal), self.service_timeout)
        if gh is None or not gh.accepted:
            return None, f"{what}: goal rejected"
        with self._lock:
            self._goals.append(gh)
        res = _wait(gh.get_result_async(), timeout_s)
        with self._lock:
            if gh in self._goals:
                self._goals.remove(gh)
        if res is None:
            return None, f"{what}: no result in {timeout_s:.0f} s"
        return res, None

    def execute(self):
        """Send the last plan to the controller (ExecuteTrajectory); the outcome as text."""
        tr = self.trajectory
        if tr is None:
            return "no plan to execute"
        self.get_logger().info(f"execute: {len(tr.points)} points")
        res, err = self._run_goal(self._exec, ExecuteTrajectory.Goal(trajectory=tr), "execute_trajectory",
                                  _seconds(tr.points[-1].time_from_start) + self.service_timeout)
        if err:
            return err
        r = res.result
        text = "done" if r.error_code == 0 else f"error {r.error_code}: {r.error_string}"
        self.get_logger().info(f"execute: {text} (status {res.status})")
        return text

    def pick_place(self, goal):
        """A PickPlace goal from the form (positions in the base frame, identity orientations)."""
        def pose(xyz):
            ps = PoseStamped(pose=Pose(position=Point(x=float(xyz[0]), y=float(xyz[1]), z=float(xyz[2])),
                                       orientation=Quaternion(w=1.0)))
            ps.header.frame_id = self.base_frame
            return ps
        g = PickPlace.Goal(pick_pose=pose(goal["pick_xyz_m"]), place_pose=pose(goal["place_xyz_m"]),
                           object_name=goal["object_name"], approach_height=goal["approach_height_m"],
                           avoid_obstacles=goal["avoid_obstacles"])
        self.get_logger().info(f"pick and place: {goal}")
        res, err = self._run_goal(self._pp, g, "pick_place", 600.0)
        if err:
            return err
        r = res.result
        return "done" if r.error_code == 0 else f"error {r.error_code}: {r.message}"

    def close(self):
        self._stop.set()
        for t in self._threads:
            t.join(5.0)
        if self.panels is not None:
            self.panels.close()
        if self.viewer is not None:
            self.viewer.stop()
        self.source.close()
        self._polled.close()


def main(argv=None):
    """Console script ``viewer``."""
    from rclpy.executors import MultiThreadedExecutor

    from manip_core.ros.node_main import run_node
    from manip_core.ros.transport import use_large_data_profile
    use_large_data_profile()  # 50,000-point clouds from another process (before the first participant)
    return run_node(argv, "viewer", Viewer, lambda: MultiThreadedExecutor(num_threads=2),
                    on_exit=lambda node: node is not None and node.close())


if __name__ == "__main__":
    import sys
    sys.exit(main())
