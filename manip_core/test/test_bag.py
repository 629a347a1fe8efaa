"""manip_core.bag (rosbags) round trips, metadata for Humble, playback timing; manip-bag usage errors."""
import subprocess
import sys

import numpy as np
import pytest
import yaml

rclpy = pytest.importorskip("rclpy")

from rclpy.serialization import deserialize_message, serialize_message  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

from manip_core.bag import BagError, BagRecorder, PlaybackClock, message_definition, read_bag  # noqa: E402


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_round_trip_keeps_bytes_types_times_and_qos(tmp_path, storage):
    from manip_msgs.msg import Obstacle, ObstacleArray
    bag = tmp_path / "b"
    js = [JointState(name=["a", "b"], position=[0.1 * k, -0.2 * k]) for k in range(5)]
    obs = ObstacleArray(obstacles=[Obstacle()])
    obs.obstacles[0].center.x = 0.25
    obs.header.frame_id = "base_link"
    with BagRecorder(bag, storage=storage) as rec:
        rec.add_topic("/joint_states", "sensor_msgs/msg/JointState")
        rec.add_topic("/obstacles", "manip_msgs/msg/ObstacleArray", reliable=False)  # not in rosbags' store
        for k, m in enumerate(js):
            rec.write("/joint_states", 1_000_000_000 + k * 10_000_000, serialize_message(m))
        rec.write("/obstacles", 1_020_000_000, serialize_message(obs))
    meta = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert meta["version"] == 8 and meta["storage_identifier"] == storage
    info, start, end, messages = read_bag(bag)
    assert {t.name: (t.msgtype, t.count, t.reliable) for t in info} == {
        "/joint_states": ("sensor_msgs/msg/JointState", 5, True),
        "/obstacles": ("manip_msgs/msg/ObstacleArray", 1, False)}
    assert (start, end) == (1_000_000_000, 1_040_000_000)
    got = list(messages())
    assert [t for _, t, _ in got] == sorted(t for _, t, _ in got)
    back = [deserialize_message(raw, JointState) for topic, _, raw in got if topic == "/joint_states"]
    np.testing.assert_allclose([m.position for m in back], [m.position for m in js])
    o = deserialize_message(next(raw for topic, _, raw in got if topic == "/obstacles"), ObstacleArray)
    assert o.obstacles[0].center.x == 0.25 and o.header.frame_id == "base_link"


def test_message_definition_of_an_installed_package_and_errors(tmp_path):
    _, text = message_definition("manip_msgs/msg/ObstacleArray")
    assert text.startswith("std_msgs/Header header\nmanip_msgs/Obstacle[] obstacles")
    with pytest.raises(BagError, match="no msg/Nope.msg found in the share folder of package manip_msgs"):
        message_definition("manip_msgs/msg/Nope")
    (tmp_path / "exists").mkdir()
    with pytest.raises(BagError, match="exists"):
        BagRecorder(tmp_path / "exists")
    with pytest.raises(BagError, match="storage must be one of mcap, sqlite3"):
        BagRecorder(tmp_path / "x", storage="db3")
    with pytest.raises(BagError, match="no such bag"):
        read_bag(tmp_path / "none")


def test_playback_clock():
    c = PlaybackClock(10_000, 20_000, rate=2.0, wall0_ns=5)
    assert c.due(10_000) == 5 and c.due(20_000) == 5 + 5_000 and c.due(12_000, loop=1) == 5 + 1_000 + 5_000
    assert c.bag_time(5 + 2_500) == 15_000
    with pytest.raises(BagError, match="rate must be > 0"):
        PlaybackClock(0, 1, rate=0.0)


