"""manip-view --bag: a recorded run (a rosbag2 written with manip_core.bag) looked up by time, and the command that
serves it with a time slider: the joint states, the planner's tip path, obstacles, a cloud in a camera frame (moved
into the base with the bag's /tf_static) and the left image at each time."""
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest
from rclpy.serialization import serialize_message

from manip_core.bag import BagError, BagRecorder
from manip_core.robots import robot_path
from manip_view.browser import free_port
from manip_view.replay import load_run

NAMES = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
         "wrist_3_joint"]


def write_run(bag, with_description=False):
    from geometry_msgs.msg import Point, TransformStamped
    from sensor_msgs.msg import Image, JointState
    from std_msgs.msg import String
    from tf2_msgs.msg import TFMessage
    from visualization_msgs.msg import Marker, MarkerArray

    from manip_msgs.msg import Obstacle, ObstacleArray
    from manip_perception.stereo import pack_pointcloud2
    from sensor_msgs.msg import PointCloud2, PointField

    t0 = 5_000_000_000
    with BagRecorder(bag) as rec:
        for topic, kind in (("/joint_states", "sensor_msgs/msg/JointState"),
                            ("/planned_path", "visualization_msgs/msg/MarkerArray"),
                            ("/obstacles", "manip_msgs/msg/ObstacleArray"),
                            ("/stereo/points2", "sensor_msgs/msg/PointCloud2"),
                            ("/stereo/left/image_rect", "sensor_msgs/msg/Image"),
                            ("/tf_static", "tf2_msgs/msg/TFMessage")) + (
                (("/robot_description", "std_msgs/msg/String"),) if with_description else ()):
            rec.add_topic(topic, kind)
        if with_description:
            rec.write("/robot_description", t0, serialize_message(String(data=robot_path("ur5").read_text())))
        tf = TransformStamped(child_frame_id="cam")
        tf.header.frame_id = "base_link"
        tf.transform.translation.z = 1.0
        tf.transform.rotation.w = 1.0
        rec.write("/tf_static", t0, serialize_message(TFMessage(transforms=[tf])))
        for k in range(101):  # 2 s at 50 Hz, shoulder_pan from 0 to 1 rad, the rest in another order
            # names in reversed order: the last one is shoulder_pan_joint
            js = JointState(name=list(reversed(NAMES)), position=[0.0] * 5 + [0.01 * k])
            rec.write("/joint_states", t0 + k * 20_000_000, serialize_message(js))
        line = Marker(type=Marker.LINE_STRIP, action=Marker.ADD, ns="tip_path",
                      points=[Point(x=0.1 * i, y=0.0, z=0.5) for i in range(4)])
        rec.write("/planned_path", t0 + 500_000_000, serialize_message(MarkerArray(markers=[line])))
        obs = ObstacleArray(obstacles=[Obstacle(id=0)])
        obs.obstacles[0].center.x, obs.obstacles[0].size.x = 0.4, 0.1
        rec.write("/obstacles", t0 + 1_000_000_000, serialize_message(obs))
        c = pack_pointcloud2(np.array([[0.1, 0.2, 0.3], [0.0, 0.0, 0.0]]), [[255, 0, 0], [0, 255, 0]])
        cloud = PointCloud2(height=1, width=2, point_step=c.point_step, row_step=c.row_step, data=c.data,
                            fields=[PointField(name=a, offset=o, datatype=d, count=n) for a, o, d, n in c.fields])
        cloud.header.frame_id = "cam"
        rec.write("/stereo/points2", t0 + 1_500_000_000, serialize_message(cloud))
        img = Image(height=2, width=3, encoding="bgr8", step=9, data=bytes([10, 20, 30] * 6))
        rec.write("/stereo/left/image_rect", t0 + 1_500_000_000, serialize_message(img))


def test_a_recorded_run_is_looked_up_by_time(tmp_path):
    write_run(tmp_path / "run")
    run = load_run(tmp_path / "run")
    assert run.duration_s == pytest.approx(2.0) and len(run.t_joints) == 101
    s = run.at(0.95, NAMES)
    np.testing.assert_allclose(s.q, [0.47, 0, 0, 0, 0, 0], atol=1e-12)  # the message of t = 0.94 s, reordered
    np.testing.assert_allclose(s.tool_path_m[:, 0], [0, 0.1, 0.2, 0.3])
    assert s.obstacles is None and s.cloud is None and s.image is None  # not received yet at 0.95 s
    s = run.at(1.6, NAMES)
    assert s.obstacles[0][0][0] == pytest.approx(0.4) and s.obstacles[0][1][0] == pytest.approx(0.1)
    pts, cols = run.cloud_in("base_link", s.cloud)
    np.testing.assert_allclose(pts, [[0.1, 0.2, 1.3], [0.0, 0.0, 1.0]], atol=1e-6)  # cam is 1 m above the base
    np.testing.assert_array_equal(cols, [[255, 0, 0], [0, 255, 0]])
    np.testing.assert_array_equal(s.image[0, 0], [30, 20, 10])  # bgr8 -> rgb
    assert run.at(-1.0, NAMES).q is None
    assert run.at(1.0, NAMES[:-1] + ["no_such_joint"]).q is None
    with pytest.raises(BagError, match="no such bag"):
        load_run(tmp_path / "missing")


def test_manip_view_bag_serves_the_run_and_reads_the_robot_from_the_bag(tmp_path):
    write_run(tmp_path / "run", with_description=True)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "manip_view.cli", "--bag", str(tmp_path / "run"), "--port",
                             str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines, deadline = [], time.monotonic() + 120
        while not any("joint states" in x for x in lines) and time.monotonic() < deadline and proc.poll() is None:
            lines.append(proc.stdout.readline())
        assert any(f"at http://127.0.0.1:{port}" in x and "ur5 (6 joints" in x for x in lines), lines
        assert any("2.0 s, 101 joint states" in x for x in lines), lines
        assert "<title>Viser</title>" in urllib.request.urlopen(f"http://127.0.0.1:{port}", timeout=10).read().decode()
    finally:
        proc.terminate()
        proc.wait(30)
    p = subprocess.run([sys.executable, "-m", "manip_view.cli", "--bag", str(tmp_path / "nope")], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "no such bag" in p.stderr
