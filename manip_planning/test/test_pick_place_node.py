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
        self.holding = None            # the suction gripper: what it holds (attach refused while it holds one)
        self.abort_when_holding = False   # the controller aborts every trajectory while the gripper holds
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
        if self.abort_when_holding and self.holding:
            handle.abort()
            return ExecuteTrajectory.Result(error_code=-1, error_string="fake controller: aborted while holding")
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
        """As manip_sim's suction gripper: an attach while holding is refused, a release always succeeds."""
        self.grasps.append((req.attach, req.object_name))
        if req.attach and self.holding:
            resp.success, resp.message = False, f"already holding '{self.holding}'; release it first"
            resp.object_name = self.holding
            return resp
        name = (req.object_name or "cube") if req.attach else (self.holding or "")
        self.holding = name if req.attach else None
        resp.success, resp.message, resp.object_name = True, "ok", name
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
    node = _spawn("manip_planning.pick_place_node", model_args + ["-p", "server_timeout:=3.0",
                                                                  "-p", "plan_timeout:=120.0"], env,
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
        end = time.monotonic() + 90.0      # two Python processes starting on a loaded 2-core machine
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
        end = time.monotonic() + 90.0
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


def test_object_is_published_allowed_and_carried_around_the_wall(rig, ur5, demo):
    """A tall object (4 x 4 x 20 cm, perceived as an obstacle at the pick) carried over a 25 cm wall: pick_place
    publishes it on known_objects (to pick, base frame; held, tip frame; then none), and the planner node, told
    it is attached, keeps every point of it out of the wall along the carry (Pinocchio FK of the executed
    trajectories: the same request without the attachment passes it through the wall, see
    test_pick_place_any_arm.test_held_object_is_part_of_the_robot)."""
    from geometry_msgs.msg import Point, Vector3
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from manip_msgs.msg import Obstacle, ObstacleArray, SceneObjectArray
    from manip_planning.test.test_pick_place_any_arm import PinFK, _held_in_wall
    from manip_planning.collision import densify
    from manip_planning.shapes import Shape

    wall_c, wall_s = np.array([0.5, 0.0, 0.125]), np.array([0.5, 0.04, 0.25])
    bottle_c, bottle_s = np.array([0.45, -0.25, 0.10]), np.array([0.04, 0.04, 0.20])
    pub = rig.create_publisher(ObstacleArray, "obstacles", 10)
    known = []
    qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    sub = rig.create_subscription(SceneObjectArray, "known_objects", known.append, qos)

    def obstacles(boxes):
        arr = ObstacleArray()
        arr.header.frame_id = "base_link"
        for c, sz in boxes:
            arr.obstacles.append(Obstacle(center=Point(x=c[0], y=c[1], z=c[2]), size=Vector3(x=sz[0], y=sz[1], z=sz[2]),
                                          radius=float(np.linalg.norm(sz) / 2)))
        return arr

    rig.trajectories.clear()
    rig.grasps.clear()
    try:
        end = time.monotonic() + 10.0
        while pub.get_subscription_count() < 2:          # planner and pick_place
            assert time.monotonic() < end, "obstacles subscribers not found"
            time.sleep(0.05)
        for _ in range(3):
            pub.publish(obstacles([(wall_c, wall_s), (bottle_c, bottle_s)]))
            time.sleep(0.1)
        res = rig.send(_goal(bottle_c + [0, 0, 0.07], [0.45, 0.25, 0.17]), timeout=120.0)
        r = res.result
        assert r.error_code == PickPlace.Result.SUCCESSFUL, r.message
        # (an earlier task's last set, empty, may come first: transient local)
        _wait(lambda: len([m for m in known if m.objects]) >= 2 and not known[-1].objects, 5.0, "known_objects")
        while known and not known[0].objects:
            known.pop(0)
        states = [(m.objects[0].attached, m.objects[0].header.frame_id) if m.objects else None for m in known]
        assert states[:3] == [(False, "base_link"), (True, "tool0"), None], states
        pick_msg, held_msg = known[0].objects[0], known[1].objects[0]
        assert np.allclose([pick_msg.pose.position.x, pick_msg.pose.position.y, pick_msg.pose.position.z], bottle_c)
        assert np.allclose([held_msg.size.x, held_msg.size.y, held_msg.size.z], bottle_s)
        # held in the tip frame: tool0 points down 3 cm above the goal's pick position, the bottle's centre
        # is 0.10 m along tool z
        hp = held_msg.pose.position
        assert np.allclose([hp.x, hp.y, hp.z], [0.0, 0.0, 0.10], atol=1e-6)
        held = Shape("box", 0.5 * bottle_s, np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0.10], [0, 0, 0, 1.0]]))
        fk = PinFK(demo.ur5_path(), ur5)
        assert len(rig.trajectories) == 7
        for k in (2, 3, 4):             # lift, carry over the wall, descend at the place: the bottle is held
            t = rig.trajectories[k]
            idx = [list(t.joint_names).index(j) for j in ur5.joint_names]
            Q = densify(np.array([np.array(pt.positions)[idx] for pt in t.points]), 0.005)
            assert _held_in_wall(fk, Q, held, wall_c, wall_s) < 0.0, k
    finally:
        pub.publish(obstacles([]))
        time.sleep(0.3)
        rig.destroy_publisher(pub)
        rig.destroy_subscription(sub)


