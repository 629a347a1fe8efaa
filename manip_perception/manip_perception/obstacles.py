"""Obstacles from a camera point cloud: base-frame transform, workspace crop, voxel grid, support-plane
removal, robot self-filter, DBSCAN clusters and their bounds.

No rclpy import. Points are (N, 3) arrays in metres; the camera pose is the optical frame of the left camera
in the base frame (position + quaternion x, y, z, w, as in ``manip_sim/config/stereo_camera.yaml``).
"""
import time
from dataclasses import dataclass, field

import numpy as np
from sklearn.cluster import DBSCAN  # imported up front: about 1 s, not to be paid on the first frame


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
    pts = np.asarray(points, dtype=np.float32).reshape(-1, 3)
    if voxel_size <= 0:
        raise ObstacleError(f"voxel_size must be > 0, got {voxel_size}")
    if pts.shape[0] == 0:
        return pts.copy(), np.zeros(0, np.int64)
    idx = np.floor(pts / np.float32(voxel_size)).astype(np.int64)
    idx -= idx.min(axis=0)
    dims = idx.max(axis=0) + 1
    key = (idx[:, 0] * dims[1] + idx[:, 1]) * dims[2] + idx[:, 2]
    _, inverse, counts = np.unique(key, return_inverse=True, return_counts=True)
    sums = np.stack([np.bincount(inverse, weights=pts[:, k], minlength=counts.size) for k in range(3)], axis=1)
    out = (sums / counts[:, None]).astype(np.float32)
    keep = counts >= min_points
    return out[keep], counts[keep]


@dataclass
class Plane:
    """Plane ``normal . p + offset = 0`` with a unit normal pointing up (normal[2] > 0)."""

    normal: np.ndarray
    offset: float
    fitted: bool  # False: the fallback z = table_height
    inliers: int = 0

    def signed_distance(self, points):
        return np.asarray(points, dtype=np.float64) @ self.normal + self.offset

    def height_at(self, x, y):
        n = self.normal
        return -(n[0] * x + n[1] * y + self.offset) / n[2]


def _plane_through(p0, p1, p2):
    n = np.cross(p1 - p0, p2 - p0)
    norm = np.linalg.norm(n)
    if norm < 1e-12:
        return None
    n = n / norm
    if n[2] < 0:
        n = -n
    return n, -float(n @ p0)


def fit_support_plane(points, table_height=0.0, search_band=0.05, max_tilt_deg=10.0, inlier_threshold=0.005,
                      iterations=200, min_inliers=50, rng=None, max_samples=4000):
    """RANSAC fit of the support plane among points with ``|z - table_height| <= search_band``, restricted
    to planes tilted at most ``max_tilt_deg`` from horizontal and then refined by least squares on the
    inliers. Returns a Plane, or None when fewer than ``min_inliers`` points support one."""
    rng = np.random.default_rng(0) if rng is None else rng
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    cand = pts[np.abs(pts[:, 2] - table_height) <= search_band]
    if cand.shape[0] < max(min_inliers, 3):
        return None
    sample = cand if cand.shape[0] <= max_samples else cand[rng.choice(cand.shape[0], max_samples, replace=False)]
    cos_tilt = np.cos(np.radians(max_tilt_deg))
    best, best_count = None, 0
    for _ in range(int(iterations)):
        i = rng.choice(sample.shape[0], 3, replace=False)
        plane = _plane_through(*sample[i])
        if plane is None or plane[0][2] < cos_tilt:
            continue
        count = int(np.count_nonzero(np.abs(sample @ plane[0] + plane[1]) <= inlier_threshold))
        if count > best_count:
            best, best_count = plane, count
    if best is None:
        return None
    inl = cand[np.abs(cand @ best[0] + best[1]) <= inlier_threshold]
    if inl.shape[0] < min_inliers:
        return None
    # Least-squares refinement: the normal is the smallest singular vector of the centred inliers.
    c = inl.mean(axis=0)
    _, _, vt = np.linalg.svd(inl - c, full_matrices=False)
    n = vt[2] / np.linalg.norm(vt[2])
    if n[2] < 0:
        n = -n
    if n[2] < cos_tilt:
        n, off = best
    else:
        off = -float(n @ c)
    return Plane(normal=n, offset=off, fitted=True, inliers=int(inl.shape[0]))


