"""stereo_obstacles: rectified stereo pair -> disparity, point cloud, obstacles (docs/graph.md).

Subscribes: ``stereo/left/image_rect``, ``stereo/right/image_rect`` (Image; best effort, depth 1: a pair
that arrives while one is processed replaces the waiting one, so only the newest pair is processed),
``stereo/left/camera_info``, ``stereo/right/camera_info`` (CameraInfo, qos_profile_sensor_data), and when
tf2_msgs is installed ``/tf_static`` and ``/tf`` (the camera pose: base_frame -> the left camera_info's
frame_id, tf_buffer.TransformBuffer; the pose parameters only when tf has no such transform).
Publishes (reliable, depth 10): ``stereo/disparity`` (DisparityImage), ``stereo/points2`` (PointCloud2, left
optical frame), ``obstacles`` (manip_msgs/ObstacleArray in ``base_frame``, stamp of the images),
``obstacle_markers`` (MarkerArray: DELETEALL, then one CUBE per obstacle: its oriented box, alpha from the confidence).

Self-filter (parameter ``self_filter``, on by default; robot_body): the robot model comes from manip_core's
RobotModelSource (``urdf_path`` / ``robot_description`` parameters, else the ``robot_description`` topic) and
the joint values from ``joint_states`` (the message whose stamp is nearest to the images'); points within
``self_filter_padding`` of the robot's collision geometry at those joint values are dropped before clustering,
and so are the points of the objects named on ``known_objects`` (manip_msgs/SceneObjectArray): an attached
object (held: part of the robot, it moves with its link) or an object to pick (not an obstacle).

The maths is in image_conversion, stereo, voxel_grid, support_plane, obstacles, tracking, tf_buffer and
pairing (no rclpy there).

Transport: with rmw_fastrtps and its default 512 KiB shared-memory segment, few best-effort 640x480 rgb8
images reach another process (measured here: 7 of 120 at 5 Hz; 120 of 120 with the profile below). The
publisher of the images (sim_bridge, a bag player) and this node (for its disparity and cloud) need the
large-segment profile; main() applies it (manip_core.ros.transport.use_large_data_profile) unless the user
set FASTDDS_DEFAULT_PROFILES_FILE / FASTRTPS_DEFAULT_PROFILES_FILE or another middleware.
"""
import collections
import dataclasses
import math
import time
from pathlib import Path

import numpy as np
import rclpy
from rcl_interfaces.msg import ParameterDescriptor, SetParametersResult
from rclpy.exceptions import ParameterException
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import (DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy,
                       qos_profile_sensor_data)
from sensor_msgs.msg import CameraInfo, Image, PointCloud2, PointField, RegionOfInterest
from stereo_msgs.msg import DisparityImage
from visualization_msgs.msg import Marker, MarkerArray

from manip_msgs.msg import Obstacle, ObstacleArray

from .image_conversion import ImageConversionError, fill_image, image_to_numpy, to_mono8, to_rgb8
from .obstacles import (LEVEL_CAMERA_XYZW, MIN_CLUSTER_POINTS, ObstacleError, ObstacleParams, camera_pose_matrix,
                        detect_obstacles, warm_up)
from .pairing import StereoPairer
from .stereo import (Calibration, DisparityMatcher, Rectifier, SgbmParams, StereoError, back_project_disparity,
                     disparity_range, pack_pointcloud2)
from .tf_buffer import TransformBuffer, TransformError
from .known_objects import KNOWN_OBJECTS_QOS_DEPTH, KnownObjects
from .tracking import ObstacleTracker

