"""Regression bags for stereo_obstacles: a deterministic generator of small rosbag2 recordings (mcap and
sqlite3, written with ``rosbags``) from the project's simulator (manip_sim's PyBullet scene and camera
model), with ground truth.

    .venv/bin/python manip_perception/test/regression_bags.py OUT_DIR [--frames 5]

What the camera model adds to the ideal rendered pair (all seeded, so every run writes the same bytes):

* sensor noise: Gaussian, sigma 2 grey levels, independent per camera and pixel;
* lighting: a global gain per frame (0.75 to 1.2, an exposure/illumination change over the sequence) and a
  right camera 4 % brighter than the left;
* calibration error: the true right camera is rotated by 0.03 deg (yaw), 0.02 deg (pitch) and 0.05 deg
  (roll) about its optical axes relative to the ideal pair that the camera_info describes;
* a moving arm in view: the UR5 sweeps its shoulder, elbow and wrist over the sequence (joint_states
  recorded alongside the images).

Scene (base frame, the table top at z = 0): two boxes and a cylinder on a 1.2 x 1.4 m textured table, the
UR5 at the origin. Topics: the four stereo topics (rgb8, 10 Hz stamps), ``/joint_states``, ``/tf_static``
(base_link -> stereo_left_optical: the true left camera pose). Ground truth (objects: shape, full size and
centre in the base frame; the camera; the joint values per frame) goes to ``ground_truth.json`` beside the
bag's files.
"""
import argparse
import json
import math
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
CAMERA_POSITION = (0.45, -0.9, 0.7)
CAMERA_XYZW = (-0.89879, 0.0, 0.0, 0.43837)
OBJECTS = [
    # name, shape, full size (x, y, z; cylinder: diameter, diameter, height), centre (base frame)
    ('box_a', 'box', (0.08, 0.12, 0.16), (0.30, 0.20, 0.08)),
    ('box_b', 'box', (0.16, 0.08, 0.10), (0.70, -0.10, 0.05)),
    ('cylinder', 'cylinder', (0.08, 0.08, 0.20), (0.55, 0.42, 0.10)),
]
JOINTS = ('shoulder_pan_joint', 'shoulder_lift_joint', 'elbow_joint', 'wrist_1_joint', 'wrist_2_joint',
          'wrist_3_joint')
RIGHT_ERROR_DEG = (0.02, 0.03, 0.05)  # rotation of the true right camera about its optical x, y, z
NOISE_SIGMA = 2.0


def _import_manip_sim():
    try:
        import manip_sim  # noqa: F401
    except ImportError:
        for pkg in ('manip_sim', 'manip_core'):
            sys.path.insert(0, str(REPO / pkg))


def joint_values(k, n):
    """UR5 joints at frame k of n: the arm sweeps beside the objects, in view of the camera."""
    s = k / max(n - 1, 1)
    return [math.pi + 0.5 - 0.6 * s, -1.2 - 0.3 * s, 1.3 + 0.4 * s, -1.6, -1.5707963, 0.3 * s]


def arm_chain(model, q):
    """Link origins of the arm's chain (base frame), consecutive duplicates removed."""
    pts = [np.zeros(3)] + [model.fk(np.asarray(q, float), n)[:3, 3] for n in model.link_names]
    out = [pts[0]]
    for p in pts[1:]:
        if np.linalg.norm(p - out[-1]) > 1e-6:
            out.append(p)
    return np.array(out)


