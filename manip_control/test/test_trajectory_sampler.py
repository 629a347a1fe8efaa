"""trajectory_sampler: values and derivatives against analytic polynomials; every validation error."""
import math

import numpy as np
import pytest

from manip_control.trajectory_sampler import (InvalidJoints, InvalidTrajectory, Trajectory, TrajectorySampler,
                                               hermite_coefficients, validate)

NAMES = ("a", "b", "c")
LOWER = np.array([-3.0, -3.0, -3.0])
UPPER = np.array([3.0, 3.0, 3.0])


def poly(coeffs):
    """p, p', p'' of sum c_k t^k, coeffs (k+1, n), as functions of t."""
    c = np.asarray(coeffs, float)
    k = np.arange(c.shape[0])

    def p(t):
        return (t ** k) @ c

    def v(t):
        return np.where(k >= 1, k * t ** np.maximum(k - 1, 0), 0.0) @ c

    def a(t):
        return np.where(k >= 2, k * (k - 1) * t ** np.maximum(k - 2, 0), 0.0) @ c
    return p, v, a


def traj_from(p, v, a, times, with_vel, with_acc):
    return Trajectory(NAMES, np.array(times, float), np.array([p(t) for t in times]),
                      np.array([v(t) for t in times]) if with_vel else None,
                      np.array([a(t) for t in times]) if with_acc else None)


@pytest.mark.parametrize("kind,degree,with_vel,with_acc", [("quintic", 5, True, True), ("cubic", 3, True, False)])
def test_hermite_reproduces_polynomial(kind, degree, with_vel, with_acc):
    # The Hermite interpolant of a polynomial of its own degree is the polynomial itself: values and
    # derivatives at and between the knots must match the analytic ones.
    rng = np.random.default_rng(1)
    c = rng.uniform(-0.3, 0.3, (degree + 1, 3))
    p, v, a = poly(c)
    times = [0.0, 0.4, 1.1, 1.5, 2.0]
    tr = validate(traj_from(p, v, a, times, with_vel, with_acc), NAMES, LOWER * 10, UPPER * 10)
    assert tr.interpolation == kind
    s = TrajectorySampler(tr)
    for t in list(times) + list(np.linspace(0.0, 2.0, 41)) + [0.4 - 1e-9, 0.4 + 1e-9]:
        q, qd, qdd = s.sample(t)
        np.testing.assert_allclose(q, p(t), atol=1e-10)
        np.testing.assert_allclose(qd, v(t), atol=1e-8)
        if kind == "quintic":
            np.testing.assert_allclose(qdd, a(t), atol=1e-7)


def test_cubic_matches_knot_values_but_not_a_quintic():
    # Cubic Hermite through a quintic still meets positions and velocities at the knots.
    rng = np.random.default_rng(2)
    p, v, a = poly(rng.uniform(-0.3, 0.3, (6, 3)))
    times = [0.0, 0.5, 1.0]
    s = TrajectorySampler(validate(traj_from(p, v, a, times, True, False), NAMES))
    for t in times:
        q, qd, _ = s.sample(t)
        np.testing.assert_allclose(q, p(t), atol=1e-12)
        np.testing.assert_allclose(qd, v(t), atol=1e-12)


def test_linear_positions_only():
    P = np.array([[0.0, 1.0, -1.0], [1.0, 1.0, 0.0], [0.5, 2.0, 0.0]])
    tr = validate(Trajectory(NAMES, np.array([0.0, 2.0, 3.0]), P), NAMES)
    assert tr.interpolation == "linear"
    s = TrajectorySampler(tr)
    q, qd, qdd = s.sample(0.5)
    np.testing.assert_allclose(q, P[0] + 0.25 * (P[1] - P[0]))
    np.testing.assert_allclose(qd, (P[1] - P[0]) / 2.0)
    np.testing.assert_allclose(qdd, 0.0)
    q, qd, _ = s.sample(2.5)
    np.testing.assert_allclose(q, 0.5 * (P[1] + P[2]))
    np.testing.assert_allclose(qd, P[2] - P[1])


