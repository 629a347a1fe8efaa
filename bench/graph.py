#!/usr/bin/env python3
"""Benchmark of the manip ROS 2 graph, process to process over real DDS.

    .venv/bin/python bench/graph.py               # full run (~2.5 min with the demo, ~1.5 min with --skip-demo)
    .venv/bin/python bench/graph.py --quick       # smoke run (under 1 min, no demo)

Measures, each on its own small set of node processes (isolated on a random ROS_DOMAIN_ID in 100-200, with
ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST):

1. model_server: ``compute_ik`` service round trip on reachable UR5 targets (tip tool0) next to the in-process
   ``RobotModel.ik`` of the same targets, and ``compute_fk`` next to ``RobotModel.fk`` (the cost of a service
   call with almost no work in it);
2. controller (launch/real_robot.launch.xml through manip-launch): age of the joint_states message each
   command was computed from, joint_states -> effort command latency and the control period's jitter at
   rate_hz 250, (a) on the wall clock with the bench playing the robot, (b) in the simulated loop with
   sim_bridge and use_sim_time;
3. sim_bridge alone with real_time_factor:=0: physics real-time factor from /clock;
4. the demo (python -m manip_sim.demo) on its own checked domain: its real-time factor and summary, plus the
   largest joint position error at any controller tick, watched from a second rclpy context on that domain
   (``--skip-demo`` leaves it out).

Prints a markdown table and writes it, with a JSON of the raw statistics, to bench/results/ (see
bench/README.md, "bench/graph.py"). Every process it starts carries a tag in its environment and is
stopped (SIGINT to its process group, then SIGTERM, then SIGKILL), also on Ctrl-C/SIGTERM; a last sweep kills
whatever still carries the tag. It is a benchmark, not a test: nothing is asserted.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import math
import os
import platform
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from importlib import metadata
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from results_io import cpu_model, save_results  # noqa: E402
ROOT = HERE.parent
try:  # until manip_core is installed (editable), use the source tree
    import manip_core  # noqa: F401
except ImportError:
    sys.path.insert(0, str(ROOT / "manip_core"))
    import manip_core  # noqa: F401
from manip_core.model import RobotModel  # noqa: E402
from manip_core.robots import robot_path  # noqa: E402

TAG_VAR = "MANIP_BENCH_GRAPH_TAG"
TAG = uuid.uuid4().hex[:12]
UR5_URDF = str(robot_path("ur5"))
CAMERA_YAML = str(ROOT / "manip_sim" / "config" / "stereo_camera.yaml")
REAL_ROBOT_LAUNCH = ROOT / "launch" / "real_robot.launch.xml"
DEMO_HOME = [math.pi, -math.pi / 2, math.pi / 2, -math.pi / 2, -math.pi / 2, 0.0]
COUNTER_JOINT = 5          # wrist_3_joint carries the joint_states counter: position = k * COUNTER_STEP
COUNTER_STEP = 1e-9        # rad per message (7.5 µrad after 30 s at 250 Hz: nothing moves)
RATE_HZ = 250.0            # the controller's rate_hz (real_robot.launch.xml default)


class Interrupted(Exception):
    """Ctrl-C or SIGTERM."""


def log(msg):
    print(f"[graph {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def load1():
    return round(os.getloadavg()[0], 2)


def stats(values, scale=1.0):
    """n, mean, std, min, p50, p90, p99, max of values * scale (NaN-free)."""
    a = np.asarray(values, dtype=float) * scale
    a = a[np.isfinite(a)]
    if a.size == 0:
        return {"n": 0}
    return {"n": int(a.size), "mean": float(a.mean()), "std": float(a.std()), "min": float(a.min()),
            "p50": float(np.percentile(a, 50)), "p90": float(np.percentile(a, 90)),
            "p99": float(np.percentile(a, 99)), "max": float(a.max())}


# ========================================================================================= processes
def _tagged_pids():
    """Pids of the processes (any depth of descendants) whose environment carries this run's tag."""
    needle = f"{TAG_VAR}={TAG}".encode()
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            env = (d / "environ").read_bytes()
        except OSError:
            continue
        if needle in env.split(b"\0"):
            out.append(int(d.name))
    return out


def _cpu_ticks(pid):
    """(short name, utime + stime in clock ticks) of a process, or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    ticks = int(fields[11]) + int(fields[12])
    args = [c.decode(errors="replace") for c in cmd if c]
    name = "?"
    for i, a in enumerate(args):   # python -m MODULE / console script / the renderer child
        if a == "-m" and i + 1 < len(args):
            name = args[i + 1].rsplit(".", 1)[-1]
            break
    else:
        if args:
            name = Path(args[1] if len(args) > 1 and "python" in Path(args[0]).name else args[0]).name
    return name, ticks


class CpuMeter:
    """CPU use (% of one core) of every tagged process between start() and stop()."""

    def __init__(self):
        self.t0 = None
        self.first = {}

    def start(self):
        self.t0 = time.monotonic()
        self.own0 = sum(os.times()[:2])
        self.first = {p: c for p in _tagged_pids() if (c := _cpu_ticks(p)) is not None}

    def stop(self):
        wall = time.monotonic() - self.t0
        hz = os.sysconf("SC_CLK_TCK")
        out = {}
        for p in _tagged_pids():
            c = _cpu_ticks(p)
            if c is None:
                continue
            name, ticks = c
            base = self.first.get(p, (name, ticks))[1] if p in self.first else 0
            key = name if name not in out else f"{name}[{p}]"
            out[key] = round(100.0 * (ticks - base) / hz / wall, 1)
        out["bench (this process)"] = round(100.0 * (sum(os.times()[:2]) - self.own0) / wall, 1)
        return {"wall_s": round(wall, 2), "processes_pct": out, "loadavg_1min": load1()}


class Procs:
    """Subprocesses, each in its own session (process group); output to a log file."""

    def __init__(self, log_dir, env):
        self.log_dir = Path(log_dir)
        self.env = env
        self.running = []

    def start(self, name, cmd):
        path = self.log_dir / f"{name}.log"
        fh = open(path, "w")
        p = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=self.env, cwd=str(ROOT),
                             start_new_session=True)
        p.bench_name, p.bench_log, p.bench_fh = name, path, fh
        self.running.append(p)
        log(f"started {name} (pid {p.pid}, log {path})")
        return p

    def stop(self, p, sigint_wait=15.0, sigterm_wait=5.0):
        """SIGINT to the process group, then SIGTERM, then SIGKILL; returns the exit status."""
        for sig, wait in ((signal.SIGINT, sigint_wait), (signal.SIGTERM, sigterm_wait), (signal.SIGKILL, 5.0)):
            if p.poll() is not None:
                break
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                break
            try:
                p.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                log(f"{p.bench_name} still running after {signal.Signals(sig).name} + {wait:g} s")
        p.bench_fh.close()
        if p in self.running:
            self.running.remove(p)
        return p.returncode

    def stop_all(self):
        for p in list(reversed(self.running)):
            self.stop(p, sigint_wait=10.0)
        sweep()


def sweep():
    """Kill whatever still carries this run's tag (node processes of a launcher that died, renderers)."""
    left = _tagged_pids()
    if not left:
        return
    log(f"cleaning up {len(left)} leftover process(es): {left}")
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in left:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline and (left := _tagged_pids()):
            time.sleep(0.1)
        if not left:
            return


