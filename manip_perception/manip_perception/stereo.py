"""Stereo geometry: calibrations, rectification, SGBM disparity, depth, back-projection, PointCloud2 packing.

No rclpy import. Calibrations are read from any object with the sensor_msgs/CameraInfo fields (``width``,
``height``, ``k``, ``d``, ``r``, ``p``, ``distortion_model``; the upper-case ROS 1 names ``K`` ... also work).

Conventions (ROS): images and points in the left optical frame (x right, y down, z forward); for a
rectified pair the right camera's projection matrix carries ``P[0, 3] = Tx = -fx * baseline``.
A disparity ``d = u_left - u_right`` gives ``Z = fx * baseline / (d - doffs)`` with
``doffs = cx_left - cx_right`` (0 for the usual pair with equal principal points).
"""
from dataclasses import dataclass

import cv2
import numba
import numpy as np


class StereoError(ValueError):
    """Inconsistent or unusable calibration / images."""


# ------------------------------------------------------------------------------------------ calibration
def _field(info, name):
    for n in (name, name.upper()):
        if hasattr(info, n):
            return getattr(info, n)
    raise StereoError(f"calibration has no field '{name}'")


@dataclass(frozen=True)
class Calibration:
    """One camera of the pair (CameraInfo contents as numpy arrays)."""

    width: int
    height: int
    K: np.ndarray  # (3, 3) intrinsics of the raw image
    D: np.ndarray  # distortion coefficients (plumb_bob / rational_polynomial order)
    R: np.ndarray  # (3, 3) rectification rotation (raw camera frame -> rectified frame)
    P: np.ndarray  # (3, 4) projection of the rectified image

    @classmethod
    def from_camera_info(cls, info):
        """Calibration of a CameraInfo-like object; StereoError for NaN/inf or malformed matrices."""
        try:
            K = np.asarray(_field(info, 'k'), dtype=float).reshape(3, 3)
            R = np.asarray(_field(info, 'r'), dtype=float).reshape(3, 3)
            P = np.asarray(_field(info, 'p'), dtype=float).reshape(3, 4)
            D = np.asarray(_field(info, 'd'), dtype=float).reshape(-1)
        except ValueError as e:
            raise StereoError(f"malformed camera_info matrices: {e}") from None
        width, height = int(_field(info, 'width')), int(_field(info, 'height'))
        # An all-zero R or K is an unset field (ROS: uncalibrated); treat as identity / the rectified K.
        if not np.any(R):
            R = np.eye(3)
        if not np.any(K):
            K = P[:, :3].copy()
        for name, m in (('K', K), ('R', R), ('P', P), ('D', D)):
            if not np.all(np.isfinite(m)):
                raise StereoError(f"camera_info {name} holds NaN or inf")
        if width <= 0 or height <= 0:
            raise StereoError(f"camera_info size {width}x{height} is empty")
        if P[0, 0] <= 0 or P[1, 1] <= 0:
            raise StereoError(f"camera_info P has non-positive focal lengths ({P[0, 0]}, {P[1, 1]})")
        return cls(width, height, K, D, R, P)

    @property
    def is_rectified(self):
        """No distortion and an identity rectification rotation: the image is already rectified."""
        return (not np.any(self.D)) and np.allclose(self.R, np.eye(3), atol=1e-9) and \
            np.allclose(self.K, self.P[:, :3], atol=1e-6)


@dataclass(frozen=True)
class StereoGeometry:
    """What back-projection needs, from the rectified projection matrices of the pair."""

    fx: float
    fy: float
    cx: float
    cy: float
    baseline: float  # m, > 0
    doffs: float  # cx_left - cx_right, px
    width: int
    height: int
    R_left: np.ndarray  # rotation raw left frame -> rectified left frame (identity for rectified input)

    def depth_from_disparity(self, disparity):
        return disparity_to_depth(disparity, self.fx, self.baseline, self.doffs)

    def intrinsics(self):
        return self.fx, self.fy, self.cx, self.cy


