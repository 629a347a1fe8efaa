"""sim_bridge: the PyBullet simulation on the ROS graph, behaving like a real robot driver.

Publishes (names relative, except /clock; see docs/graph.md):
  /clock (rosgraph_msgs/Clock)            simulated time from 0, every physics step (or clock_rate_hz)
  joint_states (sensor_msgs/JointState)   model joint order, publish_rate_hz, stamped with simulated time
  stereo/left/image_rect, stereo/right/image_rect (sensor_msgs/Image, rgb8, sensor-data QoS)
  stereo/left/camera_info, stereo/right/camera_info (sensor_msgs/CameraInfo, sensor-data QoS); frame_id of
      the left pair: camera_frame; of the right pair: right_camera_frame (default: camera_frame with "left"
      replaced by "right", e.g. stereo_right_optical); right P[3] = -fx * baseline. Stamp: the simulated
      time of the state that was rendered.
  sim/objects (manip_msgs/SceneObjectArray)  ground truth in base_frame, objects_rate_hz
  sim/joint_states (sensor_msgs/JointState)  only with encoder_noise_rad > 0: the true joint state (ground
      truth, the stamps of joint_states), while joint_states carries the noisy encoder readings
  /tf_static (tf2_msgs/TFMessage, transient local)  world_frame -> base_frame (the scene's robot base pose;
      left out when world_frame is empty or equal to base_frame), base_frame -> camera_frame and
      camera_frame -> right_camera_frame (the stereo pair), once at start-up
Subscribes:
  effort_controller/commands, forward_position_controller/commands, forward_velocity_controller/commands
      (std_msgs/Float64MultiArray, model joint order; ros2_control's forward_command_controller convention);
      a wrong length, NaN/inf (or a position beyond the limits, a velocity beyond the velocity limits) is
      logged and dropped (the previous command stays); the latest valid command of any kind decides the mode;
      no command for command_timeout s (simulated) -> the robot holds its position (the watchdog). With
      lockstep (lockstep_max_age > 0), effort commands are watched at their own rhythm: the watchdog holds the
      arm once the latest one is older than command_timeout_periods (default 2) of the command periods it
      observes (the median of the latest 16 intervals, simulated time), and at least lockstep_max_age: the
      physics waits (lockstep_max_wait of wall time) for each late command before it steps, and before the
      step that would hold the arm up to lockstep_hold_wait (1 s of wall time: the simulation is frozen
      meanwhile, so a controller only starved by a loaded machine is not braked mid-motion), so a command
      that old means the controller did not answer for that long, and the arm stops within two control
      periods of simulated time of a controller's death, not after command_timeout. While that hold lasts (up to
      command_timeout since the last command) the physics keeps waiting for the controller at every step, so a
      controller that was only starved on a loaded machine finds the arm where its commands stopped. Without
      lockstep the simulated time runs on whether or not the controller keeps up, so a late command is not a
      dead controller: command_timeout alone applies.
Serves:
  gripper/grasp (manip_msgs/srv/Grasp): suction attach (named or nearest object) / release.
Robot: the scene's robot, or the one given by the urdf_path (path or package:// URI, start-up only), base_link and
  tip_link parameters (the launch file's robot arguments); a scene naming another one is a configuration error
  (manip_sim.scene.with_robot). Without initial_positions it starts at manip_core.ready_pose's ready configuration
  (logged). Joints outside the base -> tip chain (fingers) are held at 0, where the model welds them.

Encoder noise (encoder_noise_rad, default 0: none): joint_states then carries every position plus
N(0, encoder_noise_rad^2) rad, drawn from a generator seeded by encoder_noise_seed, and velocities by
differencing those noisy positions over the publishing interval (an encoder-only driver); the true state goes
to sim/joint_states.

The physics runs in its own thread (paced to wall time by real_time_factor, 0: as fast as possible); the
stereo pair is rendered by a child process (manip_sim.camera.RenderProcess) at camera_rate_hz of simulated
time, dropping frames while it is busy; a third thread publishes the images. Stamps always carry the
simulated time (this node is the source of /clock).
"""
from __future__ import annotations

