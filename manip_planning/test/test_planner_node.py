"""The planner node over real DDS: ``python -m manip_planning.planner_node`` in a subprocess on a random
ROS_DOMAIN_ID in 100-200 (discovery limited to localhost); this process is the client."""
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
import pytest

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("manip_msgs.srv")

from geometry_msgs.msg import Point, Vector3  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from visualization_msgs.msg import Marker, MarkerArray  # noqa: E402

from manip_msgs.msg import ErrorCode, Obstacle as ObstacleMsg, ObstacleArray  # noqa: E402
from manip_msgs.srv import PlanTrajectory  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
Req = PlanTrajectory.Request


def _pythonpath():
    parts = [str(ROOT / "manip_planning"), str(ROOT / "manip_core")]
    if os.environ.get("PYTHONPATH"):
        parts.append(os.environ["PYTHONPATH"])
    return os.pathsep.join(parts)


class Client(Node):
    def __init__(self, context, namespace):
        super().__init__("planner_test_client", context=context, namespace=namespace)
        self.cli = self.create_client(PlanTrajectory, "plan_trajectory")
        self.js_pub = self.create_publisher(JointState, "joint_states", 10)
        self.obs_pub = self.create_publisher(ObstacleArray, "obstacles", 10)
        self.markers = []
        self.create_subscription(MarkerArray, "planned_path", self.markers.append, 10)

    def call(self, req, timeout=30.0):
        fut = self.cli.call_async(req)
        end = time.monotonic() + timeout
        while not fut.done():
            assert time.monotonic() < end, "plan_trajectory did not answer"
            time.sleep(0.01)
        return fut.result()


@pytest.fixture(scope="module")
def node(ur5, tmp_path_factory):
    domain = random.randint(100, 200)
    # A namespace of our own as well: other test sessions on this machine may draw the same domain.
    ns = f"/planner_test_{os.getpid()}_{random.randint(0, 1_000_000)}"
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
               PYTHONPATH=_pythonpath(), PYTHONUNBUFFERED="1")
    log_path = tmp_path_factory.mktemp("planner") / "planner.log"
    log = open(log_path, "w")
    proc = subprocess.Popen([sys.executable, "-m", "manip_planning.planner_node", "--ros-args", "-r", f"__ns:={ns}",
                             "-p", f"urdf_path:={ur5.source}", "-p", "base_link:=base_link", "-p", "tip_link:=tool0"],
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    saved = os.environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE")
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=domain)
    client = Client(ctx, ns)
    executor = SingleThreadedExecutor(context=ctx)
    executor.add_node(client)
    spin = threading.Thread(target=executor.spin, daemon=True)
    spin.start()
    client.proc, client.log_path = proc, log_path
    try:
        end = time.monotonic() + 30.0
        while not client.cli.wait_for_service(timeout_sec=0.5):
            assert proc.poll() is None, f"planner exited: {log_path.read_text()[-3000:]}"
            assert time.monotonic() < end, "plan_trajectory not found"
        yield client
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()
        executor.shutdown(timeout_sec=1.0)
        client.destroy_node()
        rclpy.try_shutdown(context=ctx)
        if saved is None:
            os.environ.pop("ROS_AUTOMATIC_DISCOVERY_RANGE", None)
        else:
            os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = saved


def _positions(resp):
    return np.array([p.positions for p in resp.trajectory.points])


def _times(resp):
    return np.array([p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec for p in resp.trajectory.points])


def _request(start, **kw):
    req = Req()
    req.start_positions = [float(x) for x in start]
    for k, v in kw.items():
        setattr(req, k, v)
    return req


def _pose_request(start, T, frame="base_link", **kw):
    from manip_core.spatial import matrix_to_quat_wxyz
    req = _request(start, goal_type=Req.GOAL_POSE, **kw)
    req.goal_pose.header.frame_id = frame
    p = req.goal_pose.pose
    p.position.x, p.position.y, p.position.z = (float(x) for x in T[:3, 3])
    w, x, y, z = matrix_to_quat_wxyz(T[:3, :3])
    p.orientation.x, p.orientation.y, p.orientation.z, p.orientation.w = float(x), float(y), float(z), float(w)
    return req


