"""manip-demo: the simulated pick-and-place, end to end on a real ROS 2 graph (what `make demo` runs).

Starts launch/pick_place_sim.launch.xml with manip-launch (every node in its own process, DDS between them,
isolated on a random ROS_DOMAIN_ID and localhost), waits for the graph, sends one pick_place goal whose
straight path is blocked by the obstacle, and exits 0 only if the object ends within --tolerance (2 cm) of
its place target. Prints a summary (phases with times, tracking RMS, closest approach to the obstacle,
placement error, real-time factor, perceived obstacles vs ground truth) and writes PNG plots and the summary
into the output folder it names.
"""
import argparse
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from .demo_report import Recording, arm_clearance, plot_tool_path, plot_tracking, tracking_rms, write_summary
from .scene import default_scene_path, load_scene


def default_scene_path_dir():
    """manip_sim's config folder (source tree or share/manip_sim/config)."""
    return str(Path(default_scene_path()).parent)

LAUNCH_FILE = "launch/pick_place_sim.launch.xml"


def log(msg):
    print(f"[demo] {msg}", flush=True)


# What --record stores: the robot's state and commands, tf, the stereo stream, perception and planning output.
RECORD_TOPICS = ["/clock", "/joint_states", "/tf", "/tf_static", "/effort_controller/commands",
                 "/joint_trajectory_controller/controller_state", "/stereo/left/image_rect",
                 "/stereo/right/image_rect", "/stereo/left/camera_info", "/stereo/right/camera_info", "/obstacles",
                 "/planned_path", "/sim/objects"]


def start_recording(bag, env, spin_until):
    """``manip-bag record`` of RECORD_TOPICS into ``bag`` (a subprocess); returns once every topic is subscribed."""
    log_path = bag.parent / "record.log"
    out = open(log_path, "w")
    proc = subprocess.Popen([sys.executable, "-m", "manip_core.bag_cli", "record", str(bag), "--topics",
                             *RECORD_TOPICS, "--wait", "30"], stdout=out, stderr=subprocess.STDOUT, env=env)
    spin_until(lambda: proc.poll() is not None or
               Path(log_path).read_text(errors="replace").count("manip-bag: recording ") >= len(RECORD_TOPICS)
               or "recording the others" in Path(log_path).read_text(errors="replace"),
               60, "manip-bag to subscribe to every topic")
    if proc.poll() is not None:
        raise RuntimeError(f"manip-bag record exited: {Path(log_path).read_text()[-1000:]}")
    log(f"recording {len(RECORD_TOPICS)} topics into {bag} (log: {log_path})")
    return proc


def stop_recording(proc):
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log(f"recording stopped (manip-bag exit code {proc.returncode})")


class Graph:
    """The launched nodes: a manip-launch process in its own process group, output to a log file."""

    def __init__(self, launch_file, log_path, env, extra_args=()):
        self.log_path = log_path
        self._log = open(log_path, "w")
        cmd = [sys.executable, "-m", "manip_core.launcher", str(launch_file), *extra_args]
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)

    def alive(self):
        return self.proc.poll() is None

    def failure(self):
        """manip-launch's ``FAILED: NODE ...; last error: LINE`` line (fail fast), or None."""
        self._log.flush()
        for line in Path(self.log_path).read_text(errors="replace").splitlines():
            if "[manip-launch] FAILED: " in line:
                return line.split("[manip-launch] ", 1)[1]
        return None

    def tail(self, n=40):
        self._log.flush()
        lines = Path(self.log_path).read_text(errors="replace").splitlines()
        return "\n".join(lines[-n:])

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._log.close()


def _ready_target(model, raw):
    """Tip position (m, base frame) of the derived ready pose: manip_core.ready_pose's point above the middle
    of the work area, raised to 0.15 reach above every scene obstacle or object whose bounding sphere is within
    0.15 reach of it horizontally (the demo's pillar stands right there: starting on top of it, the arm began
    inside the planner's margin and pressed on the pillar)."""
    from manip_core.ready_pose import default_work_point, horizontal_reach
    reach = horizontal_reach(model)
    target = default_work_point(model, reach)
    clear = 0.15 * reach
    for body in list(raw.get("obstacles") or []) + list(raw.get("objects") or []):
        try:
            p = np.asarray(body["position"], dtype=float)
            r = 0.5 * float(np.linalg.norm(np.asarray(body["size"], dtype=float)))   # bounding sphere (m)
        except (KeyError, TypeError, ValueError):
            continue   # the scene loader names a malformed body
        if p.shape == (3,) and np.hypot(*(p[:2] - target[:2])) < r + clear:
            target[2] = max(target[2], p[2] + r + clear)
    return target