@pytest.mark.parametrize("with_vel,with_acc", [(False, False), (True, False), (True, True)])
def test_velocity_is_derivative_of_position(with_vel, with_acc):
    # Velocities (and accelerations) sampled are the derivatives of the sampled positions: central
    # differences away from the knots agree.
    rng = np.random.default_rng(3)
    times = np.array([0.0, 0.3, 0.9, 1.2])
    P = rng.uniform(-1, 1, (4, 3))
    V = rng.uniform(-1, 1, (4, 3)) if with_vel else None
    A = rng.uniform(-1, 1, (4, 3)) if with_acc else None
    s = TrajectorySampler(validate(Trajectory(NAMES, times, P, V, A), NAMES))
    h = 1e-6
    for t in [0.1, 0.5, 0.77, 1.0, 1.15]:
        q, qd, qdd = s.sample(t)
        qp, qdp, _ = s.sample(t + h)
        qm, qdm, _ = s.sample(t - h)
        np.testing.assert_allclose((qp - qm) / (2 * h), qd, atol=1e-6)
        np.testing.assert_allclose((qdp - qdm) / (2 * h), qdd, atol=1e-4)


def test_start_state_before_first_point():
    # First point at t = 1 s: the sampler interpolates from the start state at t = 0 (quintic here), so
    # a quintic polynomial sampled at 0 and 1 is reproduced on [0, 1].
    rng = np.random.default_rng(4)
    p, v, a = poly(rng.uniform(-0.3, 0.3, (6, 3)))
    tr = validate(traj_from(p, v, a, [1.0, 2.0], True, True), NAMES)
    s = TrajectorySampler(tr, (p(0.0), v(0.0), a(0.0)), start_time=0.0)
    assert s.first_time == 0.0 and s.end_time == 2.0
    for t in np.linspace(0.0, 2.0, 21):
        q, qd, qdd = s.sample(t)
        np.testing.assert_allclose(q, p(t), atol=1e-10)
        np.testing.assert_allclose(qd, v(t), atol=1e-9)
        np.testing.assert_allclose(qdd, a(t), atol=1e-8)


def test_start_state_linear_and_start_time():
    P = np.array([[1.0, 1.0, 1.0]])
    tr = validate(Trajectory(NAMES, np.array([2.0]), P), NAMES)
    s = TrajectorySampler(tr, (np.zeros(3), np.ones(3)), start_time=1.0)
    # before start_time: the start positions are held
    q, qd, _ = s.sample(0.5)
    np.testing.assert_allclose(q, 0.0)
    np.testing.assert_allclose(qd, 0.0)
    q, qd, _ = s.sample(1.5)
    np.testing.assert_allclose(q, 0.5)
    np.testing.assert_allclose(qd, 1.0)
    # start_time after the first point: no start segment
    s2 = TrajectorySampler(tr, (np.zeros(3), np.zeros(3)), start_time=2.5)
    np.testing.assert_allclose(s2.sample(2.6)[0], 1.0)


def test_hold_after_end_and_before_first_point_without_start_state():
    times = np.array([0.5, 1.0])
    P = np.array([[0.0, 0.0, 0.0], [1.0, 2.0, 3.0]])
    V = np.array([[0.0, 0.0, 0.0], [0.5, 0.5, 0.5]])
    s = TrajectorySampler(validate(Trajectory(NAMES, times, P, V), NAMES))
    q, qd, qdd = s.sample(5.0)
    np.testing.assert_allclose(q, P[1])
    np.testing.assert_allclose(qd, 0.0)
    np.testing.assert_allclose(qdd, 0.0)
    q, qd, _ = s.sample(1.0)  # at the last point: its velocity
    np.testing.assert_allclose(qd, V[1])
    q, qd, _ = s.sample(0.1)
    np.testing.assert_allclose(q, P[0])
    np.testing.assert_allclose(qd, 0.0)
    assert s.finished(1.0) and not s.finished(0.99)


def test_single_point():
    s = TrajectorySampler(validate(Trajectory(NAMES, np.array([0.0]), np.ones((1, 3))), NAMES))
    for t in (-1.0, 0.0, 1.0):
        np.testing.assert_allclose(s.sample(t)[0], 1.0)


def test_hermite_coefficients_boundary_values():
    T = 0.7
    p0, v0, a0, p1, v1, a1 = (np.array([x]) for x in (0.1, -0.2, 0.3, 1.0, 0.4, -0.5))
    from manip_control.trajectory_sampler import _eval
    c = hermite_coefficients(T, p0, v0, a0, p1, v1, a1, "quintic")
    for s, exp in ((0.0, (p0, v0, a0)), (T, (p1, v1, a1))):
        got = _eval(c, s)
        for g, e in zip(got, exp):
            np.testing.assert_allclose(g, e, atol=1e-12)


