"""Tests of manip_core.ik_analytic (closed-form IK, all branches) and the bundled robot descriptions.

Screw axes come from three independent UR5 sources: the Modern Robotics textbook (Example 4.5), the UR
standard DH parameters (frames at q = 0) and the example-robot-data URDF read by Pinocchio (the oracle; no
manip_core parser is used here). ypp3 and planar2r screws are built by hand from their dimensions.
"""
import math
import pathlib
import sysconfig
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from manip_core.ik_analytic import AnalyticIK, fk_poe
from manip_core.errors import InputError
from manip_core.robots import BUNDLED, robot_path
from manip_core.spatial import adjoint, axis_angle_to_matrix, pose_error, rpy_to_matrix

TWO_PI = 2.0 * math.pi
FK_TOL = 1e-9
ROBOTS_DIR = pathlib.Path(robot_path("ur5")).parent
ERD_UR5 = (pathlib.Path(sysconfig.get_paths()["purelib"])
           / "cmeel.prefix/share/example-robot-data/robots/ur_description/urdf/ur5_robot.urdf")

# UR standard DH parameters of the UR5 (m, rad).
DH_D = [0.089159, 0.0, 0.0, 0.10915, 0.09465, 0.0823]
DH_A = [0.0, -0.425, -0.39225, 0.0, 0.0, 0.0]
DH_ALPHA = [math.pi / 2, 0.0, 0.0, math.pi / 2, -math.pi / 2, 0.0]
UR_NAMES = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
            "wrist_3_joint"]


# ----------------------------------------------------------------------------------------------- helpers

def _screw(w, p):
    """[w; -w x p] for a revolute axis w through p."""
    w = np.asarray(w, dtype=float)
    return np.concatenate([w, -np.cross(w, np.asarray(p, dtype=float))])


def _unit3(x):
    return x / np.linalg.norm(x)


def _trans(x, y, z):
    T = np.eye(4)
    T[:3, 3] = (x, y, z)
    return T


def _rot(axis, angle):
    T = np.eye(4)
    T[:3, :3] = axis_angle_to_matrix(axis, angle)
    return T


def _angdiff(a, b):
    """Largest |a_i - b_i| mod 2 pi (rad)."""
    return float(np.max(np.abs(np.remainder(np.asarray(a) - np.asarray(b) + math.pi, TWO_PI) - math.pi)))


def dh_frames(q):
    """[F_0 .. F_6], F_i = F_(i-1) Rz(q_i) Tz(d_i) Tx(a_i) Rx(alpha_i) (UR standard DH)."""
    F = [np.eye(4)]
    for i in range(6):
        F.append(F[-1] @ _rot([0, 0, 1], q[i]) @ _trans(0, 0, DH_D[i]) @ _trans(DH_A[i], 0, 0)
                 @ _rot([1, 0, 0], DH_ALPHA[i]))
    return F


def mr_ur5():
    """Modern Robotics Example 4.5 UR5: (S, M, lower, upper, names)."""
    W1, W2, L1, L2, H1, H2 = 0.109, 0.082, 0.425, 0.392, 0.089, 0.095
    S = np.array([[0, 0, 1, 0, 0, 0], [0, 1, 0, -H1, 0, 0], [0, 1, 0, -H1, 0, L1], [0, 1, 0, -H1, 0, L1 + L2],
                  [0, 0, -1, -W1, L1 + L2, 0], [0, 1, 0, H2 - H1, 0, L1 + L2]], dtype=float).T
    M = np.array([[-1, 0, 0, L1 + L2], [0, 0, 1, W1 + W2], [0, 1, 0, H1 - H2], [0, 0, 0, 1]], dtype=float)
    return S, M, np.full(6, -TWO_PI), np.full(6, TWO_PI), [f"j{i + 1}" for i in range(6)]


def dh_ur5():
    """Screws from the DH frames at q = 0: omega_i = z of F_(i-1), p_i = origin of F_(i-1); M = F_6."""
    F = dh_frames(np.zeros(6))
    S = np.stack([_screw(F[i][:3, 2], F[i][:3, 3]) for i in range(6)], axis=1)
    return S, F[6], np.full(6, -TWO_PI), np.full(6, TWO_PI), list(UR_NAMES)


