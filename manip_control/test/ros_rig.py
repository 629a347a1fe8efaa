"""Test rig for the controller node over real DDS (loaded by the ``ros_rig`` fixture of conftest.py).

:func:`running_controller` starts ``python -m manip_control.controller_node`` in a subprocess on a random
ROS_DOMAIN_ID in 100-200 with discovery limited to localhost, and plays the robot in this process:
:class:`Robot` integrates RobotModel.forward_dynamics of the latest effort command (semi-implicit Euler,
2 ms steps) and publishes joint_states every step (500 Hz of its time base):

- ``sim_time=True``: the robot publishes /clock and runs in lockstep with the controller (the node runs with
  use_sim_time): after each step it waits for the controller's tick of that period, so the loop is
  deterministic whatever the load of the machine (tests of behaviour);
- ``sim_time=False``: wall-clock real time (tests of timing).

Other test runs on the same machine pick domains from the same range: :func:`open_free_domain` listens
for other nodes before it settles on one.
"""
import contextlib
import math
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import rclpy
from builtin_interfaces.msg import Duration, Time
from rclpy.action import ActionClient
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

import manip_control
import manip_core
from manip_control.simulate import step_plant
from manip_msgs.action import ExecuteTrajectory
from manip_msgs.msg import ControllerState

Result = ExecuteTrajectory.Result
PLANT_DT_NS = 2_000_000
CONTROL_PERIOD_NS = 4_000_000  # rate_hz 250
SIM_START_NS = 1_000_000_000


def dur(s):
    sec = int(math.floor(s))
    return Duration(sec=sec, nanosec=int(round((s - sec) * 1e9)))


def stamp_ns(stamp):
    return stamp.sec * 1_000_000_000 + stamp.nanosec


class Robot(Node):
    """The plant. Records every effort command and controller state it receives."""

    def __init__(self, context, model, q0, sim_time):
        super().__init__("test_robot", context=context)
        self.model = model
        self.sim_time = sim_time
        self.q, self.qd = np.array(q0, float), np.zeros(model.dof)
        self.tau = model.gravity_torques(self.q)
        self.lock = threading.Condition()
        self.publishing = True
        self.efforts = []
        self.states = []                # (wall monotonic time of receipt, ControllerState)
        self.last_tick_ns = -1          # stamp of the latest ControllerState
        self.t_ns = SIM_START_NS        # plant time (sim mode)
        self.last_js_ns = None          # stamp of the latest joint_states published
        self.js_pub = self.create_publisher(JointState, "joint_states", 10)
        self.clock_pub = self.create_publisher(Clock, "/clock", 10) if sim_time else None
        self.create_subscription(Float64MultiArray, "effort_controller/commands", self._on_effort, 10)
        self.create_subscription(ControllerState, "joint_trajectory_controller/controller_state",
                                 self._on_state, 10)
        self.traj_pub = self.create_publisher(JointTrajectory, "joint_trajectory_controller/joint_trajectory", 10)
        self.client = ActionClient(self, ExecuteTrajectory, "joint_trajectory_controller/execute_trajectory")
        self._run = True
        self._thread = threading.Thread(target=self._loop_sim if sim_time else self._loop_realtime, daemon=True)
        self._thread.start()

    # ---------------------------------------------------------------------------------- callbacks
    def _on_effort(self, msg):
        tau = np.array(msg.data, dtype=float)
        with self.lock:
            self.tau = tau
            self.efforts.append(tau)

    def _on_state(self, msg):
        with self.lock:
            self.states.append((time.monotonic(), msg))
            self.last_tick_ns = stamp_ns(msg.header.stamp)
            self.lock.notify_all()

    # -------------------------------------------------------------------------------------- plant
    def _publish_joint_states(self, stamp):
        if not self.publishing:
            return
        names = list(self.model.joint_names)
        msg = JointState()
        msg.header.stamp = stamp
        # an extra joint and a reversed order: the controller must pick its joints by name
        msg.name = ["gripper_finger"] + names[::-1]
        msg.position = [0.0] + [float(x) for x in self.q[::-1]]
        msg.velocity = [0.0] + [float(x) for x in self.qd[::-1]]
        self.js_pub.publish(msg)
        self.last_js_ns = stamp_ns(stamp)

    def _step(self):
        with self.lock:
            tau = self.tau
        q, qd = step_plant(self.model, self.q, self.qd, tau, PLANT_DT_NS * 1e-9)
        with self.lock:
            self.q, self.qd = q, qd

    def _loop_sim(self):
        try:
            while self._run:
                self._step()
                self.t_ns += PLANT_DT_NS
                t = Time(sec=self.t_ns // 1_000_000_000, nanosec=self.t_ns % 1_000_000_000)
                self._publish_joint_states(t)
                self.clock_pub.publish(Clock(clock=t))
                # lockstep: wait for the controller's tick of the period that ends now (none before it runs)
                with self.lock:
                    timeout = 1.0 if self.last_tick_ns >= 0 else 0.01
                    self.lock.wait_for(lambda: not self._run or self.last_tick_ns > self.t_ns - CONTROL_PERIOD_NS,
                                       timeout)
        except Exception:
            if self._run:
                raise

    def _loop_realtime(self):
        next_t = time.monotonic()
        try:
            while self._run:
                next_t += PLANT_DT_NS * 1e-9
                delay = next_t - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                elif delay < -0.05:
                    next_t = time.monotonic()  # far behind (loaded machine): do not catch up
                self._step()
                self._publish_joint_states(self.get_clock().now().to_msg())
        except Exception:
            if self._run:
                raise

    def stop(self):
        self._run = False
        with self.lock:
            self.lock.notify_all()
        self._thread.join(timeout=3.0)

    # ---------------------------------------------------------------------------------- queries
    def state(self):
        with self.lock:
            return self.q.copy(), self.qd.copy()

    def mark(self):
        """A marker for :meth:`states_since` (the number of states received so far)."""
        with self.lock:
            return len(self.states)

    def states_since(self, mark):
        with self.lock:
            return [m for (_, m) in self.states[mark:]]

    def latest(self):
        with self.lock:
            return self.states[-1][1] if self.states else None


def wait_for(pred, timeout, what):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.005)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def wait_future(fut, timeout):
    end = time.monotonic() + timeout
    while not fut.done():
        if time.monotonic() > end:
            raise AssertionError("timed out waiting for a future")
        time.sleep(0.002)
    return fut.result()