def tail(path, n=30):
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


# ============================================================================================== ROS
def init_ros():
    """rclpy.init on a random ROS_DOMAIN_ID in 100-200 that nobody else on this host uses (checked by
    looking for other nodes for 1.5 s); returns it. rclpy's signal handlers are off (ours raise)."""
    import rclpy
    from rclpy.signals import SignalHandlerOptions
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    tried = set()
    for _ in range(8):
        dom = random.choice([d for d in range(100, 201) if d not in tried])
        tried.add(dom)
        os.environ["ROS_DOMAIN_ID"] = str(dom)
        rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
        probe = rclpy.create_node("bench_graph_probe")
        end = time.monotonic() + 1.5
        others = []
        while time.monotonic() < end:
            rclpy.spin_once(probe, timeout_sec=0.1)
            others = [n for n, _ in probe.get_node_names_and_namespaces() if n != "bench_graph_probe"]
            if others:
                break
        probe.destroy_node()
        if not others:
            return dom
        log(f"ROS_DOMAIN_ID {dom} is in use ({', '.join(others[:3])}): trying another")
        rclpy.shutdown()
    raise RuntimeError("no free ROS_DOMAIN_ID in 100-200")


def spin_until(executor, cond, timeout, what, procs=()):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.05)
        if cond():
            return
        for p in procs:
            if p.poll() is not None:
                raise RuntimeError(f"{p.bench_name} exited ({p.returncode}) while waiting for {what}:\n"
                                   f"{tail(p.bench_log)}")
    raise RuntimeError(f"timed out after {timeout:g} s waiting for {what}")