def pin_chain(path, tip):
    """(S, M, lower, upper, names) of a URDF read by Pinocchio: omega = R_joint axis, p = joint position."""
    pin = pytest.importorskip("pinocchio")
    model = pin.buildModelFromUrdf(str(path))
    data = model.createData()
    q0 = np.zeros(model.nq)
    pin.forwardKinematics(model, data, q0)
    pin.updateFramePlacements(model, data)
    pin.computeJointJacobians(model, data, q0)
    cols = []
    for j in range(1, model.njoints):
        J = pin.getJointJacobian(model, data, j, pin.ReferenceFrame.LOCAL)
        axis_local = J[3:, model.joints[j].idx_v]
        oMi = data.oMi[j]
        cols.append(_screw(oMi.rotation @ axis_local, oMi.translation))
    M = data.oMf[model.getFrameId(tip)].homogeneous.copy()
    names = [str(n) for n in model.names[1:]]
    return np.stack(cols, axis=1), M, model.lowerPositionLimit.copy(), model.upperPositionLimit.copy(), names


def erd_ur5():
    if not ERD_UR5.is_file():
        pytest.skip("example-robot-data UR5 not installed")
    return pin_chain(ERD_UR5, "ee_link")


UR_SOURCES = {"mr": mr_ur5, "dh": dh_ur5, "erd": erd_ur5}


def make_ik(source, lower=None, upper=None):
    S, M, lo, up, names = UR_SOURCES[source]()
    lo = lo if lower is None else lower
    up = up if upper is None else upper
    ik = AnalyticIK.detect(S, M, ["revolute"] * 6, lo, up, joint_names=names)
    assert ik is not None and ik.kind == "ur6r" and not ik.position_only
    return ik, S, M, lo, up


def wrist_centre_home(S):
    """Intersection of axes 5 and 6 at q = 0 (m), from the screws."""
    w5, w6 = S[:3, 4], S[:3, 5]
    p5, p6 = np.cross(w5, S[3:, 4]), np.cross(w6, S[3:, 5])
    A = np.stack([w5, -w6], axis=1)
    t = np.linalg.lstsq(A, p6 - p5, rcond=None)[0]
    return p5 + t[0] * w5


def assert_all_reach(ik, sols, T, position_only=False):
    for s in sols:
        A = fk_poe(ik.S, ik.M, s)
        if position_only:
            assert np.linalg.norm(A[:3, 3] - T[:3, 3]) < FK_TOL
        else:
            dp, dr = pose_error(A, T)
            assert dp < FK_TOL and dr < FK_TOL, (s, dp, dr)
        assert np.all(s >= ik.lower) and np.all(s <= ik.upper)


def draw_q(rng, lower, upper, cap=TWO_PI):
    return rng.uniform(np.maximum(lower, -cap), np.minimum(upper, cap))


# ---------------------------------------------------------------------------------------- UR 6R tests

def test_mr_book_fk_example():
    S, M, *_ = mr_ur5()
    T = fk_poe(S, M, [0, -math.pi / 2, 0, 0, math.pi / 2, 0])
    expect = np.array([[0, -1, 0, 0.095], [1, 0, 0, 0.109], [0, 0, 1, 0.988], [0, 0, 0, 1]])
    assert np.allclose(T, expect, atol=1e-12)


def test_three_ur5_sources_agree_on_reach():
    """MR (rounded to mm) and DH/URDF describe the same arm: the tip distance from the base matches."""
    for q in np.random.default_rng(3).uniform(-math.pi, math.pi, (20, 6)):
        d = [np.linalg.norm(fk_poe(*UR_SOURCES[k]()[:2], q)[:3, 3]) for k in ("dh", "erd")]
        assert abs(d[0] - d[1]) < 1e-9


@pytest.mark.parametrize("source", ["mr", "dh", "erd"])
def test_ur_random_round_trip(source):
    ik, S, M, lo, up = make_ik(source)
    rng = np.random.default_rng(42)
    counts = {}
    for _ in range(500):
        q = draw_q(rng, lo, up)
        T = fk_poe(S, M, q)
        sols, reason = ik.solve(T)
        assert reason == "" and 1 <= len(sols) <= 8
        assert_all_reach(ik, sols, T)
        assert min(_angdiff(s, q) for s in sols) < 1e-7
        counts[len(sols)] = counts.get(len(sols), 0) + 1
    # A UR target has 8 solutions unless some (shoulder, wrist) branch puts the wrist out of the elbow's reach.
    assert counts.get(8, 0) > 300


@pytest.mark.parametrize("source", ["mr", "dh", "erd"])
def test_ur_solution_set_is_closed(source):
    """Each solution's FK gives back the same set: no branch is missed by any generator."""
    ik, S, M, lo, up = make_ik(source)
    rng = np.random.default_rng(7)
    for _ in range(40):
        T = fk_poe(S, M, draw_q(rng, lo, up))
        sols, _ = ik.solve(T)
        for s in sols:
            again, _ = ik.solve(fk_poe(S, M, s))
            assert len(again) == len(sols)
            for a in again:
                assert min(_angdiff(a, b) for b in sols) < 1e-7