def _arm_bodies(pb, client, model, q, tex, radius=0.045):
    from manip_sim.transforms import matrix_to_pose
    ids = []
    chain = arm_chain(model, q)
    for a, b in zip(chain[:-1], chain[1:]):
        axis = b - a
        length = float(np.linalg.norm(axis))
        zax = axis / length
        xax = np.cross(zax, [0, 0, 1] if abs(zax[2]) < 0.9 else [1, 0, 0])
        xax /= np.linalg.norm(xax)
        T = np.eye(4)
        T[:3, :3] = np.column_stack([xax, np.cross(zax, xax), zax])
        T[:3, 3] = (a + b) / 2
        _, quat = matrix_to_pose(T)
        vis = pb.createVisualShape(pb.GEOM_CYLINDER, radius=radius, length=length, physicsClientId=client)
        body = pb.createMultiBody(0, -1, vis, basePosition=T[:3, 3].tolist(), baseOrientation=list(quat),
                                  physicsClientId=client)
        pb.changeVisualShape(body, -1, textureUniqueId=tex, rgbaColor=[1, 1, 1, 1], physicsClientId=client)
        ids.append(body)
    return ids


def ur5_is_drawn():
    """True when the bundled UR5's URDF has visual or collision shapes (the renderer draws the arm)."""
    text = (REPO / 'manip_core' / 'manip_core' / 'robots' / 'ur5.urdf').read_text()
    return '<visual' in text or '<collision' in text


def gain(k, n):
    return 0.75 + 0.45 * (0.5 - 0.5 * math.cos(2 * math.pi * k / max(n - 1, 1)))


def _scene():
    from manip_sim.scene import parse_scene
    data = {'name': 'regression',
            'robot': {'urdf': 'ur5', 'base_link': 'base_link', 'tip_link': 'tool0'},
            'table': {'size': [1.2, 1.4, 0.05], 'center_xy': [0.35, 0.1]},
            'obstacles': [{'name': n, 'shape': s, 'size': list(size) if s == 'box' else [size[0], size[2]],
                           'position': list(pos), 'color': [0.6, 0.5, 0.4, 1.0]} for n, s, size, pos in OBJECTS]}
    return parse_scene(data, base_dir=str(REPO / 'manip_sim' / 'config'))


def _rot(axis, deg):
    import cv2
    return cv2.Rodrigues(np.asarray(axis, float) * math.radians(deg))[0]


