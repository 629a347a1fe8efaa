"""Any arm, not only the bundled UR5: the simulated graph (launch/pick_place_sim.launch.xml under manip-launch,
every node its own process, DDS between them) on arms from example-robot-data (meshes through package://) and
the MotionBenchMaker Panda as published (a massless link with inertia, fixed fingers), each from a scene file
that names only the URDF, base and tip links; and fail fast: a node that dies at start-up makes the demo fail
within 10 s of it, naming it.

Per arm: every node takes the one robot given to the launch file (their logs name its chain), the simulator
starts it at the derived ready configuration (tool down: checked with Pinocchio's FK of the URDF), the
controller moves the simulated arm along a joint trajectory (the simulator's joint_states reach the goal), and
model_server's compute_fk of the reached configuration equals Pinocchio's FK of the same URDF.
"""
import os
import random
import re
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
LAUNCH = ROOT / "launch" / "pick_place_sim.launch.xml"
ERD = "package://example-robot-data/robots/"
ERD_DIR = Path(sysconfig.get_paths()["purelib"]) / "cmeel.prefix/share/example-robot-data/robots"
MBM_PANDA = ROOT.parent / "shared/benchmarks/mbm/robots/panda/panda_spherized.urdf"

# name: (urdf as a scene names it, base link, tip link, expected dof)
ARMS = {
    "xarm7": (ERD + "xarm_description/urdf/xarm7.urdf", "link_base", "link_eef", 7),
    "mbm_panda": (str(MBM_PANDA), "panda_link0", "panda_grasptarget", 7),
    "ur10": (ERD + "ur_description/urdf/ur10_robot.urdf", "base_link", "tool0", 6),
    "kinova": (ERD + "kinova_description/robots/kinova.urdf", "base", "j2s6s200_end_effector", 6),
}
# nodes that load the robot model and say so ("robot model from ...: NAME, BASE -> TIP, N joints")
MODEL_NODES = ("model_server", "controller", "planner", "pick_place", "state_publisher")


def _local_path(uri):
    from manip_core.package_uri import resolve_uri
    return resolve_uri(uri)


def _spin_until(executor, cond, timeout, what, proc, log_path):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.05)
        if cond():
            return
        if proc.poll() is not None:
            break
    tail = "\n".join(Path(log_path).read_text(errors="replace").splitlines()[-40:])
    raise AssertionError(f"timed out waiting for {what} (launch exit code {proc.poll()})\n{tail}")