@pytest.mark.parametrize("source", ["mr", "dh", "erd"])
def test_ur_generic_target_has_eight_labelled_branches(source):
    ik, S, M, lo, up = make_ik(source)
    q = np.array([0.3, -1.2, 1.4, -0.6, 1.1, 0.4])
    if source == "erd":
        q = np.array([0.3, -0.4, 1.4, -0.6, 1.1, 0.4])
    T = fk_poe(S, M, q)
    labeled, reason = ik.solve_labeled(T)
    assert reason == "" and len(labeled) == 8
    labels = [lab for _, lab in labeled]
    assert len(set(labels)) == 8
    assert labels[0].startswith("shoulder-left/wrist-noflip/elbow-up")
    assert labels[-1] == "shoulder-right/wrist-flip/elbow-down"
    assert_all_reach(ik, [s for s, _ in labeled], T)
    # the same target gives the same order every time
    assert [lab for _, lab in ik.solve_labeled(T)[0]] == labels


@pytest.mark.parametrize("source", ["mr", "dh", "erd"])
def test_ur_wrist_singularity(source):
    """Axis 6 parallel to the parallel axes (q5 = 0 or pi here): theta6 = 0 is chosen, FK still exact."""
    ik, S, M, lo, up = make_ik(source)
    rng = np.random.default_rng(11)
    zero6 = total = 0
    for q5 in (0.0, math.pi):
        for _ in range(20):
            q = rng.uniform(-math.pi, math.pi, 6)
            q[4] = q5
            T = fk_poe(S, M, q)
            sols, reason = ik.solve(T)
            assert reason == "" and sols
            assert_all_reach(ik, sols, T)
            # the target is singular for q's shoulder branch (the other theta1 root sees another R_rem)
            mine = [s for s in sols if abs(math.remainder(s[0] - q[0], TWO_PI)) < 1e-9]
            assert 1 <= len(mine) <= 2 and all(abs(math.sin(s[4])) < 1e-9 for s in mine)
            zero6 += sum(s[5] == 0.0 for s in mine)
            total += len(mine)
    assert zero6 > total / 2          # theta6 = 0 unless that leaves the wrist out of the elbow's reach


def shoulder_singular_q(S, M):
    """A q with the wrist centre on the shoulder-offset cylinder (the two theta1 roots coincide)."""
    w1, p1 = S[:3, 0], np.cross(S[:3, 0], S[3:, 0])
    h = S[:3, 1]
    W0 = wrist_centre_home(S)
    c1 = abs(float(np.dot(h, W0 - p1)))
    for q2 in (-math.pi / 2, math.pi / 2, 0.0, math.pi):
        for q4 in (-math.pi / 2, math.pi / 2, 0.0, math.pi):
            q = np.array([0.4, q2, 0.0, q4, 0.7, -0.3])
            X = fk_poe(S, M, q) @ np.linalg.inv(M)
            W = X[:3, :3] @ W0 + X[:3, 3]
            r = W - p1
            dist = np.linalg.norm(r - np.dot(w1, r) * w1)
            if abs(dist - c1) < 1e-12:
                return q
    raise AssertionError("no shoulder-singular configuration found")


@pytest.mark.parametrize("source", ["mr", "dh", "erd"])
def test_ur_shoulder_and_elbow_singularities(source):
    ik, S, M, lo, up = make_ik(source)
    q = shoulder_singular_q(S, M)
    for qq in (q, np.array([0.2, -0.5, 0.0, 0.3, 1.0, 0.5])):     # shoulder singular; elbow stretched
        T = fk_poe(S, M, qq)
        sols, reason = ik.solve(T)
        assert reason == "" and sols
        assert_all_reach(ik, sols, T)
        assert min(_angdiff(s, qq) for s in sols) < 1e-6


@pytest.mark.parametrize("source", ["mr", "dh", "erd"])
def test_ur_unreachable_targets_give_reasons(source):
    ik, S, M, lo, up = make_ik(source)
    T = fk_poe(S, M, np.array([0.3, -1.2, 1.4, -0.6, 1.1, 0.4]))
    far = T.copy()
    far[:3, 3] += np.array([1.5, 0.5, 0.3])
    sols, reason = ik.solve(far)
    assert sols == [] and "beyond the reach shell" in reason
    # wrist centre moved onto the base axis: inside the shoulder-offset cylinder
    X = T @ np.linalg.inv(M)
    W = X[:3, :3] @ wrist_centre_home(S) + X[:3, 3]
    w1 = S[:3, 0]
    p1 = np.cross(w1, S[3:, 0])
    inside = T.copy()
    inside[:3, 3] += p1 + np.dot(w1, W - p1) * w1 - W
    sols, reason = ik.solve(inside)
    assert sols == [] and "shoulder-offset cylinder" in reason


