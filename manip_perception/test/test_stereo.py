"""stereo: calibration, rectification, SGBM disparity and depth against PyBullet ground truth."""
import math

import cv2
import numpy as np
import pytest

from manip_perception.obstacles import ObstacleParams, camera_pose_matrix, detect_obstacles, transform_points
from manip_perception.stereo import (POINTFIELD_FLOAT32, Calibration, DisparityMatcher, Rectifier, SgbmParams,
                                     StereoError, back_project, back_project_disparity, depth_to_disparity,
                                     disparity_to_depth,
                                     pack_pointcloud2, stereo_geometry, unpack_pointcloud2)


def grey(img):
    return cv2.cvtColor(img, cv2.COLOR_RGB2GRAY)


def smooth_mask(depth, camera, margin=4):
    """Pixels whose ground-truth disparity is smooth (no depth edge within ``margin`` px), seen by both
    cameras (right of the SGBM search range) and nearer than the far plane."""
    d = depth_to_disparity(depth, camera.fx, camera.baseline)
    gx = np.abs(np.diff(d, axis=1, prepend=d[:, :1]))
    gy = np.abs(np.diff(d, axis=0, prepend=d[:1, :]))
    edge = ((gx > 1.0) | (gy > 1.0)).astype(np.uint8)
    edge = cv2.dilate(edge, np.ones((2 * margin + 1, 2 * margin + 1), np.uint8)) > 0
    ok = ~edge & (depth < 0.9 * camera.far)
    ok[:, :SgbmParams().num_disparities + margin] = False
    return ok


def test_renderer_principal_point(scene):
    """The ground truth itself: the table pixels back-project onto z = 0 with the (320, 239) principal
    point and the depth-buffer formula of conftest (guards the camera model every other test uses)."""
    cam = scene.camera
    pts = cam.back_project_base(scene.depth)
    table = (scene.seg == scene.table) & (scene.depth < 5.0)
    z = pts[table][:, 2]
    assert table.sum() > 100_000
    assert abs(np.median(z)) < 5e-4
    assert np.percentile(np.abs(z), 99) < 2e-3
    # A half-pixel shift of cy would already tilt the plane by more than the tolerance.
    v, u = np.nonzero(table)
    d = scene.depth[v, u]
    y_shift = (v - (cam.cy + 0.5)) / cam.fy * d
    pc = np.stack([(u - cam.cx) / cam.fx * d, y_shift, d], axis=1)
    z_shifted = (pc @ cam.rotation.T + cam.position)[:, 2]
    assert np.percentile(np.abs(z_shifted), 99) > 2e-3


@pytest.mark.parametrize('matcher', ['sgbm', 'bm'])
def test_disparity_and_depth_match_ground_truth(scene, matcher):
    """Both matchers (SGBM, and block matching: the node's default for camera rate) against the renderer's
    depth buffer."""
    cam = scene.camera
    matcher = DisparityMatcher(SgbmParams(matcher=matcher, block_size=0))
    disp = matcher.compute(grey(scene.left), grey(scene.right))
    assert disp.dtype == np.float32 and disp.shape == scene.depth.shape
    assert np.isnan(disp[:, :64]).all()  # left border: no match possible, invalid = NaN
    d_gt = depth_to_disparity(scene.depth, cam.fx, cam.baseline)
    ok = smooth_mask(scene.depth, cam)
    valid = ok & np.isfinite(disp)
    # the rest: flat patches of the texture (texture_threshold), and for bm its uniqueness on weak texture
    assert valid.sum() / ok.sum() > (0.8 if matcher.params.matcher == 'sgbm' else 0.7), valid.sum() / ok.sum()
    err = np.abs(disp[valid] - d_gt[valid])
    assert np.median(err) < 0.3, np.median(err)
    assert np.percentile(err, 95) < 1.0, np.percentile(err, 95)
    # Textured object surfaces are matched too.
    on_objects = valid & np.isin(scene.seg, [o.body for o in scene.objects])
    assert on_objects.sum() > 3000
    assert np.median(np.abs(disp[on_objects] - d_gt[on_objects])) < 0.5
    # Depth from disparity: Z = fx * B / d.
    depth = disparity_to_depth(disp, cam.fx, cam.baseline)
    has_depth = valid & np.isfinite(depth)
    assert has_depth.sum() > 0.99 * valid.sum()
    rel = np.abs(depth[has_depth] - scene.depth[has_depth]) / scene.depth[has_depth]
    assert np.median(rel) < 0.005
    assert np.isnan(depth[~np.isfinite(disp)]).all()


