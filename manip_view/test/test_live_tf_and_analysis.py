"""The live viewer (its node in this process, on a real DDS graph) and two inputs from other nodes: the "Frames on /tf,
/tf_static" toggle draws a frame another node puts on /tf_static at its pose in the robot's base frame, and hides it
again; the MarkerArray of manip_core's analysis_markers node becomes the Analysis folder's layer."""
import random
import threading
import time

import numpy as np
import pytest
import rclpy
from geometry_msgs.msg import TransformStamped
from rclpy.executors import MultiThreadedExecutor
from rclpy.qos import DurabilityPolicy, QoSProfile
from tf2_msgs.msg import TFMessage

from manip_core.robots import robot_path
from manip_view.browser import free_port


def _wait(cond, timeout_s, what):
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.fixture
def viewer():
    from manip_view.viewer_node import Viewer
    rclpy.init(args=["--ros-args", "-p", f"urdf_path:={robot_path('ur5')}", "-p", f"port:={free_port()}",
                     "-p", "nice:=0"], domain_id=random.randint(100, 200))
    node = Viewer()
    ex = MultiThreadedExecutor(num_threads=2)
    ex.add_node(node)
    threading.Thread(target=ex.spin, daemon=True).start()
    try:
        yield node
    finally:
        node.close()
        ex.shutdown()
        node.destroy_node()
        rclpy.shutdown()


def test_a_frame_on_tf_static_appears_at_its_base_frame_pose(viewer):
    _wait(lambda: viewer.panels is not None, 120, "the viewer's page")
    pub = rclpy.create_node("tf_frames_test")
    try:
        tf_pub = pub.create_publisher(TFMessage, "/tf_static",
                                      QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL))
        base = viewer.base_frame
        a, b = TransformStamped(), TransformStamped()   # base -> mount (1 m up x), mount -> cam (90 deg about z)
        a.header.frame_id, a.child_frame_id = base, "mount"
        a.transform.translation.x, a.transform.rotation.w = 1.0, 1.0
        b.header.frame_id, b.child_frame_id = "mount", "cam"
        b.transform.translation.y = 0.5
        b.transform.rotation.z = b.transform.rotation.w = np.sqrt(0.5)
        tf_pub.publish(TFMessage(transforms=[a, b]))
        panels = viewer.panels
        assert not panels.tf_frames_wanted and panels._tf_handles == {}   # nothing drawn until asked for
        panels._tf_box.value = True
        _wait(lambda: "cam" in panels._tf_handles, 30, "the cam frame in the page")
        h = panels._tf_handles["cam"]
        np.testing.assert_allclose(h.position, [1.0, 0.5, 0.0], atol=1e-9)   # base <- mount <- cam, composed
        w = np.asarray(h.wxyz)
        np.testing.assert_allclose(w * np.sign(w[0]), [np.sqrt(0.5), 0, 0, np.sqrt(0.5)], atol=1e-9)
        assert h.visible and panels._tf_handles["mount"].visible
        panels._tf_box.value = False
        assert not any(x.visible for x in panels._tf_handles.values())
    finally:
        pub.destroy_node()


def test_the_analysis_markers_on_the_graph_become_the_analysis_layers(viewer):
    """What manip_core's analysis_markers node publishes (its own message builder, latched) is drawn as the page's
    reach shell: the estimate's boundary points, each with the marker's colour."""
    from manip_core import RobotModel
    from manip_core.analysis.workspace import estimate_workspace
    from manip_core.ros.analysis_markers import workspace_markers
    from visualization_msgs.msg import MarkerArray
    est = estimate_workspace(RobotModel.load("ur5"), 20_000, seed=0)
    _wait(lambda: viewer.panels is not None, 120, "the viewer's page")
    pub = rclpy.create_node("analysis_markers_test")
    try:
        msg = workspace_markers(est, viewer.base_frame)
        markers = msg.markers
        q = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        publisher = pub.create_publisher(MarkerArray, "analysis_markers", q)
        bad = workspace_markers(est, viewer.base_frame)           # NaN everywhere: logged, nothing drawn
        for p in bad.markers[0].points:
            p.x = float("nan")
        for c in bad.markers[0].colors:
            c.r = float("nan")
        bad.markers[0].pose.orientation.w = float("nan")
        publisher.publish(bad)
        time.sleep(0.5)
        assert "reach_shell" not in viewer.panels.analysis.layers
        publisher.publish(msg)
        layers = viewer.panels.analysis.layers
        _wait(lambda: "reach_shell" in layers, 30, "the reach shell layer")
        pts, _ = est.to_points("boundary")
        np.testing.assert_allclose(np.asarray(layers["reach_shell"].points, np.float64), pts, atol=1e-6)
        cols = np.array([(c.r, c.g, c.b) for c in markers[0].colors]) * 255
        np.testing.assert_allclose(np.asarray(layers["reach_shell"].colors, np.float64), cols, atol=0.51)
        assert "points published by the analysis" in viewer.panels.analysis.status["reach_shell"].content
    finally:
        pub.destroy_node()


def test_marker_points_apply_the_marker_pose_and_colours():
    from geometry_msgs.msg import Point
    from scipy.spatial.transform import Rotation
    from std_msgs.msg import ColorRGBA
    from visualization_msgs.msg import Marker

    from manip_view.analysis_layers import marker_points
    rng = np.random.default_rng(4)
    P = rng.normal(size=(5, 3))
    R = Rotation.from_rotvec([0.3, -0.2, 1.1])
    m = Marker(type=Marker.CUBE_LIST, points=[Point(x=a, y=b, z=c) for a, b, c in P.tolist()])
    x, y, z, w = R.as_quat()  # scipy: (x, y, z, w)
    m.pose.orientation.x, m.pose.orientation.y, m.pose.orientation.z, m.pose.orientation.w = x, y, z, w
    m.pose.position.x, m.pose.position.y, m.pose.position.z = 0.1, -0.2, 0.3
    pts, cols = marker_points(m)
    np.testing.assert_allclose(pts, R.apply(P) + [0.1, -0.2, 0.3], atol=1e-12)
    m.color = ColorRGBA(r=1.0, g=0.5, b=0.0, a=1.0)       # no per-point colours: the marker's for all
    assert marker_points(m)[1].tolist() == [[255, 128, 0]] * 5
    m.colors = [ColorRGBA(r=0.0, g=0.0, b=float(k) / 4, a=1.0) for k in range(5)]
    assert marker_points(m)[1][:, 2].tolist() == [0, 64, 128, 191, 255]