def spin_for(executor, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        executor.spin_once(timeout_sec=min(0.05, max(0.0, end - time.monotonic())))


# ====================================================================================== 1. IK service
def bench_ik(procs, n_calls):
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from manip_msgs.srv import ComputeFK, ComputeIK
    from manip_core.ros.conversions import matrix_to_pose
    from manip_core.spatial import pose_error

    robot = RobotModel.load("ur5", base_link="base_link", tip_link="tool0")
    rng = np.random.default_rng(0)
    Q = rng.uniform(robot.joint_lower, robot.joint_upper, size=(n_calls, robot.dof))
    targets = [robot.fk(q) for q in Q]
    load_start = load1()
    server = procs.start("model_server", [sys.executable, "-m", "manip_core.model_server_node", "--ros-args",
                                          "-p", f"urdf_path:={UR5_URDF}", "-p", "base_link:=base_link",
                                          "-p", "tip_link:=tool0"])
    node = rclpy.create_node("bench_ik_client")
    ex = SingleThreadedExecutor()
    ex.add_node(node)
    cli_ik = node.create_client(ComputeIK, "compute_ik")
    cli_fk = node.create_client(ComputeFK, "compute_fk")
    t_wait = time.monotonic()
    spin_until(ex, lambda: cli_ik.service_is_ready() and cli_fk.service_is_ready(), 90,
               "model_server's services", [server])
    log(f"model_server services up after {time.monotonic() - t_wait:.1f} s")

    def call(cli, req):
        t0 = time.perf_counter()
        fut = cli.call_async(req)
        ex.spin_until_future_complete(fut, timeout_sec=10.0)
        dt = time.perf_counter() - t0
        if not fut.done():
            raise RuntimeError(f"no answer from {cli.srv_name} within 10 s")
        return dt, fut.result()

    ik_reqs = []
    for T in targets:
        r = ComputeIK.Request()
        r.target.header.frame_id = "base_link"
        r.target.pose = matrix_to_pose(T)
        ik_reqs.append(r)
    fk_reqs = [ComputeFK.Request(positions=[float(x) for x in q]) for q in Q]
    for i in range(min(20, n_calls)):          # warm-up: numba kernels of the server, DDS matching
        call(cli_ik, ik_reqs[i])
        call(cli_fk, fk_reqs[i])
    cpu = CpuMeter()
    cpu.start()
    ros_ik, ros_ok, ros_err = [], 0, []
    for T, r in zip(targets, ik_reqs):
        dt, resp = call(cli_ik, r)
        ros_ik.append(dt)
        if resp.success:
            q = np.array(resp.solutions[0].position)
            dp, dr = pose_error(robot.fk(q), T)
            ros_err.append(max(dp, dr))
            ros_ok += dp <= 1e-6 and dr <= 1e-6 and np.all(q >= robot.joint_lower - 1e-9) and \
                np.all(q <= robot.joint_upper + 1e-9)
    ros_fk = [call(cli_fk, r)[0] for r in fk_reqs]
    cpu_ros = cpu.stop()
    node.destroy_node()
    ex.shutdown()
    procs.stop(server)

    # in process, the same targets and defaults as model_server's call (seed mid-limits, tol 1e-6)
    for T in targets[:20]:
        robot.ik(T, position_only=False)
    loc_ik, loc_ok = [], 0
    for T in targets:
        t0 = time.perf_counter()
        r = robot.ik(T, tol_position_m=1e-6, tol_rotation_rad=1e-6, position_only=False)
        loc_ik.append(time.perf_counter() - t0)
        loc_ok += bool(r.success)
    loc_fk = []
    for q in Q:
        t0 = time.perf_counter()
        robot.fk(q)
        loc_fk.append(time.perf_counter() - t0)
    s_ros, s_loc = stats(ros_ik, 1e3), stats(loc_ik, 1e3)
    return {
        "targets": n_calls, "robot": "ur5 (bundled), base_link -> tool0", "loadavg_start": load_start,
        "loadavg_end": load1(), "cpu_during_ros_calls": cpu_ros,
        "ros_ik_ms": s_ros, "ros_ik_success_pct": 100.0 * ros_ok / n_calls,
        "ros_ik_max_error": max(ros_err) if ros_err else None,
        "inprocess_ik_ms": s_loc, "inprocess_ik_success_pct": 100.0 * loc_ok / n_calls,
        "ros_fk_ms": stats(ros_fk, 1e3), "inprocess_fk_ms": stats(loc_fk, 1e3),
        "ik_overhead_p50_ms": s_ros["p50"] - s_loc["p50"],
    }


# ================================================================================= 2. the controller
def delivery_quantiles(pairs, qs=(0.5, 0.9, 0.99), bin_ms=0.1):
    """Effective delivery latency of joint_states into the control law, from (delta_ms, used) pairs: delta =
    tick time - publish time of a message published before the tick, used = that message (or a newer one)
    was the state of the tick. P(used | delta) is the latency's CDF at delta; its q-quantile is the first
    bin where the (running-max) fraction reaches q. Also the largest delta at which a message had still not
    reached the control law (a lower bound of the worst latency)."""
    if not pairs:
        return {}
    d = np.array([p[0] for p in pairs])
    u = np.array([p[1] for p in pairs], dtype=bool)
    edges = np.arange(0.0, d.max() + bin_ms, bin_ms)
    idx = np.digitize(d, edges) - 1
    frac = np.array([u[idx == i].mean() if np.any(idx == i) else np.nan for i in range(len(edges))])
    frac = np.fmax.accumulate(np.nan_to_num(frac, nan=0.0))
    out = {f"p{int(q * 100)}": float(edges[np.argmax(frac >= q)] + bin_ms) if np.any(frac >= q) else None
           for q in qs}
    out["worst_not_yet_used_ms"] = float(d[~u].max()) if np.any(~u) else 0.0
    out["pairs"] = int(len(d))
    return out


def analyse_ticks(ticks, inputs, efforts, period_ms, input_wall=None):
    """ticks: (receipt wall ns, stamp ns, input id, mode, efforts bytes) per controller_state; inputs: {id:
    time ns on the clock of the stamps} (ids increase with time); efforts: (receipt wall ns, bytes) per
    effort command; input_wall: {id: wall ns} for the end-to-end latency when the stamps are not wall time."""
    in_ids = np.array(sorted(inputs))
    in_t = np.array([inputs[k] for k in in_ids], dtype=np.int64)
    st = [t for t in ticks if t[2] in inputs]
    unmatched = len(ticks) - len(st)
    if not st:
        return {"ticks": len(ticks), "ticks_unmatched": unmatched}
    stamp = np.array([t[1] for t in st], dtype=np.int64)
    used = np.array([t[2] for t in st], dtype=np.int64)
    age_ms = (stamp - np.array([inputs[k] for k in used], dtype=np.int64)) * 1e-6
    pos = np.searchsorted(in_t, stamp, side="right") - 1        # newest input published before the tick
    newest = in_ids[np.maximum(pos, 0)]
    behind = np.searchsorted(in_ids, newest) - np.searchsorted(in_ids, used)
    pairs = []
    for T, k, p in zip(stamp, used, pos):
        for j in range(max(0, p - 3), p + 1):                   # the last few inputs before the tick
            pairs.append(((T - in_t[j]) * 1e-6, in_ids[j] <= k))
    by_efforts = {}
    for t in st:
        by_efforts.setdefault(t[4], t)
    e2e, tick_cmd, matched = [], [], 0
    wall_of = input_wall if input_wall is not None else inputs
    for recv, data in efforts:
        t = by_efforts.get(data)
        if t is None:
            continue
        matched += 1
        if t[2] in wall_of:
            e2e.append((recv - wall_of[t[2]]) * 1e-6)
        if input_wall is None:
            tick_cmd.append((recv - t[1]) * 1e-6)
    stamp_iv = np.diff(stamp) * 1e-6
    recv_iv = np.diff(np.array([e[0] for e in efforts], dtype=np.int64)) * 1e-6
    span_s = (stamp[-1] - stamp[0]) * 1e-9
    modes = {}
    for t in st:
        modes[int(t[3])] = modes.get(int(t[3]), 0) + 1
    return {
        "ticks": len(ticks), "ticks_unmatched": unmatched, "modes": modes,
        "effort_commands": len(efforts), "effort_commands_matched": matched,
        "achieved_rate_hz": (len(stamp) - 1) / span_s if span_s > 0 else None,
        "state_age_ms": stats(age_ms),
        "newer_input_waiting": {"pct_ticks": 100.0 * float(np.mean(behind > 0)), "max": int(behind.max())},
        "delivery_latency_ms": delivery_quantiles(pairs),
        "same_input_reused_pct": 100.0 * float(np.mean(np.diff(used) == 0)) if len(used) > 1 else None,
        "input_to_command_ms": stats(e2e), "tick_to_command_receipt_ms": stats(tick_cmd),
        "period_stamps_ms": {**stats(stamp_iv), "nominal": period_ms,
                             "missed_periods": int(np.sum(stamp_iv > 1.5 * period_ms)),
                             "abs_dev_p99": float(np.percentile(np.abs(stamp_iv - period_ms), 99))
                             if len(stamp_iv) else None},
        "period_command_receipt_ms": {**stats(recv_iv), "nominal": period_ms,
                                      "missed_periods": int(np.sum(recv_iv > 1.5 * period_ms))},
        "input_interval_ms": stats(np.diff(in_t[in_t >= stamp[0]]) * 1e-6),
    }


def _controller_own_timing(log_path):
    text = Path(log_path).read_text(errors="replace")
    m = re.search(r"control loop \(wall clock\): (\d+) periods, mean ([\d.]+) ms .*?std ([\d.]+) ms, worst "
                  r"deviation ([\d.]+) ms", text)
    return {"periods": int(m[1]), "mean_ms": float(m[2]), "std_ms": float(m[3]),
            "worst_deviation_ms": float(m[4])} if m else None


def _controller_listener(node):
    """Subscriptions to controller_state and effort_controller/commands; returns (ticks, efforts, switch)."""
    from manip_msgs.msg import ControllerState
    from std_msgs.msg import Float64MultiArray
    ticks, efforts, on = [], [], {"on": True}

    def on_state(m):
        if on["on"]:
            ticks.append((time.time_ns(), m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec,
                          m.actual_positions, m.mode, bytes(memoryview(m.efforts))))

    def on_effort(m):
        if on["on"]:
            efforts.append((time.time_ns(), bytes(memoryview(m.data))))

    node.create_subscription(ControllerState, "joint_trajectory_controller/controller_state", on_state, 100)
    node.create_subscription(Float64MultiArray, "effort_controller/commands", on_effort, 100)
    return ticks, efforts, on


def bench_controller(procs, duration_s, js_rate_hz):
    """The bench plays the robot: joint_states at js_rate_hz stamped with the wall clock (the controller runs
    on the wall clock, use_sim_time false), position of COUNTER_JOINT = k * COUNTER_STEP for message k. The
    controller copies the positions of the state it used into controller_state.actual_positions, so each
    tick names its joint_states message exactly; controller_state.efforts are the efforts it published on
    effort_controller/commands in the same tick, which ties each command to its tick. js_rate_hz slightly
    off the control rate (249.5 vs 250 Hz) sweeps the phase between the two through a whole period every
    2 s; at exactly equal rates the phase is frozen by the start times and the ages say little."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from sensor_msgs.msg import JointState

    load_start = load1()
    launch = procs.start("real_robot_launch", [sys.executable, "-m", "manip_core.launcher",
                                               str(REAL_ROBOT_LAUNCH), f"rate_hz:={RATE_HZ}"])
    node = rclpy.create_node("bench_robot")
    ex = SingleThreadedExecutor()
    ex.add_node(node)
    names = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
             "wrist_3_joint"]
    pub = node.create_publisher(JointState, "joint_states", 10)
    pub_ns = {}              # k -> time.time_ns() just before publish()
    ticks, efforts, rec = _controller_listener(node)
    stop = threading.Event()

    def publisher():
        period = 1.0 / js_rate_hz
        msg = JointState(name=names, velocity=[0.0] * 6, effort=[0.0] * 6)
        pos = list(DEMO_HOME)
        k = 0
        nxt = time.monotonic()
        while not stop.is_set():
            k += 1
            pos[COUNTER_JOINT] = k * COUNTER_STEP
            msg.position = pos
            t = time.time_ns()
            msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(t, 1_000_000_000)
            pub_ns[k] = t
            pub.publish(msg)
            nxt += period
            delay = nxt - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            elif delay < -0.1:
                nxt = time.monotonic()

    thread = threading.Thread(target=publisher, name="bench_joint_states", daemon=True)
    thread.start()
    try:
        t_wait = time.monotonic()
        spin_until(ex, lambda: len(ticks) > 50, 120, "controller_state messages", [launch])
        log(f"controller commanding after {time.monotonic() - t_wait:.1f} s; warming up 2 s, then "
            f"{duration_s:g} s recorded")
        spin_for(ex, 2.0)
        ticks.clear()
        efforts.clear()
        cpu = CpuMeter()
        cpu.start()
        spin_for(ex, duration_s)
        cpu_use = cpu.stop()
        rec["on"] = False
    finally:
        stop.set()
        thread.join(2.0)
        node.destroy_node()
        ex.shutdown()
    rc = procs.stop(launch)
    ticks = [(r, s, int(round(a[COUNTER_JOINT] / COUNTER_STEP)), m, e) for r, s, a, m, e in ticks]
    res = analyse_ticks(ticks, dict(pub_ns), efforts, 1e3 / RATE_HZ)
    res.update({"scenario": "bench plays the robot (wall clock)", "rate_hz": RATE_HZ, "js_rate_hz": js_rate_hz,
                "duration_s": duration_s, "launch_exit": rc, "loadavg_start": load_start,
                "loadavg_end": load1(), "cpu": cpu_use,
                "controller_own_timing": _controller_own_timing(launch.bench_log)})
    return res


def sway_trajectory(names, q0, duration_s, period_s=4.0, dt=0.05):
    """JointTrajectory from q0 (starting at rest): the pan and wrist joints sway by up to 0.2-0.3 rad."""
    from builtin_interfaces.msg import Duration
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
    amp = {"shoulder_pan_joint": 0.2, "wrist_1_joint": 0.3, "wrist_2_joint": 0.3, "wrist_3_joint": 0.3}
    A = np.array([amp.get(n, 0.0) for n in names])
    q0 = np.asarray(q0, dtype=float)
    w = 2 * math.pi / period_s
    msg = JointTrajectory(joint_names=list(names))
    for t in np.arange(0.0, duration_s + dt / 2, dt):
        sec, ns = divmod(int(round(t * 1e9)), 1_000_000_000)
        msg.points.append(JointTrajectoryPoint(
            positions=(q0 + A * (1 - np.cos(w * t)) / 2).tolist(), velocities=(A * w * np.sin(w * t) / 2).tolist(),
            accelerations=(A * w * w * np.cos(w * t) / 2).tolist(), time_from_start=Duration(sec=sec, nanosec=ns)))
    return msg


def bench_controller_sim(procs, duration_s):
    """The controller in the simulated loop: sim_bridge (real_time_factor 1, 500 Hz physics and /clock,
    joint_states 250 Hz, camera 2 Hz) + real_robot.launch.xml with use_sim_time:=true. Ticks are tied to
    their joint_states message by the positions (controller_state.actual_positions are the positions of the
    state used, bit for bit); ages and periods are in simulated time (the node clock), the end-to-end
    latency is wall time from the bench's receipt of that joint_states message to its receipt of the
    command."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from sensor_msgs.msg import JointState
    from trajectory_msgs.msg import JointTrajectory

    load_start = load1()
    sim = procs.start("sim_bridge_loop", [sys.executable, "-m", "manip_sim.sim_bridge_node", "--ros-args",
                                          "--params-file", CAMERA_YAML, "-p", "use_sim_time:=true"])
    launch = procs.start("real_robot_launch_sim", [sys.executable, "-m", "manip_core.launcher",
                                                   str(REAL_ROBOT_LAUNCH), f"rate_hz:={RATE_HZ}",
                                                   "use_sim_time:=true"])
    node = rclpy.create_node("bench_sim_loop")
    ex = SingleThreadedExecutor()
    ex.add_node(node)
    ticks, efforts, rec = _controller_listener(node)
    js = []          # (receipt wall ns, stamp ns, names, positions)

    def on_js(m):
        if rec["on"]:
            js.append((time.time_ns(), m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec,
                       tuple(m.name), m.position))

    node.create_subscription(JointState, "joint_states", on_js, 100)
    traj_pub = node.create_publisher(JointTrajectory, "joint_trajectory_controller/joint_trajectory", 10)
    try:
        t_wait = time.monotonic()
        spin_until(ex, lambda: len(ticks) > 50 and js, 120, "controller_state messages", [sim, launch])
        log(f"controller commanding the simulated arm after {time.monotonic() - t_wait:.1f} s; sending a "
            f"slow sway (so that every joint_states message differs), 2 s warm-up, then {duration_s:g} s "
            f"recorded")
        traj_pub.publish(sway_trajectory(js[-1][2], js[-1][3], duration_s + 6.0))
        spin_for(ex, 2.0)
        for x in (ticks, efforts, js):
            x.clear()
        cpu = CpuMeter()
        cpu.start()
        spin_for(ex, duration_s)
        cpu_use = cpu.stop()
        rec["on"] = False
    finally:
        node.destroy_node()
        ex.shutdown()
    rc = procs.stop(launch)
    procs.stop(sim)
    if not ticks or not js:
        return {"scenario": "sim loop", "error": f"{len(ticks)} controller states, {len(js)} joint_states"}
    joint_names = None
    inputs, walls, by_key, dup = {}, {}, {}, 0
    for i, (recv, stamp, names, pos) in enumerate(sorted(js, key=lambda x: x[1])):
        if joint_names is None:
            joint_names = names
        key = bytes(memoryview(pos))     # model order: sim_bridge publishes in the model's joint order
        if key in by_key:
            dup += 1
        by_key[key] = i
        inputs[i], walls[i] = stamp, recv
    t2 = []
    for r, s, a, m, e in ticks:
        t2.append((r, s, by_key.get(bytes(memoryview(a)), -1), m, e))
    res = analyse_ticks(t2, inputs, efforts, 1e3 / RATE_HZ, input_wall=walls)
    res.update({"scenario": "sim_bridge + controller, use_sim_time (stamps: sim time)", "rate_hz": RATE_HZ,
                "duration_s": duration_s, "launch_exit": rc, "loadavg_start": load_start,
                "loadavg_end": load1(), "cpu": cpu_use, "joint_states_duplicate_positions": dup,
                "controller_own_timing": _controller_own_timing(launch.bench_log)})
    return res


# =================================================================================== 3. sim physics RTF
def bench_sim_rtf(procs, label, camera_rate_hz, duration_s):
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from rosgraph_msgs.msg import Clock

    load_start = load1()
    cmd = [sys.executable, "-m", "manip_sim.sim_bridge_node", "--ros-args", "--params-file", CAMERA_YAML,
           "-p", "real_time_factor:=0.0", "-p", "use_sim_time:=true", "--log-level", "sim_bridge:=debug"]
    if camera_rate_hz is not None:
        cmd += ["-p", f"camera_rate_hz:={float(camera_rate_hz)}"]
    sim = procs.start(f"sim_bridge_{label}", cmd)
    node = rclpy.create_node("bench_clock")
    ex = SingleThreadedExecutor()
    ex.add_node(node)
    qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT)

    def grab(timeout=10.0):
        """(receipt ns, sim ns) of the first /clock message of a fresh subscription, which is then removed:
        nothing in the bench takes /clock between the samples (at RTF 10-25 that is 5,000-12,000 messages/s,
        enough to keep a Python subscriber busy on a core of this 2-core machine)."""
        box = []
        sub = node.create_subscription(Clock, "/clock", lambda m: box.append(
            (time.monotonic_ns(), m.clock.sec * 1_000_000_000 + m.clock.nanosec)) if not box else None, qos)
        try:
            spin_until(ex, lambda: bool(box), timeout, "/clock", [sim])
        finally:
            node.destroy_subscription(sub)
        return box[0]

    try:
        t_wait = time.monotonic()
        grab(120.0)
        log(f"sim_bridge ({label}) publishing /clock after {time.monotonic() - t_wait:.1f} s; warming up 1 s, "
            f"then {duration_s:g} s measured")
        spin_for(ex, 1.0)
        cpu = CpuMeter()
        cpu.start()
        rec = [grab()]
        end = time.monotonic() + duration_s
        while time.monotonic() < end:
            spin_for(ex, min(1.0, end - time.monotonic()))
            rec.append(grab())
        cpu_use = cpu.stop()
    finally:
        node.destroy_node()
        ex.shutdown()
    procs.stop(sim)
    text = Path(sim.bench_log).read_text(errors="replace")
    own = [float(x) for x in re.findall(r"real-time factor ([\d.]+) \(sim", text)]
    if len(rec) < 2:
        return {"label": label, "error": "too few /clock samples"}
    w = np.array([r[0] for r in rec], dtype=np.int64)
    s = np.array([r[1] for r in rec], dtype=np.int64)
    rtf = (s[-1] - s[0]) / (w[-1] - w[0])
    win = np.diff(s) / np.diff(w)
    return {
        "label": label, "camera_rate_hz": camera_rate_hz if camera_rate_hz is not None else 2.0,
        "duration_s": duration_s, "loadavg_start": load_start, "loadavg_end": load1(), "cpu": cpu_use,
        "rtf": float(rtf), "rtf_1s_windows": {"min": float(win.min()), "max": float(win.max()), "n": len(win)},
        "sim_advance_s": float((s[-1] - s[0]) * 1e-9), "wall_s": float((w[-1] - w[0]) * 1e-9),
        "clock_samples": len(rec), "sim_bridge_own_rtf_log": own,
    }