def test_ur_joint_limits_filter_and_reason():
    S, M, lo, up, names = dh_ur5()
    q = np.array([1.0, -1.2, 1.4, -0.6, 1.1, 0.4])
    T = fk_poe(S, M, q)
    lower, upper = lo.copy(), up.copy()
    lower[0], upper[0] = -0.5, 0.5
    ik = AnalyticIK.detect(S, M, ["revolute"] * 6, lower, upper, joint_names=names)
    sols, reason = ik.solve(T)
    assert sols == []
    assert "solutions violate joint limits" in reason and "shoulder_pan_joint" in reason
    # elbow limited to one sign: only the elbow branches on that side survive
    lower, upper = lo.copy(), up.copy()
    lower[2], upper[2] = 0.0, math.pi
    ik = AnalyticIK.detect(S, M, ["revolute"] * 6, lower, upper, joint_names=names)
    sols, reason = ik.solve(T)
    assert reason == "" and 1 <= len(sols) <= 4
    assert all(0.0 <= s[2] <= math.pi for s in sols)
    assert min(_angdiff(s, q) for s in sols) < 1e-7


def test_wrapping_into_limits_and_continuous():
    S, M, lo, up, names = dh_ur5()
    q = np.array([-2.5, -1.2, 1.4, -0.6, 1.1, 0.4])
    T = fk_poe(S, M, q)
    lower, upper = lo.copy(), up.copy()
    lower[0], upper[0] = 0.0, TWO_PI                               # -2.5 is only reachable as 2 pi - 2.5
    ik = AnalyticIK.detect(S, M, ["revolute"] * 5 + ["continuous"], lower, upper, joint_names=names)
    sols, reason = ik.solve(T)
    assert reason == ""
    assert all(0.0 <= s[0] <= TWO_PI for s in sols)
    assert all(-math.pi < s[5] <= math.pi for s in sols)
    assert any(abs(s[0] - (TWO_PI - 2.5)) < 1e-9 for s in sols)
    assert_all_reach(ik, sols, T)


def test_near_picks_representatives_and_order():
    ik, S, M, lo, up = make_ik("dh")
    q = np.array([0.3, -1.2, 1.4, -0.6, 1.1, 4.0])                 # 4.0 rad: within +-2 pi limits
    T = fk_poe(S, M, q)
    sols, _ = ik.solve(T, near=q)
    assert np.max(np.abs(sols[0] - q)) < 1e-7                      # not just mod 2 pi: the same numbers
    dists = [np.linalg.norm(s - q) for s in sols]
    assert dists == sorted(dists)
    default, _ = ik.solve(T)
    assert all(np.all(np.abs(s) <= math.pi + 1e-12) for s in default)


def test_inexact_geometry_is_polished():
    """Axes off by 3e-7 rad (a URDF with rpy rounded to 1.570796) are accepted and polished to 1e-9."""
    S, M, lo, up, names = mr_ur5()
    R = np.eye(4)
    S2 = S.copy()
    for i, ax in ((2, [1, 0, 0]), (3, [0, 0, 1]), (5, [1, 0, 0])):
        R[:3, :3] = axis_angle_to_matrix(ax, 3.3e-7)
        p = np.cross(S[:3, i], S[3:, i])
        S2[:, i] = _screw(R[:3, :3] @ S[:3, i], p)
    ik = AnalyticIK.detect(S2, M, ["revolute"] * 6, lo, up)
    assert ik is not None and ik.kind == "ur6r"
    rng = np.random.default_rng(5)
    for _ in range(50):
        q = rng.uniform(-math.pi, math.pi, 6)
        T = fk_poe(S2, M, q)
        sols, reason = ik.solve(T)
        assert reason == ""
        assert_all_reach(ik, sols, T)
        assert min(_angdiff(s, q) for s in sols) < 1e-7