READY_CLEARANCE_M = 0.05    # the derived ready pose keeps this from the scene's bodies (planner margin 0.03 + 2 cm)


def _scene_obstacles(raw):
    """manip_planning Obstacles of a scene's obstacles and objects (base frame): an unrotated box as it is,
    anything else as its bounding sphere."""
    from manip_planning.collision import Obstacle
    out = []
    for body in list(raw.get("obstacles") or []) + list(raw.get("objects") or []):
        try:
            p = np.asarray(body["position"], dtype=float)
            size = np.asarray(body["size"], dtype=float).reshape(-1)
            quat = np.asarray(body.get("orientation_xyzw", [0, 0, 0, 1]), dtype=float)
        except (KeyError, TypeError, ValueError):
            continue   # the scene loader names a malformed body
        unrotated = np.allclose(np.abs(quat), [0, 0, 0, 1])
        if body.get("shape") == "box" and size.size == 3 and unrotated:
            out.append(Obstacle(p, size))
        else:
            ext = {1: lambda d: [d[0]] * 3, 2: lambda d: [d[0], d[0], d[1]]}.get(size.size, lambda d: d)(size)
            out.append(Obstacle(p, radius=0.5 * float(np.linalg.norm(ext))))
    return out


def _clear_ready(model, urdf, raw, target):
    """(q, description) of the derived ready pose: manip_core.ready_pose's (best manipulability, tool down at
    ``target``) when it keeps READY_CLEARANCE_M from the scene's bodies on the planner's own collision spheres;
    else, of the tool-down IK solutions there, the best manipulability among those that keep it, else the
    clearest (a UR10's best-manipulability solution put its elbow inside the demo's pillar)."""
    from manip_core.ready_pose import ready_configuration, tool_down_solutions
    from manip_planning.collision import Scene
    from manip_planning.planning import Planner, PlannerSettings, collision_model_for
    ready = ready_configuration(model, target)
    obstacles = _scene_obstacles(raw)
    if not obstacles:
        return ready.q, ready.description
    planner = Planner(model, PlannerSettings(), collision_model_for(model, urdf))
    scene = Scene(obstacles)

    def clearance(q):
        return float(np.min(planner.arm.clearances(q, scene)[0]))

    c = clearance(ready.q)
    if c >= READY_CLEARANCE_M:
        return ready.q, f"{ready.description}; clearance to the scene's bodies {c:.3f} m"
    part = "full" if model.dof >= 6 else "position"
    rated = [(q, clearance(q), float(model.manipulability(q, part)))
             for q in tool_down_solutions(model, target, yaws=8, seeds=4)]
    ok = [r for r in rated if r[1] >= READY_CLEARANCE_M]
    if ok:
        q, c2, w = max(ok, key=lambda r: r[2])
        return q, (f"{ready.description} came {c:.3f} m from the scene's bodies: instead the best manipulability "
                   f"{w:.4g} of the {len(ok)} of {len(rated)} tool-down solutions that keep {READY_CLEARANCE_M} m "
                   f"(clearance {c2:.3f} m)")
    if rated and max(r[1] for r in rated) > c:
        q, c2, w = max(rated, key=lambda r: r[1])
        return q, (f"{ready.description} came {c:.3f} m from the scene's bodies; no tool-down solution keeps "
                   f"{READY_CLEARANCE_M} m: the clearest of {len(rated)} ({c2:.3f} m)")
    return ready.q, f"{ready.description}; clearance to the scene's bodies only {c:.3f} m"