def _run_arm(name, tmp_path):
    urdf, base, tip, dof = ARMS[name]
    if name == "mbm_panda" and not MBM_PANDA.is_file():
        pytest.skip(f"{MBM_PANDA} not present")
    pin = pytest.importorskip("pinocchio")
    import rclpy
    from builtin_interfaces.msg import Duration
    from manip_msgs.msg import ControllerState
    from manip_msgs.srv import ComputeFK
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor
    from sensor_msgs.msg import JointState
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    from manip_core import RobotModel
    from manip_core.ros.conversions import pose_to_matrix

    scene = tmp_path / "scene.yaml"   # names only the robot: no table, objects or initial positions
    scene.write_text(f"robot:\n  urdf: {urdf}\n  base_link: {base}\n  tip_link: {tip}\n")
    path = _local_path(urdf)
    model = RobotModel.from_urdf(path, base, tip)
    assert model.dof == dof
    env = dict(os.environ, ROS_DOMAIN_ID=str(random.randint(100, 200)), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    log_path = tmp_path / "launch.log"
    log = open(log_path, "w")
    proc = subprocess.Popen([sys.executable, "-m", "manip_core.launcher", str(LAUNCH), f"robot:={urdf}",
                             f"base_link:={base}", f"tip_link:={tip}", f"scene:={scene}"],
                            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True, cwd=ROOT)
    ctx = Context()
    rclpy.init(context=ctx, domain_id=int(env["ROS_DOMAIN_ID"]))
    node = rclpy.create_node(f"arm_test_{name}", context=ctx)
    executor = SingleThreadedExecutor(context=ctx)
    executor.add_node(node)
    try:
        latest, states = {}, []
        node.create_subscription(JointState, "joint_states", lambda m: latest.update(zip(m.name, m.position)), 10)
        node.create_subscription(ControllerState, "joint_trajectory_controller/controller_state", states.append, 10)
        pub = node.create_publisher(JointTrajectory, "joint_trajectory_controller/joint_trajectory", 10)
        names = model.joint_names
        # the controller publishes its state once it has the robot model (from model_server) and joint_states
        _spin_until(executor, lambda: len(states) > 0 and all(n in latest for n in names), 240,
                    "the controller's state", proc, log_path)
        assert list(states[-1].joint_names) == names
        chain = f"{base} -> {tip}, {dof} joints"

        def missing():
            text = log_path.read_text(errors="replace")
            return [n for n in MODEL_NODES if not re.search(rf"\[{n}\] .*robot model from .*, {re.escape(chain)}", text)]
        _spin_until(executor, lambda: not missing(), 120, f"every node's robot model ({chain})", proc, log_path)
        text = log_path.read_text(errors="replace")
        assert re.search(rf"\[sim_bridge\] .*{re.escape(f'{base} -> {tip}')}", text)
        assert "initial joint positions (the scene gives none): IK of" in text
        # the ready configuration: tool (tip z axis) pointing down, by Pinocchio's FK of the URDF
        pm = pin.buildModelFromUrdf(path)
        pd = pm.createData()
        fid = pm.getFrameId(tip)

        def pin_fk(q_named):
            q = pin.neutral(pm)
            for jn, v in q_named.items():
                j = pm.joints[pm.getJointId(jn)]
                if j.nq == 2:     # continuous joint: (cos, sin)
                    q[j.idx_q:j.idx_q + 2] = [np.cos(v), np.sin(v)]
                else:
                    q[j.idx_q] = v
            pin.framesForwardKinematics(pm, pd, q)
            base_T = pd.oMf[pm.getFrameId(base)].homogeneous
            return np.linalg.inv(base_T) @ pd.oMf[fid].homogeneous

        q_ready = {n: latest[n] for n in names}
        T_ready = pin_fk(q_ready)
        assert T_ready[2, 2] < -0.99, f"tool axis at the ready pose: {T_ready[:3, 2]}"
        # a joint trajectory through the controller moves the simulated arm
        start = np.array([q_ready[n] for n in names])
        step = np.where(np.arange(dof) % 2 == 0, 0.15, -0.15)
        goal = np.clip(start + step, model.joint_lower + 0.05, model.joint_upper - 0.05)
        spin = _spin_until
        spin(executor, lambda: pub.get_subscription_count() > 0, 60, "the trajectory subscription", proc, log_path)
        traj = JointTrajectory(joint_names=names)
        traj.points = [JointTrajectoryPoint(positions=[float(v) for v in goal], velocities=[0.0] * dof,
                                            time_from_start=Duration(sec=2))]
        pub.publish(traj)
        spin(executor, lambda: np.max(np.abs(np.array([latest[n] for n in names]) - goal)) < 0.02, 120,
             "the arm to reach the trajectory's goal", proc, log_path)
        # model_server's FK of the reached configuration = Pinocchio's FK of the same URDF
        q_end = {n: latest[n] for n in names}
        client = node.create_client(ComputeFK, "compute_fk")
        assert client.wait_for_service(timeout_sec=60)
        req = ComputeFK.Request(joint_names=list(names), positions=[q_end[n] for n in names])
        future = client.call_async(req)
        spin(executor, future.done, 60, "compute_fk", proc, log_path)
        res = future.result()
        assert res.success, res.message
        T = pose_to_matrix(res.pose.pose)
        np.testing.assert_allclose(T, pin_fk(q_end), atol=1e-6)
        assert "Traceback" not in log_path.read_text(errors="replace")
        assert proc.poll() is None, "the launch stopped"
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.shutdown(context=ctx)
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.close()


def test_graph_on_xarm7_from_package_uri(tmp_path):
    """7-DOF, meshes through package://, URDF root 'world' above the base link."""
    _run_arm("xarm7", tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mbm_panda", "ur10", "kinova"])
def test_graph_on_other_arms(name, tmp_path):
    _run_arm(name, tmp_path)


BROKEN_LAUNCH = """<launch>
  <arg name="scene"/><arg name="camera"/><arg name="robot"/><arg name="base_link"/><arg name="tip_link"/>
  <arg name="control_law" default="computed_torque"/><arg name="state_estimator" default="none"/>
  <group>
    <include file="{launch}">
      <arg name="scene" value="$(var scene)"/><arg name="camera" value="$(var camera)"/>
      <arg name="robot" value="$(var robot)"/><arg name="base_link" value="$(var base_link)"/>
      <arg name="tip_link" value="$(var tip_link)"/>
    </include>
  </group>
  <node pkg="manip_control" exec="controller" name="broken_controller" output="screen">
    <param name="control_law" value="no_such_law"/>
  </node>
</launch>
"""


def test_demo_fails_fast_naming_a_node_that_dies_at_start_up(tmp_path):
    """A node of the demo's graph that dies at start-up (a bad parameter: FATAL, exit 2) makes manip-launch stop
    every node and the demo fail within 10 s of the node's death, naming the node and its error line."""
    launch = tmp_path / "broken.launch.xml"
    launch.write_text(BROKEN_LAUNCH.format(launch=LAUNCH))
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "manip_sim.demo", "--launch", str(launch), "--output",
                        str(tmp_path / "out"), "--timeout", "120"], cwd=ROOT, capture_output=True, text=True,
                       timeout=180)
    wall = time.monotonic() - t0
    assert p.returncode == 2, p.stdout + p.stderr
    m = re.search(r"manip-demo: error: the graph failed ([\d.]+) s after the launch started \(seen at wall clock "
                  r"([\d.]+) s\), while waiting for the simulator \(sim/objects\): FAILED: broken_controller "
                  r"(logged FATAL|exited with code 2); last error: \[FATAL\] \[([\d.]+)\] .*control_law must be one "
                  r"of .*'no_such_law'", p.stderr)
    assert m, p.stderr
    # from the node's FATAL (its log stamp, wall clock) to the demo's failure: fail fast (about 0.5 s); the node's
    # own start-up (Python imports, ~3-9 s on a loaded 2-core machine) comes before it
    latency = float(m.group(2)) - float(m.group(4))
    assert 0.0 <= latency < 10.0, p.stderr
    assert float(m.group(1)) < 30.0, p.stderr
    assert wall < 60, wall     # including the orderly stop of the nodes that had started
    log = (tmp_path / "out" / "launch.log").read_text()
    assert "[manip-launch] sending SIGINT to" in log and "sim_bridge" in log