# =========================================================================================== 4. demo
DEMO_NODES = {"sim_bridge", "model_server", "controller", "stereo_obstacles", "planner", "pick_place",
              "pick_place_demo"}


class DomainWatch:
    """A second rclpy context on the demo's domain: checks that no node runs there before the demo starts,
    then, once a second, which nodes are there (a duplicate or foreign node means another graph shares the
    domain), and every controller_state (largest |position error| at any tick, hold included: the demo's
    own RMS counts tracking ticks only)."""

    def __init__(self, exclude):
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.signals import SignalHandlerOptions
        from manip_msgs.msg import ControllerState
        tried = {exclude}
        for _ in range(8):
            self.domain = random.choice([d for d in range(100, 201) if d not in tried])
            tried.add(self.domain)
            self.ctx = rclpy.Context()
            rclpy.init(context=self.ctx, domain_id=self.domain, signal_handler_options=SignalHandlerOptions.NO)
            self.node = rclpy.create_node("bench_demo_watch", context=self.ctx)
            self.ex = SingleThreadedExecutor(context=self.ctx)
            self.ex.add_node(self.node)
            spin_for(self.ex, 1.5)
            if not self._others():
                break
            log(f"ROS_DOMAIN_ID {self.domain} is in use: trying another for the demo")
            self.close()
        else:
            raise RuntimeError("no free ROS_DOMAIN_ID in 100-200 for the demo")
        self.foreign = {}
        self.max_nodes = {}
        self.errors = []          # (stamp s, mode, max |position error|)
        self.node.create_subscription(ControllerState, "joint_trajectory_controller/controller_state",
                                      self._on_state, 100)

    def _others(self):
        return [n for n, _ in self.node.get_node_names_and_namespaces() if n != "bench_demo_watch"]

    def _on_state(self, m):
        e = np.abs(np.asarray(m.position_errors))
        self.errors.append((m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec, int(m.mode),
                            float(e.max()) if e.size else 0.0))

    def poll(self, seconds):
        spin_for(self.ex, seconds)
        names = self._others()
        for n in set(names):
            c = names.count(n)
            self.max_nodes[n] = max(self.max_nodes.get(n, 0), c)
            if n not in DEMO_NODES or c > 1:
                self.foreign[n] = max(self.foreign.get(n, 0), c)

    def close(self):
        self.node.destroy_node()
        self.ex.shutdown()
        self.ctx.try_shutdown()

    def summary(self):
        E = np.array([e[2] for e in self.errors]) if self.errors else np.zeros(0)
        tracking = np.array([e[1] == 1 for e in self.errors], dtype=bool)
        return {"domain": self.domain, "foreign_or_duplicate_nodes": self.foreign,
                "nodes_seen": self.max_nodes, "controller_states": int(E.size),
                "max_abs_position_error_rad": float(E.max()) if E.size else None,
                "max_abs_position_error_tracking_rad": float(E[tracking].max()) if tracking.any() else None,
                "ticks_error_above_0.1_rad": int(np.sum(E > 0.1)), "ticks_error_above_1_rad": int(np.sum(E > 1.0))}