import logging
import queue
from dataclasses import replace
import threading
import time

import numpy as np
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy, HistoryPolicy, qos_profile_sensor_data

from builtin_interfaces.msg import Time
from geometry_msgs.msg import Pose
from manip_msgs.msg import SceneObject, SceneObjectArray
from manip_msgs.srv import Grasp
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import Float64MultiArray
from tf2_msgs.msg import TFMessage

from manip_core import RobotModel
from manip_core.errors import ModelError
from manip_core.ready_pose import ready_configuration
from manip_core.ros.tf import STATIC_QOS, transform_msg

from .camera import RenderProcess, StereoCamera, right_frame_name
from .scene import SceneError, default_scene_path, load_scene, with_robot
from .world import MODE_EFFORT, CommandError, World

# Defaults of the camera parameters: those of manip_sim/config/stereo_camera.yaml.
CAMERA_DEFAULTS = {
    "base_frame": "base_link",
    "camera_frame": "stereo_left_optical",
    "right_camera_frame": "",
    "camera_position": [0.45, -0.9, 0.7],
    "camera_orientation_xyzw": [-0.89879, 0.0, 0.0, 0.43837],
    "stereo_baseline": 0.12,
    "image_width": 640,
    "image_height": 480,
    "horizontal_fov_deg": 70.0,
}


def stamp_from_seconds(t):
    ns = int(round(t * 1e9))
    return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def image_msg(array, stamp, frame_id):
    h, w, _ = array.shape
    msg = Image()
    msg.header.stamp = stamp
    msg.header.frame_id = frame_id
    msg.height, msg.width = h, w
    msg.encoding = "rgb8"
    msg.is_bigendian = 0
    msg.step = w * 3
    msg.data = array.tobytes()   # bytes, not an ndarray (much faster)
    return msg


def camera_info_msg(camera: StereoCamera, right, stamp):
    msg = CameraInfo()
    msg.header.stamp = stamp
    msg.header.frame_id = camera.right_frame_id if right else camera.frame_id
    msg.width, msg.height = camera.width, camera.height
    msg.distortion_model = "plumb_bob"
    msg.d = [0.0] * 5
    msg.k = camera.K().reshape(-1).tolist()
    msg.r = np.eye(3).reshape(-1).tolist()
    msg.p = camera.P(right).reshape(-1).tolist()
    return msg


