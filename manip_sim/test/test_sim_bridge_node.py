"""The sim_bridge node over real DDS: the node runs in a subprocess (random ROS_DOMAIN_ID in 100-200,
localhost discovery), the test talks to it with rclpy like any other node of the graph."""
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "manip_sim" / "config"
JOINTS = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
          "wrist_3_joint"]
WIDTH, HEIGHT = 320, 240       # smaller than the default, to test the parameters and spare the CPU


def _wait(pred, timeout, step=0.02):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return pred()


class Probe:
    """A test node in its own context and domain, spinning in a thread; records what arrives."""

    def __init__(self, domain_id):
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import qos_profile_sensor_data
        from manip_msgs.msg import SceneObjectArray
        from manip_msgs.srv import Grasp
        from rosgraph_msgs.msg import Clock
        from sensor_msgs.msg import CameraInfo, Image, JointState
        from std_msgs.msg import Float64MultiArray

        self.rclpy = rclpy
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain_id)
        self.node = rclpy.create_node("sim_bridge_test_probe", context=self.context)
        self.lock = threading.Lock()
        self.msgs = {k: [] for k in ("joint_states", "clock", "objects", "left", "right", "left_info",
                                     "right_info")}
        self.totals = {k: 0 for k in self.msgs}  # messages received (the lists keep only the latest)
        n = self.node

        def keep(key, limit=400):
            self.msgs.setdefault(key, [])
            self.totals.setdefault(key, 0)

            def cb(msg):
                with self.lock:
                    lst = self.msgs[key]
                    lst.append((time.monotonic(), msg))
                    del lst[:-limit]
                    self.totals[key] += 1
            return cb

        n.create_subscription(JointState, "joint_states", keep("joint_states"), 10)
        n.create_subscription(Clock, "/clock", keep("clock"), 10)
        n.create_subscription(SceneObjectArray, "sim/objects", keep("objects"), 10)
        for side in ("left", "right"):
            n.create_subscription(Image, f"stereo/{side}/image_rect", keep(side, 4), qos_profile_sensor_data)
            n.create_subscription(CameraInfo, f"stereo/{side}/camera_info", keep(f"{side}_info", 20),
                                  qos_profile_sensor_data)
        self.keep = keep
        self.effort_pub = n.create_publisher(Float64MultiArray, "effort_controller/commands", 10)
        self.Float64MultiArray = Float64MultiArray
        self.grasp = n.create_client(Grasp, "gripper/grasp")
        self.Grasp = Grasp
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(n)
        self.running = True
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()

    def _spin(self):
        while self.running and self.context.ok():
            try:
                self.executor.spin_once(timeout_sec=0.05)
            except Exception:  # noqa: BLE001 (shutting down)
                if not self.running:
                    break
                raise

    def count(self, key):
        """Messages received on ``key`` since the start."""
        with self.lock:
            return self.totals[key]

    def last(self, key):
        with self.lock:
            return self.msgs[key][-1][1] if self.msgs[key] else None

    def publish_efforts(self, values):
        self.effort_pub.publish(self.Float64MultiArray(data=[float(v) for v in values]))

    def call_grasp(self, attach, name="", max_distance=0.0, timeout=10.0):
        assert self.grasp.wait_for_service(timeout_sec=timeout), "gripper/grasp not available"
        future = self.grasp.call_async(self.Grasp.Request(attach=attach, object_name=name,
                                                          max_distance=max_distance))
        assert _wait(future.done, timeout), "no answer from gripper/grasp"
        return future.result()

    def close(self):
        self.running = False
        self.thread.join(2.0)
        self.executor.shutdown()
        self.node.destroy_node()
        self.rclpy.try_shutdown(context=self.context)


def _start_bridge(tmp_path_factory, params):
    """(process, probe, log path) of a sim_bridge with the pick-and-place scene and ``params``."""
    domain = random.randint(100, 200)
    env = dict(os.environ)
    env.update(ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST", PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "manip_sim"), str(ROOT / "manip_core")]
                                        + [p for p in [env.get("PYTHONPATH")] if p])
    log = tmp_path_factory.mktemp("sim_bridge") / "node.log"
    cmd = [sys.executable, "-m", "manip_sim.sim_bridge_node", "--ros-args",
           "--params-file", str(CONFIG / "stereo_camera.yaml"),
           "-p", f"scene_file:={CONFIG / 'pick_place_scene.yaml'}", *params,
           "--log-level", "sim_bridge:=debug"]
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
    return proc, Probe(domain), log