def bench_demo(procs, timeout_s, exclude_domain):
    out = Path(tempfile.mkdtemp(prefix="graph-demo-"))
    watch = DomainWatch(exclude_domain)
    load_start = load1()
    t0 = time.monotonic()
    env_domain = procs.env.get("ROS_DOMAIN_ID")
    procs.env["ROS_DOMAIN_ID"] = str(watch.domain)    # its own domain: the bench's node hears none of it
    try:
        p = procs.start("demo", [sys.executable, "-m", "manip_sim.demo", "--output", str(out)])
    finally:
        procs.env["ROS_DOMAIN_ID"] = env_domain
    try:
        while p.poll() is None and time.monotonic() - t0 < timeout_s:
            watch.poll(1.0)
        if p.poll() is None:
            log(f"demo still running after {timeout_s:g} s: stopping it")
    finally:
        watch.close()
    rc = procs.stop(p, sigint_wait=30.0)
    wall = time.monotonic() - t0
    text = Path(p.bench_log).read_text(errors="replace")
    summary = (out / "summary.txt").read_text() if (out / "summary.txt").exists() else ""
    res = {"exit": rc, "process_wall_s": round(wall, 1), "output": str(out), "loadavg_start": load_start,
           "loadavg_end": load1(), "summary": summary.strip().splitlines(), "watch": watch.summary()}
    own = _controller_own_timing(out / "launch.log") if (out / "launch.log").exists() else None
    res["controller_own_timing"] = own
    text_launch = (out / "launch.log").read_text(errors="replace") if (out / "launch.log").exists() else ""
    res["sim_watchdog_trips"] = text_launch.count("watchdog: no joint command")
    res["controller_stale_events"] = text_launch.count("joint_states are stale")
    if (m := re.search(r"pick-and-place demo: (SUCCESS|FAILURE)", summary)):
        res["outcome"] = m[1]
    if (m := re.search(r"task time: ([\d.]+) s sim, ([\d.]+) s wall; real-time factor ([\d.na]+)", summary)):
        res["task_sim_s"], res["task_wall_s"], res["rtf"] = float(m[1]), float(m[2]), float(m[3])
    if (m := re.search(r"RMS ([\d.]+) rad, max ([\d.]+) rad", summary)):
        res["tracking_rms_rad"], res["tracking_max_rad"] = float(m[1]), float(m[2])
    if (m := re.search(r"placement error ([\d.]+) cm", summary)):
        res["placement_error_cm"] = float(m[1])
    if (m := re.search(r"simulator up after ([\d.]+) s", text)):
        res["simulator_up_s"] = float(m[1])
    res["phases"] = [(n, float(d)) for n, d in re.findall(r"phase (\S+)\s+([\d.]+) s \(sim\)", summary)]
    if not summary:
        res["log_tail"] = tail(p.bench_log, 40)
    return res