def stereo_geometry(left, right):
    """StereoGeometry of a left/right Calibration pair (right ``P[0, 3] = -fx * baseline``)."""
    if (left.width, left.height) != (right.width, right.height):
        raise StereoError(f"left and right calibrations differ in size: "
                          f"{left.width}x{left.height} vs {right.width}x{right.height}")
    Pl, Pr = left.P, right.P
    fx = Pl[0, 0]
    if not np.isclose(Pr[0, 0], fx, rtol=1e-6) or not np.isclose(Pr[1, 1], Pl[1, 1], rtol=1e-6):
        raise StereoError(f"rectified focal lengths differ: left {Pl[0, 0]}, {Pl[1, 1]}, "
                          f"right {Pr[0, 0]}, {Pr[1, 1]}")
    if not np.isclose(Pr[1, 2], Pl[1, 2], atol=1e-6):
        raise StereoError(f"rectified cy differ: left {Pl[1, 2]}, right {Pr[1, 2]} (not a horizontal pair)")
    if abs(Pl[0, 3]) > 1e-9:
        raise StereoError(f"left P[0, 3] must be 0 (got {Pl[0, 3]}): the left camera is the reference")
    baseline = -Pr[0, 3] / fx
    if not baseline > 0:
        raise StereoError(f"right P[0, 3] = {Pr[0, 3]} gives baseline {baseline}: expected -fx * B with B > 0")
    return StereoGeometry(fx=float(fx), fy=float(Pl[1, 1]), cx=float(Pl[0, 2]), cy=float(Pl[1, 2]),
                          baseline=float(baseline), doffs=float(Pl[0, 2] - Pr[0, 2]),
                          width=left.width, height=left.height, R_left=left.R.copy())


# ------------------------------------------------------------------------------------------ rectification
class Rectifier:
    """Undistort + rectify maps for a pair (cv2.initUndistortRectifyMap), or a no-op for rectified input.

    Build with :meth:`from_calibrations` (CameraInfo K, D, R, P as ROS stereo calibration writes them) or
    :meth:`from_extrinsics` (K, D of each camera and the pose of the right camera in the left camera frame,
    through cv2.stereoRectify).
    """

    def __init__(self, left, right, maps=None):
        self.left, self.right = left, right
        self._maps = maps  # None: identity
        self.geometry = stereo_geometry(left, right)

    @property
    def is_noop(self):
        return self._maps is None

    @classmethod
    def from_calibrations(cls, left, right):
        if left.is_rectified and right.is_rectified:
            return cls(left, right, None)
        size = (left.width, left.height)
        maps = []
        for c in (left, right):
            m1, m2 = cv2.initUndistortRectifyMap(c.K, c.D, c.R, c.P[:, :3], size, cv2.CV_32FC1)
            maps.append((m1, m2))
        return cls(left, right, maps)

    @classmethod
    def from_extrinsics(cls, K1, D1, K2, D2, size, R, T, alpha=0.0):
        """Rectifier from raw intrinsics and the right camera's pose: ``x_right = R @ x_left + T``
        (cv2.stereoRectify convention; T is about (-baseline, 0, 0) for a horizontal pair)."""
        K1, K2 = np.asarray(K1, float), np.asarray(K2, float)
        D1 = np.asarray(D1, float).reshape(-1)
        D2 = np.asarray(D2, float).reshape(-1)
        w, h = size
        R1, R2, P1, P2, _Q, _roi1, _roi2 = cv2.stereoRectify(
            K1, D1, K2, D2, (w, h), np.asarray(R, float), np.asarray(T, float).reshape(3, 1),
            flags=cv2.CALIB_ZERO_DISPARITY, alpha=alpha)
        left = Calibration(w, h, K1, D1, R1, P1)
        right = Calibration(w, h, K2, D2, R2, P2)
        return cls.from_calibrations(left, right)

    def rectify(self, left_image, right_image):
        """Rectified (left, right) images; the inputs themselves for an already rectified pair."""
        if self._maps is None:
            return left_image, right_image
        out = []
        for img, (m1, m2) in zip((left_image, right_image), self._maps):
            out.append(cv2.remap(img, m1, m2, cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT))
        return out[0], out[1]