def _check_valid(ur5, resp, start, goal=None):
    assert resp.success, resp.message
    assert resp.error_code.val == ErrorCode.SUCCESS
    assert list(resp.trajectory.joint_names) == list(ur5.joint_names)
    Q, t = _positions(resp), _times(resp)
    assert len(Q) >= 2 and t[0] == 0.0 and np.all(np.diff(t) > 0)
    assert np.allclose(Q[0], start, atol=1e-9)
    if goal is not None:
        assert np.allclose(Q[-1], goal, atol=1e-9)
    assert np.max(np.abs(np.diff(Q, axis=0))) < 0.2
    V = np.array([p.velocities for p in resp.trajectory.points])
    assert np.all(np.abs(V) <= np.asarray(ur5.velocity_limits) + 1e-6)
    assert np.allclose(V[[0, -1]], 0.0)
    return Q


def test_joint_plan(node, ur5, demo):
    start = demo.HOME
    goal = demo.HOME + np.array([0.5, 0.3, -0.4, 0.2, 0.1, -0.6])
    resp = node.call(_request(start, goal_type=Req.GOAL_JOINTS, goal_positions=[float(x) for x in goal],
                              profile=Req.PROFILE_CUBIC, velocity_scaling=0.5, sample_period=0.05))
    Q = _check_valid(ur5, resp, start, goal)
    assert math.isinf(resp.min_obstacle_distance)
    # straight line in joint space
    u = (Q - start) @ (goal - start) / np.sum((goal - start) ** 2)
    assert np.allclose(Q, start + u[:, None] * (goal - start), atol=1e-9)
    assert np.all(np.abs(np.diff(_times(resp))[:-1] - 0.05) < 1e-6)


def test_pose_plan_cartesian_and_joint(node, ur5, demo):
    q0 = ur5.analytic_ik().solve(demo.tool_down(demo.PICK + [0, 0, 0.13]), near=demo.HOME)[0][0]
    T = demo.tool_down(demo.PICK + [0, 0, 0.03])
    resp = node.call(_pose_request(q0, T, path_type=Req.PATH_CARTESIAN, profile=Req.PROFILE_QUINTIC))
    Q = _check_valid(ur5, resp, q0)
    tips = np.array([ur5.fk(q)[:3, 3] for q in Q])
    assert np.max(np.abs(tips[:, :2] - demo.PICK[:2])) < 1e-6            # straight down
    assert np.allclose(ur5.fk(Q[-1]), T, atol=1e-6)
    # joint-space path to a pose: ends at the pose
    T2 = demo.tool_down([0.3, 0.3, 0.3])
    resp = node.call(_pose_request(q0, T2, frame=""))
    Q = _check_valid(ur5, resp, q0)
    assert np.allclose(ur5.fk(Q[-1]), T2, atol=1e-6)
    # the tip path is published
    end = time.monotonic() + 5.0
    while time.monotonic() < end and not node.markers:
        time.sleep(0.02)
    lines = [m for arr in node.markers for m in arr.markers if m.type == Marker.LINE_STRIP]
    assert lines and len(lines[-1].points) == len(Q) and lines[-1].header.frame_id == "base_link"


def test_start_from_joint_states(node, ur5, demo):
    goal = demo.HOME + 0.2
    js = JointState(name=["gripper"] + list(ur5.joint_names)[::-1],
                    position=[0.0] + [float(x) for x in demo.HOME[::-1]])
    req = _request([], goal_type=Req.GOAL_JOINTS, goal_positions=[float(x) for x in goal])
    end = time.monotonic() + 10.0
    while True:
        node.js_pub.publish(js)
        resp = node.call(req)
        if resp.success or time.monotonic() > end:
            break
        assert resp.error_code.val == ErrorCode.NOT_READY
        time.sleep(0.1)
    _check_valid(ur5, resp, demo.HOME, goal)


