"""The pick_place node over real DDS, with the real planner node, and a fake controller and gripper.

``python -m manip_planning.planner_node`` and ``python -m manip_planning.pick_place_node`` run in
subprocesses on a random ROS_DOMAIN_ID in 100-200 (localhost discovery). This process plays the rest of
the graph with plain rclpy fakes: a ``joint_trajectory_controller/execute_trajectory`` action server that
"executes" a trajectory by jumping to its last point after a short delay (and publishes ``joint_states`` at
50 Hz), and a ``gripper/grasp`` service that records its calls. The full graph with the simulator and the
real controller is exercised by manip_sim's ``manip-demo`` (make demo), not here.
"""
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("manip_msgs.action")

from rclpy.action import ActionClient, ActionServer, CancelResponse  # noqa: E402
from rclpy.callback_groups import ReentrantCallbackGroup  # noqa: E402
from rclpy.executors import MultiThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from action_msgs.msg import GoalStatus  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

from manip_msgs.action import ExecuteTrajectory, PickPlace  # noqa: E402
from manip_msgs.srv import Grasp  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PHASES = ["HOME", "ABOVE_PICK", "PICK", "ABOVE_PLACE", "PLACE", "HOME"]


def _pythonpath():
    parts = [str(ROOT / "manip_planning"), str(ROOT / "manip_core")]
    if os.environ.get("PYTHONPATH"):
        parts.append(os.environ["PYTHONPATH"])
    return os.pathsep.join(parts)


class FakeRobot(Node):
    """Fake controller (action), fake gripper (service) and joint_states."""

    def __init__(self, context, model, q0, namespace):
        super().__init__("fake_robot", context=context, namespace=namespace)
        self.model = model
        self.q = np.array(q0, dtype=float)
        self.lock = threading.Lock()
        self.trajectories = []
        self.grasps = []
        self.delay = 0.05
        group = ReentrantCallbackGroup()
        self.js_pub = self.create_publisher(JointState, "joint_states", 10)
        self.create_timer(0.02, self._publish, callback_group=group)
        self.server = ActionServer(self, ExecuteTrajectory, "joint_trajectory_controller/execute_trajectory",
                                   execute_callback=self._execute, cancel_callback=lambda _h: CancelResponse.ACCEPT,
                                   callback_group=group)
        self.grasp_srv = self.create_service(Grasp, "gripper/grasp", self._grasp, callback_group=group)
        self.client = ActionClient(self, PickPlace, "pick_place", callback_group=group)
        self.feedback = []

    def _publish(self):
        with self.lock:
            q = self.q.copy()
        self.js_pub.publish(JointState(name=list(self.model.joint_names), position=[float(x) for x in q]))

    def _execute(self, handle):
        traj = handle.request.trajectory
        with self.lock:
            self.trajectories.append(traj)
        end = time.monotonic() + self.delay
        while time.monotonic() < end:
            if handle.is_cancel_requested:
                handle.canceled()
                return ExecuteTrajectory.Result(error_code=0, error_string="canceled")
            time.sleep(0.005)
        idx = [list(traj.joint_names).index(j) for j in self.model.joint_names]
        with self.lock:
            self.q = np.array(traj.points[-1].positions, dtype=float)[idx]
        handle.succeed()
        return ExecuteTrajectory.Result(error_code=0)

    def _grasp(self, req, resp):
        self.grasps.append((req.attach, req.object_name))
        resp.success, resp.message, resp.object_name = True, "ok", req.object_name or "cube"
        return resp

    def send(self, goal, timeout=60.0, cancel_on_phase=None, client=None):
        self.feedback.clear()

        def on_fb(msg):
            fb = msg.feedback
            self.feedback.append((fb.phase, fb.progress, fb.message))

        fut = (client or self.client).send_goal_async(goal, feedback_callback=on_fb)
        _wait(fut.done, 10.0, "goal response")
        handle = fut.result()
        assert handle.accepted
        res = handle.get_result_async()
        if cancel_on_phase:
            _wait(lambda: any(p == cancel_on_phase for p, _, _ in list(self.feedback)), timeout, cancel_on_phase)
            handle.cancel_goal_async()
        _wait(res.done, timeout, "pick_place result")
        return res.result()


def _wait(cond, timeout, what):
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.01)


def _spawn(module, args, env, log_path):
    log = open(log_path, "w")
    proc = subprocess.Popen([sys.executable, "-m", module, "--ros-args", *args], env=env, stdout=log,
                            stderr=subprocess.STDOUT)
    proc.log_file, proc.log_path = log, log_path
    return proc


def _stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    proc.log_file.close()


@pytest.fixture(scope="module")
def rig(ur5, demo, tmp_path_factory):
    domain = random.randint(100, 200)
    # A namespace of our own as well: other test sessions on this machine may draw the same domain.
    ns = f"/pick_place_test_{os.getpid()}_{random.randint(0, 1_000_000)}"
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
               PYTHONPATH=_pythonpath(), PYTHONUNBUFFERED="1")
    logs = tmp_path_factory.mktemp("pick_place")
    model_args = ["-r", f"__ns:={ns}", "-p", f"urdf_path:={ur5.source}", "-p", "base_link:=base_link",
                  "-p", "tip_link:=tool0"]
    planner = _spawn("manip_planning.planner_node", model_args, env, logs / "planner.log")
    node = _spawn("manip_planning.pick_place_node", model_args + ["-p", "server_timeout:=3.0"], env,
                  logs / "pick_place.log")
    saved = os.environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE")
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=domain)
    robot = FakeRobot(ctx, ur5, demo.HOME, ns)
    executor = MultiThreadedExecutor(num_threads=4, context=ctx)
    executor.add_node(robot)
    spin = threading.Thread(target=executor.spin, daemon=True)
    spin.start()
    robot.procs = {"planner": planner, "pick_place": node}
    robot.domain, robot.ns = domain, ns
    try:
        end = time.monotonic() + 30.0
        while not robot.client.wait_for_server(timeout_sec=0.5):
            for name, p in robot.procs.items():
                assert p.poll() is None, f"{name} exited: {p.log_path.read_text()[-3000:]}"
            assert time.monotonic() < end, "pick_place action server not found"
        yield robot
    finally:
        for p in robot.procs.values():
            _stop(p)
        executor.shutdown(timeout_sec=1.0)
        robot.destroy_node()
        rclpy.try_shutdown(context=ctx)
        if saved is None:
            os.environ.pop("ROS_AUTOMATIC_DISCOVERY_RANGE", None)
        else:
            os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = saved