# ========================================================================================= rendering
def _f(x, nd=2):
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    return f"{x:.{nd}f}"


def _row(label, s, unit_nd=3, note=""):
    if not s or not s.get("n"):
        return f"| {label} | 0 | | | | | | {note} |"
    return (f"| {label} | {s['n']} | {_f(s['mean'], unit_nd)} | {_f(s['std'], unit_nd)} | {_f(s['p50'], unit_nd)} | "
            f"{_f(s['p99'], unit_nd)} | {_f(s['max'], unit_nd)} | {note} |")


def render_controller(c, n):
    sim = "sim" in c["scenario"]
    head = (f"### 2{'ab'[n]}. {c['scenario']}: rate_hz {c['rate_hz']:g}, "
            + ("joint_states 250 Hz of sim time from sim_bridge" if sim else
               f"joint_states {c['js_rate_hz']:g} Hz from the bench")
            + f", {c['duration_s']:g} s recorded; load {c['loadavg_start']:.2f} -> {c['loadavg_end']:.2f}")
    if "error" in c:
        return [head, "", f"Failed: {c['error']}", ""]
    ps, pr, dl = c["period_stamps_ms"], c["period_command_receipt_ms"], c["delivery_latency_ms"]
    clock = "sim" if sim else "wall"
    cpu = ", ".join(f"{k} {v} %" for k, v in c["cpu"]["processes_pct"].items())
    L = [head, "", "| quantity (ms) | n | mean | std | p50 | p99 | max | note |",
         "|---|---:|---:|---:|---:|---:|---:|---|",
         _row(f"age of the joint_states used at the tick ({clock})", c["state_age_ms"],
              note=f"tick stamp - {'stamp' if sim else 'publish time'} of the message used; a newer one was "
                   f"already out at {_f(c['newer_input_waiting']['pct_ticks'], 1)} % of ticks"),
         f"| effective joint_states delivery into the control law ({clock}) | {dl.get('pairs', 0)} | | | "
         f"{_f(dl.get('p50'), 1)} | {_f(dl.get('p99'), 1)} | >= {_f(dl.get('worst_not_yet_used_ms'), 3)} | "
         f"from P(used \\| published d before the tick); p90 {_f(dl.get('p90'), 1)}; 0.1 ms bins |",
         _row("joint_states " + ("received by the bench" if sim else "publish") + " -> effort command received "
              "(wall)", c["input_to_command_ms"],
              note=f"{c['effort_commands_matched']}/{c['effort_commands']} commands matched to their tick")]
    if not sim:
        L.append(_row("tick -> effort command received (wall)", c["tick_to_command_receipt_ms"],
                      note="control law + publish + DDS + the bench's callback"))
    L += [_row(f"period, controller_state stamps ({clock})", ps,
               note=f"nominal {ps['nominal']:.3f}; {ps['missed_periods']} intervals > 1.5x nominal; "
                    f"p99 of |dev| {_f(ps['abs_dev_p99'], 3)}"),
          _row("period, effort commands as received (wall)", pr,
               note=f"{pr['missed_periods']} intervals > 1.5x nominal"),
          _row(f"joint_states interval ({clock})", c["input_interval_ms"],
               note="the input, " + ("stamps" if sim else "as published by the bench")),
          "", f"Achieved control rate {_f(c['achieved_rate_hz'], 1)} Hz ({clock} clock); the same joint_states "
              f"message served two ticks in a row at {_f(c['same_input_reused_pct'], 1)} % of ticks; "
              f"{c['ticks_unmatched']} of {c['ticks']} ticks not matched to a joint_states message. CPU: {cpu}."]
    own = c.get("controller_own_timing")
    if own:
        L.append(f"The controller's own log at shutdown (its whole run, start-up included; monotonic clock): "
                 f"{own['periods']} periods, mean {own['mean_ms']:.3f} ms, std {own['std_ms']:.3f} ms, worst "
                 f"deviation {own['worst_deviation_ms']:.3f} ms.")
    L.append("")
    return L