# ------------------------------------------------------------------------------------------ disparity
_MODES = {'sgbm': cv2.STEREO_SGBM_MODE_SGBM, 'hh': cv2.STEREO_SGBM_MODE_HH,
          'sgbm_3way': cv2.STEREO_SGBM_MODE_SGBM_3WAY, 'hh4': cv2.STEREO_SGBM_MODE_HH4}


#: Matchers: OpenCV's semi-global matching, or its block matching (sum of absolute differences of the
#: x-Sobel pre-filtered images over a square block, no smoothness term): 2-3 times cheaper, sparser on weak
#: texture (bench/perception.py: its rate and accuracy side by side).
MATCHERS = ('sgbm', 'bm')
#: block_size 0: the matcher's default (odd px).
DEFAULT_BLOCK = {'sgbm': 5, 'bm': 9}


@dataclass
class SgbmParams:
    min_disparity: int = 0
    num_disparities: int = 128  # multiple of 16
    block_size: int = 5  # odd, >= 1 (bm: >= 5); 0: DEFAULT_BLOCK of the matcher
    uniqueness_ratio: int = 10  # percent
    speckle_window_size: int = 100  # 0 disables the speckle filter
    speckle_range: int = 2  # max disparity variation inside a speckle region (px)
    disp12_max_diff: int = 1  # left-right check tolerance (px); < 0 disables it
    pre_filter_cap: int = 31
    p1: int = 0  # 0: 8 * channels * block_size^2
    p2: int = 0  # 0: 32 * channels * block_size^2
    mode: str = 'sgbm_3way'  # sgbm | hh | sgbm_3way | hh4 (matcher sgbm only)
    matcher: str = 'sgbm'  # MATCHERS; bm uses min_disparity, num_disparities, block_size, uniqueness_ratio,
    # speckle_window_size, speckle_range, disp12_max_diff, pre_filter_cap (and no P1/P2, mode)
    # Not an SGBM setting: disparities whose block_size x block_size window of the left image has an
    # intensity standard deviation below this (grey levels) are invalid; 0 (default) disables the check.
    # It helps on rendered or synthetic images with truly flat regions (the simulator's plain white
    # background, where SGBM propagates the disparity of edges along the rows: phantom points in the air
    # next to objects; 1.5 removes them). With sensor noise a flat region has the noise's std, so the
    # threshold must exceed it to help (the regression bags, noise std 2: 3.0 removes every phantom cluster
    # of their plain backdrop, 1.5 does not). On real cameras with textured scenes the check discards good
    # matches (about 9 % at 1.5 on a published indoor pair), so it is off by default.
    texture_threshold: float = 0.0

    def validate(self):
        if self.matcher not in MATCHERS:
            raise StereoError(f"matcher must be one of {', '.join(MATCHERS)}, got '{self.matcher}'")
        if self.block_size == 0:
            self.block_size = DEFAULT_BLOCK[self.matcher]
        if self.matcher == 'bm' and not 5 <= self.block_size <= 255:
            raise StereoError(f"block_size must be odd and within 5..255 for the bm matcher, got {self.block_size}")
        if self.num_disparities <= 0 or self.num_disparities % 16:
            raise StereoError(f"num_disparities must be a positive multiple of 16, got {self.num_disparities}")
        if self.block_size < 1 or self.block_size % 2 == 0:
            raise StereoError(f"block_size must be odd and >= 1, got {self.block_size}")
        if self.mode not in _MODES:
            raise StereoError(f"SGBM mode must be one of {', '.join(_MODES)}, got '{self.mode}'")
        if self.uniqueness_ratio < 0 or self.speckle_window_size < 0 or self.speckle_range < 0:
            raise StereoError("uniqueness_ratio, speckle_window_size and speckle_range must be >= 0")
        if not self.texture_threshold >= 0:
            raise StereoError(f"texture_threshold must be >= 0, got {self.texture_threshold}")
        if self.p1 and self.p2 and self.p2 <= self.p1:
            raise StereoError(f"p2 ({self.p2}) must be larger than p1 ({self.p1})")
        return self


