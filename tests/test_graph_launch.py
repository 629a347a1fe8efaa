"""The whole simulated graph, started from launch/pick_place_sim.launch.xml by manip-launch, process to process
over real DDS (isolated: random ROS_DOMAIN_ID, localhost discovery).

Checks: every node of the launch file comes up; the IK service answers; a JointTrajectory sent to the
controller moves the simulated arm to within tolerance; perception reports each object of the known scene
near its true position; Ctrl-C stops everything and leaves no process behind.
"""
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
LAUNCH = ROOT / "launch" / "pick_place_sim.launch.xml"
NODES = {"sim_bridge", "model_server", "controller", "state_publisher", "planner", "stereo_obstacles", "pick_place"}


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    import rclpy
    env = dict(os.environ, ROS_DOMAIN_ID=str(random.randint(100, 200)), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    os.environ.update({k: env[k] for k in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE")})
    log_path = tmp_path_factory.mktemp("graph") / "launch.log"
    pid_file = log_path.with_name("pids.txt")
    log = open(log_path, "w")
    proc = subprocess.Popen([sys.executable, "-m", "manip_core.launcher", str(LAUNCH), "--pid-file", str(pid_file)],
                            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True, cwd=ROOT)
    rclpy.init()
    node = rclpy.create_node("graph_test")
    info = {"proc": proc, "log": log_path, "pid_file": pid_file, "node": node}
    yield info
    node.destroy_node()
    rclpy.shutdown()
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    log.close()


def spin_until(node, cond, timeout, what, graph=None):
    import rclpy
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.05)
        if cond():
            return
        if graph is not None and graph["proc"].poll() is not None:
            break
    tail = "" if graph is None else "\n".join(Path(graph["log"]).read_text().splitlines()[-30:])
    raise AssertionError(f"timed out waiting for {what}\n{tail}")


def test_every_node_of_the_launch_file_comes_up(graph):
    node = graph["node"]
    spin_until(node, lambda: NODES <= set(node.get_node_names()), 120, f"nodes {sorted(NODES)}", graph)


def test_ik_service_answers(graph):
    import rclpy
    from geometry_msgs.msg import PoseStamped
    from manip_msgs.srv import ComputeIK

    from manip_core import RobotModel
    from manip_core.ros.conversions import matrix_to_pose
    node = graph["node"]
    ur5 = RobotModel.load("ur5", tip_link="tool0")
    q = np.array([3.0, -1.4, 1.5, -1.7, -1.6, 0.2])
    client = node.create_client(ComputeIK, "compute_ik")
    assert client.wait_for_service(timeout_sec=60)
    future = client.call_async(ComputeIK.Request(target=PoseStamped(pose=matrix_to_pose(ur5.fk(q))),
                                                 all_solutions=True))
    rclpy.spin_until_future_complete(node, future, timeout_sec=30)
    res = future.result()
    assert res is not None and res.success, getattr(res, "message", "no answer")
    assert len(res.solutions) == 8
    for sol in res.solutions:
        np.testing.assert_allclose(ur5.fk(np.array(sol.position)), ur5.fk(q), atol=1e-9)


def test_joint_trajectory_moves_the_simulated_arm(graph):
    from builtin_interfaces.msg import Duration
    from sensor_msgs.msg import JointState
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
    node = graph["node"]
    latest = {}
    node.create_subscription(JointState, "joint_states", lambda m: latest.update(zip(m.name, m.position)), 10)
    pub = node.create_publisher(JointTrajectory, "joint_trajectory_controller/joint_trajectory", 10)
    names = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
             "wrist_3_joint"]
    spin_until(node, lambda: all(n in latest for n in names), 60, "joint_states", graph)
    spin_until(node, lambda: pub.get_subscription_count() > 0, 60, "the controller's trajectory subscription", graph)
    # the controller takes trajectories once it has the model and joint_states: it then publishes its state
    from manip_msgs.msg import ControllerState
    states = []
    node.create_subscription(ControllerState, "joint_trajectory_controller/controller_state", states.append, 10)
    spin_until(node, lambda: len(states) > 0, 60, "the controller's state (model and joint_states loaded)", graph)
    start = np.array([latest[n] for n in names])
    goal = start + np.array([0.2, -0.15, 0.2, 0.1, -0.1, 0.3])
    traj = JointTrajectory(joint_names=names)
    traj.points = [JointTrajectoryPoint(positions=list(goal), velocities=[0.0] * 6, time_from_start=Duration(sec=2))]
    pub.publish(traj)
    spin_until(node, lambda: np.max(np.abs(np.array([latest[n] for n in names]) - goal)) < 0.02, 60,
               "the arm to reach the trajectory's goal", graph)


def test_perception_reports_the_scene_objects(graph):
    from manip_msgs.msg import ObstacleArray, SceneObject, SceneObjectArray
    node = graph["node"]
    truth, seen = {}, []
    node.create_subscription(SceneObjectArray, "sim/objects", lambda m: truth.update(
        {o.name: (o.kind, np.array([o.pose.position.x, o.pose.position.y, o.pose.position.z]),
                  np.array([o.size.x, o.size.y, o.size.z])) for o in m.objects}), 10)
    node.create_subscription(ObstacleArray, "obstacles", lambda m: seen.append(
        [(np.array([o.center.x, o.center.y, o.center.z]), np.array([o.size.x, o.size.y, o.size.z]))
         for o in m.obstacles]), 10)
    spin_until(node, lambda: truth and len(seen) >= 3, 120, "ground truth and three obstacle messages", graph)
    obstacles = seen[-1]
    for name, (kind, centre, size) in truth.items():
        if kind == SceneObject.KIND_SUPPORT:
            continue
        d = min(np.linalg.norm(c - centre) for c, _ in obstacles)
        assert d < 0.03, f"{name}: nearest perceived obstacle {d:.3f} m from its true centre"
    # and nothing else: every perceived obstacle belongs to a scene object
    for c, _ in obstacles:
        assert min(np.linalg.norm(c - t[1]) for t in truth.values()) < 0.03, f"phantom obstacle at {c}"


def test_ctrl_c_stops_every_process(graph):
    proc = graph["proc"]
    groups = json.loads(Path(graph["pid_file"]).read_text())  # node label -> process group ids
    pgids = [g for gs in groups.values() for g in gs]
    assert len(groups) == len(NODES) and pgids
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 0, "\n".join(Path(graph["log"]).read_text().splitlines()[-30:])
    time.sleep(0.5)
    alive = []
    for pgid in pgids:
        try:
            os.killpg(pgid, 0)
            alive.append(pgid)
        except ProcessLookupError:
            pass
    assert not alive, f"processes left behind: {alive}"
    text = Path(graph["log"]).read_text()
    assert "Traceback" not in text, text[-3000:]
