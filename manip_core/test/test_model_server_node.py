"""model_server over real DDS, process to process: the model, FK, IK, dynamics, and bad requests."""
import os
import random
import subprocess
import sys
import time

import numpy as np
import pytest
import rclpy
from geometry_msgs.msg import Pose, PoseStamped
from manip_msgs.msg import ErrorCode
from manip_msgs.srv import ComputeDynamics, ComputeFK, ComputeIK, GetRobotModel
from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
from rcl_interfaces.srv import SetParameters
from std_msgs.msg import String

from manip_core import RobotModel
from manip_core.reference_robots import UR5_REL, example_robot
from manip_core.ros.conversions import matrix_to_pose, pose_to_matrix
from manip_core.ros.model_source import DESCRIPTION_QOS

UR5 = str(example_robot(UR5_REL))


@pytest.fixture(scope="module")
def graph():
    env = dict(os.environ, ROS_DOMAIN_ID=str(random.randint(100, 200)), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    os.environ.update({k: env[k] for k in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE")})
    proc = subprocess.Popen([sys.executable, "-m", "manip_core.model_server_node", "--ros-args",
                             "-p", f"urdf_path:={UR5}", "-p", "tip_link:=ee_link"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    rclpy.init()
    node = rclpy.create_node("model_server_test")
    yield node, proc
    node.destroy_node()
    rclpy.shutdown()
    proc.send_signal(2)
    out, _ = proc.communicate(timeout=10)
    assert proc.returncode == 0, out
    assert "Traceback" not in out, out


def call(node, srv_type, name, request, timeout=20.0):
    client = node.create_client(srv_type, name)
    assert client.wait_for_service(timeout_sec=timeout), f"{name} not available"
    future = client.call_async(request)
    rclpy.spin_until_future_complete(node, future, timeout_sec=timeout)
    assert future.done(), f"{name} did not answer"
    node.destroy_client(client)
    return future.result()


@pytest.fixture(scope="module")
def ur5():
    return RobotModel.from_urdf(UR5, tip_link="ee_link")


def test_robot_description_is_latched(graph):
    node, _ = graph
    got = []
    node.create_subscription(String, "robot_description", lambda m: got.append(m.data), DESCRIPTION_QOS)
    deadline = time.time() + 20
    while not got and time.time() < deadline:
        rclpy.spin_once(node, timeout_sec=0.1)
    assert got and "<robot" in got[0]


def test_get_robot_model(graph, ur5):
    res = call(graph[0], GetRobotModel, "get_robot_model", GetRobotModel.Request())
    assert res.success
    assert list(res.model.joint_names) == ur5.joint_names
    S = np.array(res.model.screw_axes_space).reshape(ur5.dof, 6).T
    np.testing.assert_allclose(S, ur5.screw_axes_space, atol=1e-12)
    np.testing.assert_allclose(pose_to_matrix(res.model.home_pose), ur5.home, atol=1e-9)


def test_fk_and_ik_round_trip(graph, ur5):
    node, _ = graph
    q = np.array([0.3, -1.2, 1.4, -0.7, 1.1, 0.4])
    fk = call(node, ComputeFK, "compute_fk", ComputeFK.Request(positions=list(q)))
    assert fk.success and fk.error_code.val == ErrorCode.SUCCESS
    np.testing.assert_allclose(pose_to_matrix(fk.pose.pose), ur5.fk(q), atol=1e-9)
    # names in another order are reordered
    names = list(reversed(ur5.joint_names))
    fk2 = call(node, ComputeFK, "compute_fk", ComputeFK.Request(joint_names=names, positions=list(q[::-1])))
    np.testing.assert_allclose(pose_to_matrix(fk2.pose.pose), ur5.fk(q), atol=1e-9)
    req = ComputeIK.Request(target=PoseStamped(pose=matrix_to_pose(ur5.fk(q))), seed=list(q + 0.05))
    ik = call(node, ComputeIK, "compute_ik", req)
    assert ik.success, ik.message
    q_ik = np.array(ik.solutions[0].position)
    assert np.linalg.norm(ur5.fk(q_ik)[:3, 3] - ur5.fk(q)[:3, 3]) < 1e-6
    assert ik.position_error < 1e-6 and ik.rotation_error < 1e-6


def test_ik_reports_each_solutions_distance_to_singularity(graph, ur5):
    """compute_ik's per-solution measures are the singular values of Pinocchio's body Jacobian at each solution;
    the UR5's straight elbow (q3 = 0) gives a zero minimum singular value."""
    import pinocchio as pin
    pm = pin.buildModelFromUrdf(UR5)
    pd, fid = pm.createData(), pm.getFrameId("ee_link")
    assert list(pm.names[1:]) == ur5.joint_names
    smallest = {}
    for name, q in (("regular", np.array([0.3, -1.2, 1.4, -0.7, 1.1, 0.4])),
                    ("elbow straight", np.array([0.3, -1.2, 0.0, -0.7, 1.1, 0.4]))):
        target = PoseStamped(pose=matrix_to_pose(ur5.fk(q)))
        res = call(graph[0], ComputeIK, "compute_ik", ComputeIK.Request(target=target, all_solutions=True))
        assert res.success, res.message
        assert res.measure_part == "full"
        assert len(res.min_singular_values) == len(res.manipulabilities) == len(res.solutions) >= \
            (2 if name == "regular" else 1)
        for sol, smin, w in zip(res.solutions, res.min_singular_values, res.manipulabilities):
            s = np.linalg.svd(pin.computeFrameJacobian(pm, pd, np.array(sol.position), fid, pin.LOCAL),
                              compute_uv=False)
            assert smin == pytest.approx(s[-1], abs=1e-9) and w == pytest.approx(np.prod(s), abs=1e-9)
        smallest[name] = min(res.min_singular_values)
    assert smallest["regular"] > 1e-3 and smallest["elbow straight"] < 1e-6
    res = call(graph[0], ComputeIK, "compute_ik", ComputeIK.Request(
        target=PoseStamped(pose=matrix_to_pose(ur5.fk(np.full(6, 0.3)))), position_only=True))
    assert res.success and res.measure_part == "position" and len(res.min_singular_values) == 1
    assert res.min_singular_values[0] == pytest.approx(
        ur5.min_singular_value(np.array(res.solutions[0].position), "position"), rel=1e-12)


def test_dynamics_service_matches_library(graph, ur5):
    q, qd, qdd = np.full(6, 0.2), np.full(6, -0.3), np.full(6, 0.5)
    res = call(graph[0], ComputeDynamics, "compute_dynamics",
               ComputeDynamics.Request(positions=list(q), velocities=list(qd), accelerations=list(qdd)))
    assert res.success
    np.testing.assert_allclose(res.efforts, ur5.inverse_dynamics(q, qd, qdd), rtol=1e-12)
    np.testing.assert_allclose(np.reshape(res.mass_matrix, (6, 6)), ur5.mass_matrix(q), rtol=1e-12)


def test_bad_requests_get_error_codes_and_node_keeps_serving(graph):
    node, proc = graph
    unreachable = Pose()
    unreachable.position.x = 3.0
    unreachable.orientation.w = 1.0
    res = call(node, ComputeIK, "compute_ik", ComputeIK.Request(target=PoseStamped(pose=unreachable)))
    assert not res.success and res.error_code.val == ErrorCode.NO_IK_SOLUTION and res.message
    nan_pose = Pose()
    nan_pose.position.x = float("nan")
    nan_pose.orientation.w = 1.0
    res = call(node, ComputeIK, "compute_ik", ComputeIK.Request(target=PoseStamped(pose=nan_pose)))
    assert res.error_code.val == ErrorCode.INVALID_INPUT
    res = call(node, ComputeFK, "compute_fk", ComputeFK.Request(positions=[0.0, 1.0]))
    assert res.error_code.val == ErrorCode.INVALID_INPUT
    res = call(node, ComputeFK, "compute_fk", ComputeFK.Request(joint_names=["a"] * 6, positions=[0.0] * 6))
    assert res.error_code.val == ErrorCode.UNKNOWN_JOINT
    res = call(node, ComputeFK, "compute_fk", ComputeFK.Request(positions=[0.0] * 6, link="no_such_link"))
    assert res.error_code.val == ErrorCode.UNKNOWN_LINK
    res = call(node, ComputeFK, "compute_fk", ComputeFK.Request(positions=[float("inf")] * 6))
    assert res.error_code.val == ErrorCode.INVALID_INPUT
    res = call(node, ComputeIK, "compute_ik",
               ComputeIK.Request(target=PoseStamped(pose=matrix_to_pose(np.eye(4))), seed=[0.0]))
    assert res.error_code.val == ErrorCode.INVALID_INPUT
    # a malformed robot_description is rejected with its reason and the old model keeps serving
    bad = Parameter(name="robot_description",
                    value=ParameterValue(type=ParameterType.PARAMETER_STRING, string_value="<robot name='x'><link"))
    res = call(node, SetParameters, "model_server/set_parameters", SetParameters.Request(parameters=[bad]))
    assert not res.results[0].successful
    assert "line" in res.results[0].reason or "XML" in res.results[0].reason
    ok = call(node, ComputeFK, "compute_fk", ComputeFK.Request(positions=[0.0] * 6))
    assert ok.success
    assert proc.poll() is None
