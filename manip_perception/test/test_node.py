"""The stereo_obstacles node over real DDS: a subprocess started with manip_sim/config/stereo_camera.yaml,
fed the rendered pair (directly, and replayed from a rosbag2 mcap file written with rosbags), checked
against the scene's ground truth; bad inputs are rejected without stopping it; SIGINT/SIGTERM end it cleanly.
"""
import math
import os
import pickle
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import QoSProfile
from sensor_msgs.msg import Image, PointCloud2
from stereo_msgs.msg import DisparityImage
from visualization_msgs.msg import Marker, MarkerArray

from manip_msgs.msg import ObstacleArray
from manip_perception.image_conversion import image_to_numpy, numpy_to_image

TOL = 0.03
PLANE_MARGIN = 0.015  # the node's default plane_margin
TIMEOUT = 40.0


def _node_command(gt, *extra):
    # What the console script stereo_obstacles (setup.py) runs.
    return [sys.executable, '-c', 'import sys; from manip_perception import stereo_obstacles_main as m; '
            'sys.exit(m())', '--ros-args', '--params-file', str(gt.CAMERA_YAML), *extra]


def _start_node(gt, env, log_path, *extra):
    log = open(log_path, 'w')
    proc = subprocess.Popen(_node_command(gt, *extra), env=env, stdout=log, stderr=subprocess.STDOUT)
    proc.log_file = log
    proc.log_path = log_path
    return proc