def render(frames=5):
    """[(left rgb, right rgb, joint values)] per frame, and the ideal StereoCamera."""
    _import_manip_sim()
    from manip_sim.camera import SceneMirror, StereoCamera
    from manip_sim.transforms import matrix_to_pose
    from manip_sim.world import _quietly

    cam = StereoCamera(position=CAMERA_POSITION, orientation_xyzw=CAMERA_XYZW, baseline=0.12)
    # The true right camera: the ideal one rotated slightly about its optical axes.
    T_right = cam.pose(right=True)
    R_true = T_right[:3, :3] @ _rot([1, 0, 0], RIGHT_ERROR_DEG[0]) @ _rot([0, 1, 0], RIGHT_ERROR_DEG[1]) @ \
        _rot([0, 0, 1], RIGHT_ERROR_DEG[2])
    T_true = T_right.copy()
    T_true[:3, :3] = R_true
    pos, q = matrix_to_pose(T_true)
    right_cam = StereoCamera(position=tuple(pos), orientation_xyzw=tuple(q), baseline=0.12)
    mirror = _quietly(lambda: SceneMirror(_scene(), cam))
    pb = mirror._pb
    index = {pb.getJointInfo(mirror.robot, i, physicsClientId=mirror.client)[1].decode(): i
             for i in range(pb.getNumJoints(mirror.robot, physicsClientId=mirror.client))}
    # The simulator draws the bundled UR5 from its URDF (PyBullet shows the collision shapes of a link without
    # visual ones). A UR5 file without either is invisible: then the arm is drawn as textured cylinders
    # (radius 4.5 cm) along its link chain, posed by manip_core forward kinematics at the recorded joints.
    from manip_core import RobotModel
    from manip_sim.world import write_png
    model = RobotModel.load('ur5')
    stand_in = not ur5_is_drawn()
    tex_path = Path(mirror._tmp.name) / 'arm.png'
    write_png(tex_path, (np.random.default_rng(9).random((64, 64, 1)) * 160 + 60).repeat(3, 2).astype(np.uint8))
    tex = pb.loadTexture(str(tex_path), physicsClientId=mirror.client)
    if not stand_in:  # the URDF's own shapes get the stand-in's texture too: the bags' arm does not depend on the
        # colour a URDF gives it (a plain grey housing smears in stereo beyond the self-filter's padding)
        for link in range(-1, pb.getNumJoints(mirror.robot, physicsClientId=mirror.client)):
            pb.changeVisualShape(mirror.robot, link, textureUniqueId=tex, rgbaColor=[1, 1, 1, 1],
                                 physicsClientId=mirror.client)
    rng = np.random.default_rng(8)
    out = []
    proj = cam.projection_matrix()
    try:
        for k in range(frames):
            qv = joint_values(k, frames)
            mirror.apply({'joints': [(index[n], v) for n, v in zip(JOINTS, qv)]})
            arm = _arm_bodies(pb, mirror.client, model, qv, tex) if stand_in else []
            imgs = []
            for c, rel_gain in ((cam, 1.0), (right_cam, 1.04)):
                _, _, rgba, _, _ = pb.getCameraImage(c.width, c.height, c.view_matrix(mirror.world_T_base), proj,
                                                     renderer=pb.ER_TINY_RENDERER, flags=pb.ER_NO_SEGMENTATION_MASK,
                                                     physicsClientId=mirror.client)
                rgb = np.asarray(rgba, np.uint8).reshape(c.height, c.width, 4)[:, :, :3].astype(np.float32)
                rgb = rgb * (gain(k, frames) * rel_gain) + rng.normal(0, NOISE_SIGMA, rgb.shape)
                imgs.append(np.clip(np.rint(rgb), 0, 255).astype(np.uint8))
            for b in arm:
                pb.removeBody(b, physicsClientId=mirror.client)
            out.append((imgs[0], imgs[1], qv))
    finally:
        mirror.close()
    return out, cam


def ground_truth(cam, frames):
    return {'camera': {'position': list(CAMERA_POSITION), 'orientation_xyzw': list(CAMERA_XYZW),
                       'baseline': cam.baseline, 'frame_id': cam.frame_id,
                       'right_rotation_error_deg': list(RIGHT_ERROR_DEG)},
            'objects': [{'name': n, 'shape': s, 'size': list(size), 'center': list(pos)} for n, s, size, pos in
                        OBJECTS],
            'table_top_z': 0.0,
            'frames': frames}