def test_avoids_published_obstacles(node, ur5, demo):
    c, s = demo.PILLAR_CENTER, demo.PILLAR_SIZE
    # above pick and place in the first IK branch (nearest HOME) whose arm keeps 4 cm from the pillar at both ends
    # (the UR5's forearm hangs 9 cm beside the tool: in the first branch it comes within 3 cm above the place)
    for q_a in ur5.analytic_ik().solve(demo.tool_down(demo.PICK + [0, 0, 0.13]), near=demo.HOME)[0]:
        q_b = ur5.analytic_ik().solve(demo.tool_down(demo.PLACE + [0, 0, 0.13]), near=q_a)[0][0]
        if min(demo.urdf_box_clearance(demo.ur5_path(), [q], c, s) for q in (q_a, q_b)) > 0.04:
            break
    msg = ObstacleArray()
    msg.header.frame_id = "base_link"
    msg.obstacles.append(ObstacleMsg(id=0, center=Point(x=c[0], y=c[1], z=c[2]), size=Vector3(x=s[0], y=s[1], z=s[2]),
                                     radius=float(np.linalg.norm(s) / 2), num_points=100))
    req = _request(q_a, goal_type=Req.GOAL_JOINTS, goal_positions=[float(x) for x in q_b], avoid_obstacles=True)
    end = time.monotonic() + 10.0
    while True:       # until the node has the obstacles (min_obstacle_distance becomes finite)
        node.obs_pub.publish(msg)
        time.sleep(0.1)
        resp = node.call(req)
        assert resp.success, resp.message
        if math.isfinite(resp.min_obstacle_distance) or time.monotonic() > end:
            break
    Q = _check_valid(ur5, resp, q_a, q_b)
    # the node plans with the bundled UR5's collision cylinders: exact distances to them (Pinocchio + coal)
    clearance = demo.urdf_box_clearance(demo.ur5_path(), demo.interpolate(Q), c, s)
    assert clearance >= 0.03 and resp.min_obstacle_distance >= 0.03
    # without avoidance the same request goes straight through the pillar, and says how close
    req.avoid_obstacles = False
    resp = node.call(req)
    assert resp.success and resp.min_obstacle_distance < 0.0
    # obstacle spheres are published with the avoiding plan
    spheres = [m for arr in node.markers for m in arr.markers if m.type == Marker.SPHERE]
    assert spheres and np.isclose(spheres[-1].pose.position.y, 0.0)


@pytest.mark.parametrize("case,code", [
    ("nan_start", ErrorCode.INVALID_INPUT),
    ("wrong_size", ErrorCode.INVALID_INPUT),
    ("out_of_limits", ErrorCode.OUT_OF_LIMITS),
    ("unreachable", ErrorCode.NO_IK_SOLUTION),
    ("other_frame", ErrorCode.INVALID_INPUT),
    ("unknown_frame", ErrorCode.UNKNOWN_LINK),
    ("zero_quaternion", ErrorCode.INVALID_INPUT),
    ("bad_scaling", ErrorCode.INVALID_INPUT),
    ("bad_goal_type", ErrorCode.INVALID_INPUT),
    ("too_short", ErrorCode.INVALID_INPUT),
])
def test_bad_requests_get_error_codes_and_the_node_keeps_serving(node, ur5, demo, case, code):
    start = list(demo.HOME)
    goal = [float(x) for x in demo.HOME + 0.3]
    far = demo.tool_down([2.0, 0.0, 0.3])
    near = demo.tool_down([0.4, 0.1, 0.3])
    req = {
        "nan_start": lambda: _request([math.nan] + start[1:], goal_type=Req.GOAL_JOINTS, goal_positions=goal),
        "wrong_size": lambda: _request(start, goal_type=Req.GOAL_JOINTS, goal_positions=goal[:4]),
        "out_of_limits": lambda: _request(start, goal_type=Req.GOAL_JOINTS, goal_positions=[7.0] + goal[1:]),
        "unreachable": lambda: _pose_request(start, far),
        "other_frame": lambda: _pose_request(start, near, frame="tool0"),
        "unknown_frame": lambda: _pose_request(start, near, frame="world"),
        "zero_quaternion": lambda: _pose_request(start, near),
        "bad_scaling": lambda: _request(start, goal_type=Req.GOAL_JOINTS, goal_positions=goal, velocity_scaling=2.0),
        "bad_goal_type": lambda: _request(start, goal_type=7, goal_positions=goal),
        "too_short": lambda: _request(start, goal_type=Req.GOAL_JOINTS, goal_positions=goal, duration=0.01),
    }[case]()
    if case == "zero_quaternion":
        o = req.goal_pose.pose.orientation
        o.x = o.y = o.z = o.w = 0.0
    resp = node.call(req)
    assert not resp.success and resp.error_code.val == code, resp.message
    assert resp.message and len(resp.trajectory.points) == 0
    # still serving
    ok = node.call(_request(start, goal_type=Req.GOAL_JOINTS, goal_positions=goal))
    assert ok.success, ok.message
    assert node.proc.poll() is None


def test_clean_shutdown_on_sigint(node):
    """Last in the module: SIGINT ends the node with status 0 and no traceback."""
    node.proc.send_signal(signal.SIGINT)
    assert node.proc.wait(timeout=10) == 0
    text = node.log_path.read_text()
    assert "Traceback" not in text, text[-2000:]