# name: (default, description). Floats and float lists accept integers too (dynamic typing + conversion).
# No default assumes a particular scene or camera mounting (the simulator's file sets its own values).
PARAMETERS = {
    'base_frame': ('base_link', 'frame of the obstacles (the robot base, +z up); the camera pose is looked up '
                                'from it to the left camera_info frame_id on /tf_static and /tf'),
    'camera_frame': ('stereo_left_optical', 'left optical frame: frame_id of points2 (and of the tf lookup) '
                                            'when the images and camera_info have none'),
    'camera_position': ([0.0, 0.0, 0.0], 'left camera optical centre in base_frame (m); used only when tf has '
                                         'no transform base_frame -> camera frame'),
    'camera_orientation_xyzw': (list(LEVEL_CAMERA_XYZW),
                                'left optical frame orientation in base_frame, quaternion (x, y, z, w); used '
                                'only without tf (default: level, looking along base +x)'),
    'stereo_baseline': (0.0, 'expected baseline (m) for a consistency warning; 0 disables it. The baseline '
                             'used is the one of the right camera_info (P[0,3] = -fx * baseline)'),
    'min_depth': (0.5, 'working depth range, near end (m along the optical axis): with num_disparities 0 the '
                       'SGBM search covers min_depth..max_depth (d = fx * B / Z); nearer points are dropped'),
    'max_depth': (5.0, 'working depth range, far end (m); farther points are dropped'),
    'min_disparity': (0, 'SGBM minimum disparity (px); only with num_disparities > 0'),
    'num_disparities': (0, 'SGBM disparity search range (px, multiple of 16); 0: derived from min_depth, '
                           'max_depth and the calibration'),
    'stereo_matcher': ('bm', 'disparity matcher: bm (OpenCV block matching, default: camera rate, about 2.5x less '
                             'CPU than sgbm at equal obstacle accuracy on the regression bags) or sgbm (semi-global '
                             'matching: denser on weakly textured surfaces); bench/perception.py compares them'),
    'block_size': (0, 'matched block size (odd px; bm: 5..255); 0: 9 for bm, 5 for sgbm'),
    'uniqueness_ratio': (10, 'SGBM uniqueness margin (percent)'),
    'speckle_window_size': (100, 'SGBM speckle filter: largest region of smooth disparity treated as noise '
                                 '(px); 0 disables the filter'),
    'speckle_range': (2, 'SGBM speckle filter: largest disparity variation within a region (px)'),
    'disp12_max_diff': (1, 'left-right consistency check tolerance (px): a disparity whose right-to-left '
                           'match differs by more is invalid; negative disables the check'),
    'sgbm_p1': (0, 'SGBM smoothness penalty P1 (0: 8 * block_size^2)'),
    'sgbm_p2': (0, 'SGBM smoothness penalty P2 (0: 32 * block_size^2)'),
    'sgbm_mode': ('sgbm_3way', 'OpenCV SGBM mode. Measured on the steeply slanted table: sgbm_3way (default, '
                               'fastest, -0.09 px bias), sgbm (-0.22 px bias), hh (full 8-path, unbiased, about '
                               '2.5x slower), hh4'),
    'texture_threshold': (0.0, 'disparities whose block_size window of the left image has an intensity standard '
                               'deviation below this (grey levels) are invalid; 0 (default, real cameras) '
                               'disables it. Helps on rendered images with flat regions (1.5 in the simulator)'),
    'publish_points': (True, 'publish stereo/points2 (only while it has subscribers)'),
    'voxel_size': (0.01, 'voxel grid cell for downsampling and clustering (m)'),
    'voxel_min_points': (2, 'voxels holding fewer stereo points are dropped as outliers'),
    'workspace_min': ([-100.0, -100.0, -100.0], 'workspace crop box, lower corner in base_frame (m); '
                                                'default: no crop'),
    'workspace_max': ([100.0, 100.0, 100.0], 'workspace crop box, upper corner in base_frame (m)'),
    'plane_fit': (True, 'detect the support plane with RANSAC (false: use the plane z = table_height)'),
    'plane_margin': (0.015, 'points closer than this to the support plane (or below it) are dropped (m)'),
    'plane_max_tilt_deg': (15.0, 'plausibility: largest angle between the plane normal and base +z (deg)'),
    'plane_max_tilt_deg_without_pose': (45.0, 'the same when the camera pose is unknown (no tf, pose parameters at '
                                              'their defaults): the camera is assumed level, so the floor of a '
                                              'camera pitched down appears tilted by the pitch (deg)'),
    'plane_inlier_threshold': (0.01, 'RANSAC inlier distance (m)'),
    'plane_min_area': (0.05, 'plausibility: smallest plane area, as inlier voxels * voxel_size^2 (m^2)'),
    'plane_min_camera_height': (0.05, 'plausibility: the camera must be above the plane by at least this (m)'),
    'plane_max_camera_height': (5.0, 'plausibility: and by at most this (m)'),
    'table_height': (0.0, 'optional prior: base z of the support plane (m), used only with plane_search_band > 0 '
                          '(or as the fixed plane with plane_fit false)'),
    'plane_search_band': (0.0, 'with > 0: RANSAC looks for the plane within table_height +- this (m); 0: anywhere'),
    'max_support_planes': (1, 'support planes removed per frame: the dominant one (with what is below it), then up to '
                              'this many minus one further levels (shelves, seen from above: only their own '
                              'connected surface is removed, and published as an obstacle of its own)'),
    'ransac_iterations': (100, 'RANSAC hypotheses per frame'),
    'cluster_radius_voxels': (1, 'Euclidean clustering: voxels within this many cells (Chebyshev) are neighbours'),
    'cluster_min_neighbors': (6, 'Euclidean clustering: occupied voxels (itself included) in the neighbourhood '
                                 'of a core voxel; sparser voxels join a neighbouring cluster or are noise'),
    'min_cluster_points': (0, 'clusters with fewer voxels are dropped; 0: by the matcher, 12 for bm, 20 for sgbm '
                              '(a 4 cm cube shows at most about 26 voxels of 1 cm above the plane margin; block '
                              'matching gives it 13-23 at 0.9-1.04 m on rendered images, SGBM 45; the largest '
                              'non-object on the regression bags: 10 with bm; obstacles.MIN_CLUSTER_POINTS)'),
    'min_cluster_extent': (0.02, 'clusters whose largest box side is smaller are dropped (m)'),
    'track_appear_frames': (1, 'an obstacle is published after this many consecutive frames with it (1: at once)'),
    'track_disappear_frames': (1, 'and removed after this many consecutive frames without it (1: at once)'),
    'track_match_distance': (0.05, 'largest box-centre motion between frames of the same obstacle (m)'),
    'self_filter': (True, 'drop the points of the robot itself (its collision geometry at the joint_states nearest '
                          'to the images) and of the known_objects: needs the robot model (urdf_path, '
                          'robot_description parameter or topic) and joint_states, skipped (logged) until both '
                          'arrive; start-up only'),
    'self_filter_padding': (0.03, 'points within this distance of the robot collision geometry are dropped (m): '
                                  'visual meshes larger than the collision ones, stereo smear at silhouettes, '
                                  'joint_states timing'),
    'self_filter_radius': (0.08, 'robots without collision geometry (or whose meshes cannot be read): capsules of this '
                                 'radius along the link chain instead (m); read when the model arrives'),
    'object_margin': (0.02, 'points within this distance of a known object box (held, or to pick) are dropped (m)'),
    'max_pairing_delay': (0.5, 'an image without a partner of identical stamp is dropped after this (s)'),
    'pairing_buffer_size': (10, 'images kept per side while waiting for a partner'),
    'reject_log_period': (5.0, 'smallest interval between two logs of the same rejection reason (s)'),
}

