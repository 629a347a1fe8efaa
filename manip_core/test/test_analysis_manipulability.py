"""Manipulability measures and ellipsoids against closed forms (planar 2R) and Pinocchio's Jacobians (UR5)."""
import numpy as np
import pinocchio as pin
import pytest
from scipy.optimize import brentq

from manip_core import InputError, RobotModel
from manip_core.robots import robot_path

L1, L2 = 0.5, 0.4  # planar2r.urdf: joint2 0.5 m from joint1, tool 0.4 m from joint2


@pytest.fixture(scope="module")
def ur5():
    robot = RobotModel.load("ur5")
    pm = pin.buildModelFromUrdf(str(robot_path("ur5")))
    return robot, pm, pm.createData(), pm.getFrameId(robot.tip_link)


def pin_jacobians(pm, pd, fid, q):
    """Pinocchio's body Jacobian and its base-axes ('local world aligned') Jacobian, rows as [v; omega]."""
    pin.computeJointJacobians(pm, pd, q)
    pin.updateFramePlacements(pm, pd)
    return (pin.getFrameJacobian(pm, pd, fid, pin.LOCAL),
            pin.getFrameJacobian(pm, pd, fid, pin.LOCAL_WORLD_ALIGNED))


def test_planar2r_manipulability_is_l1_l2_abs_sin_q2():
    robot = RobotModel.load("planar2r")
    Q = np.random.default_rng(0).uniform(-np.pi, np.pi, (200, 2))
    Q[:3, 1] = [0.0, np.pi, 1e-9]
    w = robot.manipulability_batch(Q, part="position")
    np.testing.assert_allclose(w, L1 * L2 * np.abs(np.sin(Q[:, 1])), rtol=1e-12, atol=1e-15)
    assert w[0] < 1e-15 and w[1] < 1e-15
    for q in Q[:5]:
        assert robot.manipulability(q, "position") == pytest.approx(L1 * L2 * abs(np.sin(q[1])), abs=1e-15)
    # closed-form singular values of the 2 x 2 in-plane Jacobian: sigma_min^2 = (F - sqrt(F^2 - 4 det^2)) / 2
    F = L1 ** 2 + 2 * L2 ** 2 + 2 * L1 * L2 * np.cos(Q[:, 1])
    det = L1 * L2 * np.sin(Q[:, 1])
    smin = np.sqrt(np.maximum((F - np.sqrt(np.maximum(F ** 2 - 4 * det ** 2, 0))) / 2, 0))
    np.testing.assert_allclose(robot.min_singular_value_batch(Q, "position"), smin, atol=2e-8)


@pytest.mark.parametrize("part", ["full", "position", "orientation"])
def test_ur5_measures_and_ellipsoids_match_pinocchio(ur5, part):
    robot, pm, pd, fid = ur5
    rng = np.random.default_rng(1)
    Q = rng.uniform(-np.pi, np.pi, (20, 6))
    rows = {"full": slice(0, 6), "position": slice(0, 3), "orientation": slice(3, 6)}[part]
    s_all = []
    for q in Q:
        J_local, J_lwa = pin_jacobians(pm, pd, fid, q)
        J = J_local if part == "full" else J_lwa[rows]
        s = np.linalg.svd(J, compute_uv=False)
        s_all.append(s)
        assert robot.min_singular_value(q, part) == pytest.approx(s[-1], abs=1e-12)
        assert robot.condition_number(q, part) == pytest.approx(s[0] / s[-1], rel=1e-9)
        assert robot.manipulability(q, part) == pytest.approx(np.prod(s), abs=1e-12)
        assert robot.isotropy(q, part) == pytest.approx(s[-1] / s[0], rel=1e-9)
        # velocity ellipsoid: U diag(sigma^2) U^T = J J^T of the base-axes Jacobian ([omega; v] for "full")
        Jm = np.vstack([J_lwa[3:], J_lwa[:3]]) if part == "full" else J
        e = robot.velocity_ellipsoid(q, part)
        np.testing.assert_allclose(e.axes @ np.diag(e.lengths ** 2) @ e.axes.T, Jm @ Jm.T, atol=1e-12)
        np.testing.assert_allclose(e.lengths, s, atol=1e-12)
        f = robot.force_ellipsoid(q, part)
        np.testing.assert_allclose(f.lengths, 1 / s[::-1], rtol=1e-9)
        np.testing.assert_allclose(np.abs(f.axes[:, 0]), np.abs(e.axes[:, -1]), atol=1e-9)
    s_all = np.array(s_all)
    np.testing.assert_allclose(robot.min_singular_value_batch(Q, part), s_all[:, -1], atol=1e-12)
    np.testing.assert_allclose(robot.manipulability_batch(Q, part), np.prod(s_all, axis=1), atol=1e-12)
    np.testing.assert_allclose(robot.condition_number_batch(Q, part), s_all[:, 0] / s_all[:, -1], rtol=1e-9)
    eb = robot.velocity_ellipsoid_batch(Q, part)
    assert eb.axes.shape == (20, s_all.shape[1], s_all.shape[1])
    np.testing.assert_allclose(eb.lengths, s_all, atol=1e-12)