def test_planner_collision_meshes_dae_from_package_uri_and_bounded(tmp_path, monkeypatch):
    """The planner's collision spheres from a URDF's meshes: DAE through package:// (Kinova, example-robot-data), an
    oversized or non-regular mesh file refused in one line naming the link."""
    from manip_planning.robot_collision import CollisionModelError, parse_collision_shapes
    monkeypatch.setenv("MANIP_CACHE_DIR", str(tmp_path / "cache"))
    kinova = _local_path(ERD + "kinova_description/robots/kinova.urdf")
    shapes = parse_collision_shapes(kinova)
    assert {"j2s6s200_link_1", "j2s6s200_link_2", "j2s6s200_link_6"} <= set(shapes)
    mesh = tmp_path / "big.stl"
    mesh.write_bytes(b"\0" * 1024)
    urdf = ('<robot name="r"><link name="a"><collision><geometry><mesh filename="{}"/></geometry></collision></link>'
            '</robot>')
    import manip_core.package_uri as pu
    monkeypatch.setattr(pu, "MAX_MESH_BYTES", 1000)
    monkeypatch.setattr(pu.read_mesh_bytes, "__defaults__", (1000,))
    with pytest.raises(CollisionModelError, match=r"link 'a'.*big.stl: 1024 bytes, more than the maximum of 1000"):
        parse_collision_shapes(urdf.format(mesh))
    with pytest.raises(CollisionModelError, match=r"link 'a' collision #0: mesh file '/dev/zero' not found"):
        parse_collision_shapes(urdf.format("/dev/zero"))
