"""Fault injection while the arm moves (issue 12 item 3): kill -9 of the controller, then of the planner, during
a simulated pick-and-place (sim_bridge in lockstep on simulated time, camera off, controller, planner,
model_server, pick_place; the nodes are started again a second after their death, as ``respawn="true"`` does).

A monitor checks every effort command (finite, within the UR5's effort limits, whichever controller instance sent
it) and every joint_states message (no joint moves faster than 1.5x its velocity limit between two messages:
no jump). The goal running at the kill ends with a clear error code and message (or succeeds by retrying); the
respawned graph answers a Cartesian plan; a new goal afterwards, from the cube's ground-truth position, succeeds
(a second goal is allowed: on the loaded 2-core machine one missed a goal tolerance once). Slow: several simulated
pick-and-places (about 4 minutes).

No perception runs, so the test publishes the scene's obstacles (the pillar, ground truth of
manip_sim/config/pick_place_scene.yaml, base frame) on ``obstacles`` and the goals ask for avoid_obstacles: without
them the UR5's joint-space approach above the cube grazed the pillar, and the contact (PyBullet's ground truth:
wrist_3_link, then wrist_1_link, at 0 mm from the pillar) spun wrist_3 to 6 rad/s (1.98x its velocity limit) with
its commanded effort near 0: a collision the monitor rightly flagged, not a fault of the controller's hand-over.
"""
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from fuzz_support import LimitMonitor
from manip_core import RobotModel

pytest.importorskip("pybullet")
pytest.importorskip("control_msgs.action")

UR5_URDF = Path(__file__).resolve().parents[2] / "manip_core" / "manip_core" / "robots" / "ur5.urdf"
UR5 = RobotModel.load("ur5")
SCENE = Path(__file__).resolve().parents[2] / "manip_sim" / "config" / "pick_place_scene.yaml"
PICK = np.array([0.45, -0.25, 0.02])   # the cube of manip_sim/config/pick_place_scene.yaml
PLACE = np.array([0.30, -0.25, 0.02])
MODEL = {"urdf_path": UR5_URDF, "use_sim_time": "true"}
PARAMS = {
    "sim_bridge": {"camera_rate_hz": 0.0, "use_sim_time": "true", "lockstep_max_age": 0.008,
                   "clock_rate_hz": 250.0},
    "controller": {**MODEL, "state_timeout": 0.25},
    "planner": MODEL,
    "model_server": MODEL,
    "pick_place": MODEL,
}


def _goal(pick, place):
    from geometry_msgs.msg import PoseStamped
    from manip_msgs.action import PickPlace
    goal = PickPlace.Goal(object_name="cube", avoid_obstacles=True)
    for field, xyz in (("pick_pose", pick), ("place_pose", place)):
        ps = PoseStamped()
        ps.header.frame_id = "base_link"
        ps.pose.position.x, ps.pose.position.y, ps.pose.position.z = (float(v) for v in xyz)
        ps.pose.orientation.w = 1.0
        setattr(goal, field, ps)
    return goal


def _scene_obstacles(frame_id="base_link"):
    """The scene's static obstacles (their centres and extents: scene.BodySpec, base frame) as the ObstacleArray
    perception would publish."""
    from manip_msgs.msg import Obstacle, ObstacleArray
    from manip_sim.scene import load_scene
    scene = load_scene(SCENE)
    msg = ObstacleArray()
    msg.header.frame_id = frame_id
    for i, b in enumerate(scene.obstacles):
        size = np.asarray(b.size, dtype=float)
        o = Obstacle(id=i, radius=float(np.linalg.norm(size) / 2), num_points=1, confidence=1.0)
        o.header.frame_id = frame_id
        o.center.x, o.center.y, o.center.z = (float(v) for v in b.position)
        o.size.x, o.size.y, o.size.z = (float(v) for v in size)
        msg.obstacles.append(o)
    assert msg.obstacles, f"{SCENE} has no obstacles"
    return msg


def _planner_answers(client, timeout):
    """A Cartesian plan of 5 cm down from the current pose answered with success within timeout s."""
    from manip_msgs.srv import PlanTrajectory
    from manip_core.ros.conversions import matrix_to_pose
    from sensor_msgs.msg import JointState
    end = time.monotonic() + timeout
    js = {}
    sub = client.node.create_subscription(JointState, "joint_states", lambda m: js.update(q=list(m.position)), 10)
    try:
        while time.monotonic() < end:
            if not client.spin_until(lambda: "q" in js, 10):
                continue
            T = UR5.fk(np.array(js["q"]))
            T[2, 3] -= 0.05
            req = PlanTrajectory.Request(start_positions=js["q"], goal_type=PlanTrajectory.Request.GOAL_POSE,
                                         path_type=PlanTrajectory.Request.PATH_CARTESIAN)
            req.goal_pose.header.frame_id = "base_link"
            req.goal_pose.pose = matrix_to_pose(T)
            res = client.call(PlanTrajectory, "plan_trajectory", req, max(1.0, end - time.monotonic()))
            if res is not None and res.success:
                return True
        return False
    finally:
        client.node.destroy_subscription(sub)