@pytest.fixture(scope="module")
def bridge(tmp_path_factory):
    proc, probe, log = _start_bridge(tmp_path_factory, [
        "-p", f"image_width:={WIDTH}", "-p", f"image_height:={HEIGHT}",
        "-p", "camera_rate_hz:=4.0", "-p", "command_timeout:=0.5"])
    state = {"proc": proc, "probe": probe, "log": log}
    try:
        yield state
    finally:
        probe.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


def _log_text(bridge):
    return Path(bridge["log"]).read_text()


def _render_pid(bridge):
    for line in _log_text(bridge).splitlines():
        if "render process pid" in line:
            return int(line.rsplit("pid", 1)[1].split()[0])
    return None


def test_joint_states_and_clock_arrive(bridge):
    p = bridge["probe"]
    assert _wait(lambda: p.count("joint_states") > 20 and p.count("clock") > 20, 30), _log_text(bridge)
    js = p.last("joint_states")
    assert list(js.name) == JOINTS
    assert len(js.position) == len(js.velocity) == len(js.effort) == 6
    t0 = p.last("clock").clock
    time.sleep(0.3)
    t1 = p.last("clock").clock
    assert (t1.sec + 1e-9 * t1.nanosec) > (t0.sec + 1e-9 * t0.nanosec)
    assert js.header.stamp.sec + 1e-9 * js.header.stamp.nanosec > 0
    assert bridge["proc"].poll() is None
    log = _log_text(bridge)
    assert "robot 'ur5'" in log and "cube" in log and "pillar" in log and "physics 500 Hz" in log


def test_no_ground_truth_joint_states_without_encoder_noise(bridge):
    p = bridge["probe"]
    assert _wait(lambda: p.count("joint_states") > 5, 30)
    topics = dict(p.node.get_topic_names_and_types())
    assert "/joint_states" in topics and "/sim/objects" in topics
    assert "/sim/joint_states" not in topics


def test_encoder_noise_on_joint_states_and_the_truth_on_sim_joint_states(tmp_path_factory):
    """encoder_noise_rad 1e-3: joint_states positions = the true ones (sim/joint_states, same stamps) plus
    noise whose sample mean and standard deviation match N(0, 1e-6 rad^2) (bounds: 5 standard errors of the
    mean, and the 99.99 % chi-square band for the deviation over the samples taken), different per joint and
    message; velocities = the differences of consecutive noisy positions over their stamps."""
    from sensor_msgs.msg import JointState
    sigma = 1e-3
    proc, p, log = _start_bridge(tmp_path_factory, [
        "-p", "camera_rate_hz:=0.0", "-p", "objects_rate_hz:=0.0", "-p", f"encoder_noise_rad:={sigma}",
        "-p", "encoder_noise_seed:=7"])
    try:
        p.node.create_subscription(JointState, "joint_states", p.keep("noisy", 2000), 300)
        p.node.create_subscription(JointState, "sim/joint_states", p.keep("truth", 2000), 300)
        assert _wait(lambda: p.count("noisy") > 400 and p.count("truth") > 400, 60), log.read_text()[-3000:]
        assert "encoder noise: joint_states positions + N(0, (0.001 rad)^2) (seed 7)" in log.read_text()
        with p.lock:
            noisy = [m for _, m in p.msgs["noisy"]]
            truth = {(m.header.stamp.sec, m.header.stamp.nanosec): m for _, m in p.msgs["truth"]}
    finally:
        p.close()
        proc.kill()
        proc.wait(5)
    stamp = lambda m: (m.header.stamp.sec, m.header.stamp.nanosec)  # noqa: E731
    pairs = [(m, truth[stamp(m)]) for m in noisy if stamp(m) in truth]
    assert len(pairs) > 300, (len(noisy), len(truth))
    noise = np.array([np.subtract(m.position, t.position) for m, t in pairs])     # (N, 6) rad
    n = noise.size
    assert abs(noise.mean()) < 5.0 * sigma / np.sqrt(n), noise.mean()
    # (n - 1) s^2 / sigma^2 ~ chi^2(n - 1): within +-3.9 standard deviations sqrt(2 (n - 1)) of its mean
    chi2 = (n - 1) * noise.var(ddof=1) / sigma ** 2
    assert abs(chi2 - (n - 1)) < 3.9 * np.sqrt(2.0 * (n - 1)), (chi2, n)
    assert np.all(noise != 0.0) and np.unique(noise).size == n
    # velocities: differenced noisy positions between consecutive messages (the publishing interval)
    checked = 0
    for (a, _), (b, _) in zip(pairs, pairs[1:]):
        dt = (b.header.stamp.sec - a.header.stamp.sec) + 1e-9 * (b.header.stamp.nanosec - a.header.stamp.nanosec)
        if abs(dt - 1.0 / 250.0) < 1e-9:    # neighbours (the subscription may have missed none or some)
            np.testing.assert_allclose(b.velocity, (np.array(b.position) - a.position) / dt, atol=1e-9)
            checked += 1
    assert checked > 300, checked