def remove_support_plane(points, plane_margin=0.015, table_height=0.0, fit=True, **fit_kwargs):
    """Mask of the points more than ``plane_margin`` above the support plane (points below it are dropped
    too), and the plane used: the RANSAC fit when ``fit`` and one is found, else z = table_height."""
    pts = np.asarray(points).reshape(-1, 3)
    plane = fit_support_plane(pts, table_height=table_height, **fit_kwargs) if fit else None
    if plane is None:
        plane = Plane(normal=np.array([0.0, 0.0, 1.0]), offset=-float(table_height), fitted=False)
    return plane.signed_distance(pts) > plane_margin, plane


def self_filter(points, link_points, radius, segments=True):
    """Mask of the points farther than ``radius`` from the robot: from each of ``link_points`` (M, 3; e.g.
    the link origins of the chain in order, computed with forward kinematics) and, with ``segments``, from
    the segments joining consecutive link points. ``radius``: scalar or one per link point/segment."""
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    links = np.asarray(link_points, dtype=np.float64).reshape(-1, 3)
    keep = np.ones(pts.shape[0], dtype=bool)
    if links.shape[0] == 0 or pts.shape[0] == 0:
        return keep
    r = np.broadcast_to(np.asarray(radius, dtype=float), (links.shape[0],))
    if segments and links.shape[0] >= 2:
        a, b = links[:-1], links[1:]
        ab = b - a
        ab2 = np.maximum(np.einsum('ij,ij->i', ab, ab), 1e-18)
        rs = np.maximum(r[:-1], r[1:])
        for k in range(a.shape[0]):
            t = np.clip((pts - a[k]) @ ab[k] / ab2[k], 0.0, 1.0)
            d2 = np.sum((pts - (a[k] + t[:, None] * ab[k])) ** 2, axis=1)
            keep &= d2 > rs[k] ** 2
    else:
        for k in range(links.shape[0]):
            keep &= np.sum((pts - links[k]) ** 2, axis=1) > r[k] ** 2
    return keep


# ------------------------------------------------------------------------------------------ clusters
@dataclass
class Obstacle:
    """One cluster: centre and size of its axis-aligned box, bounding-sphere radius, number of points."""

    center: np.ndarray
    size: np.ndarray
    radius: float
    num_points: int


def cluster_labels(points, eps, min_samples):
    """DBSCAN (scikit-learn) labels of the points; -1 = noise."""
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    if pts.shape[0] == 0:
        return np.zeros(0, dtype=int)
    return DBSCAN(eps=float(eps), min_samples=int(min_samples), algorithm='kd_tree').fit(pts).labels_


def describe_clusters(points, labels, min_points=1, min_extent=0.0):
    """Obstacles of the labelled clusters with at least ``min_points`` points and a largest box side of at
    least ``min_extent``; sorted by centre (x, then y)."""
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    out = []
    for lab in np.unique(labels):
        if lab < 0:
            continue
        c = pts[labels == lab]
        if c.shape[0] < min_points:
            continue
        lo, hi = c.min(axis=0), c.max(axis=0)
        size = hi - lo
        if size.max() < min_extent:
            continue
        center = (lo + hi) / 2
        radius = float(np.sqrt(np.max(np.sum((c - center) ** 2, axis=1))))
        out.append(Obstacle(center=center, size=size, radius=radius, num_points=int(c.shape[0])))
    out.sort(key=lambda o: (round(float(o.center[0]), 6), round(float(o.center[1]), 6)))
    return out