def test_back_projected_points_lie_on_the_true_solids(scene):
    cam = scene.camera
    disp = DisparityMatcher().compute(grey(scene.left), grey(scene.right))
    depth = disparity_to_depth(disp, cam.fx, cam.baseline)
    pts, cols = back_project(depth, cam.fx, cam.fy, cam.cx, cam.cy, colors=scene.left)
    assert pts.dtype == np.float32 and cols.shape == pts.shape and cols.dtype == np.uint8
    assert pts.shape[0] == np.isfinite(depth).sum()
    base = transform_points(pts, camera_pose_matrix(cam.position, cam.orientation_xyzw))
    valid = np.isfinite(depth)
    seg = scene.seg[valid]
    ok = smooth_mask(scene.depth, cam)[valid]
    for o in scene.objects:
        p = base[(seg == o.body) & ok]
        # 2 cm: about 0.5 px of disparity at the cylinder's 1.45 m.
        lo, hi = o.position - o.half_extents - 0.02, o.position + o.half_extents + 0.02
        inside = np.all((p >= lo) & (p <= hi), axis=1)
        assert p.shape[0] > 500 and inside.mean() > 0.95, (o.name, inside.mean())
    table = base[(seg == scene.table) & ok & (scene.depth[valid] < 2.0)]
    assert np.median(np.abs(table[:, 2])) < 0.004


def test_calibration_and_geometry(camera):
    left = Calibration.from_camera_info(camera.camera_info('left'))
    right = Calibration.from_camera_info(camera.camera_info('right'))
    assert left.is_rectified and right.is_rectified
    g = stereo_geometry(left, right)
    assert g.fx == pytest.approx(camera.fx) and g.baseline == pytest.approx(camera.baseline)
    assert (g.cx, g.cy, g.doffs) == (camera.cx, camera.cy, 0.0)
    rect = Rectifier.from_calibrations(left, right)
    assert rect.is_noop
    a = np.zeros((camera.height, camera.width), np.uint8)
    assert rect.rectify(a, a)[0] is a

    bad = camera.camera_info('right')
    bad.p[5] = math.nan
    with pytest.raises(StereoError, match='P holds NaN'):
        Calibration.from_camera_info(bad)
    flipped = camera.camera_info('right')
    flipped.p[3] = +camera.fx * camera.baseline
    with pytest.raises(StereoError, match='baseline'):
        stereo_geometry(left, Calibration.from_camera_info(flipped))
    small = camera.camera_info('right')
    small.width = 320
    with pytest.raises(StereoError, match='differ in size'):
        stereo_geometry(left, Calibration.from_camera_info(small))
    with pytest.raises(StereoError, match='multiple of 16'):
        SgbmParams(num_disparities=100).validate()
    with pytest.raises(StereoError, match='odd'):
        SgbmParams(block_size=4).validate()
    with pytest.raises(StereoError, match='5..255'):
        SgbmParams(matcher='bm', block_size=3).validate()
    with pytest.raises(StereoError, match='matcher'):
        SgbmParams(matcher='census').validate()
    assert SgbmParams(matcher='bm', block_size=0).validate().block_size == 9