@pytest.mark.slow
def test_kill9_controller_and_planner_during_pick_place(node_procs, ros_client, robustness):
    from rclpy.action import ActionClient
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray
    from manip_msgs.action import PickPlace
    from manip_msgs.msg import ControllerState, ObstacleArray, SceneObjectArray
    client = ros_client
    node = client.node
    procs = {name: node_procs(name, params) for name, params in PARAMS.items()}
    mon = LimitMonitor(UR5)
    truth = {}
    node.create_subscription(Float64MultiArray, "effort_controller/commands", mon.on_effort, 100)
    node.create_subscription(JointState, "joint_states", mon.on_joint_states, 100)
    state_at = {"t": 0.0}   # wall time of the latest controller_state (a respawned controller is up once it publishes)
    node.create_subscription(ControllerState, "joint_trajectory_controller/controller_state",
                             lambda m: state_at.__setitem__("t", time.monotonic()), 10)
    node.create_subscription(SceneObjectArray, "sim/objects", lambda m: truth.update(
        {o.name: np.array([o.pose.position.x, o.pose.position.y, o.pose.position.z]) for o in m.objects}), 10)
    action = ActionClient(node, PickPlace, "pick_place")
    # the pillar for the planner (a respawned planner gets it again from the next message)
    obstacles_pub = node.create_publisher(ObstacleArray, "obstacles", 10)
    obstacles = _scene_obstacles()
    node.create_timer(0.5, lambda: obstacles_pub.publish(obstacles))

    def logs():
        return "\n".join(f"--- {k}\n{p.log[-1500:]}" for k, p in procs.items())

    assert client.spin_until(lambda: action.server_is_ready() and "cube" in truth and mon.efforts > 0, 240), logs()
    # warm: a fresh planner compiles its Cartesian kernels on its first Cartesian plan (48 s once on the loaded
    # 2-core machine: longer than pick_place's plan_timeout of 30 s)
    assert _planner_answers(client, timeout=300), logs()

    def run_goal(pick, place, fault=None, after_s=4.0):
        fut = action.send_goal_async(_goal(pick, place))
        assert client.spin_until(fut.done, 60) and fut.result().accepted, logs()
        res = fut.result().get_result_async()
        if fault:
            client.spin_until(res.done, after_s)
            assert not res.done(), f"the goal ended before the kill of {fault}: {res.result().result}"
            old = procs[fault]
            os.killpg(old.proc.pid, signal.SIGKILL)
            old.wait(10)
            client.spin_until(lambda: False, 1.0)   # respawn delay
            procs[fault] = node_procs(fault, PARAMS[fault], name=f"{fault}-respawned")
        assert client.spin_until(res.done, 600), f"no result within 600 s\n{logs()}"
        return res.result().result

    for fault in ("controller", "planner"):
        r = run_goal(truth["cube"], PLACE if np.linalg.norm(truth["cube"][:2] - PLACE[:2]) > 0.05 else PICK, fault)
        assert r.error_code == 0 or r.message, f"kill -9 {fault}: an error without a message"
        robustness.add(f"kill -9 {fault} during pick_place (respawned after 1 s)", "pick_place action",
                       f"error_code {r.error_code}: {r.message[:80]}".replace("|", "/"))
        # the respawned node answers a normal request (a fresh planner compiles its Cartesian kernels on first
        # use: tens of seconds on a loaded 2-core machine, longer than pick_place's plan_timeout), then a new goal
        # from wherever the cube is succeeds
        assert client.spin_until(lambda: action.server_is_ready(), 60)
        t0 = time.monotonic()
        # the respawned controller holds the arm again (it starts in seconds to minutes on a loaded machine)
        assert client.spin_until(lambda: state_at["t"] > t0, 240), f"no controller_state after the respawn\n{logs()}"
        assert _planner_answers(client, timeout=240), f"the respawned graph does not plan\n{logs()}"
        robustness.add(f"kill -9 {fault}: respawned graph answers a Cartesian plan", "planner",
                       f"after {time.monotonic() - t0:.0f} s")
        client.spin_until(lambda: False, 2.0)
        for attempt in (1, 2):   # one more goal allowed (a loaded machine can miss a goal tolerance once)
            target = PLACE if np.linalg.norm(truth["cube"][:2] - PLACE[:2]) > 0.05 else PICK
            r2 = run_goal(truth["cube"], target)
            robustness.add(f"new goal after kill -9 {fault} (attempt {attempt})", "pick_place action",
                           f"error_code {r2.error_code} {r2.message[:60]}".replace("|", "/"))
            if r2.error_code == 0:
                break
            client.spin_until(lambda: False, 3.0)
        assert r2.error_code == 0, f"after kill -9 {fault}: {r2.message}\n{logs()}"
        client.spin_until(lambda: False, 2.0)
        assert np.linalg.norm(truth["cube"][:2] - target[:2]) < 0.02, truth
    robustness.add("monitor over both faults", "effort commands / joint_states",
                   f"{mon.efforts} commands, {mon.states} states, {len(mon.violations)} violations, "
                   f"max |dq/dt|/v_max {mon.max_rate:.2f}")
    assert not mon.violations, f"{mon.violations[:5]}\n{logs()}"
    for name, p in procs.items():
        assert p.proc.poll() is None, f"{name} exited\n{p.log[-2000:]}"
