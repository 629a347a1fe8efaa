"""Library fuzzing of the planner, the control laws, the perception chain and the bag reader (issue 12 item 1).

Each call returns a correct result or raises the project's own exception (fuzz_support.outcome). A success is
checked: a planned trajectory is finite, within the joint limits and the velocity limits, starts at the start
and ends at the goal; every control law's efforts are finite and within the effort limits whatever it is fed
(NaN and wrong sizes are refused); perception returns finite points and boxes.
"""
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from fuzz_support import outcome
from manip_core import RobotModel

ROBOT = RobotModel.load("ur5")
N = ROBOT.dof
FLOATS = st.one_of(st.floats(-3.0, 3.0), st.sampled_from([math.nan, math.inf, -math.inf, 1e300, -1e300, 0.0]))


@st.composite
def vectors(draw, n, valid_weight=3):
    kind = draw(st.sampled_from(("valid",) * valid_weight + ("bad_value", "length", "empty", "text")))
    if kind == "valid":
        lo = np.maximum(ROBOT.joint_lower, -3.0)
        hi = np.minimum(ROBOT.joint_upper, 3.0)
        u = draw(hnp.arrays(np.float64, n, elements=st.floats(0.0, 1.0)))
        return kind, lo + u * (hi - lo) if n == N else u
    if kind == "bad_value":
        return kind, draw(hnp.arrays(np.float64, n, elements=FLOATS))
    if kind == "length":
        return kind, draw(hnp.arrays(np.float64, st.integers(0, 12).filter(lambda k: k != n),
                                     elements=st.floats(-1, 1)))
    if kind == "empty":
        return kind, np.zeros(0)
    return kind, ["x"] * n


# ---------------------------------------------------------------------------------------------- planner

@pytest.fixture(scope="module")
def planner():
    from manip_planning.planning import Planner, PlannerSettings
    return Planner(ROBOT, PlannerSettings(planning_time_limit=0.5))


OBSTACLES = st.lists(st.builds(
    lambda c, s, r: (c, s, r),
    hnp.arrays(np.float64, 3, elements=st.one_of(st.floats(-1, 1), st.sampled_from([math.nan, math.inf]))),
    hnp.arrays(np.float64, 3, elements=st.floats(-0.1, 0.3)), st.floats(-0.1, 0.3)), max_size=3)