# ------------------------------------------------------------------------------------------ pipeline
@dataclass
class ObstacleParams:
    """Every setting of :func:`detect_obstacles` (the node's parameters of the same names)."""

    camera_position: tuple = (0.45, -0.9, 0.7)
    camera_orientation_xyzw: tuple = (-0.89879, 0.0, 0.0, 0.43837)
    workspace_min: tuple = (-1.0, -1.0, -0.1)
    workspace_max: tuple = (1.0, 1.0, 1.2)
    voxel_size: float = 0.01
    voxel_min_points: int = 2
    table_height: float = 0.0
    plane_margin: float = 0.015
    plane_fit: bool = True
    plane_search_band: float = 0.05
    plane_max_tilt_deg: float = 10.0
    plane_inlier_threshold: float = 0.008
    ransac_iterations: int = 100
    dbscan_eps: float = 0.025
    dbscan_min_samples: int = 6
    min_cluster_points: int = 30
    min_cluster_extent: float = 0.02
    self_filter_radius: float = 0.1
    seed: int = 0

    def validate(self):
        camera_pose_matrix(self.camera_position, self.camera_orientation_xyzw)
        crop_box(np.zeros((0, 3)), self.workspace_min, self.workspace_max)
        for name in ('voxel_size', 'dbscan_eps'):
            if not getattr(self, name) > 0:
                raise ObstacleError(f"{name} must be > 0, got {getattr(self, name)}")
        for name in ('plane_margin', 'plane_search_band', 'plane_inlier_threshold', 'self_filter_radius',
                     'min_cluster_extent'):
            if not getattr(self, name) >= 0:
                raise ObstacleError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.dbscan_min_samples < 1 or self.min_cluster_points < 1 or self.voxel_min_points < 1:
            raise ObstacleError("dbscan_min_samples, min_cluster_points and voxel_min_points must be >= 1")
        if not 0 <= self.plane_max_tilt_deg < 90:
            raise ObstacleError(f"plane_max_tilt_deg must be in [0, 90), got {self.plane_max_tilt_deg}")
        return self


@dataclass
class Detection:
    obstacles: list
    plane: Plane = None
    points: np.ndarray = None  # the clustered points (base frame), after every filter
    labels: np.ndarray = None
    counts: dict = field(default_factory=dict)  # points left after each stage
    timings: dict = field(default_factory=dict)  # seconds per stage


def detect_obstacles(points_camera, params, link_points=None):
    """The whole chain for one cloud in the camera optical frame; returns a :class:`Detection`.

    Stages: base frame -> workspace crop -> voxel grid -> support plane -> self-filter (when
    ``link_points`` is given) -> DBSCAN -> cluster bounds.
    """
    p = params
    t = time.perf_counter
    timings, counts = {}, {}
    t0 = t()
    pts = np.asarray(points_camera, dtype=np.float32).reshape(-1, 3)
    pts = pts[np.all(np.isfinite(pts), axis=1)]
    counts['input'] = pts.shape[0]
    pts = transform_points(pts, camera_pose_matrix(p.camera_position, p.camera_orientation_xyzw))
    pts = pts[crop_box(pts, p.workspace_min, p.workspace_max)]
    counts['workspace'] = pts.shape[0]
    t1 = t()
    timings['transform_crop'] = t1 - t0
    pts, _ = voxel_downsample(pts, p.voxel_size, p.voxel_min_points)
    counts['voxels'] = pts.shape[0]
    t2 = t()
    timings['voxel'] = t2 - t1
    keep, plane = remove_support_plane(
        pts, plane_margin=p.plane_margin, table_height=p.table_height, fit=p.plane_fit,
        search_band=p.plane_search_band, max_tilt_deg=p.plane_max_tilt_deg,
        inlier_threshold=p.plane_inlier_threshold, iterations=p.ransac_iterations,
        rng=np.random.default_rng(p.seed))
    pts = pts[keep]
    counts['above_plane'] = pts.shape[0]
    t3 = t()
    timings['plane'] = t3 - t2
    if link_points is not None and len(link_points):
        pts = pts[self_filter(pts, link_points, p.self_filter_radius)]
    counts['self_filtered'] = pts.shape[0]
    t4 = t()
    timings['self_filter'] = t4 - t3
    labels = cluster_labels(pts, p.dbscan_eps, p.dbscan_min_samples)
    obstacles = describe_clusters(pts, labels, p.min_cluster_points, p.min_cluster_extent)
    counts['obstacles'] = len(obstacles)
    timings['cluster'] = t() - t4
    return Detection(obstacles=obstacles, plane=plane, points=pts, labels=labels, counts=counts, timings=timings)