def send_goal(robot, goal, timeout=30.0, cancel_after=None):
    """(status, result, feedback list) of one goal; cancel_after: seconds (wall) before canceling it."""
    fb = []
    handle = wait_future(robot.client.send_goal_async(goal, feedback_callback=lambda m: fb.append(m.feedback)),
                         10.0)
    assert handle.accepted
    res_fut = handle.get_result_async()
    if cancel_after is not None:
        time.sleep(cancel_after)
        wait_future(handle.cancel_goal_async(), 5.0)
    res = wait_future(res_fut, timeout)
    return res.status, res.result, fb


def quintic_goal(model, q0, q1, T, n_points=4, **fields):
    """Goal with points sampled from the rest-to-rest quintic q0 -> q1 over T s (positions, velocities,
    accelerations); extra goal fields as keywords."""
    goal = ExecuteTrajectory.Goal()
    goal.trajectory.joint_names = list(model.joint_names)
    d = np.asarray(q1, float) - np.asarray(q0, float)
    for t in np.linspace(T / n_points, T, n_points):
        s = t / T
        p = 10 * s ** 3 - 15 * s ** 4 + 6 * s ** 5
        v = (30 * s ** 2 - 60 * s ** 3 + 30 * s ** 4) / T
        a = (60 * s - 180 * s ** 2 + 120 * s ** 3) / T ** 2
        goal.trajectory.points.append(JointTrajectoryPoint(
            positions=[float(x) for x in q0 + p * d], velocities=[float(x) for x in v * d],
            accelerations=[float(x) for x in a * d], time_from_start=dur(t)))
    for k, v in fields.items():
        setattr(goal, k, v)
    return goal


def _pythonpath(*extra_packages):
    dirs = [str(Path(m.__file__).resolve().parents[1]) for m in (manip_control, manip_core, *extra_packages)]
    old = os.environ.get("PYTHONPATH", "")
    return os.pathsep.join(dict.fromkeys(dirs + ([old] if old else [])))


def open_free_domain(tries=8, listen_s=0.5):
    """(rclpy Context, domain id): a random ROS_DOMAIN_ID in 100-200 where no other node was seen within
    listen_s (other test runs on this machine pick from the same range). Sets ROS_DOMAIN_ID and
    ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST in os.environ (the caller restores them)."""
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    for attempt in range(tries):
        domain = random.randint(100, 200)
        os.environ["ROS_DOMAIN_ID"] = str(domain)
        ctx = rclpy.Context()
        rclpy.init(context=ctx, domain_id=domain)
        probe = rclpy.create_node("manip_control_domain_probe", context=ctx)
        time.sleep(listen_s)
        others = [n for n in probe.get_node_names() if n != "manip_control_domain_probe"]
        probe.destroy_node()
        if not others or attempt == tries - 1:
            return ctx, domain
        rclpy.try_shutdown(context=ctx)


