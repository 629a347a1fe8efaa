"""The pick_place and planner nodes over real DDS on arms other than the UR5: the MBM Panda (7 DOF, the
file as published: massless links), and (slow) example-robot-data's UR10 (tip ee_link, whose approach axis
is its x axis: ``approach_axis_tip:=[1.0, 0.0, 0.0]``) and xArm7. No home is given: the arm returns to where
it started. A fake controller and gripper (test_pick_place_node.FakeRobot) execute; Pinocchio's FK of the
executed trajectories' ends says where the tip was at the grasp and the release.
"""
import os
import random
import threading
import time
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("manip_msgs.action")
pin = pytest.importorskip("pinocchio")

from rclpy.executors import MultiThreadedExecutor  # noqa: E402
from action_msgs.msg import GoalStatus  # noqa: E402

from manip_core.model import RobotModel  # noqa: E402
from manip_msgs.action import PickPlace  # noqa: E402
from manip_planning.test.test_pick_place_any_arm import MBM_PANDA, PinFK, _start  # noqa: E402
from manip_planning.test.test_pick_place_node import (FakeRobot, _goal, _pythonpath, _spawn,  # noqa: E402
                                                      _stop)


def _erd(rel):
    from manip_core.reference_robots import example_robot
    try:
        return example_robot(rel)
    except FileNotFoundError as e:
        pytest.skip(str(e))


ARMS = {
    # name: path, base, tip, approach axis, pick, place (m, base frame), marks
    "mbm_panda": (lambda: MBM_PANDA, "panda_link0", "panda_grasptarget", (0.0, 0.0, 1.0), (0.5, -0.2, 0.05),
                  (0.45, 0.25, 0.05), ()),
    "erd_ur10": (lambda: _erd("ur_description/urdf/ur10_robot.urdf"), "base_link", "ee_link", (1.0, 0.0, 0.0),
                 (0.7, -0.3, 0.05), (0.6, 0.4, 0.05), (pytest.mark.slow,)),
    "erd_xarm7": (lambda: _erd("xarm_description/urdf/xarm7.urdf"), "link_base", "link_eef", (0.0, 0.0, 1.0),
                  (0.4, -0.2, 0.05), (0.35, 0.25, 0.05), (pytest.mark.slow,)),
}


@pytest.mark.parametrize("name", [pytest.param(n, marks=a[6]) for n, a in ARMS.items()])
def test_pick_and_place_on_another_arm(name, tmp_path):
    get, base, tip, axis, pick, place, _ = ARMS[name]
    path = Path(get())
    if not path.is_file():
        pytest.skip(f"{path} not here")
    model = RobotModel.from_urdf(str(path), base, tip)
    fk = PinFK(path, model)
    domain = random.randint(100, 200)
    ns = f"/pick_place_arms_{os.getpid()}_{random.randint(0, 1_000_000)}"
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
               PYTHONPATH=_pythonpath(), PYTHONUNBUFFERED="1")
    model_args = ["-r", f"__ns:={ns}", "-p", f"urdf_path:={path}", "-p", f"base_link:={base}",
                  "-p", f"tip_link:={tip}"]
    procs = {"planner": _spawn("manip_planning.planner_node", model_args, env, tmp_path / "planner.log"),
             "pick_place": _spawn("manip_planning.pick_place_node",
                                  model_args + ["-p", "server_timeout:=5.0", "-p", "plan_timeout:=120.0",
                                                "-p", f"approach_axis_tip:=[{', '.join(map(str, axis))}]"],
                                  env, tmp_path / "pick_place.log")}
    saved = os.environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE")
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=domain)
    start = _start(model)
    robot = FakeRobot(ctx, model, start, ns)
    executor = MultiThreadedExecutor(num_threads=4, context=ctx)
    executor.add_node(robot)
    threading.Thread(target=executor.spin, daemon=True).start()

    def logs():
        return "\n".join(f"--- {n}\n{p.log_path.read_text()[-2000:]}" for n, p in procs.items())

    try:
        end = time.monotonic() + 60.0
        while not robot.client.wait_for_server(timeout_sec=0.5):
            for n, p in procs.items():
                assert p.poll() is None, f"{n} exited:\n{logs()}"
            assert time.monotonic() < end, "pick_place action server not found:\n" + logs()
        res = robot.send(_goal(pick, place, frame=base), timeout=120.0)
        r = res.result
        assert res.status == GoalStatus.STATUS_SUCCEEDED, r.message + "\n" + logs()
        assert list(r.phase_names) == ["HOME", "ABOVE_PICK", "PICK", "ABOVE_PLACE", "PLACE", "HOME"]
        assert robot.grasps == [(True, "cube"), (False, "cube")]
        # started where it is (home = the start): 7 trajectories; back at the start
        assert len(robot.trajectories) == 7
        assert np.allclose(robot.q, start, atol=1e-6)
        a = np.asarray(axis) / np.linalg.norm(axis)
        for k, p, lift in ((1, pick, 0.03), (4, place, 0.035)):       # grasp and release poses
            t = robot.trajectories[k]
            idx = [list(t.joint_names).index(j) for j in model.joint_names]
            T = fk(np.asarray(t.points[-1].positions)[idx])
            assert np.allclose(T[:3, 3], np.asarray(p) + [0, 0, lift], atol=1e-4), (k, T[:3, 3])
            assert np.allclose(T[:3, :3] @ a, [0, 0, -1], atol=1e-4), k
    finally:
        for p in procs.values():
            _stop(p)
        executor.shutdown(timeout_sec=1.0)
        robot.destroy_node()
        rclpy.try_shutdown(context=ctx)
        if saved is None:
            os.environ.pop("ROS_AUTOMATIC_DISCOVERY_RANGE", None)
        else:
            os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = saved
