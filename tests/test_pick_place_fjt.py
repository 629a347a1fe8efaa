"""pick_place in trajectory client mode (``trajectory_action``) against manip's FollowJointTrajectory server:
sim_bridge (PyBullet, camera off), controller, planner and pick_place in subprocesses, in simulated time; the
task moves the scene's cube 15 cm along the table (clear of the pillar: no perception runs) and the cube's
ground truth (sim/objects) must end within 2 cm of the place pose. Slow (about a minute of simulated task)."""
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("pybullet")
pytest.importorskip("control_msgs.action")

from geometry_msgs.msg import PoseStamped  # noqa: E402
from rclpy.action import ActionClient  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402

from manip_msgs.action import PickPlace  # noqa: E402
from manip_msgs.msg import SceneObjectArray  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
UR5 = ROOT / "manip_core" / "manip_core" / "robots" / "ur5.urdf"
PICK = np.array([0.45, -0.25, 0.02])   # the cube of manip_sim/config/pick_place_scene.yaml
PLACE = np.array([0.30, -0.25, 0.02])


@pytest.mark.slow
def test_pick_place_executes_through_follow_joint_trajectory(tmp_path):
    env = dict(os.environ, ROS_DOMAIN_ID=str(random.randint(100, 200)), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
               PYTHONUNBUFFERED="1")
    py = sys.executable
    model = ["-p", f"urdf_path:={UR5}", "-p", "use_sim_time:=true"]
    cmds = {
        "sim": [py, "-m", "manip_sim.sim_bridge_node", "--ros-args", "-p", "camera_rate_hz:=0.0",
                "-p", "use_sim_time:=true", "-p", "lockstep_max_age:=0.008", "-p", "clock_rate_hz:=250.0"],
        "controller": [py, "-m", "manip_control.controller_node", "--ros-args", *model, "-p", "state_timeout:=0.25"],
        "planner": [py, "-m", "manip_planning.planner_node", "--ros-args", *model],
        "pick_place": [py, "-m", "manip_planning.pick_place_node", "--ros-args", *model,
                       "-p", "trajectory_action:=joint_trajectory_controller/follow_joint_trajectory"],
    }
    procs = {k: subprocess.Popen(c, stdout=open(tmp_path / f"{k}.log", "w"), stderr=subprocess.STDOUT, env=env,
                                 cwd=str(ROOT)) for k, c in cmds.items()}
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=int(env["ROS_DOMAIN_ID"]))
    node = rclpy.create_node("pick_place_fjt_test", context=ctx)
    ex = SingleThreadedExecutor(context=ctx)
    ex.add_node(node)
    truth = {}
    node.create_subscription(SceneObjectArray, "sim/objects", lambda m: truth.update(
        {o.name: np.array([o.pose.position.x, o.pose.position.y, o.pose.position.z]) for o in m.objects}), 10)
    client = ActionClient(node, PickPlace, "pick_place")
    logs = lambda: "\n".join(f"--- {k}\n{(tmp_path / f'{k}.log').read_text()[-1500:]}" for k in cmds)  # noqa: E731
    try:
        end = time.monotonic() + 90
        while not (client.server_is_ready() and "cube" in truth):
            assert time.monotonic() < end, logs()
            for k, p in procs.items():
                assert p.poll() is None, logs()
            ex.spin_once(timeout_sec=0.1)
        goal = PickPlace.Goal(object_name="cube", avoid_obstacles=False)
        for field, xyz in (("pick_pose", PICK), ("place_pose", PLACE)):
            ps = PoseStamped()
            ps.header.frame_id = "base_link"
            ps.pose.position.x, ps.pose.position.y, ps.pose.position.z = (float(v) for v in xyz)
            ps.pose.orientation.w = 1.0
            setattr(goal, field, ps)
        fut = client.send_goal_async(goal)
        while not fut.done():
            ex.spin_once(timeout_sec=0.1)
        assert fut.result().accepted
        res_fut = fut.result().get_result_async()
        end = time.monotonic() + 400
        while not res_fut.done():
            assert time.monotonic() < end, logs()
            ex.spin_once(timeout_sec=0.1)
        result = res_fut.result().result
        assert result.error_code == 0, (result.message, logs())
        t_end = time.monotonic() + 3
        while time.monotonic() < t_end:
            ex.spin_once(timeout_sec=0.1)
        err = np.linalg.norm(truth["cube"][:2] - PLACE[:2])
        print(f"\npick_place through FollowJointTrajectory: cube placed {err * 100:.1f} cm from the target")
        assert err < 0.02, logs()
        pp_log = (tmp_path / "pick_place.log").read_text()
        assert "trajectories go to FollowJointTrajectory action 'joint_trajectory_controller/follow_joint_trajectory'" \
            in pp_log, pp_log[-2000:]
    finally:
        ex.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=ctx)
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        for p in procs.values():
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
