"""Support-plane detection: RANSAC over the whole (voxelised) cloud for the dominant plane that can hold
objects, with plausibility checks, wherever that plane is.

No rclpy import. Points are (N, 3) in the base frame (m), whose +z is up (against gravity). A hypothesis
(three random points) is plausible when

* its normal is within ``max_tilt_deg`` of +z (gravity check),
* the camera is above it by ``min_camera_height`` to ``max_camera_height`` (a plane seen from above, not
  a ceiling, not beyond the working range);

the plausible hypothesis with the most inliers (within ``inlier_threshold``) is refined by least squares on
its inliers, and accepted when, after refinement, it still passes both checks, has at least
``min_area / voxel_size**2`` inliers (voxel centroids: the count measures the plane's visible area) in one
connected piece (cells of twice the voxel size, touching: a plane through the tops of separate objects is
no support surface, and removing everything below it would remove the objects; checked when the inliers
are fewer than PIECE_CHECK_FACTOR = 8 times the minimum, since separate tops of that total area are
implausible) and they are not a thin strip (narrower than half the side of ``min_area``: a plane that
grazes a larger, more tilted surface).
Otherwise :func:`detect_support_plane` says why in ``PlaneDetection.message`` and returns no plane: the
caller removes nothing (no silent fallback to a fixed height).

An optional prior (``height_hint`` with ``search_band`` > 0) restricts the search to points with
``|z - height_hint| <= search_band``; without it (the default) the plane may be anywhere.
"""
import math
from dataclasses import dataclass

import numba
import numpy as np


@dataclass
class Plane:
    """Plane ``normal . p + offset = 0`` with a unit normal pointing up (normal[2] > 0)."""

    normal: np.ndarray
    offset: float
    fitted: bool = True  # False: a plane given by the caller, not fitted
    inliers: int = 0

    def signed_distance(self, points):
        p = np.asarray(points, dtype=np.float64).reshape(-1, 3)
        n = self.normal
        return p[:, 0] * n[0] + p[:, 1] * n[1] + p[:, 2] * n[2] + self.offset

    def height_at(self, x, y):
        n = self.normal
        return -(n[0] * x + n[1] * y + self.offset) / n[2]

    @property
    def tilt_deg(self):
        return math.degrees(math.acos(min(1.0, abs(float(self.normal[2])))))

    def describe(self):
        height = (f"height {self.height_at(0.0, 0.0):+.3f} m at (0, 0)" if abs(self.normal[2]) > 1e-6
                  else f"distance {-self.offset:+.3f} m from the origin")
        return (f"normal ({self.normal[0]:+.3f}, {self.normal[1]:+.3f}, {self.normal[2]:+.3f}), tilt "
                f"{self.tilt_deg:.1f} deg, {height}, {self.inliers} inliers")


@dataclass
class PlaneParams:
    max_tilt_deg: float = 15.0  # deg between the normal and base +z
    inlier_threshold: float = 0.01  # m
    iterations: int = 100
    min_area: float = 0.05  # m^2 of inlier voxels
    min_camera_height: float = 0.05  # m: the camera must be above the plane by at least this
    max_camera_height: float = 5.0  # m
    height_hint: float = 0.0  # m, base z of the expected plane; used only when search_band > 0
    search_band: float = 0.0  # m; 0: search everywhere
    max_samples: int = 4000  # hypotheses are scored on at most this many points

    def validate(self):
        if not 0 <= self.max_tilt_deg < 90:
            raise ValueError(f"plane_max_tilt_deg must be in [0, 90), got {self.max_tilt_deg}")
        for name in ('inlier_threshold', 'min_area', 'search_band'):
            if not getattr(self, name) >= 0:
                raise ValueError(f"plane {name} must be >= 0, got {getattr(self, name)}")
        if not self.max_camera_height > self.min_camera_height:
            raise ValueError(f"plane_max_camera_height ({self.max_camera_height}) must exceed "
                             f"plane_min_camera_height ({self.min_camera_height})")
        if self.iterations < 1 or self.max_samples < 3:
            raise ValueError("ransac_iterations must be >= 1")
        return self


@dataclass
class PlaneDetection:
    plane: Plane = None  # the accepted plane, or None
    status: str = 'none'  # 'found', 'rejected' (a candidate failed a check), 'none' (no candidate at all)
    message: str = ''
    candidate: Plane = None  # the rejected candidate (status 'rejected')