def _goal(pick, place, frame="base_link"):
    g = PickPlace.Goal()
    for stamped, p in ((g.pick_pose, pick), (g.place_pose, place)):
        stamped.header.frame_id = frame
        stamped.pose.position.x, stamped.pose.position.y, stamped.pose.position.z = (float(x) for x in p)
        stamped.pose.orientation.w = 1.0
    g.object_name = "cube"
    g.avoid_obstacles = True
    return g


def test_pick_and_place(rig, ur5, demo):
    rig.trajectories.clear()
    rig.grasps.clear()
    res = rig.send(_goal(demo.PICK, demo.PLACE))
    r = res.result
    assert res.status == GoalStatus.STATUS_SUCCEEDED and r.error_code == PickPlace.Result.SUCCESSFUL, r.message
    assert list(r.phase_names) == PHASES
    assert len(r.phase_durations) == 6 and all(d >= 0.0 for d in r.phase_durations)
    assert rig.grasps == [(True, "cube"), (False, "cube")]
    # the robot started at home: the first HOME phase needs no motion, then 7 trajectories
    assert len(rig.trajectories) == 7
    tips = [ur5.fk(np.array(t.points[-1].positions))[:3, 3] for t in rig.trajectories]
    assert np.allclose(tips[1], demo.PICK + [0, 0, 0.03], atol=1e-5)     # grasp pose
    assert np.allclose(tips[4], demo.PLACE + [0, 0, 0.035], atol=1e-5)    # release pose
    assert np.allclose(rig.q, demo.HOME, atol=1e-9)
    phases = [p for p, _, _ in rig.feedback]
    assert [p for i, p in enumerate(phases) if i == 0 or phases[i - 1] != p] == PHASES
    progress = [v for _, v, _ in rig.feedback]
    assert progress == sorted(progress) and progress[-1] == pytest.approx(1.0)


def test_unreachable_pick_is_rejected_before_moving(rig, demo):
    rig.trajectories.clear()
    rig.grasps.clear()
    res = rig.send(_goal([1.6, 0.0, 0.02], demo.PLACE))
    assert res.status == GoalStatus.STATUS_ABORTED
    assert res.result.error_code == PickPlace.Result.UNREACHABLE and "pick" in res.result.message
    assert rig.trajectories == [] and rig.grasps == []


def test_wrong_frame_is_an_invalid_goal(rig, demo):
    res = rig.send(_goal(demo.PICK, demo.PLACE, frame="camera"))
    assert res.result.error_code == PickPlace.Result.INVALID_GOAL and "frame" in res.result.message


def test_cancel(rig, demo):
    rig.delay = 0.5
    rig.grasps.clear()
    try:
        res = rig.send(_goal(demo.PICK, demo.PLACE), cancel_on_phase="ABOVE_PICK")
    finally:
        rig.delay = 0.05
    assert res.status == GoalStatus.STATUS_CANCELED
    assert res.result.error_code == PickPlace.Result.CANCELED
    assert rig.grasps == []
    assert list(res.result.phase_names)[-1] == "ABOVE_PICK"


def test_missing_servers_are_reported(rig, ur5, demo, tmp_path):
    """A pick_place node in a namespace without planner, controller or gripper: the goal fails before any
    motion, naming the missing server."""
    env = dict(os.environ, ROS_DOMAIN_ID=str(rig.domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
               PYTHONPATH=_pythonpath(), PYTHONUNBUFFERED="1")
    proc = _spawn("manip_planning.pick_place_node",
                  ["-r", f"__ns:={rig.ns}/lonely", "-p", f"urdf_path:={ur5.source}", "-p", "server_timeout:=1.0"], env,
                  tmp_path / "lonely.log")
    client = ActionClient(rig, PickPlace, f"{rig.ns}/lonely/pick_place")
    try:
        end = time.monotonic() + 30.0
        while not client.wait_for_server(timeout_sec=0.5):
            assert proc.poll() is None, proc.log_path.read_text()[-3000:]
            assert time.monotonic() < end, "lonely/pick_place not found"
        rig.trajectories.clear()
        res = rig.send(_goal(demo.PICK, demo.PLACE), timeout=30.0, client=client)
        assert res.result.error_code == PickPlace.Result.PLANNING_FAILED
        assert "plan_trajectory" in res.result.message and "not available" in res.result.message
        assert rig.trajectories == []
    finally:
        client.destroy()
        _stop(proc)


def test_clean_shutdown(rig):
    """SIGTERM (pick_place) and SIGINT (planner) end the nodes with status 0 and no traceback."""
    for name, p in rig.procs.items():
        p.send_signal(signal.SIGTERM if name == "pick_place" else signal.SIGINT)
        assert p.wait(timeout=10) == 0, name
        text = p.log_path.read_text()
        assert "Traceback" not in text, text[-2000:]
