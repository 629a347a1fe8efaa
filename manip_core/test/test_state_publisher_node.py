"""state_publisher over real DDS, process to process: /tf_static (transient local) and /tf from joint_states,
composed along the tree and compared with Pinocchio's frame placements (robot_state_publisher semantics)."""
import os
import random
import subprocess
import sys
import time

import numpy as np
import pinocchio as pin
import pytest

pytest.importorskip("tf2_msgs.msg")

import rclpy  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from manip_core.reference_robots import UR5_REL, example_robot  # noqa: E402
from manip_core.ros.tf import STATIC_QOS, TF_QOS  # noqa: E402

UR5 = str(example_robot(UR5_REL))


def matrix(tf):
    from scipy.spatial.transform import Rotation
    T = np.eye(4)
    r, p = tf.transform.rotation, tf.transform.translation
    T[:3, :3] = Rotation.from_quat([r.x, r.y, r.z, r.w]).as_matrix()
    T[:3, 3] = [p.x, p.y, p.z]
    return T


def test_tf_matches_pinocchio_and_follows_joint_states():
    env = dict(os.environ, ROS_DOMAIN_ID=str(random.randint(100, 200)), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    proc = subprocess.Popen([sys.executable, "-m", "manip_core.state_publisher_node", "--ros-args",
                             "-p", f"urdf_path:={UR5}", "-p", "frame_prefix:=arm/"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=int(env["ROS_DOMAIN_ID"]))
    node = rclpy.create_node("state_publisher_test", context=ctx)
    executor = SingleThreadedExecutor(context=ctx)
    executor.add_node(node)
    static, dynamic = [], []
    node.create_subscription(TFMessage, "/tf_static", lambda m: static.append(m), STATIC_QOS)
    node.create_subscription(TFMessage, "/tf", lambda m: dynamic.append(m), TF_QOS)
    pub = node.create_publisher(JointState, "joint_states", 10)
    model = pin.buildModelFromUrdf(UR5)
    data = model.createData()
    names = [model.names[i] for i in range(1, model.njoints)]
    try:
        deadline = time.monotonic() + 30
        while not static and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.1)
        assert static, "no /tf_static (transient local) within 30 s"
        rng = np.random.default_rng(7)
        for k in range(3):
            q = rng.uniform(-3.0, 3.0, model.nq)
            msg = JointState(name=names[::-1], position=[float(x) for x in q[::-1]])
            msg.header.stamp.sec, msg.header.stamp.nanosec = 100 + k, 5000
            n0 = len(dynamic)
            deadline = time.monotonic() + 20
            while len(dynamic) == n0 and time.monotonic() < deadline:
                pub.publish(msg)
                executor.spin_once(timeout_sec=0.2)
            got = [m for m in dynamic[n0:] if m.transforms[0].header.stamp.sec == 100 + k]
            assert got, "no /tf for the joint_states sent"
            tf = {t.child_frame_id: (t.header.frame_id, matrix(t)) for t in static[-1].transforms + got[0].transforms}
            assert {t.header.stamp.nanosec for t in got[0].transforms} == {5000}  # joint_states stamp
            assert len(got[0].transforms) == 6  # the moving joints only
            pin.framesForwardKinematics(model, data, q)
            for link in ("arm/tool0", "arm/ee_link", "arm/wrist_3_link", "arm/base"):
                T, f = np.eye(4), link
                while f in tf:
                    parent, T_pc = tf[f]
                    T, f = T_pc @ T, parent
                assert f == "arm/world"
                np.testing.assert_allclose(T, data.oMf[model.getFrameId(link[4:])].homogeneous, atol=1e-6)
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=ctx)
        proc.send_signal(2)
        out, _ = proc.communicate(timeout=10)
    assert proc.returncode == 0, out
    assert "Traceback" not in out, out
    assert "tf of ur5: " in out and "fixed joints on /tf_static, 6 moving joints" in out, out
