"""Trapezoidal, TOPP-RA and jerk-limited time scaling: sampled at 1 kHz no limit is exceeded; durations
against the closed form of the trapezoid and against toppra's optimum."""
import math

import numpy as np
import pytest

from manip_planning.jerk_limited import jerk_limited_trajectory
from manip_planning.planning import PlanRequest, Planner, PlannerSettings
from manip_planning.topp import toppra_trajectory
from manip_planning.trapezoidal import segment_profile, trapezoidal_trajectory

DT = 0.001
V = np.array([1.0, 2.0, 1.5])
A = np.array([2.0, 3.0, 4.0])
J = np.array([20.0, 30.0, 40.0])
W = np.array([[0.0, 0.0, 0.0], [1.0, 0.5, -0.2], [1.5, 1.5, 0.3], [1.4, 1.5, 0.3]])
TOL = 1e-9


def _within(traj, v, a, j=None, tol=TOL):
    t, q = traj.times, traj.positions
    assert np.all(np.diff(t) > 0) and np.all(np.diff(t) <= DT + 1e-12)
    assert np.all(np.abs(traj.velocities) <= v * (1 + tol) + tol)
    assert np.all(np.abs(traj.accelerations) <= a * (1 + tol) + tol)
    # finite differences of the positions: the mean velocity over each 1 ms step is within the limit too
    fd = np.diff(q, axis=0) / np.diff(t)[:, None]
    assert np.all(np.abs(fd) <= v * (1 + 1e-6))
    if j is not None:
        jerk = np.diff(traj.accelerations, axis=0) / np.diff(t)[:, None]
        assert np.all(np.abs(jerk) <= j * (1 + 1e-6) + 1e-6)


def _passes_through(traj, W):
    for w in W:
        assert np.min(np.max(np.abs(traj.positions - w), axis=1)) < 1e-9
    assert np.array_equal(traj.positions[0], W[0]) and np.allclose(traj.positions[-1], W[-1], atol=1e-12)
    assert np.allclose(traj.velocities[[0, -1]], 0.0, atol=1e-9)


def test_trapezoid_closed_form():
    # joint 0 moves 1 rad at 1 rad/s, 2 rad/s^2: 0.5 s up, 0.5 s cruise, 0.5 s down = 1.5 s (the slowest joint)
    Vs, As, ta, T = segment_profile([1.0, 0.5, -0.2], V, A)
    assert (Vs, As, ta, T) == pytest.approx((1.0, 2.0, 0.5, 1.5))
    # a short move never reaches the peak: 0.1 rad at 2 rad/s^2 gives 2 sqrt(0.1 / 2) s
    assert segment_profile([0.1, 0, 0], V, A)[3] == pytest.approx(2 * math.sqrt(0.05))
    tr = trapezoidal_trajectory(W, V, A, DT)
    _within(tr, V, A)
    _passes_through(tr, W)
    assert tr.duration == pytest.approx(sum(segment_profile(b - a, V, A)[3] for a, b in zip(W[:-1], W[1:])))
    # synchronised: every sample lies on its straight segment
    seg0 = tr.positions[tr.times <= 1.5]
    d = W[1] - W[0]
    resid = seg0 - np.outer(seg0 @ d / (d @ d), d)
    assert np.max(np.abs(resid)) < 1e-12


def test_toppra_is_time_optimal_and_within_limits():
    pytest.importorskip("toppra")
    tr = toppra_trajectory(W[:3], V, A, DT)
    _within(tr, V, A)
    assert np.array_equal(tr.positions[0], W[0]) and np.allclose(tr.positions[-1], W[2], atol=1e-12)
    # along a smooth path it need not stop at the corner: faster than the trapezoids on the polyline
    assert tr.duration < trapezoidal_trajectory(W[:3], V, A, DT).duration
    # on a straight line the trapezoid is the optimum: TOPP-RA (1 % limit margin) comes within a few percent
    line = W[:2]
    t_opt = segment_profile(line[1] - line[0], V, A)[3]
    t_topp = toppra_trajectory(line, V, A, DT).duration
    assert t_opt <= t_topp <= 1.05 * t_opt


def test_toppra_rejects_a_colliding_spline():
    pytest.importorskip("toppra")

    class Wall:   # "collides" wherever joint 0 goes beyond 1 rad, the corner of an L-shaped polyline
        def are_free(self, Q):
            return np.asarray(Q)[:, 0] <= 1.0 + 1e-12

    corner = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [1.0, 1.0, 0.0]])
    assert toppra_trajectory(corner, V, A, DT, checker=Wall()) is None      # the spline cuts past the corner
    assert toppra_trajectory(corner[:2], V, A, DT, checker=Wall()) is not None


def test_jerk_limited_within_all_limits():
    pytest.importorskip("ruckig")
    tr = jerk_limited_trajectory(W, V, A, J, DT)
    _within(tr, V, A, J, tol=1e-6)
    _passes_through(tr, W)
    # no faster than the (jerk-unlimited) optimum, and close to it when the jerk limit is high
    t_trap = trapezoidal_trajectory(W, V, A, DT).duration
    assert tr.duration >= t_trap - 1e-9
    assert jerk_limited_trajectory(W, V, A, J * 1000, DT).duration == pytest.approx(t_trap, rel=0.02)


@pytest.mark.parametrize("profile", ["trapezoidal", "toppra", "jerk_limited"])
def test_planner_profiles(ur5, profile):
    pytest.importorskip("ruckig" if profile == "jerk_limited" else "toppra")
    planner = Planner(ur5)
    q0 = np.array([0.0, -1.2, 1.0, -1.4, -1.5, 0.0])
    q1 = q0 + [0.8, -0.3, 0.4, 0.2, 0.5, -0.6]
    res = planner.plan(PlanRequest(start=q0, goal_joints=q1, profile=profile, sample_period=DT))
    assert res.success, res.message
    _within(res.trajectory, planner.velocity_limits, planner.acceleration_limits, tol=1e-6)
    assert np.allclose(res.trajectory.positions[-1], q1, atol=1e-9)
    bad = planner.plan(PlanRequest(start=q0, goal_joints=q1, profile=profile, duration=5.0))
    assert not bad.success and "duration" in bad.message