@pytest.mark.parametrize("source", ["mr", "dh"])
def test_ur_any_base_tool_frame_and_axis_signs(source):
    """S' = Ad(B) S, M' = B M Tool (another base/tool frame) and a flipped joint-3 axis: same arm, same IK."""
    S, M, lo, up, _ = UR_SOURCES[source]()
    B = _trans(0.3, -0.2, 0.5) @ _rot(_unit3(np.array([1.0, 2.0, 3.0])), 0.7)
    tool = _trans(0.01, 0.02, 0.15) @ _rot([0, 1, 0], 0.4)
    S2 = adjoint(B) @ S
    S2[:, 2] *= -1.0                                                # joint 3 turns the other way
    M2 = B @ M @ tool
    ik = AnalyticIK.detect(S2, M2, ["revolute"] * 6, lo, up)
    assert ik is not None and ik.kind == "ur6r"
    rng = np.random.default_rng(13)
    for _ in range(100):
        q = rng.uniform(-math.pi, math.pi, 6)
        T = fk_poe(S2, M2, q)
        sols, reason = ik.solve(T)
        assert reason == ""
        assert_all_reach(ik, sols, T)
        assert min(_angdiff(s, q) for s in sols) < 1e-7


def test_detect_rejects_other_geometries():
    S, M, lo, up, _ = mr_ur5()
    assert AnalyticIK.detect(S, M, ["revolute"] * 5 + ["prismatic"], lo, up) is None
    off = S.copy()
    off[:, 5] = _screw(S[:3, 5], np.cross(S[:3, 5], S[3:, 5]) + np.array([0.01, 0, 0]))  # wrist offset 1 cm
    assert AnalyticIK.detect(off, M, ["revolute"] * 6, lo, up) is None
    tilted = S.copy()
    tilted[:, 2] = _screw(axis_angle_to_matrix([1, 0, 0], 0.1) @ S[:3, 2], np.cross(S[:3, 2], S[3:, 2]))
    assert AnalyticIK.detect(tilted, M, ["revolute"] * 6, lo, up) is None
    assert AnalyticIK.detect(S[:, :4], M, ["revolute"] * 4) is None


def test_bad_target_raises_input_error():
    ik, *_ = make_ik("mr")
    with pytest.raises(InputError):
        ik.solve(np.zeros(3))                                       # a position is not enough for ur6r
    T = np.eye(4)
    T[0, 3] = np.nan
    with pytest.raises(InputError):
        ik.solve(T)


# ------------------------------------------------------------------------------------------- ypp3

YPP3_LO, YPP3_UP = np.array([-math.pi, -math.pi / 2, -2.6]), np.array([math.pi, math.pi / 2, 2.6])


def ypp3_screws():
    """Yaw z at the origin; pitch axes y at z = 0.2 and 0.5 m; tool at z = 0.75 m at q = 0."""
    S = np.stack([_screw([0, 0, 1], [0, 0, 0]), _screw([0, 1, 0], [0, 0, 0.2]), _screw([0, 1, 0], [0, 0, 0.5])],
                 axis=1)
    return S, _trans(0, 0, 0.75)


def ypp3_ik(lower=YPP3_LO, upper=YPP3_UP):
    S, M = ypp3_screws()
    ik = AnalyticIK.detect(S, M, ["revolute"] * 3, lower, upper,
                           joint_names=["yaw_joint", "shoulder_joint", "elbow_joint"])
    assert ik is not None and ik.kind == "ypp3" and ik.position_only
    return ik, S, M


def test_ypp3_random_round_trip():
    ik, S, M = ypp3_ik()
    wide, _, _ = ypp3_ik(np.full(3, -math.pi), np.full(3, math.pi))
    rng = np.random.default_rng(1)
    four = 0
    for _ in range(500):
        q = draw_q(rng, YPP3_LO, YPP3_UP)
        T = fk_poe(S, M, q)
        for target in (T, T[:3, 3]):
            sols, reason = ik.solve(target)
            assert reason == "" and 1 <= len(sols) <= 4
            assert_all_reach(ik, sols, T, position_only=True)
            assert min(_angdiff(s, q) for s in sols) < 1e-7
        all_sols, _ = wide.solve(T)
        assert_all_reach(wide, all_sols, T, position_only=True)
        four += len(all_sols) == 4
    assert four > 480                                               # 4 branches without limits


def test_ypp3_labels():
    ik, S, M = ypp3_ik(np.full(3, -math.pi), np.full(3, math.pi))
    labeled, _ = ik.solve_labeled(np.array([0.3, 0.1, 0.5]))
    labels = [lab for _, lab in labeled]
    assert labels == ["shoulder-front/elbow-up", "shoulder-front/elbow-down",
                      "shoulder-back/elbow-up", "shoulder-back/elbow-down"]
    q_front_up = labeled[0][0]
    assert abs(q_front_up[0] - math.atan2(0.1, 0.3)) < 1e-12       # facing the target
    elbow = fk_poe(S[:, :2], _trans(0, 0, 0.5), q_front_up[:2])[:3, 3]
    d = _unit3(np.array([0.3, 0.1, 0.5]) - [0, 0, 0.2])
    up = np.array([0, 0, 1.0]) - d[2] * d
    assert np.dot(elbow - [0, 0, 0.2], up) > 0                      # elbow above the shoulder-target line
    q_back_up = labeled[2][0]
    elbow = fk_poe(S[:, :2], _trans(0, 0, 0.5), q_back_up[:2])[:3, 3]
    assert np.dot(elbow - [0, 0, 0.2], up) > 0