@numba.njit(cache=True)
def _ransac(sample, triples, cos_tilt, thr, cam, hmin, hmax):
    """Per hypothesis: normal (up), offset, inlier count on ``sample``, and a code: 0 plausible,
    1 degenerate, 2 tilted, 3 camera below / too close, 4 camera too far."""
    n_h = triples.shape[0]
    normals = np.zeros((n_h, 3))
    offsets = np.zeros(n_h)
    counts = np.zeros(n_h, np.int64)
    codes = np.zeros(n_h, np.int64)
    for h in range(n_h):
        p0, p1, p2 = sample[triples[h, 0]], sample[triples[h, 1]], sample[triples[h, 2]]
        a = p1 - p0
        b = p2 - p0
        nx = a[1] * b[2] - a[2] * b[1]
        ny = a[2] * b[0] - a[0] * b[2]
        nz = a[0] * b[1] - a[1] * b[0]
        norm = math.sqrt(nx * nx + ny * ny + nz * nz)
        if norm < 1e-12:
            codes[h] = 1
            continue
        if nz < 0:
            norm = -norm
        nx, ny, nz = nx / norm, ny / norm, nz / norm
        d = -(nx * p0[0] + ny * p0[1] + nz * p0[2])
        normals[h, 0], normals[h, 1], normals[h, 2] = nx, ny, nz
        offsets[h] = d
        c = 0
        for i in range(sample.shape[0]):
            if abs(nx * sample[i, 0] + ny * sample[i, 1] + nz * sample[i, 2] + d) <= thr:
                c += 1
        counts[h] = c
        height = nx * cam[0] + ny * cam[1] + nz * cam[2] + d
        if nz < cos_tilt:
            codes[h] = 2
        elif height < hmin:
            codes[h] = 3
        elif height > hmax:
            codes[h] = 4
    return normals, offsets, counts, codes


@numba.njit(cache=True)
def _inlier_moments(pts, n, d, thr):
    """Count, mean (3,) and covariance sum (3, 3) of the points within ``thr`` of the plane."""
    c = 0
    s = np.zeros(3)
    for i in range(pts.shape[0]):
        if abs(n[0] * pts[i, 0] + n[1] * pts[i, 1] + n[2] * pts[i, 2] + d) <= thr:
            c += 1
            for a in range(3):
                s[a] += pts[i, a]
    mean = s / max(c, 1)
    cov = np.zeros((3, 3))
    for i in range(pts.shape[0]):
        if abs(n[0] * pts[i, 0] + n[1] * pts[i, 1] + n[2] * pts[i, 2] + d) <= thr:
            for a in range(3):
                for b in range(3):
                    cov[a, b] += (pts[i, a] - mean[a]) * (pts[i, b] - mean[b])
    return c, mean, cov


_REASONS = {2: 'tilted more than plane_max_tilt_deg from horizontal',
            3: 'camera not above it by plane_min_camera_height (seen from below or too close)',
            4: 'farther below the camera than plane_max_camera_height'}


#: The connected-piece check runs when a plane has fewer inliers than this many times the minimum.
PIECE_CHECK_FACTOR = 8


def largest_connected_piece(points, plane, thr, voxel_size, return_mask=False):
    """Number of inlier voxels (within ``thr`` of the plane) in the largest piece connected on a grid of twice
    the voxel size (neighbouring cells, diagonals included: gaps of a voxel or so, stereo holes, are bridged).
    With ``return_mask``: (count, mask of ``points`` in that piece)."""
    from .voxel_grid import cluster_voxels, voxelize
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    inl_mask = np.abs(pts @ plane.normal + plane.offset) <= thr
    inl = pts[inl_mask]
    empty = (0, np.zeros(len(pts), bool)) if return_mask else 0
    if inl.shape[0] == 0:
        return empty
    cell = 2.0 * voxel_size
    _, counts, cells, _ = voxelize(inl, cell)  # occupied cells and their inliers (numba hash)
    labels, _ = cluster_voxels(cells, 1, 1)
    ok = labels >= 0
    if not np.any(ok):
        return empty
    weights = np.bincount(labels[ok], weights=counts[ok])
    best = int(np.argmax(weights))
    if not return_mask:
        return int(weights[best])
    # The points of the best piece: their cell is one of the piece's cells.
    def key(c):  # one int64 per cell (indices within +-2**20, as in voxel_grid)
        c = c + (1 << 20)
        return (c[:, 0] << 42) | (c[:, 1] << 21) | c[:, 2]

    in_piece = np.isin(key(np.floor(inl / cell).astype(np.int64)), key(cells[labels == best]))
    mask = np.zeros(len(pts), bool)
    mask[np.flatnonzero(inl_mask)[in_piece]] = True
    return int(weights[best]), mask