def test_validate_reorders_into_model_order():
    tr = Trajectory(("c", "a", "b"), np.array([1.0]), np.array([[3.0, 1.0, 2.0]]), np.array([[0.3, 0.1, 0.2]]))
    out = validate(tr, NAMES)
    assert out.joint_names == NAMES
    np.testing.assert_allclose(out.positions, [[1.0, 2.0, 3.0]])
    np.testing.assert_allclose(out.velocities, [[0.1, 0.2, 0.3]])


class Pt:
    def __init__(self, t, positions, velocities=(), accelerations=()):
        self.time_from_start = t
        self.positions, self.velocities, self.accelerations = positions, velocities, accelerations


class Dur:
    def __init__(self, sec, nanosec):
        self.sec, self.nanosec = sec, nanosec


def test_from_points_message_like():
    raw = Trajectory.from_points(NAMES, [Pt(Dur(0, 500_000_000), [0, 0, 0], [0, 0, 0]),
                                         Pt(Dur(1, 0), [1, 1, 1], [0, 0, 0])])
    tr = validate(raw, NAMES)
    np.testing.assert_allclose(tr.times, [0.5, 1.0])
    assert tr.interpolation == "cubic"


@pytest.mark.parametrize("names,points,exc,text", [
    ((), [Pt(1.0, [])], InvalidJoints, "names no joints"),
    (("a", "a", "b"), [Pt(1.0, [0, 0, 0])], InvalidJoints, "repeated: a"),
    (("a", "b", "x"), [Pt(1.0, [0, 0, 0])], InvalidJoints, "unknown joint(s) x"),
    (("a", "b"), [Pt(1.0, [0, 0])], InvalidJoints, "lacks joint(s) c"),
    (NAMES, [], InvalidTrajectory, "no points"),
    (NAMES, [Pt(1.0, [0, 0, 0]), Pt(0.5, [0, 0, 0])], InvalidTrajectory, "not strictly increasing"),
    (NAMES, [Pt(1.0, [0, 0, 0]), Pt(1.0, [0, 0, 0])], InvalidTrajectory, "not strictly increasing"),
    (NAMES, [Pt(-0.5, [0, 0, 0])], InvalidTrajectory, "negative"),
    (NAMES, [Pt(math.inf, [0, 0, 0])], InvalidTrajectory, "NaN or inf"),
    (NAMES, [Pt(math.nan, [0, 0, 0])], InvalidTrajectory, "NaN or inf"),
    (NAMES, [Pt(1.0, [0, math.nan, 0])], InvalidTrajectory, "NaN or inf in positions"),
    (NAMES, [Pt(1.0, [0, 0, 0], [0, math.inf, 0])], InvalidTrajectory, "NaN or inf in velocities"),
    (NAMES, [Pt(1.0, [0, 0, 0], [0, 0, 0], [math.nan, 0, 0])], InvalidTrajectory, "NaN or inf in accelerations"),
    (NAMES, [Pt(1.0, [0, 0])], InvalidTrajectory, "point 0 has 2 positions for 3 joints"),
    (NAMES, [Pt(1.0, [0, 0, 0], [0, 0])], InvalidTrajectory, "2 velocities for 3 joints"),
    (NAMES, [Pt(1.0, [0, 0, 0], [0, 0, 0]), Pt(2.0, [0, 0, 0])], InvalidTrajectory, "not for point(s) [1]"),
    (NAMES, [Pt(1.0, [0, 0, 0], [], [0, 0, 0])], InvalidTrajectory, "accelerations are given without velocities"),
    (NAMES, [Pt(1.0, [0, 3.5, 0])], InvalidTrajectory, "position 3.5 of joint b is beyond its limits"),
    (NAMES, [Pt(1.0, [0, 0, -3.1])], InvalidTrajectory, "joint c is beyond its limits"),
])
def test_validation_errors(names, points, exc, text):
    with pytest.raises(exc) as err:
        validate(Trajectory.from_points(names, points), NAMES, LOWER, UPPER)
    assert text in str(err.value)


def test_invalid_joints_is_an_invalid_trajectory():
    assert issubclass(InvalidJoints, InvalidTrajectory) and issubclass(InvalidTrajectory, ValueError)


def test_array_trajectory_row_count_mismatch():
    with pytest.raises(InvalidTrajectory, match="rows of positions"):
        validate(Trajectory(NAMES, np.array([1.0, 2.0]), np.zeros((1, 3))), NAMES)


def test_limits_margin_accepts_rounding():
    validate(Trajectory(NAMES, np.array([1.0]), np.array([[3.0 + 1e-12, 0, 0]])), NAMES, LOWER, UPPER)