class Rig:
    robot: Robot
    proc: subprocess.Popen
    log_path: Path

    def log(self):
        return self.log_path.read_text()


@contextlib.contextmanager
def running_controller(model, q0, log_dir, sim_time, params=()):
    """Controller subprocess + plant; yields a Rig once the action server is up and the controller ticks."""
    saved = {k: os.environ.get(k) for k in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE")}
    ctx, domain = open_free_domain()
    env = dict(os.environ, PYTHONPATH=_pythonpath(), PYTHONUNBUFFERED="1")
    rig = Rig()
    rig.log_path = Path(log_dir) / "controller.log"
    args = ["-p", f"urdf_path:={model.source}", "-p", "base_link:=base_link", "-p", "tip_link:=tool0",
            "-p", f"use_sim_time:={'true' if sim_time else 'false'}"]
    for p in params:
        args += ["-p", p]
    old_switch = sys.getswitchinterval()
    sys.setswitchinterval(0.0005)  # the plant thread and the executor thread share this process's GIL
    with open(rig.log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "manip_control.controller_node", "--ros-args", *args],
                                env=env, stdout=log, stderr=subprocess.STDOUT, cwd=str(log_dir))
        rig.proc = proc
        robot = Robot(ctx, model, q0, sim_time)
        rig.robot = robot
        executor = SingleThreadedExecutor(context=ctx)
        executor.add_node(robot)
        spin = threading.Thread(target=executor.spin, daemon=True)
        spin.start()
        try:
            end = time.monotonic() + 30.0
            while not robot.client.wait_for_server(timeout_sec=0.5):
                assert proc.poll() is None, f"controller exited: {rig.log()[-3000:]}"
                assert time.monotonic() < end, "action server not found"
            wait_for(lambda: robot.latest() is not None, 20.0, "controller_state")
            yield rig
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            robot.stop()
            executor.shutdown(timeout_sec=1.0)
            robot.destroy_node()
            rclpy.try_shutdown(context=ctx)
            sys.setswitchinterval(old_switch)
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


class Observer(Node):
    """A test node without a plant: action client, and records of controller_state and joint_states."""

    def __init__(self, context):
        super().__init__("test_observer", context=context)
        self.lock = threading.Lock()
        self.states = []
        self.joint_states = []
        self.create_subscription(ControllerState, "joint_trajectory_controller/controller_state",
                                 lambda m: self._keep(self.states, m), 10)
        self.create_subscription(JointState, "joint_states", lambda m: self._keep(self.joint_states, m), 10)
        self.client = ActionClient(self, ExecuteTrajectory, "joint_trajectory_controller/execute_trajectory")

    def _keep(self, lst, msg):
        with self.lock:
            lst.append(msg)
            del lst[:-5000]

    def latest(self):
        with self.lock:
            return self.states[-1] if self.states else None

    def mark(self):
        with self.lock:
            return len(self.states)

    def states_since(self, mark):
        with self.lock:
            return list(self.states[mark:])


@contextlib.contextmanager
def running_nodes(commands, log_dir, extra_packages=()):
    """Start ``commands`` (argument lists, each logged to log_dir/<index>.log) on a fresh domain and yield
    (Observer, [Popen]); SIGINT to each at the end."""
    saved = {k: os.environ.get(k) for k in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE")}
    ctx, domain = open_free_domain()
    env = dict(os.environ, PYTHONPATH=_pythonpath(*extra_packages), PYTHONUNBUFFERED="1")
    procs, logs = [], []
    try:
        for i, cmd in enumerate(commands):
            log = open(Path(log_dir) / f"{i}.log", "w")
            logs.append(log)
            procs.append(subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=str(log_dir)))
        obs = Observer(ctx)
        executor = SingleThreadedExecutor(context=ctx)
        executor.add_node(obs)
        threading.Thread(target=executor.spin, daemon=True).start()
        try:
            yield obs, procs
        finally:
            executor.shutdown(timeout_sec=1.0)
            obs.destroy_node()
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for log in logs:
            log.close()
        rclpy.try_shutdown(context=ctx)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