def prepare_scene(args, out_dir):
    """The run's scene and camera files, written into ``out_dir`` (scene.yaml, stereo_camera.yaml).

    The robot: ``--robot`` (with ``--base-link``/``--tip-link``), else the scene's; it reaches every node through
    the launch file's robot, base_link and tip_link arguments. With ``--robot`` and no ``--scene``, or a scene
    without objects or tasks, the demo's objects are placed for the arm (manip_sim.layout: the UR5 reference
    layout scaled to its reach, checked by IK) and the camera moves with them. A robot without
    initial_positions starts at manip_core.ready_pose's ready configuration. Each choice is logged."""
    import yaml
    from manip_core import RobotModel
    from .layout import demo_layout
    from .scene import resolve_urdf
    scene_file = Path(args.scene)
    try:
        raw = yaml.safe_load(scene_file.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"{scene_file}: cannot read the scene: {exc}") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{scene_file}: a scene is a mapping (see manip_sim/manip_sim/scene.py)")
    robot = dict(raw.get("robot") or {})
    if args.robot:
        robot = {"urdf": args.robot}
        if not args.scene_given:   # the demo's default objects, placed for this arm
            raw = {"name": raw.get("name", "pick_place")}
    for key, value in (("base_link", args.base_link), ("tip_link", args.tip_link)):
        if value:
            robot[key] = value
    if not robot.get("urdf"):
        raise ValueError(f"{scene_file}: robot.urdf: missing (or pass --robot NAME_OR_URDF)")
    # A path given on the command line is relative to the working directory; one in the scene, to the scene.
    base_dir = Path.cwd() if args.robot else scene_file.resolve().parent
    try:
        robot["urdf"] = resolve_urdf(robot["urdf"], base_dir)
    except FileNotFoundError as exc:
        raise ValueError(f"robot {robot['urdf']!r}: {exc}") from None
    model = RobotModel.from_urdf(robot["urdf"], robot.get("base_link"), robot.get("tip_link"))
    robot["base_link"], robot["tip_link"] = model.base_link, model.tip_link
    if getattr(args, "tcp_offset", None) is not None:    # a tool frame the description lacks: a derived URDF with it as the tip
        from manip_core.tool_frame import with_tool_frame
        derived = out_dir / f"{Path(robot['urdf']).stem}_{args.tcp_link}.urdf"
        derived.write_text(with_tool_frame(robot["urdf"], model.tip_link, args.tcp_offset, name=args.tcp_link))
        log(f"tool frame '{args.tcp_link}' at {list(args.tcp_offset)} m in {model.tip_link}'s frame: the robot is "
            f"{derived}, tip link {args.tcp_link}")
        robot["urdf"], robot["tip_link"] = str(derived), args.tcp_link
        model = RobotModel.from_urdf(robot["urdf"], robot["base_link"], robot["tip_link"])
    log(f"robot {model.name} from {robot['urdf']}: {model.base_link} -> {model.tip_link}, {model.dof} joints "
        f"({', '.join(model.joint_names)})")
    camera = yaml.safe_load(Path(args.camera).read_text())
    params = camera["/**"]["ros__parameters"]
    if not raw.get("objects") or not raw.get("tasks"):
        layout = demo_layout(model)
        raw.update(layout.scene)
        s = layout.scale
        params["camera_position"] = [float(v) for v in layout.camera_position_m]
        for key in ("min_depth", "max_depth"):
            if key in params:
                params[key] = float(params[key]) * max(s, 1.0) if key == "max_depth" else float(params[key]) * min(s, 1.0)
        for key in ("workspace_min", "workspace_max"):
            if key in params:
                params[key] = [float(v) * max(s, 1.0) for v in params[key]]
        log(f"objects placed for {model.name}: {layout.description}")
    if robot.get("initial_positions") is None:
        q, how = _clear_ready(model, robot["urdf"], raw, _ready_target(model, raw))
        robot["initial_positions"] = {n: float(v) for n, v in zip(model.joint_names, q)}
        log(f"initial joint positions (none given): {how}")
    raw["robot"] = robot
    scene_path, camera_path = out_dir / "scene.yaml", out_dir / "stereo_camera.yaml"
    scene_path.write_text("# written by manip-demo for this run (manip_sim/manip_sim/demo.py prepare_scene)\n"
                          + yaml.safe_dump(raw, sort_keys=False))
    camera_path.write_text("# written by manip-demo for this run from " + str(args.camera) + "\n"
                           + yaml.safe_dump(camera, sort_keys=False))
    return scene_path, camera_path