class DisparityMatcher:
    """cv2.StereoSGBM (or cv2.StereoBM, ``matcher`` 'bm') with :class:`SgbmParams`; :meth:`compute` returns
    float32 pixels, NaN = invalid."""

    def __init__(self, params=None, channels=1):
        self.params = (params or SgbmParams()).validate()
        p = self.params
        if p.matcher == 'bm':
            create = getattr(cv2, 'StereoBM_create', None) or cv2.StereoBM.create
            m = create(numDisparities=p.num_disparities, blockSize=p.block_size)
            m.setMinDisparity(p.min_disparity)
            m.setPreFilterType(cv2.STEREO_BM_PREFILTER_XSOBEL)
            m.setPreFilterCap(min(max(p.pre_filter_cap, 1), 63))
            m.setTextureThreshold(0)  # the texture check is texture_threshold's, the same for both matchers
            m.setUniquenessRatio(p.uniqueness_ratio)
            m.setSpeckleWindowSize(p.speckle_window_size)
            m.setSpeckleRange(16 * p.speckle_range)  # BM filters its 16x fixed-point output as it is
            m.setDisp12MaxDiff(p.disp12_max_diff)
            self._matcher = m
            self._grey_only = True
            return
        self._grey_only = False
        area = channels * p.block_size * p.block_size
        create = getattr(cv2, 'StereoSGBM_create', None) or cv2.StereoSGBM.create  # OpenCV 4 and 5
        self._matcher = create(
            minDisparity=p.min_disparity, numDisparities=p.num_disparities, blockSize=p.block_size,
            P1=p.p1 or 8 * area, P2=p.p2 or 32 * area, disp12MaxDiff=p.disp12_max_diff,
            preFilterCap=p.pre_filter_cap, uniquenessRatio=p.uniqueness_ratio,
            speckleWindowSize=p.speckle_window_size, speckleRange=p.speckle_range, mode=_MODES[p.mode])

    def compute(self, left, right):
        """Disparity of a rectified pair (uint8 grey or colour, same shape), float32 px, NaN where invalid."""
        if left.shape != right.shape:
            raise StereoError(f"left and right images differ in shape: {left.shape} vs {right.shape}")
        if left.dtype != np.uint8 or right.dtype != np.uint8:
            raise StereoError(f"SGBM needs uint8 images, got {left.dtype} and {right.dtype}")
        if self._grey_only and left.ndim == 3:
            left, right = (cv2.cvtColor(x, cv2.COLOR_RGB2GRAY) for x in (left, right))
        raw = self._matcher.compute(left, right)  # int16, 16 * disparity
        disp = raw.astype(np.float32) * (1.0 / 16.0)
        disp[raw < self.params.min_disparity * 16] = np.nan
        if self.params.texture_threshold > 0:
            disp[~self.textured(left)] = np.nan
        return disp

    def textured(self, image):
        """Mask of the pixels whose block_size window has an intensity std >= texture_threshold."""
        grey = image if image.ndim == 2 else cv2.cvtColor(image, cv2.COLOR_RGB2GRAY)
        g = grey.astype(np.float32)
        win = (max(3, self.params.block_size),) * 2
        mean = cv2.boxFilter(g, -1, win, borderType=cv2.BORDER_REFLECT)
        sq = cv2.boxFilter(g * g, -1, win, borderType=cv2.BORDER_REFLECT)
        return sq - mean * mean >= np.float32(self.params.texture_threshold) ** 2

    @property
    def max_disparity(self):
        return self.params.min_disparity + self.params.num_disparities - 1


# ------------------------------------------------------------------------------------------ working range
def disparity_range(fx, baseline, min_depth, max_depth, doffs=0.0, block_size=0):
    """(min_disparity, num_disparities) for SGBM covering depths ``min_depth`` to ``max_depth`` (m):
    d = fx * baseline / Z + doffs (px); min_disparity = floor(d(max_depth)) (at least 0), and the range up to
    ceil(d(min_depth)) rounded up to a multiple of 16. ``block_size`` (odd px) adds its half width of margin
    at the near end, so that a surface at exactly min_depth is inside the search."""
    if not (fx > 0 and baseline > 0):
        raise StereoError(f"disparity range needs fx > 0 and baseline > 0, got {fx}, {baseline}")
    if not 0 < min_depth < max_depth:
        raise StereoError(f"working depth range needs 0 < min_depth < max_depth, got {min_depth}, {max_depth}")
    d_far = fx * baseline / max_depth + doffs
    d_near = fx * baseline / min_depth + doffs
    lo = max(0, int(np.floor(d_far)))
    hi = int(np.ceil(d_near)) + block_size // 2
    num = max(16, int(np.ceil((hi - lo + 1) / 16.0)) * 16)
    return lo, num