def test_effort_command_moves_a_joint(bridge):
    from manip_core import RobotModel
    from manip_sim.scene import load_scene

    p = bridge["probe"]
    assert _wait(lambda: p.effort_pub.get_subscription_count() > 0, 20)
    scene = load_scene(CONFIG / "pick_place_scene.yaml")
    model = RobotModel.from_urdf(scene.robot.urdf, scene.robot.base_link, scene.robot.tip_link)
    q_start = np.array(p.last("joint_states").position)
    end = time.monotonic() + 1.0
    # Gravity compensation + 1 mN*m on wrist_3, at 50 Hz. wrist_3's inertia about its axis is 1.3e-4 kg*m^2, so
    # 1 s of it turns the joint at most 0.5 * (1e-3 / 1.3e-4) * 1^2 = 3.8 rad: clear of its 2*pi limit (a larger
    # torque slams the joint into the limit, whose reaction then moves wrist_2).
    while time.monotonic() < end:
        q = np.array(p.last("joint_states").position)
        p.publish_efforts(model.gravity_torques(q) + [0, 0, 0, 0, 0, 1e-3])
        time.sleep(0.02)
    js = p.last("joint_states")
    moved = np.array(js.position) - q_start
    assert 0.1 < moved[5] < 4.0, moved
    assert np.max(np.abs(moved[:5])) < 0.05, moved
    assert js.effort[5] == pytest.approx(1e-3, abs=1e-9)


def test_bad_command_is_rejected_and_the_node_keeps_running(bridge):
    p = bridge["probe"]
    p.publish_efforts([0.0] * 4)
    p.publish_efforts([0.0, float("nan"), 0.0, 0.0, 0.0, 0.0])
    assert _wait(lambda: _log_text(bridge).count("rejected effort command") >= 2, 10), _log_text(bridge)
    text = _log_text(bridge)
    assert "expected 6 values" in text and "NaN" in text
    n = p.count("joint_states")
    assert _wait(lambda: p.count("joint_states") > n + 10, 10)
    assert bridge["proc"].poll() is None
    # After the commands stop the watchdog brakes the arm.
    assert _wait(lambda: "watchdog" in _log_text(bridge), 10)


def test_images_and_camera_info_arrive_with_consistent_sizes(bridge):
    p = bridge["probe"]
    assert _wait(lambda: min(p.count(k) for k in ("left", "right", "left_info", "right_info")) > 0, 40), \
        _log_text(bridge)
    for side in ("left", "right"):
        img, info = p.last(side), p.last(f"{side}_info")
        assert (img.width, img.height, img.encoding, img.step) == (WIDTH, HEIGHT, "rgb8", 3 * WIDTH)
        assert len(img.data) == img.step * img.height
        assert (info.width, info.height) == (WIDTH, HEIGHT)
        assert info.k[2] == pytest.approx((WIDTH - 1) / 2) and info.k[5] == pytest.approx((HEIGHT - 1) / 2)
        assert img.header.frame_id == info.header.frame_id
        image = np.frombuffer(bytes(img.data), np.uint8).reshape(HEIGHT, WIDTH, 3)
        assert image.std() > 10                      # not a blank image
    left, right = p.last("left_info"), p.last("right_info")
    assert left.header.frame_id == "stereo_left_optical" and right.header.frame_id == "stereo_right_optical"
    fx = left.k[0]
    assert fx == pytest.approx((WIDTH / 2) / np.tan(np.radians(35.0)))
    assert left.p[3] == 0.0 and right.p[3] == pytest.approx(-fx * 0.12)