def render(r):
    m = r["machine"]
    L = [f"# manip ROS 2 graph benchmark ({r['mode']} run, {r['timestamp']})", "",
         f"Machine: {m['cpu']}, {m['cores']} logical cores; {m['platform']}; Python {m['python']}, rclpy "
         f"{m['rmw']}, ROS_DOMAIN_ID {r['domain_id']} (localhost only). Load average (1 min) at start "
         f"{r['loadavg_start']:.2f}, at end {r.get('loadavg_end', float('nan')):.2f}; each section gives its own.",
         "", "Every number is wall clock, process to process over DDS (rmw_fastrtps_cpp), measured from the "
         "bench's Python process; see bench/README.md for the methods.", ""]
    ik = r.get("ik")
    if ik:
        L += [f"## 1. model_server: compute_ik / compute_fk round trip ({ik['targets']} reachable UR5 targets, "
              f"tip tool0; load {ik['loadavg_start']:.2f} -> {ik['loadavg_end']:.2f})", "",
              "| call (ms) | n | mean | std | p50 | p99 | max | note |", "|---|---:|---:|---:|---:|---:|---:|---|",
              _row("compute_ik service round trip", ik["ros_ik_ms"],
                   note=f"success {ik['ros_ik_success_pct']:.1f} % (checked by FK here)"),
              _row("RobotModel.ik in process", ik["inprocess_ik_ms"],
                   note=f"success {ik['inprocess_ik_success_pct']:.1f} %"),
              _row("compute_fk service round trip", ik["ros_fk_ms"], note="≈ bare service-call cost"),
              _row("RobotModel.fk in process", ik["inprocess_fk_ms"], 4), "",
              f"ROS overhead of compute_ik at the median: {ik['ik_overhead_p50_ms']:.3f} ms per call "
              f"(server-side CPU during the ROS calls: "
              + ", ".join(f"{k} {v} %" for k, v in ik["cpu_during_ros_calls"]["processes_pct"].items()) + ").", ""]
    ctrl = r.get("controller") or []
    if ctrl:
        L += ["## 2. controller: joint_states -> effort command, control period jitter", ""]
    for n, c in enumerate(ctrl):
        L += render_controller(c, n)
    sims = r.get("sim_rtf")
    if sims:
        L += ["## 3. sim_bridge physics real-time factor (real_time_factor:=0, sim_bridge alone)", "",
              "| configuration | RTF (/clock) | ~1 s windows min-max | sim s / wall s | sim_bridge's own log "
              "(5 s windows) | CPU % of one core | load |", "|---|---:|---:|---:|---:|---|---:|"]
        for s in sims:
            if "error" in s:
                L.append(f"| {s['label']} | {s['error']} | | | | | |")
                continue
            w = s["rtf_1s_windows"]
            cpu = ", ".join(f"{k} {v}" for k, v in s["cpu"]["processes_pct"].items())
            L.append(f"| {s['label']} | {s['rtf']:.2f} | {_f(w['min'])}-{_f(w['max'])} | "
                     f"{s['sim_advance_s']:.1f} / {s['wall_s']:.1f} "
                     f"| {', '.join(f'{x:.2f}' for x in s['sim_bridge_own_rtf_log']) or 'n/a'} | {cpu} | "
                     f"{s['loadavg_start']:.2f} -> {s['loadavg_end']:.2f} |")
        L.append("")
    d = r.get("demo")
    if d is not None:
        if d.get("skipped"):
            L += ["## 4. demo", "", f"Skipped ({d['skipped']}).", ""]
        else:
            L += [f"## 4. demo (python -m manip_sim.demo; load {d['loadavg_start']:.2f} -> {d['loadavg_end']:.2f})",
                  "", "| outcome | task sim s | task wall s | real-time factor | tracking RMS rad | "
                  "placement error cm | simulator up s | process wall s |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|",
                  f"| {d.get('outcome', 'exit ' + str(d['exit']))} | {_f(d.get('task_sim_s'))} | "
                  f"{_f(d.get('task_wall_s'))} | {_f(d.get('rtf'))} | {_f(d.get('tracking_rms_rad'), 4)} | "
                  f"{_f(d.get('placement_error_cm'))} | {_f(d.get('simulator_up_s'), 1)} | "
                  f"{_f(d['process_wall_s'], 1)} |", ""]
            if d.get("phases"):
                L.append("Phases (sim s): " + ", ".join(f"{n} {t:.2f}" for n, t in d["phases"]) + ".")
            w = d.get("watch", {})
            own = d.get("controller_own_timing")
            L.append(f"Watched from the demo's domain ({w.get('domain')}): {w.get('controller_states', 0)} "
                     f"controller states, largest |position error| at any tick {_f(w.get('max_abs_position_error_rad'), 3)} "
                     f"rad (tracking ticks only: {_f(w.get('max_abs_position_error_tracking_rad'), 3)} rad), "
                     f"{w.get('ticks_error_above_0.1_rad', 0)} ticks above 0.1 rad, "
                     f"{w.get('ticks_error_above_1_rad', 0)} above 1 rad; foreign or duplicate nodes: "
                     f"{w.get('foreign_or_duplicate_nodes') or 'none'}. sim_bridge watchdog trips (no command for "
                     f"0.2 s): {d.get('sim_watchdog_trips')}; controller stale-state events: "
                     f"{d.get('controller_stale_events')}."
                     + (f" Controller's own timing: mean period {own['mean_ms']:.3f} ms (nominal 4), std "
                        f"{own['std_ms']:.3f} ms, worst deviation {own['worst_deviation_ms']:.1f} ms." if own else ""))
            L.append("")
    L.append(f"Elapsed {r.get('elapsed_s', float('nan')):.0f} s.")
    return "\n".join(L) + "\n"