def depth_resolution(depth, fx, baseline, disparity_error=0.25):
    """Depth uncertainty (m) at ``depth`` (m) for a disparity error (px): dZ = Z^2 dd / (fx B)."""
    z = np.asarray(depth, dtype=float)
    return z * z * disparity_error / (fx * baseline)


# ------------------------------------------------------------------------------------------ depth / points
def disparity_to_depth(disparity, fx, baseline, doffs=0.0):
    """Z = fx * baseline / (d - doffs) (m); NaN where the disparity is invalid or not positive."""
    d = np.asarray(disparity, dtype=np.float32) - np.float32(doffs)
    with np.errstate(divide='ignore', invalid='ignore'):
        z = np.float32(fx * baseline) / d
    z[~(d > 0)] = np.nan
    return z


def depth_to_disparity(depth, fx, baseline, doffs=0.0):
    """Inverse of :func:`disparity_to_depth`."""
    z = np.asarray(depth, dtype=np.float64)
    with np.errstate(divide='ignore', invalid='ignore'):
        return (fx * baseline / z + doffs).astype(np.float32)


@numba.njit(cache=True)
def _back_project(img, fB, doffs, fx, fy, cx, cy, R, min_depth, max_depth, pixels):
    """Points (N, 3) float32 in row-major pixel order (one pass to count), and when ``pixels`` their pixel
    rows/columns (else empty arrays). ``img``: depth (m) when ``fB`` is 0, else disparity (px), turned into
    depth on the way as disparity_to_depth does (float32: Z = fB / (d - doffs), only where d - doffs > 0)."""
    h, w = img.shape
    n = 0
    for v in range(h):
        for u in range(w):
            d = img[v, u]
            if fB != 0:
                d = d - doffs
                d = fB / d if d > 0 else np.float32(np.nan)
            if d > min_depth and d <= max_depth:  # False for NaN
                n += 1
    pts = np.empty((n, 3), np.float32)
    vv = np.empty(n if pixels else 0, np.int64)
    uu = np.empty(n if pixels else 0, np.int64)
    k = 0
    for v in range(h):
        for u in range(w):
            d = img[v, u]
            if fB != 0:
                d = d - doffs
                d = fB / d if d > 0 else np.float32(np.nan)
            if d > min_depth and d <= max_depth:
                x = (u - cx) * d / fx
                y = (v - cy) * d / fy
                # R^T p (identity R for rectified input)
                pts[k, 0] = x * R[0, 0] + y * R[1, 0] + d * R[2, 0]
                pts[k, 1] = x * R[0, 1] + y * R[1, 1] + d * R[2, 1]
                pts[k, 2] = x * R[0, 2] + y * R[1, 2] + d * R[2, 2]
                if pixels:
                    vv[k] = v
                    uu[k] = u
                k += 1
    return pts, vv, uu


def back_project(depth, fx, fy, cx, cy, colors=None, rotation=None, max_depth=None, min_depth=0.0):
    """3D points (N, 3) float32 of every pixel with a finite depth (in the camera optical frame), in
    row-major pixel order.

    ``colors``: optional (H, W, 3) uint8 image; returns (points, colors[N, 3]) then.
    ``rotation``: optional (3, 3) applied as ``rotation.T @ p`` (a rectified -> raw frame change: pass the
    left rectification R so that the points are in the raw left optical frame).
    ``min_depth``/``max_depth``: keep ``min_depth < Z <= max_depth``.
    """
    return _points(depth, 0.0, 0.0, fx, fy, cx, cy, colors, rotation, max_depth, min_depth)