def write_bag(path, rendered, cam, storage, t0_s):
    """One bag (storage 'mcap' or 'sqlite3') of the rendered frames, stamps t0_s + 0.1 k; returns path."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore
    ts = get_typestore(Stores.ROS2_HUMBLE)  # version 8 bags with Humble types: playable on Humble and later
    T = ts.types
    path = Path(path)
    plugin = StoragePlugin.MCAP if storage == 'mcap' else StoragePlugin.SQLITE3
    Time, Header = T['builtin_interfaces/msg/Time'], T['std_msgs/msg/Header']
    with Writer(path, version=8, storage_plugin=plugin) as w:
        c = {k: w.add_connection(topic, mt, typestore=ts) for k, (topic, mt) in {
            'left': ('/stereo/left/image_rect', 'sensor_msgs/msg/Image'),
            'right': ('/stereo/right/image_rect', 'sensor_msgs/msg/Image'),
            'left_info': ('/stereo/left/camera_info', 'sensor_msgs/msg/CameraInfo'),
            'right_info': ('/stereo/right/camera_info', 'sensor_msgs/msg/CameraInfo'),
            'joint_states': ('/joint_states', 'sensor_msgs/msg/JointState'),
            'tf_static': ('/tf_static', 'tf2_msgs/msg/TFMessage')}.items()}
        t0_ns = int(round(t0_s * 1e9))
        Tc = cam.pose()
        x, y, z, wq = CAMERA_XYZW
        tf = T['tf2_msgs/msg/TFMessage'](transforms=[T['geometry_msgs/msg/TransformStamped'](
            header=Header(stamp=Time(sec=t0_ns // 10 ** 9, nanosec=t0_ns % 10 ** 9), frame_id='base_link'),
            child_frame_id=cam.frame_id,
            transform=T['geometry_msgs/msg/Transform'](
                translation=T['geometry_msgs/msg/Vector3'](x=float(Tc[0, 3]), y=float(Tc[1, 3]), z=float(Tc[2, 3])),
                rotation=T['geometry_msgs/msg/Quaternion'](x=x, y=y, z=z, w=wq)))])
        w.write(c['tf_static'], t0_ns, ts.serialize_cdr(tf, 'tf2_msgs/msg/TFMessage'))
        for k, (left, right, qv) in enumerate(rendered):
            t_ns = t0_ns + k * 100_000_000
            stamp = Time(sec=t_ns // 10 ** 9, nanosec=t_ns % 10 ** 9)
            js = T['sensor_msgs/msg/JointState'](header=Header(stamp=stamp, frame_id=''), name=list(JOINTS),
                                                 position=np.array(qv, float), velocity=np.zeros(0),
                                                 effort=np.zeros(0))
            w.write(c['joint_states'], t_ns, ts.serialize_cdr(js, 'sensor_msgs/msg/JointState'))
            for side, img in (('left', left), ('right', right)):
                frame = cam.frame_id if side == 'left' else cam.right_frame_id
                header = Header(stamp=stamp, frame_id=frame)
                P = cam.P(right=(side == 'right'))
                info = T['sensor_msgs/msg/CameraInfo'](
                    header=header, height=cam.height, width=cam.width, distortion_model='plumb_bob',
                    d=np.zeros(5), k=cam.K().reshape(-1), r=np.eye(3).reshape(-1), p=P.reshape(-1), binning_x=0,
                    binning_y=0, roi=T['sensor_msgs/msg/RegionOfInterest'](x_offset=0, y_offset=0, height=0,
                                                                           width=0, do_rectify=False))
                w.write(c[side + '_info'], t_ns, ts.serialize_cdr(info, 'sensor_msgs/msg/CameraInfo'))
                im = T['sensor_msgs/msg/Image'](header=header, height=img.shape[0], width=img.shape[1],
                                                encoding='rgb8', is_bigendian=0, step=img.shape[1] * 3,
                                                data=np.ascontiguousarray(img).reshape(-1))
                w.write(c[side], t_ns, ts.serialize_cdr(im, 'sensor_msgs/msg/Image'))
    gt = ground_truth(cam, [{'stamp': [(t0_ns + k * 100_000_000) // 10 ** 9, (t0_ns + k * 100_000_000) % 10 ** 9],
                             'joints': dict(zip(JOINTS, qv))} for k, (_, _, qv) in enumerate(rendered)])
    (path / 'ground_truth.json').write_text(json.dumps(gt, indent=1) + '\n')
    return path


def generate(out_dir, frames=5):
    """Render once and write ``regression_mcap`` (stamps from 100 s) and ``regression_sqlite3`` (from 200 s)
    under out_dir; returns their paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rendered, cam = render(frames)
    return [write_bag(out_dir / 'regression_mcap', rendered, cam, 'mcap', 100.0),
            write_bag(out_dir / 'regression_sqlite3', rendered, cam, 'sqlite3', 200.0)]