def _checks(plane, cam, p, min_inliers, width=math.inf):
    """Reason the plane is implausible, or ''."""
    if plane.tilt_deg > p.max_tilt_deg:
        return f"tilt {plane.tilt_deg:.1f} deg > plane_max_tilt_deg {p.max_tilt_deg}"
    h = float(plane.signed_distance(cam)[0])
    if h < p.min_camera_height:
        return f"camera {h:+.3f} m above it < plane_min_camera_height {p.min_camera_height}"
    if h > p.max_camera_height:
        return f"camera {h:.3f} m above it > plane_max_camera_height {p.max_camera_height}"
    if plane.inliers < min_inliers:
        return f"{plane.inliers} inliers < {min_inliers} (plane_min_area)"
    if width < 0.5 * math.sqrt(p.min_area):
        return (f"its inliers form a strip {width:.3f} m wide < half the side of plane_min_area "
                f"({0.5 * math.sqrt(p.min_area):.3f} m): a slice through a larger surface")
    return ''


def detect_support_plane(points, camera_position, voxel_size, params=None, rng=None):
    """:class:`PlaneDetection` of the support plane among ``points`` (voxel centroids, base frame);
    ``camera_position``: the camera's optical centre in the base frame (m)."""
    p = (params or PlaneParams()).validate()
    rng = np.random.default_rng(0) if rng is None else rng
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    cam = np.asarray(camera_position, dtype=np.float64).reshape(3)
    min_inliers = max(3, int(math.ceil(p.min_area / voxel_size ** 2)))
    cand = np.ascontiguousarray(pts)
    if p.search_band > 0:
        cand = np.ascontiguousarray(pts[np.abs(pts[:, 2] - p.height_hint) <= p.search_band])
    where = (f" within {p.search_band} m of z = {p.height_hint} m" if p.search_band > 0 else "")
    if cand.shape[0] < min_inliers:
        return PlaneDetection(status='none', message=f"no support plane: {cand.shape[0]} points{where}, fewer "
                                                     f"than the {min_inliers} inliers of plane_min_area "
                                                     f"{p.min_area} m^2")
    sample = cand if cand.shape[0] <= p.max_samples else cand[rng.choice(cand.shape[0], p.max_samples,
                                                                          replace=False)]
    sample = np.ascontiguousarray(sample)
    # Three indices per hypothesis (a repeated index gives a degenerate plane, skipped).
    triples = rng.integers(0, sample.shape[0], (int(p.iterations), 3))
    normals, offsets, counts, codes = _ransac(sample, triples, math.cos(math.radians(p.max_tilt_deg)),
                                              p.inlier_threshold, cam, p.min_camera_height, p.max_camera_height)
    ok = codes == 0
    scale = cand.shape[0] / sample.shape[0]
    if not ok.any():
        bad = np.flatnonzero(codes > 1)
        if bad.size == 0:
            return PlaneDetection(status='none', message="no support plane: every RANSAC sample was degenerate")
        b = bad[np.argmax(counts[bad])]
        cp = Plane(normals[b], float(offsets[b]), True, int(counts[b] * scale))
        return PlaneDetection(status='rejected', candidate=cp,
                              message=f"no support plane{where}: best candidate ({cp.describe()}, estimated) "
                                      f"rejected: {_REASONS[int(codes[b])]}")
    best = np.flatnonzero(ok)[np.argmax(counts[ok])]
    n, d = normals[best], offsets[best]
    count, mean, cov = _inlier_moments(cand, n, d, p.inlier_threshold)
    if count >= 3:  # least squares: the normal is the smallest eigenvector of the inliers' covariance
        n2 = np.linalg.eigh(cov)[1][:, 0]
        n2 = n2 / np.linalg.norm(n2)
        if n2[2] < 0:
            n2 = -n2
        n, d = n2, -float(n2 @ mean)
        count, _, cov = _inlier_moments(cand, n, d, p.inlier_threshold)
    inl_count = int(count)
    # Width of the inlier set: that of a uniform strip with the same spread across its main direction
    # (sqrt(12) * std along the middle principal axis). A plane that only grazes a larger tilted surface
    # holds a long thin strip of it.
    width = math.sqrt(12.0 * max(np.linalg.eigvalsh(cov)[1], 0.0) / max(inl_count, 1))
    plane = Plane(normal=np.asarray(n, float), offset=float(d), fitted=True, inliers=inl_count)
    reason = _checks(plane, cam, p, min_inliers, width)
    # Connectivity (about 10 ms of CPU for a 3 m^2 floor): only where separate tops could add up to the inliers
    # (fewer than PIECE_CHECK_FACTOR times the minimum; a floor seen whole has many more).
    if not reason and inl_count < PIECE_CHECK_FACTOR * min_inliers:
        piece = largest_connected_piece(cand, plane, p.inlier_threshold, voxel_size)
        if piece < min_inliers:
            reason = (f"its largest connected piece holds {piece} of its {inl_count} inliers < {min_inliers} "
                      f"(plane_min_area): separate surfaces (tops of objects?), not one support surface")
    if reason:
        return PlaneDetection(status='rejected', candidate=plane,
                              message=f"support plane rejected ({plane.describe()}): {reason}")
    return PlaneDetection(plane=plane, status='found', message=f"support plane: {plane.describe()}")
