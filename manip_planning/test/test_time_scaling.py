"""Cubic and quintic time scalings: boundary conditions, derivatives, limits, shortest durations."""
import math

import numpy as np
import pytest

from manip_planning import time_scaling as ts
from manip_planning.joint_path import LinePath, PlanningError, SplinePath, joint_line_trajectory, time_scale


@pytest.mark.parametrize("profile", ts.PROFILES)
def test_boundary_conditions(profile):
    T = 1.7
    s, sd, sdd = ts.scaling(profile, np.array([0.0, T]), T)
    assert s.tolist() == [0.0, 1.0]
    assert np.allclose(sd, 0.0, atol=1e-15)
    if profile == ts.QUINTIC:
        assert np.allclose(sdd, 0.0, atol=1e-12)
    else:
        assert sdd[0] == pytest.approx(6.0 / T**2) and sdd[1] == pytest.approx(-6.0 / T**2)


@pytest.mark.parametrize("profile", ts.PROFILES)
def test_derivatives_and_peaks(profile):
    T = 2.3
    t = np.linspace(0.0, T, 20001)
    s, sd, sdd = ts.scaling(profile, t, T)
    assert np.all(np.diff(s) >= 0.0)                               # monotone
    h = t[1] - t[0]
    assert np.allclose(np.gradient(s, h)[1:-1], sd[1:-1], atol=1e-6)
    assert np.allclose(np.gradient(sd, h)[1:-1], sdd[1:-1], atol=1e-5)
    assert np.max(sd) == pytest.approx(ts.PEAK_VELOCITY[profile] / T, rel=1e-6)
    assert np.max(np.abs(sdd)) == pytest.approx(ts.PEAK_ACCELERATION[profile] / T**2, rel=1e-6)
    assert s.dtype == sd.dtype == sdd.dtype == np.float64


def test_bad_inputs():
    with pytest.raises(ValueError):
        ts.scaling("septic", 0.0, 1.0)
    with pytest.raises(ValueError):
        ts.scaling(ts.CUBIC, 0.0, 0.0)
    with pytest.raises(ValueError):
        ts.minimum_duration([1.0], [1.0], [1.0], velocity_scaling=1.5)
    with pytest.raises(ValueError):
        ts.minimum_duration([1.0], [0.0], [1.0])


@pytest.mark.parametrize("profile", ts.PROFILES)
@pytest.mark.parametrize("vs,as_", [(1.0, 1.0), (0.3, 0.5), (1.0, 0.05)])
def test_shortest_joint_move_respects_limits_and_is_tight(profile, vs, as_):
    rng = np.random.default_rng(3)
    q0 = rng.uniform(-2, 2, 6)
    q1 = rng.uniform(-2, 2, 6)
    vmax = np.array([3.15, 3.15, 3.15, 3.2, 3.2, 3.2])
    amax = np.array([4.0, 4.0, 5.0, 8.0, 8.0, 8.0])
    tr = joint_line_trajectory(q0, q1, profile, velocity_limits=vmax, acceleration_limits=amax,
                               velocity_scaling=vs, acceleration_scaling=as_, sample_period=0.001)
    v_ratio = np.max(np.abs(tr.velocities) / (vmax * vs))
    a_ratio = np.max(np.abs(tr.accelerations) / (amax * as_))
    assert v_ratio <= 1.0 + 1e-9 and a_ratio <= 1.0 + 1e-9
    assert max(v_ratio, a_ratio) > 0.99           # the shortest: one limit is reached
    T = ts.minimum_duration(q1 - q0, vmax, amax, profile, vs, as_)
    assert tr.duration == pytest.approx(T, rel=1e-9)
    assert np.allclose(tr.positions[0], q0) and np.allclose(tr.positions[-1], q1, atol=0)
    assert np.allclose(tr.velocities[[0, -1]], 0.0)
    for a in (tr.times, tr.positions, tr.velocities, tr.accelerations):
        assert a.dtype == np.float64
    assert np.all(np.diff(tr.times) > 0)


def test_given_duration_and_too_short_duration():
    q0, q1 = np.zeros(2), np.array([1.0, -0.5])
    lim = dict(velocity_limits=[1.0, 1.0], acceleration_limits=[2.0, 2.0])
    tr = joint_line_trajectory(q0, q1, "cubic", duration=5.0, sample_period=0.1, **lim)
    assert tr.duration == 5.0 and len(tr) == 51
    assert tr.times[-1] == 5.0
    T_min = ts.minimum_duration(q1 - q0, [1.0, 1.0], [2.0, 2.0], "cubic")
    with pytest.raises(PlanningError) as e:
        joint_line_trajectory(q0, q1, "cubic", duration=0.9 * T_min, **lim)
    assert e.value.code == PlanningError.INVALID_INPUT and "shorter" in e.value.message


def test_spline_path_time_scaling_respects_limits():
    W = np.array([[0.0, 0.0, 0.0], [0.5, 1.0, -0.3], [1.2, 0.4, 0.2], [1.5, -0.5, 0.9]])
    path = SplinePath(W)
    s = np.linspace(0, 1, 7)
    q, d1, d2 = path.derivatives(s)
    assert np.allclose(q[0], W[0]) and np.allclose(q[-1], W[-1])
    vmax, amax = np.array([1.0, 2.0, 1.5]), np.array([3.0, 3.0, 3.0])
    tr = time_scale(path, "quintic", velocity_limits=vmax, acceleration_limits=amax, sample_period=0.002)
    assert np.all(np.abs(tr.velocities) <= vmax + 1e-9)
    assert np.all(np.abs(tr.accelerations) <= amax + 1e-9)
    # the derivatives are consistent with the positions
    qd_fd = np.gradient(tr.positions, tr.times, axis=0)
    assert np.max(np.abs(qd_fd[1:-1] - tr.velocities[1:-1])) < 1e-2


def test_sample_times_end_exactly_at_T():
    t = ts.sample_times(1.0, 0.3)
    assert t[0] == 0.0 and t[-1] == 1.0 and np.all(np.diff(t) > 0)
    assert len(ts.sample_times(1.0, 0.02)) == 51
    assert math.isclose(ts.sample_times(1.01, 0.02)[-1], 1.01)


def test_zero_motion_gives_a_single_point():
    tr = time_scale(LinePath([0.1, 0.2], [0.1, 0.2]), "quintic", velocity_limits=[1, 1], acceleration_limits=[1, 1])
    assert len(tr) == 1 and tr.duration == 0.0
