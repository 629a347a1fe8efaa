"""Obstacles from a camera point cloud: base-frame transform, workspace crop and voxel grid (one pass,
voxel_grid), support-plane detection and removal (support_plane), robot self-filter (robot_body: the robot's
collision geometry at the images' joint values, held objects, objects to pick), Euclidean clusters
(connected components of the voxel grid) and their boxes.

No rclpy import. Points are (N, 3) arrays in metres; the camera pose is the optical frame of the left camera
in the base frame (a (4, 4) matrix, or position + quaternion x, y, z, w). Base +z is up (gravity -z).

No default assumes a particular scene: no workspace crop (+-100 m), the support plane is searched
everywhere, the parameter camera pose is a level camera at the base origin looking along base +x (the node
takes the pose from tf when it can).
"""
import time
from dataclasses import dataclass, field

import numpy as np

from .support_plane import Plane, PlaneParams, detect_support_plane, largest_connected_piece
from .voxel_grid import cluster_boxes, cluster_voxels, voxelize


class ObstacleError(ValueError):
    """Invalid parameters or inputs."""


# ------------------------------------------------------------------------------------------ transforms
def quaternion_xyzw_to_matrix(q):
    """(3, 3) rotation of a quaternion (x, y, z, w); normalised; ObstacleError for a zero/non-finite one."""
    q = np.asarray(q, dtype=float).reshape(-1)
    if q.shape != (4,) or not np.all(np.isfinite(q)):
        raise ObstacleError(f"quaternion must be 4 finite numbers (x, y, z, w), got {q.tolist()}")
    n = np.linalg.norm(q)
    if n < 1e-9:
        raise ObstacleError("quaternion is zero")
    x, y, z, w = q / n
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def camera_pose_matrix(position, orientation_xyzw):
    """(4, 4) pose of the camera optical frame in the base frame (maps camera points to base points)."""
    p = np.asarray(position, dtype=float).reshape(-1)
    if p.shape != (3,) or not np.all(np.isfinite(p)):
        raise ObstacleError(f"camera position must be 3 finite numbers, got {p.tolist()}")
    T = np.eye(4)
    T[:3, :3] = quaternion_xyzw_to_matrix(orientation_xyzw)
    T[:3, 3] = p
    return T


def transform_points(points, T):
    """Points (N, 3) mapped by a (4, 4) transform; float32 result.

    Column arithmetic instead of a (N, 3) @ (3, 3) product: BLAS is slow on such thin matrices when other
    threads (OpenCV) compete for the cores (1 ms vs 40-70 ms for 230k points here).
    """
    pts = np.asarray(points, dtype=np.float32).reshape(-1, 3)
    R = np.asarray(T, dtype=np.float64)[:3, :3]
    t = np.asarray(T, dtype=np.float64)[:3, 3]
    out = np.empty_like(pts)
    x, y, z = pts[:, 0], pts[:, 1], pts[:, 2]
    for i in range(3):
        out[:, i] = x * np.float32(R[i, 0]) + y * np.float32(R[i, 1]) + z * np.float32(R[i, 2]) + np.float32(t[i])
    return out


# ------------------------------------------------------------------------------------------ filters
def crop_box(points, lower, upper):
    """Boolean mask of the points inside the axis-aligned box [lower, upper] (inclusive)."""
    lo, hi = np.asarray(lower, float), np.asarray(upper, float)
    if lo.shape != (3,) or hi.shape != (3,) or np.any(hi <= lo):
        raise ObstacleError(f"workspace box needs lower < upper (3 values each), got {lo.tolist()} / {hi.tolist()}")
    p = np.asarray(points).reshape(-1, 3)
    mask = np.ones(p.shape[0], dtype=bool)
    for i in range(3):  # per column against scalars: no (N, 3) temporaries
        c = p[:, i]
        mask &= (c >= lo[i]) & (c <= hi[i])
    return mask


def voxel_downsample(points, voxel_size, min_points=1):
    """One point per occupied voxel (the mean of its points); returns (points (M, 3) float32, counts (M,)).

    ``min_points``: voxels with fewer raw points are dropped (isolated stereo outliers).
    """
    if not voxel_size > 0:
        raise ObstacleError(f"voxel_size must be > 0, got {voxel_size}")
    cent, counts, _, _ = voxelize(points, voxel_size, min_points)
    return cent, counts


