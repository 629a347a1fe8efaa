"""Slider moves: a quintic from the measured position, within the limits and a fraction of the velocity limits."""
import numpy as np
import pytest

from manip_core.errors import InputError
from manip_view.command import hold, slider_move

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


def test_short_moves_take_the_minimum_duration_and_hold_is_one_point():
    t, p, _ = slider_move([0, 0, 0], [0.001, 0, 0], LO, HI, V, min_duration_s=0.5)
    assert t[-1] - t[0] == pytest.approx(0.5)
    t, p, v = hold([0.1, 0.2, 0.3])
    assert t.shape == (1,) and p.tolist() == [[0.1, 0.2, 0.3]] and not v.any()
    with pytest.raises(InputError, match="q_target"):
        slider_move([0, 0, 0], [np.nan, 0, 0], LO, HI, V)