def test_a_goal_after_a_task_that_failed_holding_the_cube_places_it(rig, ur5, demo):
    """Regression (issue 12: after a kill -9 of the planner while the cube was held, every new goal failed with
    "attach failed: already holding 'cube'"). A task fails after its grasp (the controller aborts every trajectory
    while the gripper holds); the node says so and the next goal places the held cube instead of picking: a
    straight lift from where the arm stopped, above the place, down, release, home; a goal naming another object
    meanwhile is refused, naming the held one. Oracle: FK of the executed trajectories' last points."""
    log_path = rig.procs["pick_place"].log_path
    rig.trajectories.clear()
    rig.grasps.clear()
    rig.abort_when_holding = True
    try:
        res = rig.send(_goal(demo.PICK, demo.PLACE))
    finally:
        rig.abort_when_holding = False
    r = res.result
    assert r.error_code == PickPlace.Result.EXECUTION_FAILED and "still holding 'cube'" in r.message, r.message
    assert rig.grasps == [(True, "cube")] and rig.holding == "cube"
    q_stop = rig.q.copy()                                  # at the grasp pose: the lift was aborted
    assert np.allclose(ur5.fk(q_stop)[:3, 3], demo.PICK + [0, 0, 0.03], atol=1e-5)

    other = _goal(demo.PICK, demo.PLACE)
    other.object_name = "sphere"
    rig.trajectories.clear()
    r = rig.send(other).result
    assert r.error_code == PickPlace.Result.INVALID_GOAL and "still holds 'cube'" in r.message, r.message
    assert rig.trajectories == [] and rig.holding == "cube"

    rig.grasps.clear()
    res = rig.send(_goal(demo.PICK, demo.PLACE))
    r = res.result
    assert res.status == GoalStatus.STATUS_SUCCEEDED and r.error_code == PickPlace.Result.SUCCESSFUL, r.message
    assert "placed 'cube', held from an earlier task (no pick)" in r.message
    assert list(r.phase_names) == ["ABOVE_PLACE", "PLACE", "HOME"]
    assert rig.grasps == [(False, "cube")] and rig.holding is None       # released, never attached again
    tips = [ur5.fk(np.array(t.points[-1].positions)) for t in rig.trajectories]
    assert len(tips) == 5                                  # lift, above the place, down, retreat, home
    T_stop = ur5.fk(q_stop)
    assert np.allclose(tips[0][:3, 3], T_stop[:3, 3] + [0, 0, 0.10], atol=1e-5)       # straight up 10 cm
    assert np.allclose(tips[0][:3, :3], T_stop[:3, :3], atol=1e-5)
    assert np.allclose(tips[2][:3, 3], demo.PLACE + [0, 0, 0.035], atol=1e-5)          # release pose
    assert np.allclose(tips[4], tips[0], atol=1e-5)        # home: where the lift ended
    text = log_path.read_text()
    assert "the gripper still holds 'cube' from the last task" in text and "no pick" in text, text[-2000:]
    # the node forgot it: the next goal picks again
    rig.grasps.clear()
    r = rig.send(_goal(demo.PICK, demo.PLACE)).result
    assert r.error_code == PickPlace.Result.SUCCESSFUL and rig.grasps == [(True, "cube"), (False, "cube")], r.message


def test_clean_shutdown(rig):
    """SIGTERM (pick_place) and SIGINT (planner) end the nodes with status 0 and no traceback."""
    for name, p in rig.procs.items():
        p.send_signal(signal.SIGTERM if name == "pick_place" else signal.SIGINT)
        assert p.wait(timeout=10) == 0, name
        text = p.log_path.read_text()
        assert "Traceback" not in text, text[-2000:]
