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