def test_doffs_and_depth_formula():
    d = np.array([[10.0, 2.0, np.nan, 0.0]], np.float32)
    z = disparity_to_depth(d, 500.0, 0.1, doffs=2.0)
    assert z[0, 0] == pytest.approx(500 * 0.1 / 8)
    assert np.isnan(z[0, 1:]).all()
    np.testing.assert_allclose(depth_to_disparity(z[:, :1], 500.0, 0.1, doffs=2.0), [[10.0]], rtol=1e-6)


def test_back_project_disparity_is_back_project_of_the_depth():
    """The node's one-pass path (disparity -> points) gives the points, in the same order, of the two-step one
    (disparity_to_depth, then back_project), bit for bit: with doffs, a rectification rotation, colours, the
    depth window, NaN, zero and negative disparities."""
    rng = np.random.default_rng(3)
    d = rng.uniform(-5.0, 120.0, (48, 64)).astype(np.float32)
    d[rng.random(d.shape) < 0.2] = np.nan
    d[0, :5] = 2.0  # d - doffs == 0
    colours = rng.integers(0, 255, (48, 64, 3), dtype=np.uint8)
    R = _rot([0.3, 1.0, 0.2], 3.0)
    kw = dict(colors=colours, rotation=R, max_depth=3.0, min_depth=0.45)
    want, want_c = back_project(disparity_to_depth(d, 457.0, 0.12, doffs=2.0), 457.0, 455.0, 320.3, 239.1, **kw)
    got, got_c = back_project_disparity(d, 457.0, 0.12, 2.0, 455.0, 320.3, 239.1, **kw)
    assert len(want) > 1000
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got_c, want_c)
    np.testing.assert_array_equal(back_project_disparity(d, 457.0, 0.12, 2.0, 455.0, 320.3, 239.1), back_project(
        disparity_to_depth(d, 457.0, 0.12, doffs=2.0), 457.0, 455.0, 320.3, 239.1))
    with pytest.raises(StereoError):
        back_project_disparity(d, 457.0, 0.0, 0.0, 457.0, 320.0, 240.0)


def _rot(axis, deg):
    return cv2.Rodrigues(np.asarray(axis, float) * math.radians(deg))[0]


def _distort(image, K, D):
    """The image a camera with distortion D would see (inverse warp through cv2.undistortPoints)."""
    h, w = image.shape[:2]
    v, u = np.mgrid[0:h, 0:w].astype(np.float32)
    pix = np.stack([u.ravel(), v.ravel()], axis=1).reshape(-1, 1, 2)
    ideal = cv2.undistortPoints(pix, K, D, P=K).reshape(h, w, 2)
    return cv2.remap(image, ideal[..., 0], ideal[..., 1], cv2.INTER_LINEAR)