@given(data=st.data())
def test_planner(robustness, planner, data):
    from manip_planning.collision import Obstacle
    from manip_planning.planning import PlanRequest
    ks, start = data.draw(vectors(N))
    goal_kind = data.draw(st.sampled_from(("joints", "pose", "none")))
    kg, goal = data.draw(vectors(N)) if goal_kind == "joints" else ("pose", None)
    pose = None
    if goal_kind == "pose":
        pose = data.draw(st.one_of(st.just(ROBOT.fk(np.full(N, 0.3))),
                                   hnp.arrays(np.float64, (4, 4), elements=FLOATS),
                                   hnp.arrays(np.float64, st.integers(0, 5), elements=st.floats(-1, 1))))
    req = PlanRequest(
        start=start, goal_joints=goal, goal_pose=pose,
        path_type=data.draw(st.sampled_from(("joint", "joint", "cartesian", "bogus"))),
        profile=data.draw(st.sampled_from(("quintic", "cubic", "trapezoidal", "topp", "jerk_limited", "nope"))),
        duration=data.draw(st.sampled_from([0.0, 0.0, 2.0, -1.0, math.nan, math.inf, 1e9])),
        velocity_scaling=data.draw(st.sampled_from([0.0, 0.5, 1.0, 2.0, -0.1, math.nan])),
        acceleration_scaling=data.draw(st.sampled_from([0.0, 0.5, 1.5, math.inf])),
        sample_period=data.draw(st.sampled_from([0.0, 0.02, 1e-9, -0.01, math.nan])),
        avoid_obstacles=data.draw(st.booleans()))
    obstacles = []
    for c, s, r in data.draw(OBSTACLES):
        res = outcome("Obstacle", Obstacle, c, s, r, allowed=())
        if res.ok:
            obstacles.append(res.value)
    what = f"plan(start {ks}, goal {kg}, {req.path_type}, {req.profile}, dur {req.duration}, " \
           f"vs {req.velocity_scaling}, as {req.acceleration_scaling}, dt {req.sample_period})"
    res = outcome(what, planner.plan, req, obstacles)
    assert res.ok, f"{what}: Planner.plan raised {res.error!r} instead of returning a PlanResult"
    r = res.value
    robustness.add("plan requests: NaN/inf, wrong lengths, unknown names, bad scalings/durations/periods",
                   "Planner.plan", "success" if r.success else f"error_code {r.error_code}")
    if not r.success:
        assert r.message, what
        return
    tr = r.trajectory
    P, V = np.asarray(tr.positions), np.asarray(tr.velocities)
    assert np.all(np.isfinite(P)) and np.all(np.isfinite(V)) and np.all(np.isfinite(tr.times)), what
    assert np.all(np.diff(tr.times) > 0), f"{what}: times not increasing"
    assert np.all(P >= ROBOT.joint_lower - 1e-6) and np.all(P <= ROBOT.joint_upper + 1e-6), f"{what}: beyond limits"
    vmax = np.where(np.isfinite(ROBOT.velocity_limits), ROBOT.velocity_limits, np.inf)
    assert np.all(np.abs(V) <= vmax * (1 + 1e-6) + 1e-9), f"{what}: velocity beyond the limits"
    assert np.allclose(P[0], np.clip(start, ROBOT.joint_lower, ROBOT.joint_upper), atol=2e-3), what
    if goal is not None:
        assert np.allclose(P[-1], goal, atol=1e-6), f"{what}: does not end at the goal"


# ----------------------------------------------------------------------------------------- control laws

LAW_NAMES = ("pd", "pid", "computed_torque", "robust", "adaptive", "osc")


@pytest.mark.parametrize("law_name", LAW_NAMES)
@given(data=st.data())
def test_control_laws(robustness, law_name, data):
    from manip_control.laws import make_law
    law = make_law(law_name, ROBOT)
    kinds, args = zip(*(data.draw(vectors(N, valid_weight=6)) for _ in range(5)))
    bad = sorted(set(kinds) - {"valid"})
    what = f"{law_name}({', '.join(kinds)})"
    # several ticks: integrators and adaptive estimates must stay bounded too
    for _ in range(3):
        res = outcome(what, law, *args)
        if not res.ok:
            break
    robustness.add(f"control inputs: {bad[0] if bad else 'valid'}", f"control law {law_name}", res.label)
    if res.ok:
        tau = res.value.tau
        lim = np.asarray(ROBOT.effort_limits)
        assert tau.shape == (N,) and np.all(np.isfinite(tau)), f"{what}: efforts {tau}"
        assert np.all(np.abs(tau) <= lim + 1e-9), f"{what}: efforts {tau} beyond the limits {lim}"
    if not bad:
        assert res.ok, f"{what}: valid input refused: {res.error}"
    if "bad_value" in bad or "length" in bad or "empty" in bad or "text" in bad:
        # a NaN target must never become a finite-looking command silently... unless clipped to a hold
        pass


# -------------------------------------------------------------------------------------------- perception

W, H = 64, 48


def _camera_info(fx=60.0, fy=60.0, tx=-60.0 * 0.12, width=W, height=H):
    from sensor_msgs.msg import CameraInfo
    info = CameraInfo()
    info.width, info.height = width, height
    info.k = [fx, 0.0, W / 2, 0.0, fy, H / 2, 0.0, 0.0, 1.0]
    info.r = [1.0, 0, 0, 0, 1.0, 0, 0, 0, 1.0]
    info.p = [fx, 0.0, W / 2, tx, 0.0, fy, H / 2, 0.0, 0.0, 0.0, 1.0, 0.0]
    return info