def test_ground_truth_objects(bridge):
    from manip_msgs.msg import SceneObject

    p = bridge["probe"]
    assert _wait(lambda: p.count("objects") > 0, 20)
    msg = p.last("objects")
    assert msg.header.frame_id == "base_link"
    objs = {o.name: o for o in msg.objects}
    assert set(objs) == {"table", "cube", "pillar"}
    cube = objs["cube"]
    assert cube.kind == SceneObject.KIND_OBJECT and objs["pillar"].kind == SceneObject.KIND_OBSTACLE
    assert (cube.pose.position.x, cube.pose.position.y) == (pytest.approx(0.45, abs=1e-3),
                                                            pytest.approx(-0.25, abs=1e-3))
    assert cube.size.x == pytest.approx(0.04) and not cube.attached


def test_grasp_service_answers(bridge):
    p = bridge["probe"]
    res = p.call_grasp(True, "cube")
    assert not res.success and "max_distance" in res.message      # the tool is far above the cube
    res = p.call_grasp(True, "nothing_like_this")
    assert not res.success and "no object" in res.message
    res = p.call_grasp(False)
    assert res.success


def test_world_and_camera_frames_on_tf_static(bridge):
    """world -> base_link (the scene's base pose: identity), base_link -> left optical (camera_position /
    camera_orientation_xyzw of stereo_camera.yaml), left -> right optical (+baseline along the left x)."""
    import yaml
    from scipy.spatial.transform import Rotation
    from tf2_msgs.msg import TFMessage
    from manip_core.ros.tf import STATIC_QOS
    probe = bridge["probe"]
    got = []
    probe.node.create_subscription(TFMessage, "/tf_static", got.append, STATIC_QOS)  # transient local: late is fine
    assert _wait(lambda: got, 30.0), _log_text(bridge)[-2000:]
    tf = {(t.header.frame_id, t.child_frame_id): t.transform for t in got[-1].transforms}
    assert set(tf) == {("world", "base_link"), ("base_link", "stereo_left_optical"),
                       ("stereo_left_optical", "stereo_right_optical")}
    cam = yaml.safe_load((CONFIG / "stereo_camera.yaml").read_text())["/**"]["ros__parameters"]

    def pq(t):
        return (np.array([t.translation.x, t.translation.y, t.translation.z]),
                np.array([t.rotation.x, t.rotation.y, t.rotation.z, t.rotation.w]))
    p, q = pq(tf[("world", "base_link")])
    np.testing.assert_allclose(p, 0.0, atol=1e-12)
    np.testing.assert_allclose(np.abs(q), [0, 0, 0, 1], atol=1e-12)
    p, q = pq(tf[("base_link", "stereo_left_optical")])
    np.testing.assert_allclose(p, cam["camera_position"], atol=1e-9)
    assert Rotation.from_quat(q).approx_equal(Rotation.from_quat(cam["camera_orientation_xyzw"]), atol=1e-6)
    p, q = pq(tf[("stereo_left_optical", "stereo_right_optical")])
    np.testing.assert_allclose(p, [cam["stereo_baseline"], 0.0, 0.0], atol=1e-9)
    np.testing.assert_allclose(np.abs(q), [0, 0, 0, 1], atol=1e-9)


def test_sigint_shuts_down_cleanly(bridge):
    proc = bridge["proc"]
    render_pid = _render_pid(bridge)
    assert render_pid is not None
    proc.send_signal(signal.SIGINT)
    assert proc.wait(15) == 0
    text = _log_text(bridge)
    assert "Traceback" not in text, text
    assert _wait(lambda: not Path(f"/proc/{render_pid}").exists()
                 or "zombie" in Path(f"/proc/{render_pid}/status").read_text().lower(), 5)