def run(args):
    import rclpy
    from geometry_msgs.msg import PoseStamped
    from manip_msgs.action import PickPlace
    from manip_msgs.msg import ControllerState, ObstacleArray, SceneObject, SceneObjectArray
    from rclpy.action import ActionClient
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import JointState

    from manip_core import RobotModel

    out_dir = Path(args.output or f"demo_output/{time.strftime('%Y%m%d-%H%M%S')}").resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    scene_path, camera_path = prepare_scene(args, out_dir)
    scene = load_scene(scene_path)
    task = scene.tasks[0]
    env = dict(os.environ)
    env.setdefault("ROS_DOMAIN_ID", str(random.randint(100, 200)))
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    os.environ.update({k: env[k] for k in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE")})
    log(f"output folder: {out_dir}")
    log(f"launching {args.launch} (ROS_DOMAIN_ID={env['ROS_DOMAIN_ID']}, log: {out_dir / 'launch.log'})")
    wall0 = time.monotonic()
    graph = Graph(args.launch, out_dir / "launch.log", env,
                  [f"scene:={scene_path}", f"camera:={camera_path}", f"robot:={scene.robot.urdf}",
                   f"base_link:={scene.robot.base_link}", f"tip_link:={scene.robot.tip_link}"] +
                  (["gui:=true"] if args.gui else []) +
                  [f"control_law:={args.control_law}", f"state_estimator:={args.state_estimator}"] +
                  (["view:=true", f"view_port:={args.view_port}"] if args.view else []))
    if args.view:  # manip_view's viewer node serves the page while the graph runs
        log(f"viewer: http://127.0.0.1:{args.view_port} (the arm, plans, obstacles, cloud and camera, live)")
    rclpy.init()
    node = rclpy.create_node("pick_place_demo", parameter_overrides=[Parameter("use_sim_time", value=True)])
    rec = Recording()
    recorder = None
    truth, perceived = {}, []
    clock = {"first": None, "first_wall": None, "last": None}

    def now_s():
        return node.get_clock().now().nanoseconds * 1e-9

    def on_state(m):
        if not rec.joint_names:
            rec.joint_names = list(m.joint_names)
            rec.control_law = m.control_law
        rec.t_state.append(m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec)
        rec.desired.append(list(m.desired_positions))
        rec.actual.append(list(m.actual_positions))
        rec.tracking.append(m.mode == ControllerState.MODE_TRACKING)

    def on_joints(m):
        t = m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec
        if clock["first"] is None:
            clock["first"], clock["first_wall"] = t, time.monotonic()
        clock["last"] = t
        if not rec.t_joints or t - rec.t_joints[-1] >= 0.02:
            rec.t_joints.append(t)
            rec.joints.append(dict(zip(m.name, m.position)))

    def on_truth(m):
        for o in m.objects:
            p = o.pose.position
            truth[o.name] = (o.kind, np.array([p.x, p.y, p.z]), np.array([o.size.x, o.size.y, o.size.z]))

    def on_obstacles(m):
        perceived[:] = [(np.array([o.center.x, o.center.y, o.center.z]), np.array([o.size.x, o.size.y, o.size.z]))
                        for o in m.obstacles]

    node.create_subscription(ControllerState, "joint_trajectory_controller/controller_state", on_state, 10)
    node.create_subscription(JointState, "joint_states", on_joints, 10)
    node.create_subscription(SceneObjectArray, "sim/objects", on_truth, 10)
    node.create_subscription(ObstacleArray, "obstacles", on_obstacles, 10)
    client = ActionClient(node, PickPlace, "pick_place")

    next_check = [0.0]   # when to look for manip-launch's FAILED line again (fail fast)

    def spin_until(cond, timeout, what, progress=None):
        """Spin until cond(); timeout: wall s from now, or with ``progress`` (a list holding the monotonic time of
        the latest progress) from the latest progress, so a long task that keeps going is not cut off."""
        start = time.monotonic()

        def deadline():
            return max(start, progress[0] if progress else start) + timeout
        while time.monotonic() < deadline():
            rclpy.spin_once(node, timeout_sec=0.05)
            if cond():
                return True
            alive = graph.alive()
            failed = graph.failure() if not alive or time.monotonic() >= next_check[0] else None
            if failed:   # manip-launch fails fast: a node exited or logged FATAL
                raise RuntimeError(f"the graph failed {time.monotonic() - wall0:.1f} s after the launch started (seen "
                                   f"at wall clock {time.time():.3f} s), while waiting for {what}: {failed}")
            next_check[0] = max(next_check[0], time.monotonic() + 0.5)
            if not alive:
                raise RuntimeError(f"the launch exited while waiting for {what}:\n{graph.tail()}")
        raise TimeoutError(f"timed out after {timeout:.0f} s {'without progress ' if progress else ''}waiting for "
                           f"{what}; launch log tail:\n{graph.tail()}")

    try:
        spin_until(lambda: task.object in truth, args.timeout, "the simulator (sim/objects)")
        log(f"simulator up after {time.monotonic() - wall0:.1f} s")
        spin_until(lambda: client.server_is_ready(), args.timeout, "the pick_place action server")
        log("pick_place action server ready")
        # the controller publishes its state once it has the robot model and joint_states (it rejects goals before)
        spin_until(lambda: len(rec.t_state) > 0, args.timeout, "the controller (controller_state)")
        log("controller has the robot model and joint_states")
        # the planner compiles its numba kernels on its first plan: tens of seconds on a loaded machine, more than
        # pick_place's plan_timeout; a small first plan (wait: --timeout) keeps that out of the task
        from manip_msgs.srv import PlanTrajectory
        planner = node.create_client(PlanTrajectory, "plan_trajectory")
        spin_until(planner.service_is_ready, args.timeout, "the planner (plan_trajectory)")
        spin_until(lambda: bool(rec.joints) and all(n in rec.joints[-1] for n in rec.joint_names), args.timeout,
                   "joint_states of every joint")
        arm = RobotModel.load(scene.robot.urdf, base_link=scene.robot.base_link, tip_link=scene.robot.tip_link)
        q_now = np.array([float(rec.joints[-1][n]) for n in arm.joint_names])
        lo, hi = np.asarray(arm.joint_lower, dtype=float), np.asarray(arm.joint_upper, dtype=float)
        finite = np.isfinite(lo) & np.isfinite(hi)      # continuous joints: no middle (inf - inf warned)
        mid = np.where(finite, 0.5 * (np.where(finite, lo, 0.0) + np.where(finite, hi, 0.0)), 0.0)
        q_goal = q_now + 0.02 * np.sign(mid - q_now)     # a small move towards the middle of the limits
        first = PlanTrajectory.Request(start_positions=q_now.tolist(), goal_type=PlanTrajectory.Request.GOAL_JOINTS,
                                       goal_positions=q_goal.tolist(), profile=PlanTrajectory.Request.PROFILE_QUINTIC,
                                       avoid_obstacles=True)
        t_plan = time.monotonic()
        answer = planner.call_async(first)
        spin_until(answer.done, args.timeout, "the planner's first plan (its kernels compile on first use)")
        log(f"planner answered a first plan in {time.monotonic() - t_plan:.1f} s "
            f"({'ok' if answer.result().success else answer.result().message})")
        spin_until(lambda: len(perceived) > 0, args.timeout, "perceived obstacles (obstacles topic)")
        log(f"perception sees {len(perceived)} obstacle(s)")
        if args.record:
            recorder = start_recording(out_dir / "bag", env, spin_until)
        kind, pick_xyz, _ = truth[task.object]
        place_xyz = np.asarray(task.place_position, dtype=float)
        goal = PickPlace.Goal()
        goal.pick_pose = PoseStamped()
        goal.pick_pose.header.frame_id = scene.robot.base_link
        goal.pick_pose.pose.position.x, goal.pick_pose.pose.position.y, goal.pick_pose.pose.position.z = pick_xyz
        goal.pick_pose.pose.orientation.w = 1.0
        goal.place_pose = PoseStamped()
        goal.place_pose.header.frame_id = scene.robot.base_link
        (goal.place_pose.pose.position.x, goal.place_pose.pose.position.y,
         goal.place_pose.pose.position.z) = place_xyz
        goal.place_pose.pose.orientation.w = 1.0
        goal.object_name = task.object
        goal.avoid_obstacles = True
        last_phase = {"name": None}
        progressed = [time.monotonic()]     # wall time of pick_place's latest feedback (one per step of the task)

        def on_feedback(fb):
            progressed[0] = time.monotonic()
            f = fb.feedback
            if f.phase != last_phase["name"]:
                last_phase["name"] = f.phase
                log(f"phase {f.phase:<12} progress {100 * f.progress:5.1f} %  sim t = {now_s():7.2f} s  {f.message}")

        log(f"goal: pick '{task.object}' at {np.round(pick_xyz, 3).tolist()} -> place at "
            f"{np.round(place_xyz, 3).tolist()}, avoiding obstacles")
        run_wall0, run_sim0 = time.monotonic(), now_s()
        send = client.send_goal_async(goal, feedback_callback=on_feedback)
        spin_until(send.done, 30, "the goal to be accepted")
        handle = send.result()
        if not handle.accepted:
            raise RuntimeError("pick_place rejected the goal")
        result_future = handle.get_result_async()
        spin_until(result_future.done, args.timeout, "the pick_place result", progress=progressed)
        result = result_future.result().result
        run_wall, run_sim = time.monotonic() - run_wall0, now_s() - run_sim0
        settle = now_s() + 1.0
        spin_until(lambda: now_s() >= settle, 30, "the object to settle")
        final_xyz = truth[task.object][1]
    finally:
        if recorder is not None:
            stop_recording(recorder)
        node.destroy_node()
        rclpy.shutdown()
        graph.stop()
        log(f"graph stopped (launch exit code {graph.proc.returncode})")

    # ------------------------------------------------------------------------------------------ report
    robot = RobotModel.load(scene.robot.urdf, base_link=scene.robot.base_link, tip_link=scene.robot.tip_link)
    chain_links = [j.child for j in robot.tree.path(robot.base_link, robot.tip_link)]
    Q = np.array([[js.get(n, 0.0) for n in robot.joint_names] for js in rec.joints])
    links = np.array([[robot.fk(q, link)[:3, 3] for link in chain_links] for q in Q])
    tool = links[:, -1, :]
    boxes = [(c, s) for name, (k, c, s) in truth.items() if k == SceneObject.KIND_OBSTACLE]
    clearance, k_min = arm_clearance(links, boxes) if boxes else (float("inf"), -1)
    rms, max_err = tracking_rms(rec)
    err3 = float(np.linalg.norm(final_xyz - place_xyz))
    sim_span = (clock["last"] or 0.0) - (clock["first"] or 0.0)
    rtf = run_sim / run_wall if run_wall > 0 else float("nan")
    ok = result.error_code == 0 and err3 <= args.tolerance
    lines = [f"pick-and-place demo: {'SUCCESS' if ok else 'FAILURE'}",
             f"  result: error_code {result.error_code} {result.message!r}"]
    lines += [f"  phase {n:<14} {d:6.2f} s (sim)" for n, d in zip(result.phase_names, result.phase_durations)]
    lines += [f"  task time: {run_sim:.2f} s sim, {run_wall:.2f} s wall; real-time factor {rtf:.2f}",
              f"  joint tracking error while tracking ({args.control_law}, estimator {args.state_estimator}): "
             f"RMS {rms:.4f} rad, max {max_err:.4f} rad",
              f"  closest approach of the arm's link axes to the obstacle: {clearance:.3f} m"
              + (f" (at sim t = {rec.t_joints[k_min] - rec.t_joints[0]:.2f} s)" if k_min >= 0 else ""),
              f"  object final position {np.round(final_xyz, 4).tolist()} m, target {place_xyz.tolist()} m",
              f"  placement error {100 * err3:.2f} cm (tolerance {100 * args.tolerance:.1f} cm)"]
    for c, s in perceived:
        d = min((float(np.linalg.norm(c - bc)) for bc, _ in boxes), default=float("nan"))
        lines.append(f"  perceived obstacle at {np.round(c, 3).tolist()} m, size {np.round(s, 3).tolist()} m: "
                     f"{100 * d:.1f} cm from the true centre")
    lines.append(f"  recorded {len(rec.t_state)} controller states, {len(Q)} joint samples over {sim_span:.1f} s sim")
    if rec.desired:
        plot_tracking(rec, out_dir / "joint_tracking.png")
    if len(tool):
        plot_tool_path(tool, boxes, pick_xyz, place_xyz, final_xyz, out_dir / "tool_path.png")
    lines.append(f"  plots: {out_dir / 'joint_tracking.png'}, {out_dir / 'tool_path.png'}")
    if recorder is not None:
        lines.append(f"  bag: {out_dir / 'bag'} (rosbag2, mcap; `manip-bag info` / `manip-bag play` it), "
                     f"log {out_dir / 'record.log'}")
    write_summary(lines, out_dir / "summary.txt")
    print("\n".join(lines), flush=True)
    return 0 if ok else 1


def main(argv=None):
    p = argparse.ArgumentParser(prog="manip-demo", description=__doc__.splitlines()[0])
    p.add_argument("--launch", default=LAUNCH_FILE, help="launch file (default: %(default)s)")
    p.add_argument("--scene", default=None, help="scene YAML (default: manip_sim's pick_place_scene.yaml); it may "
                                                  "name only robot.urdf, base_link and tip_link: the objects are "
                                                  "then placed for the arm's reach")
    p.add_argument("--robot", default=None,
                   help="the robot: a URDF path, a package:// URI or a manip_core bundled name (default: the "
                        "scene's); without --scene the demo's objects are placed for its reach")
    p.add_argument("--base-link", default=None, help="base link of the arm (default: the scene's, else the root)")
    p.add_argument("--tip-link", default=None,
                   help="tip (tool) link of the arm, its z axis the approach axis (default: the scene's, else the "
                        "end of the longest chain)")
    p.add_argument("--tcp-offset", type=float, nargs=3, default=None, metavar=("X", "Y", "Z"),
                   help="tool-centre point (m) in the tip link's frame, for a description without a frame where the "
                        "tool acts (e.g. between a gripper's fingers): the run's robot is the URDF with a fixed link "
                        "--tcp-link there (manip_core.tool_frame, written into the output folder), the tip of every "
                        "node")
    p.add_argument("--tcp-link", default="tcp", help="name of that link (default: %(default)s)")
    p.add_argument("--camera", default=None, help="stereo camera parameters file (default: manip_sim's "
                                                   "stereo_camera.yaml)")
    p.add_argument("--output", default=None, help="folder for plots and summary (default: demo_output/<time>)")
    p.add_argument("--tolerance", type=float, default=0.02, help="placement tolerance, m (default: 0.02)")
    p.add_argument("--timeout", type=float, default=240.0,
                   help="seconds to wait for each stage; for the task itself, seconds without progress (pick_place "
                        "sends feedback at each step: a motion, a grasp), so a slow arm on a loaded machine is not "
                        "cut off while it moves (default: %(default)s)")
    p.add_argument("--gui", action="store_true", help="open the PyBullet GUI (needs a display)")
    p.add_argument("--record", action="store_true",
                   help="record the run with manip-bag into OUTPUT/bag (topics: RECORD_TOPICS)")
    p.add_argument("--view", action="store_true", help="serve the browser viewer (manip_view) while the task runs")
    p.add_argument("--view-port", type=int, default=8080, help="TCP port of the viewer's page (default: 8080)")
    p.add_argument("--control-law", default="computed_torque",
                   choices=("pd", "pid", "computed_torque", "robust", "adaptive", "osc"),
                   help="control law of the controller (default: %(default)s)")
    p.add_argument("--state-estimator", default="none", choices=("none", "kalman"),
                   help="joint-state estimator of the controller (default: %(default)s)")
    args = p.parse_args(argv)
    args.scene_given = args.scene is not None
    if args.scene is None:
        from .scene import default_scene_path
        args.scene = str(default_scene_path())
    if args.camera is None:
        args.camera = str(Path(default_scene_path_dir()) / "stereo_camera.yaml")
    if not Path(args.launch).is_file():
        print(f"manip-demo: error: launch file {args.launch} not found (run from the repository root or pass "
              f"--launch)", file=sys.stderr)
        return 2
    try:
        return run(args)
    except (RuntimeError, TimeoutError, ValueError) as e:
        print(f"manip-demo: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("manip-demo: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