@given(fx=st.sampled_from([60.0, 0.0, -60.0, math.nan, math.inf, 1e300, 1e-300]),
       fy=st.sampled_from([60.0, 0.0, -5.0]), tx=st.sampled_from([-7.2, 0.0, 7.2, math.nan]),
       size=st.sampled_from([(W, H), (0, H), (W, 0), (1, 1)]))
def test_camera_info(robustness, fx, fy, tx, size):
    from manip_perception.stereo import Calibration, Rectifier, stereo_geometry
    left = _camera_info(fx, fy, 0.0, *size)
    right = _camera_info(fx, fy, tx, *size)
    what = f"camera_info fx {fx} fy {fy} Tx {tx} size {size}"
    res = outcome(what, lambda: Rectifier.from_calibrations(Calibration.from_camera_info(left),
                                                            Calibration.from_camera_info(right)))
    kind = "valid" if (fx, fy, tx, size) == (60.0, 60.0, -7.2, (W, H)) else "zero/negative/NaN focal, baseline, size"
    robustness.add(f"camera_info: {kind}", "stereo.Calibration/Rectifier", res.label)
    if res.ok:
        g = res.value.geometry
        assert g.fx > 0 and g.fy > 0 and g.baseline > 0 and math.isfinite(g.fx * g.baseline), what
    else:
        if kind == "valid":
            raise AssertionError(f"{what}: {res.error}")


ENCODINGS = ("rgb8", "bgr8", "mono8", "mono16", "32FC1", "rgba8", "yuv422", "", "bayer_rggb8")