def test_ypp3_reasons():
    ik, S, M = ypp3_ik()
    sols, reason = ik.solve(np.array([0.9, 0.2, 0.5]))
    assert sols == [] and "beyond the reach shell 0.050..0.550 m" in reason
    sols, reason = ik.solve(np.array([0.01, 0.0, 0.21]))
    assert sols == [] and "too close" in reason
    sols, reason = ik.solve(np.array([0.0, 0.0, -0.5]))
    assert sols == [] and "below the lowest reachable z = -0.350 m" in reason
    sols, reason = ik.solve(np.array([0.0, 0.0, 0.9]))
    assert sols == [] and "above the highest reachable z = 0.750 m" in reason
    sols, reason = ik.solve(np.array([0.1, 0.0, -0.1]))           # in reach, but needs the shoulder < -pi/2
    assert sols == [] and "violate joint limits" in reason and "shoulder_joint" in reason


def test_ypp3_target_on_yaw_axis():
    ik, S, M = ypp3_ik()
    P = np.array([0.0, 0.0, 0.6])
    sols, reason = ik.solve(P)
    assert reason == "" and sols
    assert {round(s[0], 12) for s in sols} <= {0.0, round(math.pi, 12), round(-math.pi, 12)}
    labels = [lab for _, lab in ik.solve_labeled(P)[0]]
    assert len(set(labels)) == len(labels)
    assert_all_reach(ik, sols, _trans(*P), position_only=True)


def test_ypp3_urdf_matches_hand_screws():
    S, M = ypp3_screws()
    S2, M2, lo, up, names = pin_chain(ROBOTS_DIR / "ypp3.urdf", "tool_link")
    assert np.allclose(S2, S, atol=1e-12) and np.allclose(M2, M, atol=1e-12)
    assert np.allclose(lo, YPP3_LO) and np.allclose(up, YPP3_UP)
    assert names == ["yaw_joint", "shoulder_joint", "elbow_joint"]


# --------------------------------------------------------------------------------------- planar2r

def planar_ik():
    S = np.stack([_screw([0, 0, 1], [0, 0, 0]), _screw([0, 0, 1], [0.5, 0, 0])], axis=1)
    M = _trans(0.9, 0, 0)
    ik = AnalyticIK.detect(S, M, ["revolute"] * 2, [-math.pi] * 2, [math.pi] * 2)
    assert ik is not None and ik.kind == "planar2r" and ik.position_only
    return ik, S, M


def test_planar2r_random_round_trip():
    ik, S, M = planar_ik()
    rng = np.random.default_rng(2)
    for _ in range(500):
        q = rng.uniform(-math.pi, math.pi, 2)
        T = fk_poe(S, M, q)
        sols, reason = ik.solve(T)
        assert reason == "" and 1 <= len(sols) <= 2
        assert_all_reach(ik, sols, T, position_only=True)
        assert min(_angdiff(s, q) for s in sols) < 1e-7
        if abs(math.sin(q[1])) > 1e-6:
            assert len(sols) == 2


def test_planar2r_labels_and_reasons():
    ik, S, M = planar_ik()
    labeled, _ = ik.solve_labeled(np.array([0.6, 0.0, 0.0]))
    assert [lab for _, lab in labeled] == ["elbow-up", "elbow-down"]
    assert labeled[0][0][0] > 0 and labeled[0][0][1] < 0            # elbow at +y for a target on +x
    sols, reason = ik.solve(np.array([0.6, 0.0, 0.05]))
    assert sols == [] and "off the plane of motion" in reason
    sols, reason = ik.solve(np.array([1.0, 0.2, 0.0]))
    assert sols == [] and "beyond the reach annulus 0.100..0.900 m" in reason
    sols, reason = ik.solve(np.array([0.05, 0.0, 0.0]))
    assert sols == [] and "inside the reach annulus" in reason
    sols, reason = ik.solve(np.array([0.9, 0.0, 0.0]))              # stretched: one solution
    assert reason == "" and len(sols) == 1 and np.allclose(sols[0], 0.0)