# ------------------------------------------------------------------------------------------ clusters
@dataclass
class Obstacle:
    """One cluster: centre and size of its axis-aligned box (base frame, m), bounding-sphere radius around
    the centre (m), number of voxels, a confidence in [0, 1] (single frame: the share of its voxels that
    are core voxels of the clustering, i.e. lie in dense surface; tracking.py scales it by persistence),
    and its oriented box turned about base z only: centre (m), yaw (rad, of the box's x axis from base x,
    in [-pi/4, pi/4]) and extent along its own axes (m), from the smallest-area rectangle holding the
    x, y of the cluster's core voxels (cv2.minAreaRect; stereo smear at the edges is mostly not core)."""

    center: np.ndarray
    size: np.ndarray
    radius: float
    num_points: int
    confidence: float = 1.0
    oriented_center: np.ndarray = None
    yaw: float = 0.0
    oriented_size: np.ndarray = None

    def __post_init__(self):
        if self.oriented_center is None:
            self.oriented_center = np.asarray(self.center, dtype=float)
        if self.oriented_size is None:
            self.oriented_size = np.asarray(self.size, dtype=float)


def oriented_box_xy(xy):
    """(centre (2,), yaw rad in [-pi/4, pi/4], extent (2,) along the box's x and y) of the smallest-area
    rectangle holding the points xy (K, 2) (m)."""
    import cv2
    (cx, cy), (w, h), ang = cv2.minAreaRect(np.ascontiguousarray(xy, dtype=np.float32).reshape(-1, 1, 2))
    yaw = np.radians(ang)
    # The same rectangle turned by a quarter turn has its sides swapped: bring yaw into [-pi/4, pi/4].
    while yaw > np.pi / 4:
        yaw -= np.pi / 2
        w, h = h, w
    while yaw < -np.pi / 4:
        yaw += np.pi / 2
        w, h = h, w
    return np.array([cx, cy]), float(yaw), np.array([w, h])


def dbscan_labels(points, eps, min_samples):
    """DBSCAN (scikit-learn) labels of the points; -1 = noise. The reference the voxel-grid clustering is
    tested against (test_voxel_grid.py); not used by the pipeline."""
    from sklearn.cluster import DBSCAN
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    if pts.shape[0] == 0:
        return np.zeros(0, dtype=int)
    return DBSCAN(eps=float(eps), min_samples=int(min_samples), algorithm='kd_tree').fit(pts).labels_


def describe_clusters(points, labels, min_points=1, min_extent=0.0, core=None):
    """Obstacles of the labelled clusters with at least ``min_points`` points and a largest box side of at
    least ``min_extent`` (m); sorted by centre (x, then y). ``core``: optional per-point core mask, for the
    confidence."""
    labels = np.asarray(labels, dtype=np.int64)
    lo, hi, n, radius = cluster_boxes(points, labels)
    if core is not None and labels.size:
        sel = labels >= 0
        n_core = np.bincount(labels[sel], weights=np.asarray(core, float)[sel], minlength=n.size)
    else:
        n_core = n.astype(float)
    out = []
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    order = np.argsort(labels, kind='stable')
    core_mask = np.asarray(core, dtype=bool) if core is not None else None
    starts = np.searchsorted(labels[order], np.arange(n.size + 1))
    for k in range(n.size):
        size = hi[k] - lo[k]
        if n[k] < min_points or size.max() < min_extent:
            continue
        idx = order[starts[k]:starts[k + 1]]
        if core is not None and np.count_nonzero(core_mask[idx]) >= 3:
            idx = idx[core_mask[idx]]  # dense surface only: stereo smear at the edges is mostly not core
        c_xy, yaw, ext = oriented_box_xy(pts[idx, :2])
        centre = (lo[k] + hi[k]) / 2
        out.append(Obstacle(center=centre, size=size, radius=float(radius[k]), num_points=int(n[k]),
                            confidence=float(n_core[k] / n[k]), oriented_center=np.array([*c_xy, centre[2]]),
                            yaw=yaw, oriented_size=np.array([*ext, size[2]])))
    out.sort(key=lambda o: (round(float(o.center[0]), 6), round(float(o.center[1]), 6)))
    return out


# ------------------------------------------------------------------------------------------ pipeline
#: Level camera at the base origin looking along base +x (optical z = base x, optical x = -base y).
LEVEL_CAMERA_XYZW = (-0.5, 0.5, -0.5, 0.5)


#: min_cluster_points per matcher (voxels of voxel_size, i.e. surface area in voxel_size^2, whatever the range
#: while the stereo points are denser than the voxels). A 4 cm cube shows at most about 26 voxels of 1 cm (its
#: top and the side facing the camera, above the plane margin). Block matching gives it 23 from the simulator's
#: demo camera (0.9 m away) and 13 from its shelf camera (1.04 m; test_sim_scenes.py): the cube's faces repeat a
#: checker square of about one block (9 px) and the uniqueness check rejects most of them (101 points above the
#: margin against SGBM's 290). 20 lost it there. 12 for block matching: its errors stay within a block, and the
#: largest cluster on the regression bags that is no object is 10 voxels (texture check 0 or 3: a sliver of the
#: cylinder's top, an edge of the arm that the self-filter leaves; the table's far edge at 1.7 m: 6-8). 20 for
#: SGBM, whose smoothness term carries disparities along its paths: pieces of smear of 12-20 voxels split off
#: objects and the far table edge (test_obstacles.py's scene without a plane, test_voxel_grid.py's DBSCAN
#: comparison), and it gives the cube 45-47.
MIN_CLUSTER_POINTS = {'sgbm': 20, 'bm': 12}