def read_bag(path):
    """[(key, raw CDR bytes)] in bag order (key: left, right, left_info, right_info, joint_states,
    tf_static) and the ground truth dict."""
    from rosbags.rosbag2 import Reader
    keys = {'/stereo/left/image_rect': 'left', '/stereo/right/image_rect': 'right',
            '/stereo/left/camera_info': 'left_info', '/stereo/right/camera_info': 'right_info',
            '/joint_states': 'joint_states', '/tf_static': 'tf_static'}
    with Reader(path) as r:
        records = [(keys[c.topic], bytes(raw)) for c, _, raw in r.messages()]
    return records, json.loads((Path(path) / 'ground_truth.json').read_text())


def expected_boxes(gt, plane_margin):
    """[(name, centre (3,), size (3,))] of what a camera above the table can detect of each object: its full
    footprint, from plane_margin above the table top up to its top."""
    out = []
    for o in gt['objects']:
        c, size = np.array(o['center'], float), np.array(o['size'], float)
        bottom = max(c[2] - size[2] / 2, gt['table_top_z'] + plane_margin)
        top = c[2] + size[2] / 2
        out.append((o['name'], np.array([c[0], c[1], (bottom + top) / 2]), np.array([size[0], size[1], top - bottom])))
    return out


def _segment_distance(p, chain):
    a, b = chain[:-1], chain[1:]
    ab = b - a
    t = np.clip(np.einsum('ij,ij->i', p - a, ab) / np.maximum(np.einsum('ij,ij->i', ab, ab), 1e-12), 0, 1)
    return float(np.min(np.linalg.norm(a + t[:, None] * ab - p, axis=1)))


def score(frames, gt, plane_margin=0.015, match_distance=0.05, arm_distance=0.12):
    """Accuracy of detections against the ground truth.

    ``frames``: [(joint values or None, [(centre (3,), size (3,))...])] per frame. A detection within
    ``match_distance`` (m) of an object's expected centre (greedy, nearest first) is a true positive; one
    within ``arm_distance`` of the arm's link segments is counted as ``arm`` (the arm is a real body, not a
    phantom, but not a ground-truth object either), any other is a false positive. Returns a dict: precision
    (TP / (TP + FP)), recall (TP / objects), centre error mean and max (m), size error max (m, per axis),
    arm detections."""
    from manip_core import RobotModel
    model = RobotModel.load('ur5')
    exp = expected_boxes(gt, plane_margin)
    tp = fp = arm = n_obj = 0
    cerr, serr = [], []
    for q, dets in frames:
        n_obj += len(exp)
        chain = arm_chain(model, q) if q is not None else None
        pairs = sorted((float(np.linalg.norm(np.asarray(c) - e)), i, j) for i, (c, _) in enumerate(dets)
                       for j, (_, e, _) in enumerate(exp))
        used_d, used_o = set(), set()
        for d, i, j in pairs:
            if d > match_distance or i in used_d or j in used_o:
                continue
            used_d.add(i)
            used_o.add(j)
            tp += 1
            cerr.append(d)
            serr.append(float(np.max(np.abs(np.asarray(dets[i][1]) - exp[j][2]))))
        for i, (c, _) in enumerate(dets):
            if i in used_d:
                continue
            if chain is not None and _segment_distance(np.asarray(c, float), chain) < arm_distance:
                arm += 1
            else:
                fp += 1
    return {'frames': len(frames), 'precision': tp / (tp + fp) if tp + fp else 1.0, 'recall': tp / n_obj,
            'centre_error_mean_m': float(np.mean(cerr)) if cerr else float('nan'),
            'centre_error_max_m': float(np.max(cerr)) if cerr else float('nan'),
            'size_error_max_m': float(np.max(serr)) if serr else float('nan'), 'false_positives': fp,
            'arm_detections': arm}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('out_dir', nargs='?', default=tempfile.gettempdir())
    ap.add_argument('--frames', type=int, default=5)
    a = ap.parse_args(argv)
    for p in generate(a.out_dir, a.frames):
        size = sum(f.stat().st_size for f in p.iterdir())
        print(f"{p} ({size / 1e6:.1f} MB)")


if __name__ == '__main__':
    main()
