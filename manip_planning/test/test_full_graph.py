"""OPT-IN full-graph test of pick_place: the real simulator (manip_sim sim_bridge, PyBullet), the real
controller (manip_control), the planner and pick_place nodes, each ``python -m`` in its own process on a
random ROS_DOMAIN_ID (100-200, localhost) and namespace. Obstacles come from the simulator's ground truth
(sim/objects -> obstacles), not from stereo perception, so that this tests planning and execution.

Slow (about a minute of simulated time, real-time paced) and sensitive to machine load (the controller
holds position when joint_states are more than state_timeout late), so it runs only with
MANIP_FULL_GRAPH=1:   MANIP_FULL_GRAPH=1 .venv/bin/python -m pytest -q manip_planning/test/test_full_graph.py
The end-to-end demo with perception is manip_sim's ``manip-demo`` (make demo).
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

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.environ.get("MANIP_FULL_GRAPH") != "1",
                                 reason="opt-in full-graph test: set MANIP_FULL_GRAPH=1")]

ROOT = Path(__file__).resolve().parents[2]


def _pythonpath():
    parts = [str(ROOT / p) for p in ("manip_planning", "manip_core", "manip_control", "manip_sim")]
    if os.environ.get("PYTHONPATH"):
        parts.append(os.environ["PYTHONPATH"])
    return os.pathsep.join(parts)


def test_pick_and_place_in_the_simulator(ur5, demo, tmp_path):
    rclpy = pytest.importorskip("rclpy")
    pytest.importorskip("manip_sim.sim_bridge_node")
    pytest.importorskip("manip_control.controller_node")
    from geometry_msgs.msg import Point, Vector3
    from rclpy.action import ActionClient
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import JointState

    from manip_msgs.action import PickPlace
    from manip_msgs.msg import Obstacle, ObstacleArray, SceneObject, SceneObjectArray

    domain = random.randint(100, 200)
    ns = f"/full_graph_{os.getpid()}_{random.randint(0, 1_000_000)}"
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
               PYTHONPATH=_pythonpath(), PYTHONUNBUFFERED="1")
    model = ["-p", f"urdf_path:={ur5.source}", "-p", "base_link:=base_link", "-p", "tip_link:=tool0"]
    common = ["-r", f"__ns:={ns}", "-p", "use_sim_time:=true"]
    scene = ROOT / "manip_sim" / "config" / "pick_place_scene.yaml"
    specs = {
        "sim_bridge": ("manip_sim.sim_bridge_node", common + ["-p", f"scene_file:={scene}",
                                                               "-p", "camera_rate_hz:=0.0"]),
        "controller": ("manip_control.controller_node", common + model + ["-p", "state_timeout:=0.5"]),
        "planner": ("manip_planning.planner_node", common + model),
        "pick_place": ("manip_planning.pick_place_node", common + model),
    }
    procs = {}
    logs = {}
    for name, (module, args) in specs.items():
        logs[name] = open(tmp_path / f"{name}.log", "w")
        procs[name] = subprocess.Popen([sys.executable, "-m", module, "--ros-args", *args], env=env,
                                       stdout=logs[name], stderr=subprocess.STDOUT)
    saved = os.environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE")
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=domain)
    node = Node("full_graph_test", context=ctx, namespace=ns,
                parameter_overrides=[Parameter("use_sim_time", value=True)])
    truth, joints = {}, []
    obs_pub = node.create_publisher(ObstacleArray, "obstacles", 10)

    def on_objects(msg):
        for o in msg.objects:
            p = o.pose.position
            truth[o.name] = (o.kind, np.array([p.x, p.y, p.z]), np.array([o.size.x, o.size.y, o.size.z]))
        arr = ObstacleArray()
        arr.header.frame_id = "base_link"
        for o in msg.objects:
            if o.kind == SceneObject.KIND_OBSTACLE:
                arr.obstacles.append(Obstacle(center=o.pose.position,
                                              size=Vector3(x=o.size.x, y=o.size.y, z=o.size.z),
                                              radius=float(np.linalg.norm([o.size.x, o.size.y, o.size.z]) / 2)))
        obs_pub.publish(arr)

    node.create_subscription(SceneObjectArray, "sim/objects", on_objects, 10)
    node.create_subscription(JointState, "joint_states",
                             lambda m: joints.append(dict(zip(m.name, m.position))), 10)
    client = ActionClient(node, PickPlace, "pick_place")
    executor = SingleThreadedExecutor(context=ctx)
    executor.add_node(node)
    threading.Thread(target=executor.spin, daemon=True).start()

    def logs_tail():
        return "\n".join(f"--- {n}\n{(tmp_path / f'{n}.log').read_text()[-1500:]}" for n in procs)

    try:
        end = time.monotonic() + 60.0
        while not (client.wait_for_server(timeout_sec=0.5) and "cube" in truth):
            assert all(p.poll() is None for p in procs.values()), logs_tail()
            assert time.monotonic() < end, "graph not up:\n" + logs_tail()
        goal = PickPlace.Goal()
        for stamped, p in ((goal.pick_pose, truth["cube"][1]), (goal.place_pose, demo.PLACE)):
            stamped.header.frame_id = "base_link"
            stamped.pose.position = Point(x=float(p[0]), y=float(p[1]), z=float(p[2]))
            stamped.pose.orientation.w = 1.0
        goal.object_name = "cube"
        goal.avoid_obstacles = True
        fut = client.send_goal_async(goal)
        end = time.monotonic() + 30.0
        while not fut.done():
            assert time.monotonic() < end, "goal not answered"
            time.sleep(0.05)
        res_fut = fut.result().get_result_async()
        end = time.monotonic() + 240.0
        while not res_fut.done():
            assert time.monotonic() < end, "no result:\n" + logs_tail()
            time.sleep(0.1)
        result = res_fut.result().result
        time.sleep(1.5)                  # the cube settles
        assert result.error_code == PickPlace.Result.SUCCESSFUL, result.message + "\n" + logs_tail()
        assert list(result.phase_names) == ["HOME", "ABOVE_PICK", "PICK", "ABOVE_PLACE", "PLACE", "HOME"]
        err = float(np.linalg.norm(truth["cube"][1][:2] - demo.PLACE[:2]))
        assert err < 0.02, f"cube placed {err:.3f} m from the target"
        pillar = [(c, s) for k, c, s in truth.values() if k == SceneObject.KIND_OBSTACLE][0]
        Q = np.array([[j[n] for n in ur5.joint_names] for j in joints[::10]])
        clearance = demo.urdf_box_clearance(demo.ur5_path(), Q, pillar[0], pillar[1])   # the arm's cylinders
        phases = list(zip(result.phase_names, np.round(result.phase_durations, 2).tolist()))
        print(f"full graph: {result.message}; phases {phases}; cube {err * 100:.1f} cm from the target; min clearance of the executed motion {clearance:.3f} m")
        assert clearance > 0.0
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        for p in procs.values():
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for f in logs.values():
            f.close()
        executor.shutdown(timeout_sec=1.0)
        node.destroy_node()
        rclpy.try_shutdown(context=ctx)
        if saved is None:
            os.environ.pop("ROS_AUTOMATIC_DISCOVERY_RANGE", None)
        else:
            os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = saved