class SimBridge(Node):
    def __init__(self, **kwargs):
        super().__init__("sim_bridge", **kwargs)
        self._stop = threading.Event()
        self._inbox = queue.SimpleQueue()       # work for the physics thread: (kind, payload, reply)
        self._renderer = None
        self.world = None
        self._threads = []
        self.failed = False
        try:
            self._setup()
        except BaseException:
            self.stop()
            self.destroy_node()
            raise

    def _setup(self):
        p = self._params = self._declare_parameters()
        self.scene = with_robot(load_scene(p["scene_file"]), p["urdf_path"], p["base_link"], p["tip_link"])
        model = RobotModel.from_urdf(self.scene.robot.urdf, self.scene.robot.base_link, self.scene.robot.tip_link)
        if self.scene.robot.initial_positions is None:
            # none given: a ready pose above the work area (manip_core.ready_pose; pick_place derives the same)
            ready = ready_configuration(model)
            self.get_logger().info(f"initial joint positions (the scene gives none): {ready.description}: "
                                   f"{np.round(ready.q, 4).tolist()}")
            self.scene = replace(self.scene, robot=replace(self.scene.robot,
                                                           initial_positions=tuple(float(v) for v in ready.q)))
        lockstep = p["lockstep_max_age"] > 0
        self.world = World(self.scene, model=model, time_step=1.0 / p["physics_rate_hz"], gui=p["gui"],
                           command_timeout=p["command_timeout"],
                           command_timeout_periods=p["command_timeout_periods"] if lockstep else 0.0,
                           min_command_timeout=p["lockstep_max_age"], on_event=self._on_world_event)
        w = self.world
        self.camera = StereoCamera(
            tuple(p["camera_position"]), tuple(p["camera_orientation_xyzw"]), p["stereo_baseline"],
            p["image_width"], p["image_height"], p["horizontal_fov_deg"], frame_id=p["camera_frame"],
            right_frame_id=p["right_camera_frame"] or right_frame_name(p["camera_frame"]))

        reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)
        # /clock and joint_states keep one second at 250 Hz for reliable retransmission: with 10, a recorder
        # (manip-bag record) that falls behind on a loaded machine lost a third of them
        stream = QoSProfile(depth=250, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)
        self.pub_clock = self.create_publisher(Clock, "/clock", stream)
        self.pub_joints = self.create_publisher(JointState, "joint_states", stream)
        self.pub_objects = self.create_publisher(SceneObjectArray, "sim/objects", reliable)
        # encoder noise: a seeded generator, the previous noisy positions (for the differenced velocities) and
        # the ground truth topic (created only with noise, so that the default graph is unchanged)
        self._noise_rng = np.random.default_rng(p["encoder_noise_seed"])
        self._noisy_prev = None
        self.pub_true_joints = self.create_publisher(JointState, "sim/joint_states", stream) \
            if p["encoder_noise_rad"] > 0 else None
        self.pub_images = [self.create_publisher(Image, f"stereo/{s}/image_rect", qos_profile_sensor_data)
                           for s in ("left", "right")]
        self.pub_infos = [self.create_publisher(CameraInfo, f"stereo/{s}/camera_info", qos_profile_sensor_data)
                          for s in ("left", "right")]
        self.create_subscription(Float64MultiArray, "effort_controller/commands",
                                 lambda m: self._on_command(m, "effort"), reliable)
        self.create_subscription(Float64MultiArray, "forward_position_controller/commands",
                                 lambda m: self._on_command(m, "position"), reliable)
        self.create_subscription(Float64MultiArray, "forward_velocity_controller/commands",
                                 lambda m: self._on_command(m, "velocity"), reliable)
        self.create_service(Grasp, "gripper/grasp", self._on_grasp)
        self.pub_tf_static = self.create_publisher(TFMessage, "/tf_static", STATIC_QOS)
        self._publish_static_frames(p)

        rate = p["physics_rate_hz"]
        self._every_clock = 1 if p["clock_rate_hz"] <= 0 else max(1, round(rate / p["clock_rate_hz"]))
        self._every_joints = max(1, round(rate / p["publish_rate_hz"]))
        self._every_objects = max(1, round(rate / p["objects_rate_hz"])) if p["objects_rate_hz"] > 0 else 0
        self._every_camera = max(1, round(rate / p["camera_rate_hz"])) if p["camera_rate_hz"] > 0 else 0
        self._rejected = 0
        self._lockstep_timeouts = 0
        self._image_stats = {"pairs": 0, "dropped": 0, "latency": [], "render": []}

        log = self.get_logger()
        log.info(f"robot {w.model.name!r} from {self.scene.robot.urdf}: {w.dof} joints "
                 f"[{', '.join(w.joint_names)}], {w.base_link} -> {w.tip_link}, effort limits "
                 f"{np.round(w.effort_limits, 2).tolist()} N*m, start mode {w.mode!r}")
        if not (w.urdf.has_visual or w.urdf.has_collision):
            log.info("the robot's URDF has no visual/collision geometry: the arm is invisible to the camera "
                     "and collides with nothing")
        log.info(f"scene {p['scene_file']}: objects "
                 + ", ".join(f"{b.name} ({b.shape} at {list(b.position)})" for b in self.scene.objects)
                 + "; obstacles " + (", ".join(f"{b.name} ({b.shape} {list(b.size)} at {list(b.position)})"
                                               for b in self.scene.obstacles) or "none"))
        rtf = p["real_time_factor"]
        log.info(f"physics {rate:g} Hz ({'paced at x%g wall time' % rtf if rtf > 0 else 'as fast as possible'}), "
                 f"joint_states {rate / self._every_joints:g} Hz, /clock {rate / self._every_clock:g} Hz, "
                 f"sim/objects {p['objects_rate_hz']:g} Hz, command_timeout {p['command_timeout']:g} s"
                 + (f" (effort commands: {p['command_timeout_periods']:g} observed command periods, at least "
                    f"lockstep_max_age {p['lockstep_max_age']:g} s)" if lockstep and p['command_timeout_periods'] > 0
                    else "") + ", "
                 f"camera {p['camera_rate_hz']:g} Hz")
        if p["encoder_noise_rad"] > 0:
            log.info(f"encoder noise: joint_states positions + N(0, ({p['encoder_noise_rad']:g} rad)^2) (seed "
                     f"{p['encoder_noise_seed']}), velocities by differencing them; true state on sim/joint_states")

        if self._every_camera:
            c = self.camera
            self._renderer = RenderProcess(self.scene, c)
            log.info(f"stereo camera {c.width}x{c.height}, fx {c.fx:.2f} px, baseline {c.baseline:g} m, frames "
                     f"{c.frame_id} / {c.right_frame_id}; render process pid {self._renderer.pid}")
            self._threads.append(threading.Thread(target=self._image_loop, name="sim_images", daemon=True))
        self._threads.insert(0, threading.Thread(target=self._physics_loop, name="sim_physics", daemon=True))
        for t in self._threads:
            t.start()

    def _publish_static_frames(self, p):
        """world -> base (scene), base -> left optical, left -> right optical on /tf_static."""
        from .transforms import pose_matrix
        stamp = stamp_from_seconds(0.0)
        c = self.camera
        frames = []
        urdf_links = getattr(getattr(self.world.model, "tree", None), "links", {}) or {}
        if p["world_frame"] in urdf_links:  # the robot description has it: the state publisher's to publish
            self.get_logger().info(f"world_frame '{p['world_frame']}' is a link of the robot's URDF: not published "
                                   f"here (robot_state_publisher / state_publisher does)")
        elif p["world_frame"] and p["world_frame"] != p["base_frame"]:
            world_T_base = pose_matrix(self.scene.robot.base_position, self.scene.robot.base_orientation_xyzw)
            frames.append((p["world_frame"], p["base_frame"], world_T_base))
        base_T_left = c.pose(False)
        frames.append((p["base_frame"], c.frame_id, base_T_left))
        frames.append((c.frame_id, c.right_frame_id, np.linalg.inv(base_T_left) @ c.pose(True)))
        self.pub_tf_static.publish(TFMessage(transforms=[transform_msg(stamp, a, b, T) for a, b, T in frames]))
        self.get_logger().info("/tf_static: " + ", ".join(f"{a} -> {b}" for a, b, _ in frames))

    # ---------------------------------------------------------------------------------- parameters
    def _declare_parameters(self):
        defaults = {
            "scene_file": default_scene_path(),
            # the robot (launch argument robot): overrides nothing, fills a scene without one, and must be the
            # scene's robot when the scene names one (manip_sim.scene.with_robot)
            "urdf_path": "",
            "base_link": "",
            "tip_link": "",
            "gui": False,
            "physics_rate_hz": 500.0,
            "publish_rate_hz": 250.0,
            "clock_rate_hz": 0.0,
            "real_time_factor": 1.0,
            "command_timeout": 0.2,
            "command_timeout_periods": 2.0,
            "lockstep_max_age": 0.0,
            "lockstep_max_wait": 0.05,
            "lockstep_hold_wait": 1.0,
            "camera_rate_hz": 2.0,
            "objects_rate_hz": 10.0,
            "world_frame": "world",
            "encoder_noise_rad": 0.0,
            "encoder_noise_seed": 0,
            **CAMERA_DEFAULTS,
        }
        values = {}
        from rcl_interfaces.msg import ParameterDescriptor
        for name, default in defaults.items():
            # scene_file is a path: read at start-up only, read-only afterwards (robot-description contract)
            values[name] = self.declare_parameter(name, default,
                                                  ParameterDescriptor(read_only=name in ("scene_file", "urdf_path"))).value
        for name in ("physics_rate_hz", "publish_rate_hz", "clock_rate_hz", "real_time_factor", "command_timeout",
                     "command_timeout_periods",
                     "lockstep_max_age", "lockstep_max_wait", "lockstep_hold_wait", "camera_rate_hz", "objects_rate_hz",
                     "stereo_baseline",
                     "horizontal_fov_deg", "encoder_noise_rad"):
            values[name] = float(values[name])
        values["encoder_noise_seed"] = int(values["encoder_noise_seed"])
        for name in ("camera_position", "camera_orientation_xyzw"):
            values[name] = [float(v) for v in values[name]]
        values["image_width"], values["image_height"] = int(values["image_width"]), int(values["image_height"])
        for name in ("physics_rate_hz", "publish_rate_hz"):
            if not values[name] > 0:
                raise ValueError(f"parameter {name} must be > 0, got {values[name]}")
        for name in ("real_time_factor", "command_timeout", "command_timeout_periods", "camera_rate_hz",
                     "objects_rate_hz", "clock_rate_hz",
                     "lockstep_max_age", "lockstep_max_wait", "lockstep_hold_wait", "encoder_noise_rad",
                     "encoder_noise_seed"):
            if not values[name] >= 0:
                raise ValueError(f"parameter {name} must be >= 0, got {values[name]}")
        if values["publish_rate_hz"] > values["physics_rate_hz"]:
            raise ValueError("parameter publish_rate_hz must not exceed physics_rate_hz")
        return values

    # ------------------------------------------------------------------------------------ callbacks
    def _on_world_event(self, level, text):
        log = self.get_logger()
        (log.warning if level >= logging.WARNING else log.info if level >= logging.INFO else log.debug)(text)

    def _on_command(self, msg, kind):
        try:
            values = {"effort": self.world.check_efforts, "position": self.world.check_positions,
                      "velocity": self.world.check_velocities}[kind](msg.data)
        except CommandError as exc:
            self._rejected += 1
            topic = "effort_controller/commands" if kind == "effort" else f"forward_{kind}_controller/commands"
            self.get_logger().warning(f"rejected {kind} command on {topic}: {exc}; keeping the previous command")
            return
        self._inbox.put((kind, values, None))

    def _on_grasp(self, request, response):
        done = threading.Event()
        box = {}
        self._inbox.put(("grasp", (bool(request.attach), request.object_name, float(request.max_distance)),
                         (done, box)))
        if not done.wait(5.0) or "result" not in box:
            response.success = False
            response.message = "the simulation is not running"
            return response
        result = box["result"]
        response.success, response.message, response.object_name = result.success, result.message, \
            result.object_name
        self.get_logger().info(f"gripper/grasp ({'attach' if request.attach else 'release'}): {result.message}")
        return response

    # ---------------------------------------------------------------------------------- physics loop
    def _drain_inbox(self):
        w = self.world
        while True:
            try:
                kind, payload, reply = self._inbox.get_nowait()
            except queue.Empty:
                return
            if kind == "effort":
                clipped = w.apply_efforts(payload)
                if clipped.any():
                    names = [w.joint_names[i] for i in np.flatnonzero(clipped)]
                    self.get_logger().warning(f"effort command clipped to the effort limits at {names}",
                                              throttle_duration_sec=1.0)
            elif kind == "position":
                w.set_position_targets(payload)
            elif kind == "velocity":
                w.set_velocity_targets(payload)
            elif kind == "grasp":
                attach, name, max_distance = payload
                done, box = reply
                try:
                    box["result"] = w.attach(name, max_distance) if attach else w.detach()
                finally:
                    done.set()

    def _publish_state(self):
        w = self.world
        stamp = stamp_from_seconds(w.time)
        k = w.steps
        # joint_states before /clock: a controller whose timer runs on /clock then finds this step's state.
        if k % self._every_joints == 0:
            js = w.joint_state()
            msg = JointState()
            msg.header.stamp = stamp
            msg.name = w.joint_names
            msg.position = js.positions.tolist()
            msg.velocity = js.velocities.tolist()
            msg.effort = js.efforts.tolist()
            if self.pub_true_joints is not None:
                self.pub_true_joints.publish(msg)
                msg = self._with_encoder_noise(msg, js.positions, w.time)
            self.pub_joints.publish(msg)
        if k % self._every_clock == 0:
            self.pub_clock.publish(Clock(clock=stamp))
        if self._every_objects and k % self._every_objects == 0:
            msg = SceneObjectArray()
            msg.header.stamp = stamp
            msg.header.frame_id = self._params["base_frame"]
            for o in w.object_states():
                so = SceneObject()
                so.header = msg.header
                so.name, so.kind, so.attached = o.name, o.kind, o.attached
                pose = Pose()
                pose.position.x, pose.position.y, pose.position.z = (float(v) for v in o.position)
                (pose.orientation.x, pose.orientation.y, pose.orientation.z,
                 pose.orientation.w) = (float(v) for v in o.orientation_xyzw)
                so.pose = pose
                so.size.x, so.size.y, so.size.z = (float(v) for v in o.size)
                msg.objects.append(so)
            self.pub_objects.publish(msg)
        if self._every_camera and k % self._every_camera == 0 and self._renderer.ready:
            if not self._renderer.request(w.time, w.render_state()):
                self._image_stats["dropped"] += 1

    def _with_encoder_noise(self, true_msg, q_rad, t_s):
        """A copy of ``true_msg`` with encoder noise on the positions and the velocities (rad/s) differenced
        from the previous noisy positions (the first message keeps the true velocities)."""
        z = q_rad + self._noise_rng.normal(0.0, self._params["encoder_noise_rad"], q_rad.shape)
        msg = JointState(header=true_msg.header, name=true_msg.name, position=z.tolist(),
                         velocity=list(true_msg.velocity), effort=list(true_msg.effort))
        prev = self._noisy_prev
        if prev is not None and t_s > prev[0]:
            msg.velocity = ((z - prev[1]) / (t_s - prev[0])).tolist()
        self._noisy_prev = (t_s, z)
        return msg

    def _wait_for_controller(self):
        """Lockstep (lockstep_max_age > 0): while a controller drives the arm in effort mode and its latest
        command is older than lockstep_max_age s of simulated time, wait up to lockstep_max_wait s of wall time
        for a new one before stepping. A starved controller (a loaded machine) then slows the simulation down
        instead of leaving the arm unactuated, like Gazebo's lockstep; a controller that stopped is still
        caught by the watchdog, since the wait is bounded. The wait goes on while the watchdog holds the arm
        after effort commands stopped, up to command_timeout since the last one (module doc)."""
        max_age = self._params["lockstep_max_age"]
        w = self.world
        if max_age <= 0:
            return
        if w.mode != MODE_EFFORT and not (w.tripped_from == MODE_EFFORT
                                          and w.time - w.last_command_time <= w.command_timeout):
            return
        wait = self._params["lockstep_max_wait"]
        if w.mode == MODE_EFFORT and w.watchdog_timeout > 0 and w.time - w.last_command_time > w.watchdog_timeout:
            wait = max(wait, self._params["lockstep_hold_wait"])   # this step would hold the arm: frozen, wait longer
        deadline = time.monotonic() + wait
        while w.time - w.last_command_time > max_age and time.monotonic() < deadline and not self._stop.is_set():
            time.sleep(2e-4)
            self._drain_inbox()
        if w.time - w.last_command_time > max_age:
            self._lockstep_timeouts += 1

    def _physics_loop(self):
        w = self.world
        rtf = self._params["real_time_factor"]
        log = self.get_logger()
        wall0, sim0 = time.monotonic(), w.time
        report_wall, report_sim = wall0, sim0
        try:
            while not self._stop.is_set():
                self._drain_inbox()
                self._wait_for_controller()
                w.step()
                self._publish_state()
                now = time.monotonic()
                if rtf > 0:
                    target = wall0 + (w.time - sim0) / rtf
                    if target - now > 5e-4:
                        time.sleep(target - now)
                    elif now - target > 0.5:        # fell far behind (stall): do not race to catch up
                        wall0, sim0 = now, w.time
                if now - report_wall >= 5.0:
                    s = self._image_stats
                    lat = s["latency"][-50:]
                    ren = s["render"][-50:]
                    log.debug(f"real-time factor {(w.time - report_sim) / (now - report_wall):.3f} "
                              f"(sim {w.time:.2f} s); lockstep waits that timed out {self._lockstep_timeouts}; "
                              f"camera pairs {s['pairs']}, dropped {s['dropped']}"
                              + (f", latency {1e3 * np.mean(lat):.0f} ms, render {1e3 * np.mean(ren):.0f} ms"
                                 if lat else ""))
                    report_wall, report_sim = now, w.time
        except Exception as exc:  # noqa: BLE001
            if self._stop.is_set() or not self.context.ok():
                return       # shutting down (publishers invalid)
            import traceback
            log.fatal(f"physics loop failed, shutting down: {exc!r}\n{traceback.format_exc()}")
            self.failed = True
            self.context.try_shutdown()     # wakes rclpy.spin in main()

    def _image_loop(self):
        r = self._renderer
        log = self.get_logger()
        reported = False
        try:
            while not self._stop.is_set():
                frame = r.poll(0.1)
                if r.error and not reported:
                    log.error(f"render process failed, no images: {r.error}")
                    reported = True
                if frame is None:
                    if r.error:
                        time.sleep(0.1)
                    continue
                stamp = stamp_from_seconds(frame.stamp)
                for i, (img, frame_id) in enumerate(((frame.left, self.camera.frame_id),
                                                     (frame.right, self.camera.right_frame_id))):
                    self.pub_images[i].publish(image_msg(img, stamp, frame_id))
                    self.pub_infos[i].publish(camera_info_msg(self.camera, i == 1, stamp))
                s = self._image_stats
                s["pairs"] += 1
                s["render"] = s["render"][-99:] + [frame.render_s]
                # request -> published
                s["latency"] = s["latency"][-99:] + [time.monotonic() - frame.requested]
        except Exception as exc:  # noqa: BLE001
            if self._stop.is_set() or not self.context.ok():
                return
            log.error(f"image loop stopped: {exc!r}")
            raise

    # ------------------------------------------------------------------------------------- shutdown
    def stop(self):
        """Stop the threads, the render process and PyBullet (idempotent)."""
        self._stop.set()
        for t in self._threads:
            if t.is_alive():
                t.join(2.0)
        if self._renderer is not None:
            self._renderer.close()
        if self.world is not None:
            self.world.close()
            self.world = None


def main(args=None):
    """SIGINT/SIGTERM at any moment: threads, renderer and PyBullet stopped, exit 0, no traceback
    (manip_core.ros.node_main); configuration errors: one FATAL line, exit 1."""
    from manip_core.ros.node_main import run_node
    from manip_core.ros.transport import use_large_data_profile
    from rclpy.executors import SingleThreadedExecutor
    use_large_data_profile()  # camera images: must precede the first participant (rclpy.init)
    failed = []

    def stop(node):
        node.stop()
        failed.append(node.failed)

    code = run_node(args, "sim_bridge", SimBridge, SingleThreadedExecutor, on_exit=stop,
                    config_errors=(SceneError, ModelError, ValueError, FileNotFoundError, RuntimeError),
                    config_status=1)
    return 1 if any(failed) else code


if __name__ == "__main__":
    import sys
    sys.exit(main())