def test_planar2r_urdf_matches_hand_screws():
    ik, S, M = planar_ik()
    S2, M2, lo, up, names = pin_chain(ROBOTS_DIR / "planar2r.urdf", "tool")
    assert np.allclose(S2, S, atol=1e-12) and np.allclose(M2, M, atol=1e-12)
    assert np.allclose(lo, -math.pi) and np.allclose(up, math.pi)


# ------------------------------------------------------------------------------------ bundled ur5

def _vec(text):
    return np.array([float(x) for x in text.split()])


def urdf_chain(path, tip):
    """[(joint element, origin (4, 4), axis (3,))] from the root to tip, parsed with ElementTree."""
    root = ET.parse(path).getroot()
    by_child = {j.find("child").get("link"): j for j in root.findall("joint")}
    chain, link = [], tip
    while link in by_child:
        j = by_child[link]
        o = j.find("origin")
        T = np.eye(4)
        if o is not None:
            T[:3, :3] = rpy_to_matrix(_vec(o.get("rpy", "0 0 0")))
            T[:3, 3] = _vec(o.get("xyz", "0 0 0"))
        ax = j.find("axis")
        chain.append((j, T, _vec(ax.get("xyz")) if ax is not None else np.zeros(3)))
        link = j.find("parent").get("link")
    return root, chain[::-1]


def urdf_link_frames(chain, q):
    """{child link name: pose in the root frame} for joint values q (movable joints in chain order)."""
    T, frames, k = np.eye(4), {}, 0
    for j, origin, axis in chain:
        T = T @ origin
        if j.get("type") != "fixed":
            T = T @ _rot(axis, q[k])
            k += 1
        frames[j.find("child").get("link")] = T.copy()
    return frames


UR5_LINKS = ["shoulder_link", "upper_arm_link", "forearm_link", "wrist_1_link", "wrist_2_link", "wrist_3_link"]


def test_bundled_ur5_urdf_matches_dh():
    root, chain = urdf_chain(robot_path("ur5"), "tool0")
    assert [j.get("name") for j, _, _ in chain] == UR_NAMES + ["wrist_3_link-tool0_fixed_joint"]
    rng = np.random.default_rng(9)
    for q in rng.uniform(-TWO_PI, TWO_PI, (100, 6)):
        frames = urdf_link_frames(chain, q)
        F = dh_frames(q)
        assert np.allclose(frames["tool0"], F[6], atol=1e-12)
        for i, name in enumerate(UR5_LINKS):            # F_i = L_i Tx(a_i) Rx(alpha_i)
            assert np.allclose(frames[name] @ _trans(DH_A[i], 0, 0) @ _rot([1, 0, 0], DH_ALPHA[i]), F[i + 1],
                               atol=1e-12)


def test_bundled_ur5_inertials_and_limits():
    root, chain = urdf_chain(robot_path("ur5"), "tool0")
    links = {lk.get("name"): lk for lk in root.findall("link")}
    masses = [3.7, 8.393, 2.275, 1.219, 1.219, 0.1879]
    coms_dh = [[0, -0.02561, 0.00193], [0.2125, 0, 0.11336], [0.15, 0, 0.0265], [0, -0.0018, 0.01634],
               [0, 0.0018, 0.01634], [0, 0, -0.001159]]
    q = np.random.default_rng(4).uniform(-math.pi, math.pi, 6)
    frames, F = urdf_link_frames(chain, q), dh_frames(q)
    for i, name in enumerate(UR5_LINKS):
        inertial = links[name].find("inertial")
        assert float(inertial.find("mass").get("value")) == masses[i]
        com_link = _vec(inertial.find("origin").get("xyz"))
        world = frames[name][:3, :3] @ com_link + frames[name][:3, 3]
        assert np.allclose(world, F[i + 1][:3, :3] @ coms_dh[i] + F[i + 1][:3, 3], atol=1e-12)
        I = inertial.find("inertia")
        assert all(float(I.get(k)) > 0 for k in ("ixx", "iyy", "izz"))
    efforts = [150, 150, 150, 28, 28, 28]
    for (j, _, _), eff in zip(chain, efforts):
        lim = j.find("limit")
        assert float(lim.get("lower")) == -TWO_PI and float(lim.get("upper")) == TWO_PI
        assert float(lim.get("velocity")) == 3.15 and float(lim.get("effort")) == eff


def test_bundled_ur5_with_pinocchio_and_ik():
    S, M, lo, up, names = pin_chain(robot_path("ur5"), "tool0")
    S_dh, M_dh, *_ = dh_ur5()
    assert np.allclose(S, S_dh, atol=1e-12) and np.allclose(M, M_dh, atol=1e-12)
    ik = AnalyticIK.detect(S, M, ["revolute"] * 6, lo, up, joint_names=names)
    assert ik.kind == "ur6r"
    q = np.array([0.3, -1.2, 1.4, -0.6, 1.1, 0.4])
    sols, reason = ik.solve(fk_poe(S, M, q))
    assert reason == "" and len(sols) == 8