@dataclass
class ObstacleParams:
    """Every setting of :func:`detect_obstacles` (the node's parameters of the same names)."""

    camera_position: tuple = (0.0, 0.0, 0.0)
    camera_orientation_xyzw: tuple = LEVEL_CAMERA_XYZW
    workspace_min: tuple = (-100.0, -100.0, -100.0)
    workspace_max: tuple = (100.0, 100.0, 100.0)
    voxel_size: float = 0.01
    voxel_min_points: int = 2
    plane_fit: bool = True
    plane_margin: float = 0.015
    plane_max_tilt_deg: float = 15.0
    plane_inlier_threshold: float = 0.01
    plane_min_area: float = 0.05
    plane_min_camera_height: float = 0.05
    plane_max_camera_height: float = 5.0
    table_height: float = 0.0
    plane_search_band: float = 0.0
    max_support_planes: int = 1
    ransac_iterations: int = 100
    cluster_radius_voxels: int = 1
    cluster_min_neighbors: int = 6
    # voxels: SGBM's default (MIN_CLUSTER_POINTS has block matching's)
    min_cluster_points: int = MIN_CLUSTER_POINTS['sgbm']
    min_cluster_extent: float = 0.02
    self_filter_padding: float = 0.03
    object_margin: float = 0.02
    seed: int = 0

    def plane_params(self):
        return PlaneParams(max_tilt_deg=self.plane_max_tilt_deg, inlier_threshold=self.plane_inlier_threshold,
                           iterations=self.ransac_iterations, min_area=self.plane_min_area,
                           min_camera_height=self.plane_min_camera_height,
                           max_camera_height=self.plane_max_camera_height, height_hint=self.table_height,
                           search_band=self.plane_search_band)

    def validate(self):
        camera_pose_matrix(self.camera_position, self.camera_orientation_xyzw)
        crop_box(np.zeros((0, 3)), self.workspace_min, self.workspace_max)
        if not self.voxel_size > 0:
            raise ObstacleError(f"voxel_size must be > 0, got {self.voxel_size}")
        for name in ('plane_margin', 'self_filter_padding', 'object_margin', 'min_cluster_extent'):
            if not getattr(self, name) >= 0:
                raise ObstacleError(f"{name} must be >= 0, got {getattr(self, name)}")
        for name in ('cluster_radius_voxels', 'cluster_min_neighbors', 'min_cluster_points', 'voxel_min_points',
                     'max_support_planes'):
            if getattr(self, name) < 1:
                raise ObstacleError(f"{name} must be >= 1, got {getattr(self, name)}")
        try:
            self.plane_params().validate()
        except ValueError as e:
            raise ObstacleError(str(e)) from None
        return self


@dataclass
class Detection:
    obstacles: list
    plane: Plane = None  # the support plane removed (None: none found or plane_fit off with no plane)
    plane_detection: object = None  # support_plane.PlaneDetection (status and message), None when not fitted
    more_planes: list = field(default_factory=list)  # further support planes (shelf levels), max_support_planes
    points: np.ndarray = None  # the clustered voxel centroids (base frame), after every filter
    labels: np.ndarray = None
    counts: dict = field(default_factory=dict)  # points left after each stage
    timings: dict = field(default_factory=dict)  # seconds per stage (wall clock)
    cpu_timings: dict = field(default_factory=dict)  # CPU seconds per stage (this thread: every stage runs in it)


