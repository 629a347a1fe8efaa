"""Slider moves: a quintic from the measured position, within the limits and a fraction of the velocity limits."""
import numpy as np
import pytest

from manip_core.errors import InputError
from types import SimpleNamespace

from manip_core import RobotModel
from manip_view.command import slider_move

LO, HI, V = np.array([-1.0, -2.0, -0.5]), np.array([1.0, 2.0, 0.5]), np.array([2.0, 1.0, 0.2])


def test_move_starts_where_the_arm_is_and_respects_limits():
    q0 = np.array([0.2, -1.0, 0.1])
    t, p, v = slider_move(q0, [5.0, 1.5, -0.4], LO, HI, V, speed_fraction=0.5)
    np.testing.assert_allclose(p[0], q0)           # no jump
    np.testing.assert_allclose(p[-1], [1.0, 1.5, -0.4])  # clipped into [LO, HI]
    np.testing.assert_allclose(v[0], 0, atol=1e-12) and np.testing.assert_allclose(v[-1], 0, atol=1e-12)
    assert np.all(np.diff(t) > 0) and t[0] > 0
    # Peak speed of each joint from finite differences of a fine resampling: <= 0.5 of its limit, reached by one.
    tf = np.linspace(t[0], t[-1], 20001)
    pf = np.column_stack([np.interp(tf, t, p[:, j]) for j in range(3)])
    duration = t[-1] - t[0]
    s = (tf - t[0]) / duration
    exact = p[0] + np.outer(10 * s**3 - 15 * s**4 + 6 * s**5, p[-1] - p[0])
    peak = np.abs(np.diff(exact, axis=0) / np.diff(tf)[:, None]).max(axis=0)
    assert np.all(peak <= 0.5 * V * (1 + 1e-3)) and np.any(peak >= 0.5 * V * (1 - 1e-3))
    np.testing.assert_allclose(pf[::2000], exact[::2000], atol=0.02)  # the samples follow the quintic


def test_short_moves_take_the_minimum_duration():
    t, p, _ = slider_move([0, 0, 0], [0.001, 0, 0], LO, HI, V, min_duration_s=0.5)
    assert t[-1] - t[0] == pytest.approx(0.5)
    with pytest.raises(InputError, match="q_target"):
        slider_move([0, 0, 0], [np.nan, 0, 0], LO, HI, V)


def test_the_controllers_validator_accepts_a_slider_move():
    from manip_control.trajectory_sampler import Trajectory, validate  # what the controller node runs on it

    robot = RobotModel.load("ur5")
    q0 = np.array([0.3, -1.2, 1.4, -0.8, 0.6, 0.2])
    t, p, v = slider_move(q0, q0 + 0.7, robot.joint_lower, robot.joint_upper, robot.velocity_limits)
    points = [SimpleNamespace(time_from_start=float(ti), positions=pi.tolist(), velocities=vi.tolist(),
                              accelerations=[]) for ti, pi, vi in zip(t, p, v)]
    traj = validate(Trajectory.from_points(robot.joint_names, points), robot.joint_names, robot.joint_lower,
                    robot.joint_upper)
    assert traj.duration == pytest.approx(t[-1])