OBSTACLE_PARAM_NAMES = ('camera_position', 'camera_orientation_xyzw', 'workspace_min', 'workspace_max',
                        'voxel_size', 'voxel_min_points', 'table_height', 'plane_margin', 'plane_fit',
                        'plane_search_band', 'max_support_planes', 'plane_max_tilt_deg', 'plane_inlier_threshold',
                        'plane_min_area',
                        'plane_min_camera_height', 'plane_max_camera_height', 'ransac_iterations',
                        'cluster_radius_voxels', 'cluster_min_neighbors',
                        'min_cluster_extent', 'self_filter_padding', 'object_margin')
SGBM_PARAM_NAMES = {'stereo_matcher': 'matcher', 'min_disparity': 'min_disparity', 'block_size': 'block_size',
                    'uniqueness_ratio': 'uniqueness_ratio',
                    'speckle_window_size': 'speckle_window_size', 'speckle_range': 'speckle_range',
                    'disp12_max_diff': 'disp12_max_diff', 'sgbm_p1': 'p1', 'sgbm_p2': 'p2', 'sgbm_mode': 'mode',
                    'texture_threshold': 'texture_threshold'}
#: Images: keep only the newest per side (a frame that arrives while one is processed replaces the waiting
#: one instead of queueing); best effort, compatible with qos_profile_sensor_data publishers.
NEWEST_IMAGE = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT, history=HistoryPolicy.KEEP_LAST)
RELIABLE = QoSProfile(depth=10)
#: known_objects: the latest set, also to a late joiner (publish it transient local too).
KNOWN_OBJECTS_QOS = QoSProfile(depth=KNOWN_OBJECTS_QOS_DEPTH, reliability=ReliabilityPolicy.RELIABLE,
                               durability=DurabilityPolicy.TRANSIENT_LOCAL, history=HistoryPolicy.KEEP_LAST)


def _typed(name, value):
    """Value converted to the type of the parameter's default; ValueError when it does not fit."""
    default = PARAMETERS[name][0]
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be a bool")
        return value
    if isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{name} must be an integer")
        return value
    if isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number")
        return float(value)
    if isinstance(default, list):
        vals = [float(v) for v in value]
        if len(vals) != len(default) or not all(math.isfinite(v) for v in vals):
            raise ValueError(f"{name} must be {len(default)} finite numbers")
        return vals
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string")
    return value


class Config:
    """Validated settings built from parameter values (a dict name -> value)."""

    def __init__(self, values):
        v = {n: _typed(n, values[n]) for n in PARAMETERS}
        self.values = v
        # num_disparities 0: a placeholder range until the calibration gives the derived one (sgbm_for).
        self.sgbm = SgbmParams(num_disparities=v['num_disparities'] or 16,
                               **{field: v[name] for name, field in SGBM_PARAM_NAMES.items()}).validate()
        if v['num_disparities'] < 0:
            raise ValueError(f"num_disparities must be >= 0, got {v['num_disparities']}")
        if v['min_cluster_points'] < 0:
            raise ValueError(f"min_cluster_points must be >= 0 (0: by the matcher), got {v['min_cluster_points']}")
        by_matcher = {'min_cluster_points': v['min_cluster_points'] or MIN_CLUSTER_POINTS[self.sgbm.matcher]}
        self.obstacles = ObstacleParams(**{n: (tuple(v[n]) if isinstance(v[n], list) else v[n])
                                           for n in OBSTACLE_PARAM_NAMES}, **by_matcher).validate()
        if not 0 <= v['min_depth'] < v['max_depth']:
            raise ValueError(f"working depth range needs 0 <= min_depth < max_depth, got {v['min_depth']}, "
                             f"{v['max_depth']}")
        if v['max_pairing_delay'] <= 0 or v['pairing_buffer_size'] < 1:
            raise ValueError("max_pairing_delay must be > 0, pairing_buffer_size >= 1")
        ObstacleTracker(v['track_appear_frames'], v['track_disappear_frames'], v['track_match_distance'])
        if not 0 <= v['plane_max_tilt_deg_without_pose'] < 90:
            raise ValueError(f"plane_max_tilt_deg_without_pose must be in [0, 90), got "
                             f"{v['plane_max_tilt_deg_without_pose']}")
        if not v['base_frame']:
            raise ValueError("base_frame must not be empty")
        if not v['self_filter_radius'] > 0:
            raise ValueError(f"self_filter_radius must be > 0 m, got {v['self_filter_radius']}")

    def sgbm_for(self, geometry):
        """SGBM settings for a calibration: the given range, or the one of the working depth range."""
        v = self.values
        if v['num_disparities'] > 0:
            return self.sgbm
        lo, num = disparity_range(geometry.fx, geometry.baseline, max(v['min_depth'], 1e-3), v['max_depth'],
                                  geometry.doffs, self.sgbm.block_size)
        return SgbmParams(**{**self.sgbm.__dict__, 'min_disparity': lo, 'num_disparities': num}).validate()