def _shoulder_singular_q(robot):
    """A UR5 configuration whose wrist point (where the axes of joints 5 and 6 meet) lies in the plane of the
    axes of joints 1 and 2 (the plane through the base axis): found by root finding on the shoulder angle."""
    def distance(q2):
        q = np.array([0.3, q2, 1.2, -0.4, 0.8, 0.2])
        Js = robot.jacobian_space(q)
        w5, v5, w6, v6 = Js[:3, 4], Js[3:, 4], Js[:3, 5], Js[3:, 5]
        p5 = np.cross(w5, v5)  # the point of axis 5 closest to the origin
        # intersection with axis 6: p5 + t w5 with (p5 + t w5 - p6) . (w5 x w6) = 0 and on axis 6
        p6 = np.cross(w6, v6)
        A = np.array([w5, -w6]).T
        t = np.linalg.lstsq(A, p6 - p5, rcond=None)[0]
        wrist = p5 + t[0] * w5
        n = np.cross(Js[:3, 0], Js[:3, 1])  # normal of the plane of axes 1 and 2 (both through the base axis)
        return float(n @ (wrist - np.cross(Js[:3, 1], Js[3:, 1]))) / np.linalg.norm(n)
    q2 = brentq(distance, -3.0, 0.0) if distance(-3.0) * distance(0.0) < 0 else brentq(distance, 0.0, 3.0)
    return np.array([0.3, q2, 1.2, -0.4, 0.8, 0.2])


def test_ur5_known_singularities_have_zero_min_singular_value(ur5):
    robot, pm, pd, fid = ur5
    cases = {
        "wrist aligned (q5 = 0)": np.array([0.4, -1.0, 1.3, -0.7, 0.0, 0.9]),
        "elbow straight (q3 = 0)": np.array([0.4, -1.0, 0.0, -0.7, 1.1, 0.9]),
        "wrist point on the base axis plane": _shoulder_singular_q(robot),
    }
    regular = np.array([0.4, -1.0, 1.3, -0.7, 1.1, 0.9])
    for name, q in cases.items():
        s_pin = np.linalg.svd(pin_jacobians(pm, pd, fid, q)[0], compute_uv=False)
        assert s_pin[-1] < 1e-9, (name, s_pin)  # the oracle agrees that q is singular
        assert robot.min_singular_value(q) < 1e-9, name
        assert robot.condition_number(q) > 1e8, name
        assert robot.manipulability(q) < 1e-9, name
    assert robot.min_singular_value(regular) > 0.01
    # along a path through the wrist singularity the measure goes to zero linearly in |q5|
    Q = np.tile(regular, (7, 1))
    Q[:, 4] = np.linspace(-0.3, 0.3, 7)
    s = robot.min_singular_value_batch(Q)
    assert s[3] < 1e-12 and np.all(s[:3] > s[3]) and np.all(np.diff(s[:4]) < 0) and np.all(np.diff(s[3:]) > 0)


def test_fewer_joints_than_rows_and_bad_input():
    robot = RobotModel.load("ypp3")
    q = np.array([0.2, 0.4, 0.9])
    e = robot.velocity_ellipsoid(q, part="full")
    assert e.axes.shape == (6, 6) and e.lengths.shape == (6,)
    assert np.all(e.lengths[3:] == 0.0) and np.all(robot.force_ellipsoid(q, "full").lengths[:3] == np.inf)
    with pytest.raises(InputError, match="part"):
        robot.manipulability(q, part="linear")
    with pytest.raises(InputError):
        robot.min_singular_value([0.0, np.nan, 0.0])
    with pytest.raises(InputError, match=r"\(N, 3\)"):
        robot.condition_number_batch(np.zeros((4, 2)))


def test_solution_measures_of_ik_solutions():
    """What compute_ik reports per solution: the planar 2R's closed-form IK pair (elbow up/down) has
    manipulability l1 l2 |sin q2| on its position Jacobian; a 6R pose IK uses the full body Jacobian."""
    from manip_core.analysis.manipulability import solution_measures
    robot = RobotModel.load("planar2r")
    target = robot.fk(np.array([0.4, 1.1]))
    sols = robot.ik_all(target[:3, 3])
    assert len(sols) == 2
    part, smin, w = solution_measures(robot, sols)
    assert part == "position"
    np.testing.assert_allclose(w, [L1 * L2 * abs(np.sin(q[1])) for q in sols], rtol=1e-12)
    assert np.all(smin > 0) and np.all(smin <= w / smin + 1e-12)   # sigma_min <= sigma_max = w / sigma_min
    ur5 = RobotModel.load("ur5")
    part, smin, w = solution_measures(ur5, [np.zeros(6)])
    assert part == "full" and smin.shape == (1,) and smin[0] < 1e-9   # zero pose: wrist and shoulder singular
    assert solution_measures(ur5, [np.zeros(6)], position_only=True)[0] == "position"
    assert solution_measures(ur5, np.zeros((0, 6)))[1].shape == (0,)