def test_cli_usage_errors(tmp_path):
    r = subprocess.run([sys.executable, "-m", "manip_core.bag_cli", "play", str(tmp_path / "none")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "no such bag" in r.stderr
    r = subprocess.run([sys.executable, "-m", "manip_core.bag_cli", "play", "x", "--rate", "0"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--rate must be > 0" in r.stderr


# The publisher process of the recorder test: waits for the recorder's two subscriptions, publishes 3 s of a
# 250 Hz Clock (its value counts the messages in ms) and a 0.9 MB image every 8th message (~30 Hz), prints
# the counts. Large-data profile as every image-publishing node (manip_core.ros.transport).
_LOAD_PUBLISHER = """
import sys, time
from manip_core.ros.transport import use_large_data_profile
use_large_data_profile()
import rclpy
from rclpy.qos import QoSProfile, ReliabilityPolicy
from builtin_interfaces.msg import Time
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import Image
rclpy.init()
node = rclpy.create_node("bag_load_publisher")
qos = QoSProfile(depth=int(sys.argv[1]), reliability=ReliabilityPolicy.RELIABLE)
fast, images = node.create_publisher(Clock, "/load/fast", qos), node.create_publisher(Image, "/load/image", qos)
end = time.monotonic() + 90
while (fast.get_subscription_count() < 1 or images.get_subscription_count() < 1) and time.monotonic() < end:
    rclpy.spin_once(node, timeout_sec=0.05)
time.sleep(1.0)
img = Image(height=480, width=640, encoding="rgb8", step=640 * 3)
img.data = bytes(640 * 480 * 3)
n_fast = n_img = 0
t0 = time.monotonic()
while n_fast < 750:
    time.sleep(max(0.0, t0 + n_fast / 250.0 - time.monotonic()))
    fast.publish(Clock(clock=Time(sec=n_fast // 1000, nanosec=(n_fast % 1000) * 1_000_000)))
    n_fast += 1
    if n_fast % 8 == 0:
        img.header.stamp.sec = n_img
        images.publish(img)
        n_img += 1
print(f"published {n_fast} {n_img}", flush=True)
time.sleep(3.0)
"""


def test_record_keeps_every_message_of_a_250_hz_topic_beside_large_images(tmp_path):
    """manip-bag record on a real graph (process to process): a 250 Hz /clock-like topic and 0.9 MB images at
    30 Hz for 3 s, both reliable; the bag holds every message of both, in order. The recorder that wrote in
    its callbacks kept 107 of the 750 fast messages here (load 19 on 2 cores). The publishers keep 1000
    messages so that what is measured is the recorder: with the depth 10 of sim_bridge's /clock, a reliable
    KEEP_LAST writer itself overwrites samples not yet acknowledged under such load (657 of 750 arrived at
    load 18 with nothing waiting in the recorder)."""
    import os
    import random
    import re
    import signal

    env = dict(os.environ, ROS_DOMAIN_ID=str(random.randint(100, 200)), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
               PYTHONUNBUFFERED="1")
    bag, log = tmp_path / "bag", tmp_path / "record.log"
    procs = []
    try:
        with open(log, "w") as out:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "manip_core.bag_cli", "record", str(bag), "--topics", "/load/fast",
                 "/load/image", "--wait", "60"], env=env, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True))
        procs.append(subprocess.Popen([sys.executable, "-c", _LOAD_PUBLISHER, "1000"], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                      start_new_session=True))
        pub_out, _ = procs[1].communicate(timeout=150)
        m = re.search(r"published (\d+) (\d+)", pub_out)
        assert m, pub_out
        n_fast, n_img = int(m[1]), int(m[2])
        procs[0].send_signal(signal.SIGINT)
        assert procs[0].wait(timeout=120) == 0, log.read_text()
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    from rosgraph_msgs.msg import Clock
    info, _, _, messages = read_bag(bag)
    assert {t.name: t.count for t in info} == {"/load/fast": n_fast, "/load/image": n_img}, log.read_text()
    ticks = [deserialize_message(raw, Clock).clock for topic, _, raw in messages() if topic == "/load/fast"]
    assert [t.sec * 1000 + t.nanosec // 1_000_000 for t in ticks] == list(range(n_fast))
    assert "refused" not in log.read_text()
