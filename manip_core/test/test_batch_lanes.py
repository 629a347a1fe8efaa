"""Batched inverse dynamics, forward dynamics and mass matrices in SIMD lanes (manip_core._lane_kernels)
against the single-call kernels, which test_model_vs_pinocchio.py checks against Pinocchio: every lane, the
tail that does not fill a group, groups with NaN, custom gravity, a tip wrench, prismatic and mimic joints
(Panda finger chain)."""
import numpy as np
import pytest

from manip_core import RobotModel
from manip_core._lane_kernels import W
from manip_core.errors import InputError
from manip_core.reference_robots import PANDA_REL, UR5_REL, example_robot

CHAINS = {"ur5": (UR5_REL, "ee_link"), "panda": (PANDA_REL, "panda_hand_tcp"),
          "panda_finger": (PANDA_REL, "panda_leftfinger")}


@pytest.fixture(scope="module", params=list(CHAINS))
def model(request):
    rel, tip = CHAINS[request.param]
    return RobotModel.from_urdf(example_robot(rel), tip_link=tip)


def _states(m, n, seed):
    rng = np.random.default_rng(seed)
    lo = np.where(np.isfinite(m.joint_lower), m.joint_lower, -np.pi)
    hi = np.where(np.isfinite(m.joint_upper), m.joint_upper, np.pi)
    return rng.uniform(lo, hi, (n, m.dof)), rng.uniform(-2, 2, (n, m.dof)), rng.uniform(-3, 3, (n, m.dof))


@pytest.mark.parametrize("n", [1, W - 1, W, 5 * W + 3])
def test_lanes_match_single_calls(model, n):
    Q, QD, QDD = _states(model, n, n)
    g = np.array([0.5, -1.0, -9.0])
    f_tip = np.array([0.3, -0.2, 0.1, 4.0, -5.0, 6.0])
    for kw in ({}, {"gravity": g, "f_tip": f_tip}):
        got = model.inverse_dynamics_batch(Q, QD, QDD, **kw)
        expected = np.array([model.inverse_dynamics(q, qd, qdd, **kw) for q, qd, qdd in zip(Q, QD, QDD)])
        scale = max(1.0, float(np.abs(expected).max()))
        assert np.abs(got - expected).max() <= 1e-13 * scale


def test_nan_row_in_a_group_is_reported(model):
    Q, QD, QDD = _states(model, 3 * W, 1)
    QD[W + 2, 0] = np.nan
    with pytest.raises(InputError, match=rf"1 of {3 * W} configurations failed: rows \[{W + 2}\]"):
        model.inverse_dynamics_batch(Q, QD, QDD)


@pytest.mark.parametrize("n", [W - 1, 5 * W + 3])
def test_forward_dynamics_lanes_match_single_calls(model, n):
    Q, QD, TAU = _states(model, n, 100 + n)
    TAU *= 5.0
    g = np.array([0.5, -1.0, -9.0])
    f_tip = np.array([0.3, -0.2, 0.1, 4.0, -5.0, 6.0])
    for kw in ({}, {"gravity": g, "f_tip": f_tip}):
        got = model.forward_dynamics_batch(Q, QD, TAU, **kw)
        expected = np.array([model.forward_dynamics(q, qd, t, **kw) for q, qd, t in zip(Q, QD, TAU)])
        scale = max(1.0, float(np.abs(expected).max()))
        assert np.abs(got - expected).max() <= 1e-12 * scale
    QD[3, 0] = np.inf
    with pytest.raises(InputError, match=r"rows \[3\]"):
        model.forward_dynamics_batch(Q, QD, TAU)


def test_mass_matrix_lanes_match_single_calls(model):
    Q, _, _ = _states(model, 3 * W + 5, 7)
    got = model.mass_matrix_batch(Q)
    expected = np.array([model.mass_matrix(q) for q in Q])
    assert np.abs(got - expected).max() <= 1e-13 * max(1.0, float(np.abs(expected).max()))
    Q[W, 2] = np.nan
    with pytest.raises(InputError, match=rf"rows \[{W}\]"):
        model.mass_matrix_batch(Q)


def test_fk_lanes_match_single_calls(model):
    Q, _, _ = _states(model, 4 * W + 3, 9)
    got = model.fk_batch(Q)
    expected = np.array([model.fk(q) for q in Q])
    # the same operations in the same order as the single call (_sincos: the same bits lane by lane)
    np.testing.assert_array_equal(got, expected)
    Q[2 * W + 1, 0] = np.inf
    with pytest.raises(InputError, match=rf"rows \[{2 * W + 1}\]"):
        model.fk_batch(Q)


def test_angles_beyond_the_fast_reduction_go_through_libm(model):
    """Joint values past _sincos.FAST_BOUND_RAD (a continuous joint after many turns) in some lanes of a group:
    those lanes take libm's sin and cos, the others the lanes' own; every lane still equals the single call."""
    Q, QD, QDD = _states(model, 2 * W, 13)
    Q[1, 0] = 3.0e5
    Q[W + 4, :] = -7.5e6
    np.testing.assert_array_equal(model.fk_batch(Q), np.array([model.fk(q) for q in Q]))
    expected = np.array([model.inverse_dynamics(q, qd, qdd) for q, qd, qdd in zip(Q, QD, QDD)])
    got = model.inverse_dynamics_batch(Q, QD, QDD)
    assert np.abs(got - expected).max() <= 1e-13 * max(1.0, float(np.abs(expected).max()))


def test_jacobian_lanes_match_single_calls(model):
    Q, _, _ = _states(model, 4 * W + 5, 17)
    # the lanes rotate by Rodrigues about every axis, the single call by the coordinate-axis shortcut: 1e-16 apart
    for batch, single in ((model.jacobian_space_batch, model.jacobian_space),
                          (model.jacobian_body_batch, model.jacobian_body)):
        assert np.abs(batch(Q) - np.array([single(q) for q in Q])).max() <= 1e-14
    Q[W + 3, 1] = np.nan
    with pytest.raises(InputError, match=rf"rows \[{W + 3}\]"):
        model.jacobian_body_batch(Q)