def back_project_disparity(disparity, fx, baseline, doffs, fy, cx, cy, colors=None, rotation=None, max_depth=None,
                           min_depth=0.0):
    """back_project(disparity_to_depth(disparity, fx, baseline, doffs), fx, fy, cx, cy, ...) in one pass over
    the image, without the depth image (the same float32 depths, the same points): the node's path."""
    if not (fx > 0 and baseline > 0):
        raise StereoError(f"back-projection needs fx > 0 and baseline > 0, got {fx}, {baseline}")
    return _points(disparity, fx * baseline, doffs, fx, fy, cx, cy, colors, rotation, max_depth, min_depth)


def _points(img, fB, doffs, fx, fy, cx, cy, colors, rotation, max_depth, min_depth):
    z = np.ascontiguousarray(img, dtype=np.float32)
    h, w = z.shape
    R = np.eye(3) if rotation is None else np.asarray(rotation, dtype=np.float64)
    pts, v, u = _back_project(z, np.float32(fB), np.float32(doffs), float(fx), float(fy), float(cx), float(cy), R,
                              float(min_depth), np.inf if max_depth is None else float(max_depth),
                              colors is not None)
    if colors is not None:
        c = np.asarray(colors)
        if c.shape[:2] != (h, w):
            raise StereoError(f"colour image {c.shape[:2]} and depth {z.shape} differ in size")
        return pts, c[v, u, :3]
    return pts


# ------------------------------------------------------------------------------------------ PointCloud2
#: sensor_msgs/PointField datatype FLOAT32
POINTFIELD_FLOAT32 = 7


@dataclass
class CloudFields:
    """Plain PointCloud2 contents: the node copies these into a message (fields -> PointField)."""

    height: int
    width: int
    fields: list  # [(name, offset, datatype, count)]
    is_bigendian: bool
    point_step: int
    row_step: int
    data: bytes
    is_dense: bool


def pack_pointcloud2(points, colors=None):
    """x, y, z float32 [+ rgb packed as float32 0x00RRGGBB, the PCL/RViz convention] of N points.

    Unorganised cloud (height 1, width N), little-endian, dense (the points must be finite).
    """
    pts = np.asarray(points, dtype=np.float32).reshape(-1, 3)
    n = pts.shape[0]
    names = ['x', 'y', 'z'] + (['rgb'] if colors is not None else [])
    rec = np.zeros(n, dtype=np.dtype({'names': names, 'formats': ['<f4'] * len(names),
                                      'offsets': [0, 4, 8] + ([12] if colors is not None else []),
                                      'itemsize': 16 if colors is not None else 12}))
    rec['x'], rec['y'], rec['z'] = pts[:, 0], pts[:, 1], pts[:, 2]
    if colors is not None:
        c = np.asarray(colors, dtype=np.uint32).reshape(-1, 3)
        if c.shape[0] != n:
            raise StereoError(f"{c.shape[0]} colours for {n} points")
        rgb = (c[:, 0] << 16) | (c[:, 1] << 8) | c[:, 2]
        rec['rgb'] = rgb.astype('<u4').view('<f4')
    step = rec.dtype.itemsize
    fields = [(name, off, POINTFIELD_FLOAT32, 1) for name, off in zip(names, (0, 4, 8, 12))]
    return CloudFields(height=1, width=n, fields=fields, is_bigendian=False, point_step=step,
                       row_step=step * n, data=rec.tobytes(), is_dense=bool(np.all(np.isfinite(pts))))


def unpack_pointcloud2(data, point_step, n, with_rgb=False):
    """Inverse of :func:`pack_pointcloud2` for its layout: (points, colors or None)."""
    raw = np.frombuffer(bytes(data), dtype=np.uint8).reshape(n, point_step)
    pts = raw[:, :12].copy().view('<f4').reshape(n, 3).astype(np.float32)
    if not with_rgb:
        return pts, None
    rgb = raw[:, 12:16].copy().view('<u4').reshape(n)
    cols = np.stack([(rgb >> 16) & 255, (rgb >> 8) & 255, rgb & 255], axis=1).astype(np.uint8)
    return pts, cols