def _wait_for_log(proc, pattern, timeout=30.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        text = proc.log_path.read_text()
        if re.search(pattern, text):
            return text
        if proc.poll() is not None:
            raise AssertionError(f"node exited with {proc.returncode}:\n{text}")
        time.sleep(0.1)
    raise AssertionError(f"'{pattern}' not logged within {timeout} s:\n{proc.log_path.read_text()}")


def _stop(proc, sig=signal.SIGINT, timeout=15.0):
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    proc.log_file.close()
    return proc.returncode, proc.log_path.read_text()


class Feeder:
    """stereo_feeder.py in a subprocess: publishes what the tests hand it (serialized messages)."""

    def __init__(self, env, workdir):
        self.workdir = workdir
        self.count = 0
        self.log_path = workdir / 'feeder.log'
        self.log_file = open(self.log_path, 'w')
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name('stereo_feeder.py'))], env=env,
                                     stdin=subprocess.PIPE, stdout=self.log_file, stderr=subprocess.STDOUT,
                                     text=True)

    def wait_ready(self, timeout=30.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if 'ready' in self.log_path.read_text():
                return
            assert self.proc.poll() is None, self.log_path.read_text()
            time.sleep(0.1)
        raise AssertionError(f"feeder not ready: {self.log_path.read_text()}")

    def run(self, steps, repeat=None):
        """steps: (key, message or raw bytes) or ('sleep', s); repeat: run again every that many s."""
        from rclpy.serialization import serialize_message
        ser = [s if s[0] == 'sleep' or isinstance(s[1], bytes) else (s[0], serialize_message(s[1]))
               for s in steps]
        self.count += 1
        path = self.workdir / f'script{self.count}.pkl'
        path.write_bytes(pickle.dumps({'steps': ser, 'repeat': repeat}))
        self.proc.stdin.write(f'{path}\n')
        self.proc.stdin.flush()

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log_file.close()


class Harness:
    """The test side: subscribers of the node's outputs (receiving large messages needs no profile)."""

    def __init__(self, domain_id, feeder):
        self.feeder = feeder
        self.context = Context()
        rclpy.init(context=self.context, domain_id=domain_id)
        self.node = rclpy.create_node('stereo_obstacles_test', context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.received = {'obstacles': [], 'markers': [], 'disparity': [], 'points': []}
        rel = QoSProfile(depth=10)
        self.node.create_subscription(ObstacleArray, 'obstacles', self.received['obstacles'].append, rel)
        self.node.create_subscription(MarkerArray, 'obstacle_markers', self.received['markers'].append, rel)
        self.node.create_subscription(DisparityImage, 'stereo/disparity', self.received['disparity'].append, rel)
        self.node.create_subscription(PointCloud2, 'stereo/points2', self.received['points'].append, rel)

    def spin_for(self, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.executor.spin_once(timeout_sec=0.02)

    def wait_for_node(self, timeout=30.0):
        end = time.monotonic() + timeout
        outputs = ('obstacles', 'obstacle_markers', 'stereo/disparity', 'stereo/points2')
        while time.monotonic() < end:
            if all(self.node.count_publishers(t) > 0 for t in outputs):
                self.spin_for(0.5)  # let the node's side of discovery settle too
                return
            self.spin_for(0.1)
        raise AssertionError('stereo_obstacles not discovered')

    def find(self, key, stamp):
        for m in self.received[key]:
            h = m.header if key != 'markers' else (m.markers[0].header if m.markers else None)
            if h is not None and (h.stamp.sec, h.stamp.nanosec) == (stamp.sec, stamp.nanosec):
                return m
        return None

    def wait_for(self, stamp, keys=('obstacles',), timeout=TIMEOUT):
        """Spin until a message with ``stamp`` arrived on each of keys."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.executor.spin_once(timeout_sec=0.02)
            found = {k: self.find(k, stamp) for k in keys}
            if all(v is not None for v in found.values()):
                return found
        raise AssertionError(f"no {keys} for stamp {stamp.sec}.{stamp.nanosec} within {timeout} s")

    def close(self):
        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)


@pytest.fixture(scope='module')
def ros(gt, tmp_path_factory):
    domain = random.randint(100, 200)
    from manip_core.ros.transport import LARGE_DATA_PROFILE
    profile = str(LARGE_DATA_PROFILE)
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE='LOCALHOST',
               PYTHONUNBUFFERED='1', RCUTILS_LOGGING_BUFFERED_STREAM='0', FASTDDS_DEFAULT_PROFILES_FILE=profile)
    if os.environ.get('ROS_DISTRO') in ('humble', 'jazzy'):  # Fast DDS 2 reads the older name
        env['FASTRTPS_DEFAULT_PROFILES_FILE'] = profile
    env['PYTHONPATH'] = os.pathsep.join([gt.source_root('manip_perception'), env.get('PYTHONPATH', '')])
    saved = os.environ.get('ROS_AUTOMATIC_DISCOVERY_RANGE')
    os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'  # read when the test's context starts
    logs = tmp_path_factory.mktemp('node_logs')
    proc = _start_node(gt, env, logs / 'stereo_obstacles.log', '--log-level', 'stereo_obstacles:=debug')
    feeder = Feeder(env, logs)
    harness = Harness(domain, feeder)
    try:
        _wait_for_log(proc, 'stereo_obstacles ready', timeout=TIMEOUT)
        feeder.wait_ready()
        harness.wait_for_node()
        yield harness, proc, env, logs
    finally:
        feeder.close()
        harness.close()
        _stop(proc)
        if saved is None:
            os.environ.pop('ROS_AUTOMATIC_DISCOVERY_RANGE', None)
        else:
            os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = saved


def _stamp(sec, nanosec=0):
    from builtin_interfaces.msg import Time
    return Time(sec=sec, nanosec=nanosec)


def _frame(scene, stamp):
    cam = scene.camera
    msgs = {}
    for side, img in (('left', scene.left), ('right', scene.right)):
        m = numpy_to_image(img, 'rgb8')
        m.header.stamp = stamp
        m.header.frame_id = cam.camera_frame
        msgs[side] = m
        msgs[side + '_info'] = cam.camera_info(side, stamp=stamp)
    return msgs


def _steps(msgs):
    """Camera infos first, then the images (the node pairs the images and uses the latest infos)."""
    return [(k, msgs[k]) for k in ('left_info', 'right_info', 'left', 'right') if k in msgs]


def _check_obstacles(msg, scene, stamp):
    assert msg.header.frame_id == 'base_link'
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (stamp.sec, stamp.nanosec)
    centers = [np.array([o.center.x, o.center.y, o.center.z]) for o in msg.obstacles]
    assert len(centers) == len(scene.objects), centers  # no phantoms
    errors = {}
    for obj in scene.objects:
        exp = obj.expected_center(PLANE_MARGIN)
        errors[obj.name] = min(np.linalg.norm(c - exp) for c in centers)
        assert errors[obj.name] < TOL, (obj.name, centers, exp)
    assert sorted(o.id for o in msg.obstacles) == list(range(len(centers)))
    return errors


def test_obstacles_over_dds(ros, scene, record_property):
    h, proc, _, _ = ros
    stamp = _stamp(1000, 123)
    msgs = _frame(scene, stamp)
    h.feeder.run(_steps(msgs), repeat=1.0)
    found = h.wait_for(stamp, keys=('obstacles', 'markers', 'disparity', 'points'))
    errors = _check_obstacles(found['obstacles'], scene, stamp)
    for name, err in errors.items():
        record_property(f'dds_{name}_error_cm', round(err * 100, 2))

    markers = found['markers'].markers
    assert markers[0].action == Marker.DELETEALL
    cubes = markers[1:]
    assert len(cubes) == len(found['obstacles'].obstacles)
    for mk, ob in zip(cubes, found['obstacles'].obstacles):
        assert mk.type == Marker.CUBE and mk.header.frame_id == 'base_link'
        assert mk.pose == ob.pose  # the oriented box
        assert mk.scale.x == pytest.approx(max(ob.oriented_size.x, 0.005))
        assert 0.5 < ob.confidence <= 1.0  # dense clusters, temporal filter off
        # The rendered boxes stand square to the base axes: their oriented box is nearly the axis-aligned one
        # (yaw within 5 degrees of 0 or 90, sizes within 2 cm, its centre inside the axis-aligned box). The
        # cylinder's footprint has no preferred yaw.
        c = np.array([ob.center.x, ob.center.y, ob.center.z])
        if min(scene.objects, key=lambda o: np.linalg.norm(o.expected_center(PLANE_MARGIN) - c)).kind != 'box':
            continue
        yaw = 2 * math.atan2(ob.pose.orientation.z, ob.pose.orientation.w)
        assert abs(yaw) < math.radians(5) or abs(abs(yaw) - math.pi / 2) < math.radians(5), yaw
        assert ob.oriented_size.z == pytest.approx(ob.size.z)
        assert sorted([ob.oriented_size.x, ob.oriented_size.y]) == pytest.approx(sorted([ob.size.x, ob.size.y]),
                                                                                  abs=0.02)
        assert abs(ob.pose.position.x - ob.center.x) <= ob.size.x / 2

    disp = found['disparity']
    cam = scene.camera
    assert disp.f == pytest.approx(cam.fx, rel=1e-6) and disp.t == pytest.approx(cam.baseline, rel=1e-6)
    # Derived from the working depth range of stereo_camera.yaml (0.45-3 m): d = fx * B / Z, block margin,
    # a multiple of 16 disparities.
    assert (disp.min_disparity, disp.max_disparity) == (18.0, 129.0)
    d = image_to_numpy(disp.image)
    assert d.shape == (cam.height, cam.width) and disp.image.encoding == '32FC1'
    valid = d >= disp.min_disparity
    gt_d = cam.fx * cam.baseline / scene.depth
    table = valid & (scene.seg == scene.table) & (scene.depth < 2.0)
    assert np.median(np.abs(d[table] - gt_d[table])) < 0.3

    cloud = found['points']
    assert cloud.header.frame_id == cam.camera_frame
    assert [f.name for f in cloud.fields] == ['x', 'y', 'z', 'rgb']
    assert cloud.width > 100_000 and cloud.point_step == 16

    assert proc.poll() is None
    log = _wait_for_log(proc, r'frame 1000\.000000123: 3 obstacles')
    totals = [float(x) for x in re.findall(r'total ([0-9.]+) ms', log)]
    record_property('frame_ms', totals[-1])


def test_bad_inputs_are_rejected_and_the_node_keeps_serving(ros, scene):
    h, proc, _, _ = ros
    cam = scene.camera
    good = _frame(scene, _stamp(2000))
    steps = [('right_info', good['right_info'])]  # a valid right camera_info, whatever ran before

    bad_info = _frame(scene, _stamp(2001))
    bad_info['left_info'].p[0] = float('nan')
    steps += [('left_info', bad_info['left_info']), ('sleep', 0.3)] + _steps(
        {k: bad_info[k] for k in ('left', 'right')}) + [('sleep', 0.8)]

    truncated = _frame(scene, _stamp(2002))
    truncated['left'].data = bytes(truncated['left'].data)[:-7]
    steps += [('left_info', good['left_info']), ('sleep', 0.3)] + _steps(
        {k: truncated[k] for k in ('left', 'right')}) + [('sleep', 0.8)]

    nan_pair = {}
    for side in ('left', 'right'):
        f = np.full((cam.height, cam.width), 0.5, np.float32)
        f[10, 20] = np.nan
        nan_pair[side] = numpy_to_image(f, '32FC1')
        nan_pair[side].header.stamp = _stamp(2003)
    steps += _steps(nan_pair) + [('sleep', 0.8)]

    small = _frame(scene, _stamp(2004))
    small['right'] = numpy_to_image(np.ascontiguousarray(scene.right[:240, :320]), 'rgb8')
    small['right'].header.stamp = _stamp(2004)
    steps += _steps({k: small[k] for k in ('left', 'right')}) + [('sleep', 0.8)]
    # Repeated until every rejection is logged: the images are best effort, and a node the machine's load holds
    # up keeps only the newest pair (each sequence starts with the bad left camera_info, so every run is whole).
    h.feeder.run(steps, repeat=0.5)

    patterns = (r'rejected: no valid camera_info received yet for left',
                r'rejected: left camera_info: camera_info P holds NaN',
                r'rejected: image data has \d+ bytes, expected step \* height',
                r'rejected: 32FC1 image holds NaN or inf',
                r'rejected: .*images differ')
    end = time.monotonic() + TIMEOUT
    log = ''
    while time.monotonic() < end and not all(re.search(p, log) for p in patterns):
        h.spin_for(0.2)
        log = proc.log_path.read_text()
    for p in patterns:
        assert re.search(p, log), (p, log)
    assert proc.poll() is None
    for s in (2001, 2002, 2003, 2004):
        assert h.find('obstacles', _stamp(s)) is None

    stamp = _stamp(2005)
    h.feeder.run(_steps(_frame(scene, stamp)), repeat=1.0)
    found = h.wait_for(stamp)
    _check_obstacles(found['obstacles'], scene, stamp)


def test_bag_replay(ros, scene, tmp_path):
    """Write the pair into a rosbag2 (mcap) with rosbags, read it back, publish the raw CDR bytes."""
    from rclpy.serialization import deserialize_message
    from rosbags.rosbag2 import Reader, StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    h, proc, _, _ = ros
    ts = get_typestore(Stores.ROS2_KILTED)
    T = ts.types
    cam = scene.camera
    topics = {'left': ('/stereo/left/image_rect', 'sensor_msgs/msg/Image'),
              'right': ('/stereo/right/image_rect', 'sensor_msgs/msg/Image'),
              'left_info': ('/stereo/left/camera_info', 'sensor_msgs/msg/CameraInfo'),
              'right_info': ('/stereo/right/camera_info', 'sensor_msgs/msg/CameraInfo')}
    stamps = [(3000, 0), (3000, 100_000_000)]
    bag = tmp_path / 'stereo_bag'
    with Writer(bag, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        conns = {k: writer.add_connection(t, mt, typestore=ts) for k, (t, mt) in topics.items()}
        for sec, ns in stamps:
            header = T['std_msgs/msg/Header'](stamp=T['builtin_interfaces/msg/Time'](sec=sec, nanosec=ns),
                                              frame_id=cam.camera_frame)
            t_ns = sec * 1_000_000_000 + ns
            for side, img in (('left', scene.left), ('right', scene.right)):
                f = cam.info_fields(side)
                info = T['sensor_msgs/msg/CameraInfo'](
                    header=header, height=f['height'], width=f['width'], distortion_model=f['distortion_model'],
                    d=np.array(f['d'], float), k=np.array(f['k'], float), r=np.array(f['r'], float),
                    p=np.array(f['p'], float), binning_x=0, binning_y=0,
                    roi=T['sensor_msgs/msg/RegionOfInterest'](x_offset=0, y_offset=0, height=0, width=0,
                                                              do_rectify=False))
                writer.write(conns[side + '_info'], t_ns, ts.serialize_cdr(info, 'sensor_msgs/msg/CameraInfo'))
                im = T['sensor_msgs/msg/Image'](header=header, height=img.shape[0], width=img.shape[1],
                                                encoding='rgb8', is_bigendian=0, step=img.shape[1] * 3,
                                                data=np.ascontiguousarray(img).reshape(-1))
                writer.write(conns[side], t_ns, ts.serialize_cdr(im, 'sensor_msgs/msg/Image'))
    assert list(bag.glob('*.mcap'))

    by_topic = {t: k for k, (t, _) in topics.items()}
    with Reader(bag) as reader:
        records = [(by_topic[c.topic], bytes(raw)) for c, _, raw in reader.messages()]
    assert len(records) == 8
    # The bytes decode with rclpy to the rendered image.
    first_left = next(raw for k, raw in records if k == 'left')
    np.testing.assert_array_equal(image_to_numpy(deserialize_message(first_left, Image)), scene.left)

    h.feeder.run(records, repeat=1.5)  # raw CDR bytes in bag order, as a bag player publishes them
    last = _stamp(*stamps[-1])
    found = h.wait_for(last)
    _check_obstacles(found['obstacles'], scene, last)
    assert proc.poll() is None


def test_no_support_plane_is_logged(ros, gt, camera, tmp_path):
    """A frame without any support plane in view (the objects in front of the empty background): the node
    warns that it found none and removed nothing (no fallback height), and still reports the objects."""
    h, proc, _, _ = ros
    sc = gt.render_scene(camera, gt.main_objects(), tmp_path, seed=4, table_center=(0.0, 40.0),
                         table_half_size=(0.1, 0.1))
    stamp = _stamp(7000)
    h.feeder.run(_steps(_frame(sc, stamp)), repeat=1.0)
    found = h.wait_for(stamp)
    assert len(found['obstacles'].obstacles) == len(sc.objects)
    _wait_for_log(proc, r'WARN.*(no support plane|support plane rejected).*; no plane removed')
    _wait_for_log(proc, r'frame 7000\.000000000: 3 obstacles')
    # Back to the table scene: the plane is found again and said so.
    stamp = _stamp(7001)
    h.feeder.run(_steps(_frame(gt.render_scene(camera, gt.main_objects(), tmp_path / 'table'), stamp)),
                 repeat=1.0)
    h.wait_for(stamp)
    log = _wait_for_log(proc, r'no plane removed[\s\S]*INFO.*support plane: normal')
    assert 'Logger severity' not in log and 'unexpected' not in log


def test_only_the_newest_pair_is_processed(ros, scene):
    """Frames at 30 Hz, faster than this node processes them on 2 loaded cores: it skips frames instead of
    queueing them. The frames it processes come in stamp order, at most three finish after the last frame
    was sent, and the newest frame is among them."""
    h, proc, _, _ = ros
    n = 15
    stamps = [_stamp(5000, k * 33_333_333) for k in range(n)]
    steps = []
    for st in stamps:
        steps += _steps(_frame(scene, st)) + [('sleep', 1 / 30)]
    ran = h.feeder.log_path.read_text().count('ran ')
    h.feeder.run(steps)
    end = time.monotonic() + TIMEOUT
    while h.feeder.log_path.read_text().count('ran ') == ran and time.monotonic() < end:
        h.spin_for(0.02)
    fed = time.time()
    # The newest frames finish within a few processing times (seconds on a loaded machine), then nothing.
    last = '|'.join(f'{st.nanosec:09d}' for st in stamps[-2:])
    _wait_for_log(proc, rf'frame 5000\.({last}):', timeout=TIMEOUT)
    h.spin_for(2.0)
    log = proc.log_path.read_text()
    pattern = r'\[DEBUG\] \[([0-9.]+)\] \[stereo_obstacles\]: frame 5000\.(\d+):'
    done = [(float(t), int(ns)) for t, ns in re.findall(pattern, log)]
    assert done, log[-2000:]
    order = [ns for _, ns in done]
    assert order == sorted(order) and len(set(order)) == len(order), order
    after = [ns for t, ns in done if t > fed]
    # One in progress, the newest pair waiting, and on a heavily loaded machine one more whose images the
    # middleware delivered late (a queue would give up to a dozen: 11 measured with depth 10).
    assert len(after) <= 3, (len(done), after)
    assert max(order) >= stamps[-2].nanosec, order
    assert len(done) <= n


def test_sigint_ends_the_node_cleanly(ros):
    _, proc, _, _ = ros
    rc, log = _stop(proc, signal.SIGINT)
    assert rc == 0, log
    assert 'Traceback' not in log, log
    assert re.search(r'shut down: \d+ frames processed', log)


def test_self_filter_in_the_node(gt, ros, camera, tmp_path):
    """self_filter:=true with the UR5 URDF and joint_states: the robot stand-in (rendered at the same joint
    values) is filtered out, the two objects remain. Runs after the first node was stopped."""
    from sensor_msgs.msg import JointState
    h, first, env, _ = ros
    assert first.poll() is not None
    model = gt.import_manip_core_model().RobotModel.load('ur5')
    urdf = gt.ur5_stand_in_description(tmp_path)  # capsules along the chain, like the rendered stand-in
    env = dict(env, PYTHONPATH=os.pathsep.join([gt.source_root('manip_core'), env['PYTHONPATH']]))
    proc = _start_node(gt, env, tmp_path / 'self_filter.log', '-p', 'self_filter:=true',
                       '-p', f'urdf_path:={urdf}', '--log-level', 'stereo_obstacles:=debug')
    try:
        _wait_for_log(proc, r'ready.*self-filter on', timeout=TIMEOUT)
        chain, robot = gt.robot_stand_in(model, gt.ROBOT_Q)
        objects = [o for o in gt.main_objects() if o.name != 'box_a']
        sc = gt.render_scene(camera, objects, tmp_path / 'scene', seed=3, extra_bodies=robot)
        js = JointState(name=list(model.joint_names), position=[float(x) for x in gt.ROBOT_Q])
        _prime_joint_states(h, js)
        stamp = _stamp(4000)
        h.feeder.run([('joint_states', js), ('sleep', 0.2)] + _steps(_frame(sc, stamp)), repeat=1.0)
        found = h.wait_for(stamp)
        msg = found['obstacles']
        centers = [np.array([o.center.x, o.center.y, o.center.z]) for o in msg.obstacles]
        assert len(centers) == len(objects), centers
        for o in objects:
            assert min(np.linalg.norm(c - o.expected_center(PLANE_MARGIN)) for c in centers) < TOL, o.name
        # The frame's debug line comes after the disparity and cloud are published too.
        log = _wait_for_log(proc, r"frame 4000\.000000000: 2 obstacles.*'self_filtered': \d+")
        counts = re.search(r"frame 4000\.0+: .*'above_plane': (\d+), 'self_filtered': (\d+)", log)
        assert int(counts[2]) < int(counts[1])  # the robot's points were removed
    finally:
        h.feeder.run([])
        rc, log = _stop(proc)
    assert rc == 0 and 'Traceback' not in log, log


def _prime_joint_states(h, js):
    """joint_states at 10 Hz until the node's subscription is discovered and 1 s more: a frame that comes before
    any reaches a new node is not self-filtered (logged: 'self-filter skipped'), and its robot is an obstacle."""
    h.feeder.run([('joint_states', js)], repeat=0.1)
    end = time.monotonic() + TIMEOUT
    while h.node.count_subscribers('joint_states') == 0 and time.monotonic() < end:
        h.spin_for(0.1)
    h.spin_for(1.0)


def _scene_object(name, kind, T, size, attached=False):
    from manip_msgs.msg import SceneObject
    o = SceneObject(name=name, kind=kind, attached=attached)
    o.pose.position.x, o.pose.position.y, o.pose.position.z = (float(v) for v in T[:3, 3])
    x, y, z, w = (float(v) for v in gt_quat(T[:3, :3]))
    o.pose.orientation.x, o.pose.orientation.y, o.pose.orientation.z, o.pose.orientation.w = x, y, z, w
    o.size.x, o.size.y, o.size.z = (float(v) for v in size)
    return o


def gt_quat(R):
    from scipy.spatial.transform import Rotation
    return Rotation.from_matrix(R).as_quat()  # x, y, z, w


def test_panda_self_filter_and_known_objects_in_the_node(gt, ros, panda_scene, tmp_path):
    """Any robot: example-robot-data's Panda (urdf_path; collision STL meshes through package://), rendered by
    PyBullet at the joint_states sent to the node, holding a cube, next to box_a (the object to pick) and box_b.
    known_objects (SceneObjectArray, transient local) names the held cube (attached, given in the base frame at the
    images' stamp) and box_a (to pick), plus box_b as KIND_OBSTACLE (ignored). Only box_b is reported, at its
    true position; the log names the Panda's collision geometry."""
    from sensor_msgs.msg import JointState

    from manip_msgs.msg import SceneObject, SceneObjectArray
    h, first, env, _ = ros
    assert first.poll() is not None
    sc, ids, model = panda_scene
    env = dict(env, PYTHONPATH=os.pathsep.join([gt.source_root('manip_core'), gt.source_root('manip_planning'),
                                                env['PYTHONPATH']]))
    # The Panda's base link is panda_link0: the obstacles' frame (the camera pose parameters of
    # stereo_camera.yaml hold for it: the Panda stands at the origin of the scene's base frame).
    proc = _start_node(gt, env, tmp_path / 'panda.log', '-p', f'urdf_path:={gt.PANDA_URDF}',
                       '-p', 'tip_link:=panda_hand', '-p', 'base_frame:=panda_link0')
    try:
        _wait_for_log(proc, r'ready.*self-filter on', timeout=TIMEOUT)
        log = _wait_for_log(proc, r'self-filter for panda: collision geometry of \d+ links', timeout=TIMEOUT)
        stamp = _stamp(5500)   # unique in this module: the harness keeps every result by stamp (5000 is taken)
        js = JointState(name=list(model.joint_names), position=[float(x) for x in gt.PANDA_Q])
        js.header.stamp = stamp
        box_a = next(o for o in sc.objects if o.name == 'box_a')
        box_b = next(o for o in sc.objects if o.name == 'box_b')
        T_a, T_b = np.eye(4), np.eye(4)
        T_a[:3, 3], T_b[:3, 3] = box_a.position, box_b.position
        known = SceneObjectArray(objects=[
            _scene_object('cube', SceneObject.KIND_OBJECT, ids['held_T'], [gt.PANDA_HELD_SIZE] * 3, attached=True),
            _scene_object('box_a', SceneObject.KIND_OBJECT, T_a, 2 * box_a.half_extents),
            _scene_object('box_b', SceneObject.KIND_OBSTACLE, T_b, 2 * box_b.half_extents)])
        known.header.frame_id = 'panda_link0'
        known.header.stamp = stamp
        _prime_joint_states(h, js)
        h.feeder.run([('joint_states', js), ('known_objects', known), ('sleep', 0.3)] + _steps(_frame(sc, stamp)),
                     repeat=1.0)
        msg = h.wait_for(stamp)['obstacles']
        centers = [np.array([o.center.x, o.center.y, o.center.z]) for o in msg.obstacles]
        assert len(centers) == 1, centers
        assert np.linalg.norm(centers[0] - box_b.expected_center(PLANE_MARGIN)) < TOL, centers
        log = _wait_for_log(proc, r'known_objects: cube \(held, in panda_link0\), box_a \(to pick, in panda_link0\)')
        assert log.count('known_objects: cube') == 1  # logged when the set changes, not at every republish
    finally:
        h.feeder.run([])
        rc, log = _stop(proc)
    assert rc == 0 and 'Traceback' not in log, log


def test_regression_bags_replayed_into_the_node(gt, ros, regression_bags, tmp_path, record_property):
    """The recorded regression bags (mcap and sqlite3; simulator with sensor noise, lighting changes, a
    slight right-camera rotation and the arm moving in view, see regression_bags.py) replayed frame by frame
    into a node with the robot self-filter: precision, recall, centre and size errors of its obstacles
    against the ground truth. The texture check is set above the sensor noise (std 2 grey levels): without
    it the noisy flat background gives phantom clusters (see the bench)."""
    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import JointState
    h, first, env, _ = ros
    assert first.poll() is not None
    rb, bags = regression_bags
    urdf = gt.REPO / 'manip_core' / 'manip_core' / 'robots' / 'ur5.urdf'  # what the bags show (regression_bags)
    env = dict(env, PYTHONPATH=os.pathsep.join([gt.source_root('manip_core'), env['PYTHONPATH']]))
    try:  # with tf2_msgs the camera pose comes from the bag's /tf_static, the pose parameters are wrong
        import tf2_msgs.msg  # noqa: F401
        use_tf = ['-p', 'camera_position:=[0.0, 0.0, 0.0]', '-p', 'camera_orientation_xyzw:=[0.0, 0.0, 0.0, 1.0]']
    except ImportError:  # without it, from stereo_camera.yaml
        use_tf = []
    proc = _start_node(gt, env, tmp_path / 'bags.log', '-p', 'self_filter:=true', '-p', f'urdf_path:={urdf}',
                       '-p', 'texture_threshold:=3.0', *use_tf)
    try:
        _wait_for_log(proc, r'ready.*self-filter on', timeout=TIMEOUT)
        for bag in bags:
            records, truth = rb.read_bag(bag)
            frames, step = [], []
            tf_static = [(k, raw) for k, raw in records if k == 'tf_static' and use_tf]
            for key, raw in records:
                if key == 'tf_static':
                    continue
                step.append((key, raw))
                if key == 'joint_states':  # reliable, the images best effort: let it arrive first
                    step.append(('sleep', 0.3))
                if key == 'right':  # the last message of a frame (bag order: joints, infos, images)
                    frames.append(tf_static + step)
                    step = []
            results = []
            for steps in frames:
                joints = deserialize_message(next(r for k, r in steps if k == 'joint_states'), JointState)
                stamp = _stamp(joints.header.stamp.sec, joints.header.stamp.nanosec)
                h.feeder.run(steps, repeat=1.0)  # repeated until processed: the images are best effort
                msg = h.wait_for(stamp)['obstacles']
                dets = [(np.array([o.center.x, o.center.y, o.center.z]), np.array([o.size.x, o.size.y, o.size.z]))
                        for o in msg.obstacles]
                results.append((list(joints.position), dets))
            s = rb.score(results, truth, PLANE_MARGIN)
            name = bag.name
            for k, v in s.items():
                record_property(f'{name}_{k}', round(v, 4) if isinstance(v, float) else v)
            assert s['frames'] == truth_frames(truth) and s['precision'] >= 0.95 and s['recall'] >= 0.95, (name, s)
            assert s['centre_error_mean_m'] < 0.03 and s['centre_error_max_m'] < 0.06, (name, s)
            assert s['size_error_max_m'] < 0.10 and s['arm_detections'] == 0, (name, s)
        if use_tf:
            _wait_for_log(proc, r'camera pose from tf: base_link -> stereo_left_optical')
    finally:
        h.feeder.run([])
        rc, log = _stop(proc)
    assert rc == 0 and 'Traceback' not in log, log


def test_camera_pose_from_tf_static(gt, ros, scene, tmp_path):
    """With tf2_msgs installed: the camera pose comes from /tf_static (base_link -> the camera_info's frame)
    and wins over wrong pose parameters; the log names the source."""
    tf2 = pytest.importorskip('tf2_msgs.msg')
    from geometry_msgs.msg import TransformStamped
    from rclpy.qos import DurabilityPolicy
    h, first, env, _ = ros
    assert first.poll() is not None
    cam = scene.camera
    proc = _start_node(gt, env, tmp_path / 'tf.log', '-p', 'camera_position:=[0.0, 0.0, 0.0]',
                       '-p', 'camera_orientation_xyzw:=[-0.5, 0.5, -0.5, 0.5]')
    try:
        _wait_for_log(proc, r'ready.*camera pose from tf', timeout=TIMEOUT)
        ts = TransformStamped()
        ts.header.frame_id, ts.child_frame_id = 'base_link', cam.camera_frame
        ts.transform.translation.x, ts.transform.translation.y, ts.transform.translation.z = \
            (float(v) for v in cam.position)
        q = cam.orientation_xyzw
        ts.transform.rotation.x, ts.transform.rotation.y, ts.transform.rotation.z, ts.transform.rotation.w = \
            (float(v) for v in q)
        pub = h.node.create_publisher(tf2.TFMessage, '/tf_static',
                                      QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL))
        pub.publish(tf2.TFMessage(transforms=[ts]))
        h.spin_for(1.0)
        stamp = _stamp(6000)
        h.feeder.run(_steps(_frame(scene, stamp)), repeat=1.0)
        found = h.wait_for(stamp)
        _check_obstacles(found['obstacles'], scene, stamp)
        _wait_for_log(proc, r'camera pose from tf: base_link -> stereo_left_optical')
    finally:
        h.feeder.run([])
        rc, log = _stop(proc)
    assert rc == 0 and 'Traceback' not in log, log


def truth_frames(truth):
    return len(truth['frames'])


def test_sigterm_and_sim_time(gt, ros, tmp_path):
    _, _, env, _ = ros
    proc = _start_node(gt, env, tmp_path / 'sigterm.log', '-p', 'use_sim_time:=true')
    _wait_for_log(proc, 'stereo_obstacles ready', timeout=TIMEOUT)
    rc, log = _stop(proc, signal.SIGTERM)
    assert rc == 0, log
    assert 'Traceback' not in log and 'Failed to publish' not in log, log


def test_invalid_parameters_fail_at_start(gt, ros, tmp_path):
    _, _, env, _ = ros
    proc = subprocess.run(_node_command(gt, '-p', 'num_disparities:=100'), env=env, capture_output=True,
                          text=True, timeout=30)
    assert proc.returncode == 1
    assert 'num_disparities must be a positive multiple of 16' in proc.stdout + proc.stderr
    assert 'Traceback' not in proc.stdout + proc.stderr


def test_parameters_declared_described_and_validated():
    """In-process node (own context): every setting is a described parameter; invalid updates are refused."""
    from rclpy.parameter import Parameter

    from manip_perception.stereo_obstacles_node import PARAMETERS, StereoObstaclesNode
    ctx = Context()
    rclpy.init(context=ctx, domain_id=random.randint(100, 200))
    try:
        node = StereoObstaclesNode(context=ctx)
        names = list(PARAMETERS)
        for d in node.describe_parameters(names):
            assert d.description, d.name
        assert node.get_parameter('use_sim_time').value is False  # declared by rclpy, honoured by default
        assert not node.set_parameters([Parameter('num_disparities', value=100)])[0].successful
        assert not node.set_parameters([Parameter('workspace_max', value=[1.0, 1.0])])[0].successful
        assert not node.set_parameters([Parameter('camera_orientation_xyzw', value=[0.0, 0.0, 0.0, 0.0])])[
            0].successful
        assert not node.set_parameters([Parameter('voxel_size', value=float('nan'))])[0].successful
        assert not node.set_parameters([Parameter('min_depth', value=6.0)])[0].successful  # > max_depth
        assert not node.set_parameters([Parameter('track_appear_frames', value=0)])[0].successful
        assert not node.set_parameters([Parameter('self_filter', value=False)])[0].successful  # start-up only
        assert not node.set_parameters([Parameter('self_filter_padding', value=-0.01)])[0].successful
        assert not node.set_parameters([Parameter('self_filter_radius', value=0.0)])[0].successful
        assert not node.set_parameters([Parameter('max_support_planes', value=0)])[0].successful
        assert not node.set_parameters([Parameter('stereo_matcher', value='census')])[0].successful
        assert not node.set_parameters([Parameter('min_cluster_points', value=-1)])[0].successful
        # min_cluster_points 0 (default): block matching's 12 (the 4 cm cube at 1 m keeps 13-23 voxels)
        assert node.config.sgbm.matcher == 'bm' and node.config.obstacles.min_cluster_points == 12
        assert node.set_parameters([Parameter('stereo_matcher', value='sgbm')])[0].successful
        assert node.config.sgbm.matcher == 'sgbm' and node.config.sgbm.block_size == 5  # block 0: its default
        assert node.config.obstacles.min_cluster_points == 20  # and SGBM's 20
        assert node.set_parameters([Parameter('min_cluster_points', value=7)])[0].successful
        assert node.config.obstacles.min_cluster_points == 7
        assert node.config.values['self_filter'] is True  # on by default: the robot from robot_description
        assert node.config.values['num_disparities'] == 0  # derived from the depth range
        assert node.config.values['texture_threshold'] == 0.0  # off for real cameras
        assert node.config.obstacles.workspace_min == (-100.0,) * 3  # no crop, no scene assumed
        assert node.set_parameters([Parameter('num_disparities', value=96),
                                    Parameter('table_height', value=1)])[0].successful  # int for a float
        assert node.config.sgbm.num_disparities == 96 and node.config.obstacles.table_height == 1.0
        assert node.set_parameters([Parameter('camera_position', value=[0, 0, 1])])[0].successful
        assert node.config.obstacles.camera_position == (0.0, 0.0, 1.0)
        node.destroy_node()
    finally:
        rclpy.try_shutdown(context=ctx)