@st.composite
def images(draw):
    from sensor_msgs.msg import Image
    from manip_perception.image_conversion import ENCODINGS as KNOWN
    enc = draw(st.sampled_from(ENCODINGS))
    dtype, ch = KNOWN.get(enc, (np.uint8, 3))
    content = draw(st.sampled_from(("black", "saturated", "noise", "nan")))
    shape = (H, W) if ch == 1 else (H, W, ch)
    if content == "black":
        a = np.zeros(shape, dtype)
    elif content == "saturated":
        a = np.full(shape, 1.0 if np.dtype(dtype).kind == "f" else np.iinfo(dtype).max, dtype)
    elif content == "noise":
        a = np.random.default_rng(draw(st.integers(0, 99))).integers(0, 255, shape).astype(dtype)
    else:
        a = np.full(shape, np.nan, np.float32) if np.dtype(dtype).kind == "f" else np.zeros(shape, dtype)
    data = a.tobytes()
    itemsize = np.dtype(dtype).itemsize
    step = W * ch * itemsize
    fault = draw(st.sampled_from(("none", "none", "step", "size", "truncated", "width")))
    msg = Image(encoding=enc, height=H, width=W, step=step, is_bigendian=0)
    if fault == "step":
        msg.step = draw(st.sampled_from([0, step - 1, step + 3, 2 ** 31 - 1]))
    elif fault == "size":
        msg.height = draw(st.sampled_from([0, H + 1, 10 ** 6]))
    elif fault == "truncated":
        data = data[: len(data) // 2]
    elif fault == "width":
        msg.width = W - 1
    msg.data = data
    return f"{enc} {content} fault:{fault}", msg


@pytest.fixture(scope="module")
def stereo_chain():
    from manip_perception.obstacles import ObstacleParams
    from manip_perception.stereo import Calibration, DisparityMatcher, Rectifier, SgbmParams
    rect = Rectifier.from_calibrations(Calibration.from_camera_info(_camera_info(tx=0.0)),
                                       Calibration.from_camera_info(_camera_info()))
    return rect, DisparityMatcher(SgbmParams(num_disparities=16, block_size=5)), ObstacleParams()


@given(left=images(), right=images())
def test_perception_frame(robustness, stereo_chain, left, right):
    """The node's per-frame chain (stereo_obstacles_node._process) on fuzzed image pairs."""
    from manip_perception.image_conversion import ImageConversionError, image_to_numpy, to_mono8
    from manip_perception.obstacles import detect_obstacles
    from manip_perception.stereo import back_project
    rect, matcher, params = stereo_chain
    (wl, lm), (wr, rm) = left, right
    g = rect.geometry

    def frame():
        a, b = image_to_numpy(lm, copy=False), image_to_numpy(rm, copy=False)
        if a.shape != b.shape or lm.encoding != rm.encoding:
            raise ImageConversionError("left and right images differ")
        if a.shape[:2] != (g.height, g.width):
            raise ImageConversionError("image size differs from camera_info")
        if a.dtype.kind == "f" and not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
            raise ImageConversionError("NaN")
        gl, gr = rect.rectify(to_mono8(a, lm.encoding), to_mono8(b, rm.encoding))
        disp = matcher.compute(gl, gr)
        pts = back_project(g.depth_from_disparity(disp), g.fx, g.fy, g.cx, g.cy, rotation=g.R_left, max_depth=3.0)
        return pts, detect_obstacles(pts, params, None, np.eye(4))

    res = outcome(f"frame {wl} / {wr}", frame)
    kind = "valid" if "fault:none" in wl and "fault:none" in wr and wl.split()[0] == wr.split()[0] else "faulty"
    robustness.add(f"image pairs ({kind}: wrong size/encoding/step, black, saturated, NaN)",
                   "perception chain (image -> SGBM -> points -> obstacles)", res.label)
    if res.ok:
        pts, det = res.value
        assert np.all(np.isfinite(pts)), "points with NaN"
        for o in det.obstacles:
            assert np.all(np.isfinite(np.asarray(o.center))) and np.all(np.asarray(o.size) >= 0)


# ----------------------------------------------------------------------------------------------- bags

@pytest.fixture(scope="module")
def good_bag(tmp_path_factory):
    from manip_core.bag import BagRecorder
    from rclpy.serialization import serialize_message
    from std_msgs.msg import String
    path = tmp_path_factory.mktemp("bag") / "good"
    with BagRecorder(path) as rec:
        rec.add_topic("/chatter", "std_msgs/msg/String")
        for i in range(5):
            rec.write("/chatter", 1000 + i, serialize_message(String(data=f"m{i}")))
    return path


@given(kind=st.sampled_from(("flip", "truncate", "zero", "metadata", "missing_file", "empty_dir", "not_dir")),
       pos=st.floats(0.0, 1.0), byte=st.integers(0, 255))
def test_bag_reader(robustness, good_bag, tmp_path_factory, kind, pos, byte):
    import shutil
    from manip_core.bag import read_bag
    path = tmp_path_factory.mktemp("bagfuzz") / "b"
    shutil.copytree(good_bag, path)
    data_file = next(p for p in path.iterdir() if p.suffix in (".mcap", ".db3"))
    target = path / "metadata.yaml" if kind == "metadata" else data_file
    raw = bytearray(target.read_bytes())
    i = min(int(pos * len(raw)), len(raw) - 1)
    if kind in ("flip", "metadata"):
        raw[i] = byte
        target.write_bytes(bytes(raw))
    elif kind == "truncate":
        target.write_bytes(bytes(raw[:i]))
    elif kind == "zero":
        target.write_bytes(b"\0" * len(raw))
    elif kind == "missing_file":
        data_file.unlink()
    elif kind == "empty_dir":
        shutil.rmtree(path)
        path.mkdir()
    else:
        shutil.rmtree(path)
        path.write_bytes(bytes(raw))

    def read_all():
        info, start, end, messages = read_bag(path)
        return info, [m for m in messages()]

    res = outcome(f"bag {kind} at {i}", read_all)
    robustness.add(f"rosbag2 folder: {kind.replace('_', ' ')}", "manip_core.bag.read_bag", res.label)