def detect_obstacles(points_camera, params, robot=None, camera_pose=None):
    """The whole chain for one cloud in the camera optical frame; returns a :class:`Detection`.

    ``camera_pose``: (4, 4) optical frame in the base frame (e.g. from tf); default: the parameters'.
    Stages: base frame + workspace crop + voxel grid (one pass) -> support plane (RANSAC, removed when a
    plausible one is found; ``plane_fit`` false: the fixed plane z = table_height) -> self-filter (when
    ``robot``, a robot_body.PosedBody, is given: points within ``self_filter_padding`` of its spheres or
    within ``object_margin`` of its boxes are dropped) -> Euclidean clustering of the voxels -> boxes. Further
    support levels (``max_support_planes`` > 1: shelf boards) are obstacles too: the box of each level's
    removed piece.
    """
    p = params
    t = time.perf_counter
    timings, counts, cpu = {}, {}, {}
    c = time.thread_time
    t0, c0 = t(), c()
    pts_cam = np.asarray(points_camera, dtype=np.float32).reshape(-1, 3)
    counts['input'] = pts_cam.shape[0]
    T = camera_pose_matrix(p.camera_position, p.camera_orientation_xyzw) if camera_pose is None else \
        np.asarray(camera_pose, dtype=np.float64)
    pts, _, ijk, kept = voxelize(pts_cam, p.voxel_size, p.voxel_min_points, transform=T, lower=p.workspace_min,
                                 upper=p.workspace_max)
    counts['workspace'] = kept
    counts['voxels'] = pts.shape[0]
    t1, c1 = t(), c()
    timings['voxel'], cpu['voxel'] = t1 - t0, c1 - c0
    found = None
    if p.plane_fit:
        found = detect_support_plane(pts, T[:3, 3], p.voxel_size, p.plane_params(), np.random.default_rng(p.seed))
        plane = found.plane
    else:
        plane = Plane(normal=np.array([0.0, 0.0, 1.0]), offset=-float(p.table_height), fitted=False)
    if plane is not None:
        keep = plane.signed_distance(pts) > p.plane_margin
        pts, ijk = pts[keep], ijk[keep]
    more, levels = [], []
    # Further support planes (shelf levels above the dominant one): only their own connected piece is removed
    # (within plane_margin), not what is below it (the objects on the level underneath). The piece is taken
    # out of the clustering only, to part the objects standing on it from it: it is an obstacle of its own
    # (a shelf board is one for the arm), its box added to the obstacles below.
    while plane is not None and p.plane_fit and len(more) < p.max_support_planes - 1:
        extra = detect_support_plane(pts, T[:3, 3], p.voxel_size, p.plane_params(),
                                     np.random.default_rng(p.seed + 1 + len(more)))
        if extra.plane is None:
            break
        _, on = largest_connected_piece(pts, extra.plane, p.plane_margin, p.voxel_size, return_mask=True)
        if not on.any():
            break
        more.append(extra.plane)
        levels.append(pts[on])
        pts, ijk = pts[~on], ijk[~on]
    counts['support_planes'] = (plane is not None) + len(more)
    counts['above_plane'] = pts.shape[0]
    t2, c2 = t(), c()
    timings['plane'], cpu['plane'] = t2 - t1, c2 - c1
    if robot is not None:
        keep = robot.mask(pts, p.self_filter_padding, p.object_margin)
        pts, ijk = pts[keep], ijk[keep]
        levels = [q[robot.mask(q, p.self_filter_padding, p.object_margin)] for q in levels]
    counts['self_filtered'] = pts.shape[0]
    t3, c3 = t(), c()
    timings['self_filter'], cpu['self_filter'] = t3 - t2, c3 - c2
    labels, core = cluster_voxels(ijk, p.cluster_min_neighbors, p.cluster_radius_voxels)
    obstacles = describe_clusters(pts, labels, p.min_cluster_points, p.min_cluster_extent, core=core)
    for q in levels:
        obstacles += describe_clusters(q, np.zeros(q.shape[0], np.int64), p.min_cluster_points, p.min_cluster_extent)
    obstacles.sort(key=lambda o: (round(float(o.center[0]), 6), round(float(o.center[1]), 6)))
    counts['obstacles'] = len(obstacles)
    timings['cluster'], cpu['cluster'] = t() - t3, c() - c3
    return Detection(obstacles=obstacles, plane=plane, plane_detection=found, more_planes=more, points=pts,
                     labels=labels, counts=counts, timings=timings, cpu_timings=cpu)


def warm_up():
    """Run the chain once on a small synthetic scene (a floor and a box) so that the numba kernels are
    compiled or loaded from their cache before the first camera frame (about 1 s when cached)."""
    g = np.stack(np.meshgrid(np.arange(-0.5, 0.5, 0.005), np.arange(1.0, 2.0, 0.005), indexing='ij'), -1)
    floor = np.column_stack([g.reshape(-1, 2), np.full(g.size // 2, -0.5)])  # 0.5 m below a level camera
    box = np.random.default_rng(0).uniform([-0.05, 1.4, -0.5], [0.05, 1.5, -0.4], (4000, 3))
    # Columns above are (base y, base x, base z); the level camera's optical frame is (-y, -z, x).
    cam = np.vstack([floor, box])[:, [0, 2, 1]] * [-1, -1, 1]
    return detect_obstacles(cam.astype(np.float32), ObstacleParams())