class StereoObstaclesNode(Node):
    def __init__(self, **kwargs):
        super().__init__('stereo_obstacles', **kwargs)
        for name, (default, description) in PARAMETERS.items():
            dynamic = isinstance(default, (float, list))
            self.declare_parameter(name, default, ParameterDescriptor(description=description,
                                                                      dynamic_typing=dynamic))
        self.config = Config({n: self.get_parameter(n).value for n in PARAMETERS})
        self._matcher = None  # built for the calibration (derived disparity range): _get_matcher
        self._tracker = self._new_tracker(self.config)
        self._pose_source = None  # 'tf' or 'parameters', logged when it changes
        self._plane_status = None
        self._more_planes_logged = 0
        self._tf = TransformBuffer()
        self._pairer = StereoPairer(self.config.values['max_pairing_delay'],
                                    self.config.values['pairing_buffer_size'])
        self.add_on_set_parameters_callback(self._on_set_parameters)

        self._info = {'left': None, 'right': None}
        self._rectifier = None
        self._rectifier_key = None
        self._baseline_warned = False
        self._reject_last = {}
        self.stats = {'frames': 0, 'rejected': 0}
        self._last_drop_logged = 0

        self._robot = None  # RobotModelSource
        self._body = None  # robot_body.RobotBody of the current model
        self._known = KnownObjects()
        self._joint_positions = {}
        self._joint_history = collections.deque(maxlen=500)  # (stamp s, {name: position}) per joint_states
        if self.config.values['self_filter']:
            self._setup_self_filter()

        sd = qos_profile_sensor_data
        self.create_subscription(Image, 'stereo/left/image_rect', lambda m: self._on_image('left', m), NEWEST_IMAGE)
        self.create_subscription(Image, 'stereo/right/image_rect', lambda m: self._on_image('right', m),
                                 NEWEST_IMAGE)
        self._tf_source = self._subscribe_tf()
        self.create_subscription(CameraInfo, 'stereo/left/camera_info', lambda m: self._on_info('left', m), sd)
        self.create_subscription(CameraInfo, 'stereo/right/camera_info', lambda m: self._on_info('right', m), sd)
        self._pub_disp = self.create_publisher(DisparityImage, 'stereo/disparity', RELIABLE)
        self._pub_points = self.create_publisher(PointCloud2, 'stereo/points2', RELIABLE)
        self._pub_obstacles = self.create_publisher(ObstacleArray, 'obstacles', RELIABLE)
        self._pub_markers = self.create_publisher(MarkerArray, 'obstacle_markers', RELIABLE)
        warm_up()  # numba kernels compiled or loaded before the first frame
        v = self.config.values
        rng = (f"{v['num_disparities']} disparities from {v['min_disparity']}" if v['num_disparities'] else
               f"disparities for depths {v['min_depth']}-{v['max_depth']} m")
        self.get_logger().info(
            f"stereo_obstacles ready: {self.config.sgbm.matcher.upper()} {rng}, block {self.config.sgbm.block_size}; "
            f"obstacles in "
            f"'{v['base_frame']}'; camera pose from {self._tf_source}"
            + (", self-filter on (robot from " + ("the model parameters" if self._robot.model is not None else
                                                  "the robot_description topic") + ")"
               if self._robot is not None else ""))

    # ------------------------------------------------------------------------------------ camera pose
    def _subscribe_tf(self):
        """Subscribe /tf_static and /tf when tf2_msgs is importable; returns a phrase for the logs."""
        try:
            from tf2_msgs.msg import TFMessage
        except ImportError:
            return "the camera_position/camera_orientation_xyzw parameters (tf2_msgs not installed: no tf)"
        static_qos = QoSProfile(depth=100, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                                reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)
        self.create_subscription(TFMessage, '/tf_static', lambda m: self._tf.add_message(m, static=True),
                                 static_qos)
        self.create_subscription(TFMessage, '/tf', lambda m: self._tf.add_message(m, static=False),
                                 QoSProfile(depth=100))
        return "tf (/tf_static, /tf), else the camera_position/camera_orientation_xyzw parameters"

    def _camera_pose(self, camera_frame):
        """(4, 4) left optical frame in base_frame: from tf when the transform exists, else the parameters;
        logs the source whenever it changes."""
        base = self.config.values['base_frame']
        try:
            T, source = self._tf.lookup(base, camera_frame), 'tf'
            text = f"camera pose from tf: {base} -> {camera_frame}"
        except TransformError as e:
            o = self.config.obstacles
            T, source = camera_pose_matrix(o.camera_position, o.camera_orientation_xyzw), 'parameters'
            text = f"camera pose from the camera_position/camera_orientation_xyzw parameters ({e})"
            if all(list(self.config.values[n]) == list(PARAMETERS[n][0])
                   for n in ('camera_position', 'camera_orientation_xyzw')):
                source = 'default'
                text = (f"camera pose unknown ({e}; pose parameters not set): assuming a level camera, support "
                        f"planes tilted up to plane_max_tilt_deg_without_pose "
                        f"{self.config.values['plane_max_tilt_deg_without_pose']} deg accepted")
        key = (source, camera_frame)
        if key != self._pose_source:
            self._pose_source = key
            p = T[:3, 3]
            text = (f"{text}: optical centre ({p[0]:.3f}, {p[1]:.3f}, {p[2]:.3f}) m, optical axis "
                    f"({T[0, 2]:+.3f}, {T[1, 2]:+.3f}, {T[2, 2]:+.3f}) in {base}")
            if source == 'default':
                self.get_logger().warning(text)
            else:
                self.get_logger().info(text)
        return T, source

    @staticmethod
    def _new_tracker(config):
        v = config.values
        return ObstacleTracker(v['track_appear_frames'], v['track_disappear_frames'], v['track_match_distance'])

    def _get_matcher(self, geometry):
        params = self.config.sgbm_for(geometry)
        if self._matcher is None or self._matcher.params != params:
            self._matcher = DisparityMatcher(params)
            self.get_logger().info(
                f"{params.matcher.upper()} disparities {params.min_disparity}.."
                f"{params.min_disparity + params.num_disparities - 1} px "
                f"(fx {geometry.fx:.1f} px, baseline {geometry.baseline:.4f} m: depths "
                f"{geometry.fx * geometry.baseline / max(params.min_disparity + params.num_disparities - 1, 1e-9):.2f}"
                f" m and beyond" + (f" up to {geometry.fx * geometry.baseline / params.min_disparity:.2f} m"
                                    if params.min_disparity > 0 else "") + ")")
        return self._matcher

    # ------------------------------------------------------------------------------------ parameters
    def _on_set_parameters(self, params):
        values = dict(self.config.values)
        for p in params:
            if p.name in PARAMETERS:
                values[p.name] = p.value
        try:
            config = Config(values)
            if self._rectifier is not None:
                DisparityMatcher(config.sgbm_for(self._rectifier.geometry))
            if config.values['self_filter'] != self.config.values['self_filter']:
                raise ValueError("self_filter can only be set at start-up")
        except (ValueError, TypeError) as e:
            return SetParametersResult(successful=False, reason=str(e))
        if any(config.values[n] != self.config.values[n] for n in
               ('track_appear_frames', 'track_disappear_frames', 'track_match_distance')):
            self._tracker = self._new_tracker(config)
        self.config = config
        self._pairer.max_delay_s = config.values['max_pairing_delay']
        self._pairer.max_pending = config.values['pairing_buffer_size']
        return SetParametersResult(successful=True)

    # ------------------------------------------------------------------------------------ self filter
    def _setup_self_filter(self):
        try:
            from manip_core.ros.model_source import RobotModelSource
            from sensor_msgs.msg import JointState
        except ImportError as e:
            self.get_logger().error(f"self_filter needs manip_core ({e}); running without it")
            return
        from manip_msgs.msg import SceneObjectArray
        self._robot = RobotModelSource(self, on_model=self._on_model)
        self.create_subscription(JointState, 'joint_states', self._on_joint_state, RELIABLE)
        self.create_subscription(SceneObjectArray, 'known_objects', self._on_known_objects, KNOWN_OBJECTS_QOS)

    def _on_model(self, model, text):
        """A (new) robot model: its collision geometry for the self-filter (a path when it came from urdf_path,
        so that relative mesh paths resolve)."""
        from .robot_body import RobotBody, RobotBodyError
        t0 = time.monotonic()
        path = self.get_parameter('urdf_path').value if self.has_parameter('urdf_path') else ''
        description = text
        try:
            if path and Path(path).is_file() and Path(path).read_text(encoding='utf-8') == text:
                description = path
        except (OSError, UnicodeDecodeError):
            pass
        try:
            self._body = RobotBody.from_description(model, description, self.config.values['self_filter_radius'])
        except RobotBodyError as e:
            self._body = None
            self.get_logger().error(f"self-filter off for {model.name}: {e}")
            return
        log = self.get_logger().info if self._body.source.startswith('collision') else self.get_logger().warning
        log(f"self-filter for {model.name}: {self._body.source} ({time.monotonic() - t0:.1f} s)")

    def _on_known_objects(self, msg):
        before = self._known.describe()
        try:
            self._known.set(msg, self.config.values['base_frame'])
        except ValueError as e:
            self._reject('known_objects', f"known_objects: {e}")
            return
        if self._known.describe() != before:
            self.get_logger().info(f"known_objects: {self._known.describe()}")

    def _on_joint_state(self, msg):
        for name, pos in zip(msg.name, msg.position):
            if math.isfinite(pos):
                self._joint_positions[name] = pos
        t = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        if t > 0:
            self._joint_history.append((t, dict(self._joint_positions)))

    def _joints_at(self, stamp):
        """Joint positions of the joint_states whose stamp is nearest to the images' (the arm moves: the
        latest message may be newer or older than the images); the latest ones when none is stamped."""
        return self._joints_at_time(stamp.sec + stamp.nanosec * 1e-9)

    def _joints_at_time(self, t):
        if not self._joint_history or t <= 0:
            return self._joint_positions
        return min(self._joint_history, key=lambda e: abs(e[0] - t))[1]

    def _posed_body(self, stamp):
        """robot_body.PosedBody in base_frame at the images' stamp (robot, held objects, objects to pick), or
        None (logged) when the model, the joint_states or the base_frame -> model base transform is missing."""
        model = self._robot.model if self._robot is not None else None
        if model is None or self._body is None or self._body.model is not model:
            self._reject('no_model', 'self-filter skipped: no robot model yet (robot_description)', count=False)
            return None
        joints = self._joints_at(stamp)
        try:
            q = np.array([joints[n] for n in model.joint_names])
        except KeyError:
            self._reject('no_joint_states', 'self-filter skipped: joint_states not (fully) received yet',
                         count=False)
            return None
        base = self.config.values['base_frame']

        def base_pose(qq):  # model base link in base_frame
            if base == model.base_link:
                return np.eye(4)
            if base in model.link_names:
                return np.linalg.inv(model.fk(qq, base))
            return self._tf.lookup(base, model.base_link)

        def frame_pose(frame, qq):  # a frame in the model base link's frame
            if frame in (model.base_link, ''):
                return np.eye(4)
            if frame in model.link_names:
                return model.fk(qq, frame)
            if frame == base:
                return np.linalg.inv(base_pose(qq))
            return self._tf.lookup(model.base_link, frame)

        def joints_at(t):
            values = self._joints_at_time(t)
            return None if any(n not in values for n in model.joint_names) else \
                np.array([values[n] for n in model.joint_names])

        try:
            T_base = base_pose(q)
        except TransformError as e:
            self._reject('robot_base', f"self-filter skipped: no transform from base_frame '{base}' to the "
                                       f"robot's base link '{model.base_link}' ({e})", count=False)
            return None
        try:
            held, to_pick = self._known.boxes(model, q, frame_pose, joints_at)
        except (TransformError, ValueError) as e:
            self._reject('known_frame', f"known_objects not applied: {e}", count=False)
            held, to_pick = [], []
        posed = self._body.at(q, held=held, to_pick=to_pick)
        return posed if base == model.base_link else posed.transformed(T_base)

    # ------------------------------------------------------------------------------------ inputs
    def _reject(self, reason, text, count=True):
        """Warn (at most once per reject_log_period per reason); ``count``: a rejected input."""
        if count:
            self.stats['rejected'] += 1
        now = time.monotonic()
        if now - self._reject_last.get(reason, -math.inf) >= self.config.values['reject_log_period']:
            self._reject_last[reason] = now
            self.get_logger().warning(f"rejected: {text} ({self.stats['rejected']} rejected so far)" if count
                                      else text)

    def _on_info(self, side, msg):
        try:
            Calibration.from_camera_info(msg)
        except StereoError as e:
            self._info[side] = None
            self._reject(f'info_{side}', f"{side} camera_info: {e}")
            return
        self._info[side] = msg

    def _on_image(self, side, msg):
        stamp = (msg.header.stamp.sec, msg.header.stamp.nanosec)
        pair = self._pairer.add(side, stamp, msg)
        if self._pairer.dropped != self._last_drop_logged:
            self._last_drop_logged = self._pairer.dropped
            self._reject('unpaired', f"images without a partner of identical stamp within max_pairing_delay "
                                     f"dropped; pairing counts {self._pairer.counts}", count=False)
        if pair is None:
            return
        try:
            self._process(*pair)
        except (ImageConversionError, StereoError, ObstacleError, ValueError) as e:
            self._reject(type(e).__name__ + str(e)[:40], str(e))
        except Exception as e:  # keep serving; the log says what happened
            self._reject('unexpected', f"unexpected {type(e).__name__}: {e}")

    def _get_rectifier(self):
        left, right = self._info['left'], self._info['right']
        if left is None or right is None:
            raise StereoError("no valid camera_info received yet for " +
                              " and ".join(s for s in ('left', 'right') if self._info[s] is None))
        key = tuple(tuple(float(x) for x in getattr(m, f)) for m in (left, right) for f in ('k', 'd', 'r', 'p')) + \
            (left.width, left.height, right.width, right.height)
        if key != self._rectifier_key:
            self._rectifier = Rectifier.from_calibrations(Calibration.from_camera_info(left),
                                                          Calibration.from_camera_info(right))
            self._rectifier_key = key
            g = self._rectifier.geometry
            self.get_logger().info(
                f"stereo calibration: {g.width}x{g.height}, fx {g.fx:.2f}, baseline {g.baseline:.4f} m, "
                + ("already rectified" if self._rectifier.is_noop else "rectifying with the camera_info R/P"))
            expected = self.config.values['stereo_baseline']
            if expected > 0 and abs(expected - g.baseline) > 1e-3 and not self._baseline_warned:
                self._baseline_warned = True
                self.get_logger().warning(f"camera_info baseline {g.baseline:.4f} m differs from parameter "
                                       f"stereo_baseline {expected:.4f} m; using the camera_info")
        return self._rectifier

    # ------------------------------------------------------------------------------------ processing
    def _process(self, left_msg, right_msg):
        t0 = time.perf_counter()
        rect = self._get_rectifier()
        g = rect.geometry
        left = image_to_numpy(left_msg, copy=False)
        right = image_to_numpy(right_msg, copy=False)
        if left.shape != right.shape or left_msg.encoding != right_msg.encoding:
            raise ImageConversionError(f"left {left_msg.encoding} {left.shape} and right {right_msg.encoding} "
                                       f"{right.shape} images differ")
        if left.shape[:2] != (g.height, g.width):
            raise ImageConversionError(f"image size {left.shape[1]}x{left.shape[0]} differs from the "
                                       f"camera_info size {g.width}x{g.height}")
        if left.dtype.kind == 'f' and not (np.all(np.isfinite(left)) and np.all(np.isfinite(right))):
            raise ImageConversionError(f"{left_msg.encoding} image holds NaN or inf")
        grey_l, grey_r = rect.rectify(to_mono8(left, left_msg.encoding), to_mono8(right, right_msg.encoding))
        t1 = time.perf_counter()
        disp = self._get_matcher(g).compute(grey_l, grey_r)
        t2 = time.perf_counter()
        want_cloud = self.config.values['publish_points'] and self._pub_points.get_subscription_count() > 0
        colors = None
        if want_cloud:
            colors = to_rgb8(left, left_msg.encoding)
            if not rect.is_noop:
                colors, _ = rect.rectify(colors, colors)
        res = back_project_disparity(disp, g.fx, g.baseline, g.doffs, g.fy, g.cx, g.cy, colors=colors,
                                     rotation=g.R_left, max_depth=self.config.values['max_depth'],
                                     min_depth=self.config.values['min_depth'])
        points, point_colors = res if colors is not None else (res, None)
        t3 = time.perf_counter()
        header = left_msg.header
        frame = header.frame_id or self.config.values['camera_frame']
        # The camera pose: base_frame -> the left camera_info's frame (the left optical frame).
        info_frame = self._info['left'].header.frame_id or frame
        T_cam, pose_source = self._camera_pose(info_frame)
        params = self.config.obstacles
        if pose_source == 'default':
            params = dataclasses.replace(params,
                                         plane_max_tilt_deg=self.config.values['plane_max_tilt_deg_without_pose'])
        det = detect_obstacles(points, params, self._posed_body(header.stamp) if self._robot else None, T_cam)
        self._log_plane(det.plane_detection)
        if det.more_planes and len(det.more_planes) != self._more_planes_logged:
            self.get_logger().info("further support planes: " + "; ".join(pl.describe() for pl in det.more_planes))
        self._more_planes_logged = len(det.more_planes)
        obstacles = self._tracker.update(det.obstacles)
        t4 = time.perf_counter()

        self._publish_obstacles(header.stamp, obstacles)
        if self._pub_disp.get_subscription_count() > 0:
            self._publish_disparity(left_msg.header, frame, disp, g)
        if want_cloud:
            self._publish_cloud(header.stamp, frame, points, point_colors)
        t5 = time.perf_counter()
        self.stats['frames'] += 1
        ms = {k: round(v * 1e3, 1) for k, v in det.timings.items()}
        self.get_logger().debug(
            f"frame {header.stamp.sec}.{header.stamp.nanosec:09d}: {len(obstacles)} obstacles "
            f"({len(det.obstacles)} detected); "
            f"convert+rectify {(t1 - t0) * 1e3:.1f} ms, SGBM {(t2 - t1) * 1e3:.1f} ms, points "
            f"{(t3 - t2) * 1e3:.1f} ms, obstacles {(t4 - t3) * 1e3:.1f} ms {ms}, publish {(t5 - t4) * 1e3:.1f} ms, "
            f"total {(t5 - t0) * 1e3:.1f} ms; points {det.counts}")

    def _log_plane(self, found):
        """Log the support-plane outcome: when its status changes, and a rejection or absence at most once per
        reject_log_period."""
        if found is None:
            return
        if found.status != self._plane_status:
            self._plane_status = found.status
            # (one call site per severity: rclpy refuses a severity change at a call site)
            if found.status == 'found':
                self.get_logger().info(found.message)
            else:
                self.get_logger().warning(found.message + "; no plane removed")
        elif found.status != 'found':
            self._reject('plane', found.message + "; no plane removed", count=False)

    def _publish_obstacles(self, stamp, obstacles):
        base = self.config.values['base_frame']
        out = ObstacleArray()
        out.header.stamp = stamp
        out.header.frame_id = base
        markers = MarkerArray()
        clear = Marker()
        clear.header = out.header
        clear.ns = 'obstacles'
        clear.action = Marker.DELETEALL
        markers.markers.append(clear)
        for i, o in enumerate(obstacles):
            m = Obstacle()
            m.header = out.header
            m.id = i
            m.center.x, m.center.y, m.center.z = (float(c) for c in o.center)
            m.size.x, m.size.y, m.size.z = (float(s) for s in o.size)
            m.radius = float(o.radius)
            m.num_points = int(o.num_points)
            m.confidence = float(o.confidence)
            m.pose.position.x, m.pose.position.y, m.pose.position.z = (float(c) for c in o.oriented_center)
            m.pose.orientation.z, m.pose.orientation.w = math.sin(o.yaw / 2), math.cos(o.yaw / 2)
            m.oriented_size.x, m.oriented_size.y, m.oriented_size.z = (float(v) for v in o.oriented_size)
            out.obstacles.append(m)
            mk = Marker()
            mk.header = out.header
            mk.ns = 'obstacles'
            mk.id = i
            mk.type = Marker.CUBE
            mk.action = Marker.ADD
            mk.pose = m.pose  # the oriented box
            mk.scale.x, mk.scale.y, mk.scale.z = (max(float(s), 0.005) for s in o.oriented_size)
            mk.color.r, mk.color.g, mk.color.b = 1.0, 0.45, 0.0
            mk.color.a = 0.2 + 0.6 * float(o.confidence)
            markers.markers.append(mk)
        self._pub_obstacles.publish(out)
        self._pub_markers.publish(markers)

    def _publish_disparity(self, header, frame, disp, g):
        p = self._matcher.params
        msg = DisparityImage()
        msg.header.stamp = header.stamp
        msg.header.frame_id = frame
        # DisparityImage convention: d = x_l - x_r - (cx_l - cx_r); invalid values below min_disparity.
        out = disp - np.float32(g.doffs)
        out[np.isnan(out)] = p.min_disparity - 1.0
        fill_image(msg.image, out.astype(np.float32), '32FC1')
        msg.image.header = msg.header
        msg.f = float(g.fx)
        msg.t = float(g.baseline)
        msg.min_disparity = float(p.min_disparity)
        msg.max_disparity = float(p.min_disparity + p.num_disparities - 1)
        msg.delta_d = 1.0 / 16.0
        x0 = min(g.width, p.min_disparity + p.num_disparities - 1 + p.block_size // 2)
        msg.valid_window = RegionOfInterest(x_offset=int(x0), y_offset=int(p.block_size // 2),
                                            width=int(max(0, g.width - x0 - p.block_size // 2)),
                                            height=int(max(0, g.height - 2 * (p.block_size // 2))))
        self._pub_disp.publish(msg)

    def _publish_cloud(self, stamp, frame, points, colors):
        c = pack_pointcloud2(points, colors)
        msg = PointCloud2()
        msg.header.stamp = stamp
        msg.header.frame_id = frame
        msg.height, msg.width = c.height, c.width
        msg.fields = [PointField(name=n, offset=o, datatype=d, count=k) for n, o, d, k in c.fields]
        msg.is_bigendian = c.is_bigendian
        msg.point_step, msg.row_step = c.point_step, c.row_step
        msg.data = c.data
        msg.is_dense = c.is_dense
        self._pub_points.publish(msg)

    def summary(self):
        return f"{self.stats['frames']} frames processed, {self.stats['rejected']} rejected, " \
               f"pairing {self._pairer.counts}"


def main(args=None):
    """SIGINT/SIGTERM at any moment: exit 0, no traceback (manip_core.ros.node_main); invalid start-up
    parameters (value or type): one FATAL line, exit 1."""
    from manip_core.ros.node_main import run_node
    from manip_core.ros.transport import use_large_data_profile
    use_large_data_profile()  # before the first participant: Fast DDS reads the profile once

    def summary(node):
        rclpy.logging.get_logger('stereo_obstacles').info(f"shut down: {node.summary()}")

    return run_node(args, 'stereo_obstacles', StereoObstaclesNode, SingleThreadedExecutor, on_exit=summary,
                    config_errors=(ValueError, TypeError, ParameterException), config_status=1)


if __name__ == '__main__':
    raise SystemExit(main())