def test_robot_path():
    for name, fname in BUNDLED.items():
        assert robot_path(name).name == fname
    for name in ("ur5", "ypp3", "planar2r"):
        assert robot_path(name).is_file()
    assert robot_path(str(robot_path("ur5"))) == robot_path("ur5")
    with pytest.raises(ValueError, match="planar2r"):
        robot_path("no_such_robot")


# ------------------------------------------------------------------------- numba batch (solve_batch)

def _batch_equals_solve(ik, targets, atol=1e-9):
    """solve_batch gives, target by target, the same solution set as solve (atol rad), each reaching the
    target (FK within 1e-9 m and rad)."""
    Q, counts = ik.solve_batch(np.array(targets))
    for i, T in enumerate(targets):
        sols, _ = ik.solve(T)
        assert counts[i] == len(sols), (i, counts[i], len(sols))
        if sols:
            a = np.array(sorted(map(tuple, sols)))
            b = np.array(sorted(map(tuple, Q[i, :counts[i]])))
            np.testing.assert_allclose(b, a, atol=atol, rtol=0)
            assert_all_reach(ik, list(b), T, position_only=ik.position_only)
    return counts


def test_numba_batch_equals_python_solver():
    """AnalyticIK.solve_batch (manip_core._ik_closed_kernel) against AnalyticIK.solve: random targets of the UR5
    from two sources (one in another base/tool frame with a flipped axis), with joint limits that cut branches,
    at the wrist singularity, with inexact geometry (polish), unreachable targets, NaN; ypp3 and planar2r."""
    rng = np.random.default_rng(21)
    S, M, lo, up, _ = dh_ur5()
    B = _trans(0.3, -0.2, 0.5) @ _rot(_unit3(np.array([1.0, 2.0, 3.0])), 0.7)
    S2 = adjoint(B) @ S
    S2[:, 2] *= -1.0
    M2 = B @ M @ _trans(0.01, 0.02, 0.15)
    cut_lo, cut_up = np.full(6, -math.pi), np.array([math.pi, 0.5, math.pi, math.pi, 2.0, math.pi])
    cases = [(AnalyticIK.detect(S, M, ["revolute"] * 6, lo, up), S, M),
             (AnalyticIK.detect(S2, M2, ["revolute"] * 6, cut_lo, cut_up), S2, M2),
             (AnalyticIK.detect(S, M, ["revolute", "continuous"] * 3, lo, up), S, M)]
    Sx, Mx, lox, upx, _ = mr_ur5()
    Sp = Sx.copy()
    R = axis_angle_to_matrix([1, 0, 0], 3.3e-7)
    Sp[:, 2] = _screw(R @ Sx[:3, 2], np.cross(Sx[:3, 2], Sx[3:, 2]))
    cases.append((AnalyticIK.detect(Sp, Mx, ["revolute"] * 6, lox, upx), Sp, Mx))
    for k, (ik, S_, M_) in enumerate(cases):
        assert ik is not None and ik.kind == "ur6r"
        qs = rng.uniform(-math.pi, math.pi, (60, 6))
        qs[:8, 4] = 0.0                                           # wrist singular
        targets = [fk_poe(S_, M_, q) for q in qs] + [_trans(3.0, 0.0, 0.0), _trans(0.0, 0.0, 0.02)]
        # inexact geometry (k = 3): both polish by least squares; near the wrist singularity the two polished
        # solutions may differ by a few 1e-9 rad while both reach the target within 1e-9
        counts = _batch_equals_solve(ik, targets, 1e-9 if k < 3 else 1e-7)
        assert counts[60] == 0
    ik, S3, M3 = ypp3_ik()
    qs = rng.uniform(YPP3_LO, YPP3_UP, (80, 3))
    _batch_equals_solve(ik, [fk_poe(S3, M3, q) for q in qs] + [_trans(0.0, 0.0, 0.6), _trans(2.0, 0, 0)])
    ik, S4, M4 = planar_ik()
    qs = rng.uniform(-math.pi, math.pi, (50, 2))
    _batch_equals_solve(ik, [fk_poe(S4, M4, q) for q in qs] + [_trans(0.0, 0.0, 5.0)])
    Q, counts = ik.solve_batch(np.full((1, 4, 4), np.nan))
    assert counts[0] == 0
    with pytest.raises(InputError, match="T_targets"):
        ik.solve_batch(np.eye(4))