def machine_info():
    cpu = cpu_model()
    try:
        rclpy_v = metadata.version("ros-kilted-rclpy")
    except metadata.PackageNotFoundError:
        rclpy_v = "?"
    return {"cpu": cpu, "cores": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(), "numpy": np.__version__,
            "rmw": os.environ.get("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp (default)"), "rclpy_dist": rclpy_v}


# ============================================================================================== main
def _raise_interrupted(signum, _frame):
    raise Interrupted(signal.Signals(signum).name)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 100 IK calls, 4 s of controller, one 3 s sim run, no demo")
    ap.add_argument("--skip-demo", action="store_true", help="leave out the demo (python -m manip_sim.demo)")
    ap.add_argument("--ik-calls", type=int, default=None, help="compute_ik calls (default 500, quick 100)")
    ap.add_argument("--controller-seconds", type=float, default=None, help="recorded s (default 20, quick 4)")
    ap.add_argument("--js-rate", type=float, default=249.5,
                    help="joint_states rate of the bench (Hz, default 249.5: just off the control rate, so that "
                         "the phase between the two sweeps a whole period every 2 s)")
    ap.add_argument("--sim-seconds", type=float, default=None, help="measured s per sim run (default 8, quick 3)")
    ap.add_argument("--demo-timeout", type=float, default=600.0, help="s before the demo is stopped")
    ap.add_argument("--only", default="ik,controller,sim,demo", help="comma-separated subset of the sections")
    ap.add_argument("--no-save", action="store_true", help="print only; write nothing to bench/results")
    args = ap.parse_args(argv)
    only = {s.strip() for s in args.only.split(",")}
    n_ik = args.ik_calls or (100 if args.quick else 500)
    ctrl_s = args.controller_seconds or (4.0 if args.quick else 20.0)
    sim_s = args.sim_seconds or (3.0 if args.quick else 8.0)

    for sig in (signal.SIGINT, signal.SIGTERM):     # also when started with SIGINT ignored (a script's `&`)
        signal.signal(sig, _raise_interrupted)
    t_start = time.perf_counter()
    now = _dt.datetime.now()
    results = {"mode": "quick" if args.quick else "full", "timestamp": now.strftime("%Y-%m-%d %H:%M"),
               "machine": machine_info(), "loadavg_start": load1(), "tag": TAG}
    log_dir = Path(tempfile.mkdtemp(prefix="graph-bench-"))
    results["logs"] = str(log_dir)
    import rclpy
    procs = None
    code = 0
    try:
        results["domain_id"] = init_ros()
        env = dict(os.environ, PYTHONUNBUFFERED="1", RCUTILS_LOGGING_BUFFERED_STREAM="0", **{TAG_VAR: TAG})
        procs = Procs(log_dir, env)
        log(f"ROS_DOMAIN_ID {results['domain_id']}, logs in {log_dir}, load {load1():.2f}")
        if "ik" in only:
            log(f"1/4 model_server compute_ik: {n_ik} calls")
            results["ik"] = bench_ik(procs, n_ik)
        if "controller" in only:
            log(f"2/4 controller, the bench playing the robot: {ctrl_s:g} s")
            results["controller"] = [bench_controller(procs, ctrl_s, args.js_rate)]
            log(f"2/4 controller in the simulated loop: {ctrl_s:g} s")
            results["controller"].append(bench_controller_sim(procs, ctrl_s))
        if "sim" in only:
            runs = [("default (camera 2 Hz sim)", None)] + ([] if args.quick else [("camera off", 0.0)])
            results["sim_rtf"] = []
            for i, (label, cam) in enumerate(runs):
                log(f"3/4 sim_bridge physics RTF: {label}")
                results["sim_rtf"].append(bench_sim_rtf(procs, "camera_off" if cam == 0.0 else "default",
                                                        cam, sim_s))
                results["sim_rtf"][-1]["label"] = label
        if "demo" in only:
            if args.skip_demo or args.quick:
                results["demo"] = {"skipped": "--skip-demo" if args.skip_demo else "--quick"}
            else:
                log("4/4 demo (1-2 min)")
                results["demo"] = bench_demo(procs, args.demo_timeout, results["domain_id"])
    except (KeyboardInterrupt, Interrupted) as e:
        log(f"interrupted ({e or 'SIGINT'}): stopping every process this run started")
        code = 130
    except RuntimeError as e:
        log(f"error: {e}")
        code = 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)    # a second Ctrl-C must not abort the cleanup
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if procs is not None:
            procs.stop_all()
        else:
            sweep()
        rclpy.try_shutdown()
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if code:
        return code
    results["loadavg_end"] = load1()
    results["elapsed_s"] = time.perf_counter() - t_start
    table = render(results)
    print(table)
    if not args.no_save:
        log(f"wrote {', '.join(save_results('graph', table, results, args.quick, now))}")
    log(f"done in {results['elapsed_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