def test_unrectified_pair_is_rectified(camera, gt, tmp_path):
    """A verged, rolled right camera and a distorted left lens: rectify, match, and find the objects."""
    R_l = camera.rotation
    R_rel = _rot([0, 1, 0], -2.0) @ _rot([0, 0, 1], 1.0)  # right camera frame in left coordinates
    eye_r = camera.position + camera.baseline * R_l[:, 0]
    objs = gt.main_objects()
    sc = gt.render_scene(camera, objs, tmp_path, right_camera=(eye_r, R_l @ R_rel))
    K = camera.K
    D_left = np.array([-0.06, 0.02, 0.0, 0.0, 0.0])
    left_raw = _distort(sc.left, K, D_left)
    assert not np.array_equal(left_raw, sc.left)
    # OpenCV: x_right = R x_left + T.
    R = R_rel.T
    T = -R_rel.T @ np.array([camera.baseline, 0, 0])
    rect = Rectifier.from_extrinsics(K, D_left, K, np.zeros(5), (camera.width, camera.height), R, T)
    assert not rect.is_noop
    g = rect.geometry
    assert g.baseline == pytest.approx(camera.baseline, rel=1e-6)
    # The same rectification from CameraInfo-like K, D, R, P (what a ROS stereo calibration publishes).
    infos = [type('Info', (), dict(width=c.width, height=c.height, k=c.K.ravel(), d=c.D, r=c.R.ravel(),
                                   p=c.P.ravel()))() for c in (rect.left, rect.right)]
    rect2 = Rectifier.from_calibrations(*[Calibration.from_camera_info(i) for i in infos])
    gl, gr = grey(left_raw), grey(sc.right)
    a, b = rect.rectify(gl, gr)
    a2, b2 = rect2.rectify(gl, gr)
    np.testing.assert_array_equal(a, a2)
    np.testing.assert_array_equal(b, b2)

    matcher = DisparityMatcher()
    disp = matcher.compute(a, b)
    depth = g.depth_from_disparity(disp)
    # rotation=R_left brings the points back from the rectified to the raw left optical frame.
    pts = back_project(depth, g.fx, g.fy, g.cx, g.cy, rotation=g.R_left)
    params = ObstacleParams(camera_position=tuple(camera.position),
                            camera_orientation_xyzw=tuple(camera.orientation_xyzw))
    base = transform_points(pts, camera_pose_matrix(camera.position, camera.orientation_xyzw))
    near_table = base[(np.abs(base[:, 2]) < 0.05) & (np.linalg.norm(base[:, :2] - [0.45, 0.1], axis=1) < 0.6)]
    assert near_table.shape[0] > 20_000
    assert abs(np.median(near_table[:, 2])) < 0.004
    det = detect_obstacles(pts, params)
    assert len(det.obstacles) == len(objs)
    for o in objs:
        err = min(np.linalg.norm(ob.center - o.expected_center(params.plane_margin)) for ob in det.obstacles)
        assert err < 0.03, (o.name, err)

    # Without rectification the same matcher finds much less (the rows do not correspond).
    raw_valid = np.isfinite(matcher.compute(gl, gr)).mean()
    assert np.isfinite(disp).mean() > raw_valid + 0.1


def test_pointcloud2_packing(camera):
    from rclpy.serialization import deserialize_message, serialize_message
    from sensor_msgs.msg import PointCloud2, PointField
    rng = np.random.default_rng(3)
    pts = rng.standard_normal((1000, 3)).astype(np.float32)
    cols = rng.integers(0, 256, (1000, 3)).astype(np.uint8)
    c = pack_pointcloud2(pts, cols)
    assert [f[:3] for f in c.fields] == [('x', 0, POINTFIELD_FLOAT32), ('y', 4, POINTFIELD_FLOAT32),
                                         ('z', 8, POINTFIELD_FLOAT32), ('rgb', 12, POINTFIELD_FLOAT32)]
    assert POINTFIELD_FLOAT32 == PointField.FLOAT32
    assert (c.height, c.width, c.point_step, c.row_step, c.is_dense) == (1, 1000, 16, 16000, True)
    msg = PointCloud2(height=c.height, width=c.width, is_bigendian=c.is_bigendian, point_step=c.point_step,
                      row_step=c.row_step, is_dense=c.is_dense,
                      fields=[PointField(name=n, offset=o, datatype=d, count=k) for n, o, d, k in c.fields])
    msg.data = c.data
    back = deserialize_message(serialize_message(msg), PointCloud2)
    p2, c2 = unpack_pointcloud2(back.data, back.point_step, back.width, with_rgb=True)
    np.testing.assert_array_equal(p2, pts)
    np.testing.assert_array_equal(c2, cols)
    # The rgb float carries 0x00RRGGBB (PCL / RViz convention).
    raw = np.frombuffer(bytes(back.data), np.uint8).reshape(1000, 16)[0, 12:16].view('<u4')[0]
    assert raw == (int(cols[0, 0]) << 16) | (int(cols[0, 1]) << 8) | int(cols[0, 2])
    plain = pack_pointcloud2(pts)
    assert plain.point_step == 12 and len(plain.fields) == 3 and len(plain.data) == 12000
