"""manip-bag on a real graph: record the simulated stereo stream (and the live obstacles), replay the camera
topics into stereo_obstacles running alone, and get the same obstacles as live (within 1 cm).

Processes: sim_bridge (PyBullet, camera at 2 Hz of simulated time, no controller: the arm holds), a live
stereo_obstacles, ``manip-bag record`` (mcap) of the four camera topics and /obstacles; then a fresh
stereo_obstacles with use_sim_time and ``manip-bag play`` of the camera topics with its /clock. The replayed
obstacles are matched to the live ones by their header stamp (the images' stamp).
"""
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

from rclpy.executors import SingleThreadedExecutor  # noqa: E402
pytest.importorskip("pybullet")
pytest.importorskip("manip_msgs.msg")

from manip_msgs.msg import ObstacleArray  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CAMERA_YAML = ROOT / "manip_sim" / "config" / "stereo_camera.yaml"
STEREO = ["/stereo/left/image_rect", "/stereo/right/image_rect", "/stereo/left/camera_info",
          "/stereo/right/camera_info"]


def _start(cmd, log, env):
    return subprocess.Popen(cmd, stdout=open(log, "w"), stderr=subprocess.STDOUT, env=env, cwd=str(ROOT))


def _stop(proc, timeout=15):
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def _wait_log(path, text, timeout, procs=()):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if text in Path(path).read_text():
            return
        for p in procs:
            assert p.poll() is None, f"a process exited: {Path(path).read_text()[-2000:]}"
        time.sleep(0.2)
    raise AssertionError(f"'{text}' not in {path} after {timeout} s:\n{Path(path).read_text()[-2000:]}")


def _key(msg):
    return msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec


def _boxes(msg):
    return sorted(((o.center.x, o.center.y, o.center.z), (o.size.x, o.size.y, o.size.z)) for o in msg.obstacles)


@pytest.mark.slow
def test_recorded_stereo_replays_to_the_same_obstacles(tmp_path):
    from rclpy.serialization import deserialize_message

    from manip_core.bag import read_bag
    env = dict(os.environ, ROS_DOMAIN_ID=str(random.randint(100, 200)), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
               PYTHONUNBUFFERED="1")
    py = sys.executable
    bag = tmp_path / "stereo_bag"
    sim = _start([py, "-m", "manip_sim.sim_bridge_node", "--ros-args", "--params-file", str(CAMERA_YAML),
                  "-p", "camera_rate_hz:=2.0", "-p", "objects_rate_hz:=0.0", "-p", "use_sim_time:=false"],
                 tmp_path / "sim.log", env)
    live = _start([py, "-m", "manip_perception.stereo_obstacles_node", "--ros-args", "--params-file",
                   str(CAMERA_YAML), "-p", "use_sim_time:=true", "-p", "publish_points:=false"],
                  tmp_path / "live.log", env)
    rec = None
    try:
        _wait_log(tmp_path / "sim.log", "render process pid", 60, [sim])
        rec = _start([py, "-m", "manip_core.bag_cli", "record", str(bag), "--topics", *STEREO, "/obstacles",
                      "--duration", "12", "--wait", "30"], tmp_path / "record.log", env)
        assert rec.wait(timeout=90) == 0, (tmp_path / "record.log").read_text()
    finally:
        for p in (rec, live, sim):
            if p is not None:
                _stop(p)
    record_log = (tmp_path / "record.log").read_text()
    assert "recording /stereo/left/image_rect (sensor_msgs/msg/Image, best effort)" in record_log, record_log
    info, _, _, messages = read_bag(bag)
    counts = {t.name: t.count for t in info}
    assert counts["/stereo/left/image_rect"] >= 3, counts
    live_obs = {}
    for topic, _, raw in messages():
        if topic == "/obstacles":
            m = deserialize_message(raw, ObstacleArray)
            live_obs[_key(m)] = m
    assert live_obs and any(m.obstacles for m in live_obs.values()), (counts, (tmp_path / "live.log").read_text()[-2000:])

    # replay into stereo_obstacles alone
    env["ROS_DOMAIN_ID"] = str(random.randint(100, 200))
    node_proc = _start([py, "-m", "manip_perception.stereo_obstacles_node", "--ros-args", "--params-file",
                        str(CAMERA_YAML), "-p", "use_sim_time:=true", "-p", "publish_points:=false"],
                       tmp_path / "replay_node.log", env)
    os.environ.update({k: env[k] for k in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE")})
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=int(env["ROS_DOMAIN_ID"]))
    node = rclpy.create_node("bag_test", context=ctx)
    executor = SingleThreadedExecutor(context=ctx)
    executor.add_node(node)
    replayed = {}
    node.create_subscription(ObstacleArray, "/obstacles", lambda m: replayed.__setitem__(_key(m), m), 10)
    player = None
    try:
        _wait_log(tmp_path / "replay_node.log", "ready", 60, [node_proc])
        player = _start([py, "-m", "manip_core.bag_cli", "play", str(bag), "--topics", *STEREO, "--delay", "2"],
                        tmp_path / "play.log", env)
        end = time.monotonic() + 90
        while player.poll() is None and time.monotonic() < end:
            executor.spin_once(timeout_sec=0.1)
        for _ in range(30):  # the last pair's obstacles
            executor.spin_once(timeout_sec=0.1)
        assert player.returncode == 0, (tmp_path / "play.log").read_text()
    finally:
        if player is not None:
            _stop(player)
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=ctx)
        _stop(node_proc)
    common = sorted(set(live_obs) & set(replayed))
    assert len(common) >= 2, (sorted(live_obs), sorted(replayed), (tmp_path / "replay_node.log").read_text()[-2000:])
    compared = 0
    for k in common:
        a, b = _boxes(live_obs[k]), _boxes(replayed[k])
        assert len(a) == len(b), (k, a, b)
        for (ca, sa), (cb, sb) in zip(a, b):
            np.testing.assert_allclose(cb, ca, atol=0.01)
            np.testing.assert_allclose(sb, sa, atol=0.01)
            compared += 1
    assert compared >= 1
    print(f"\n{len(common)} stereo pairs, {compared} obstacles compared; bag topics {counts}")
