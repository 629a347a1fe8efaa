"""regressor: inverse dynamics linear in each body's 10 inertial parameters (oracles: RobotModel's RNEA,
the Christoffel Coriolis matrix, and the closed-form gravity load of a point mass through the Jacobian)."""
import numpy as np
import pytest

from manip_control import regressor as R
from manip_control.osc import task_jacobian
from manip_core import RobotModel


def _panda():
    from manip_core.reference_robots import PANDA_REL, example_robot
    try:
        return RobotModel.from_urdf(str(example_robot(PANDA_REL)), "panda_link0", "panda_link8")
    except FileNotFoundError as e:
        pytest.skip(str(e))


@pytest.mark.parametrize("name", ["ur5", "ypp3", "panda"])
def test_regressor_times_parameters_is_inverse_dynamics(name, ur5):
    model = ur5 if name == "ur5" else _panda() if name == "panda" else RobotModel.load(name)
    pi = R.parameters(model).ravel()
    assert pi.size == 10 * R.n_bodies(model)
    rng = np.random.default_rng(0)
    for _ in range(10):
        q, qd, qdd = rng.uniform(-2, 2, (3, model.dof))
        tau = model.inverse_dynamics(q, qd, qdd)
        Y = R.regressor(model, q, qd, qdd)
        assert np.max(np.abs(Y @ pi - tau)) < 1e-10 * max(1.0, np.max(np.abs(tau)))


def test_slotine_li_regressor_is_M_a_plus_C_v_plus_g(ur5):
    pi = R.parameters(ur5).ravel()
    rng = np.random.default_rng(1)
    for _ in range(5):
        q, qd, v, a = rng.uniform(-2, 2, (4, 6))
        expected = ur5.mass_matrix(q) @ a + ur5.coriolis_matrix(q, qd) @ v + ur5.gravity_torques(q)
        np.testing.assert_allclose(R.slotine_li_regressor(ur5, q, qd, v, a) @ pi, expected, rtol=0, atol=1e-10)
    # the columns of one body alone: the other bodies' contribution is the rest
    tip = R.tip_body(ur5)
    Yt = R.slotine_li_regressor(ur5, q, qd, v, a, bodies=[tip])
    Y = R.slotine_li_regressor(ur5, q, qd, v, a)
    np.testing.assert_array_equal(Yt, Y[:, 10 * tip:10 * tip + 10])


def test_with_parameters_payload_gravity_load(ur5):
    """A 1.5 kg point mass at the tool adds J_v^T (0, 0, 9.81 m) to the holding torques."""
    pi = R.parameters(ur5)
    pi[R.tip_body(ur5)] += R.tip_point_mass(ur5, 1.5)
    plant = R.with_parameters(ur5, pi)
    np.testing.assert_allclose(R.parameters(plant), pi, atol=0)
    rng = np.random.default_rng(2)
    for _ in range(5):
        q = rng.uniform(-2, 2, 6)
        _, J = task_jacobian(ur5, q)
        extra = J[3:].T @ np.array([0.0, 0.0, 9.81 * 1.5])
        np.testing.assert_allclose(plant.gravity_torques(q) - ur5.gravity_torques(q), extra, atol=1e-10)
    assert plant.link_masses[-1] == pytest.approx(ur5.link_masses[-1] + 1.5)
    assert ur5.link_masses[-1] == pytest.approx(0.1879)  # the model itself is untouched
    with pytest.raises(ValueError, match="shape"):
        R.with_parameters(ur5, pi[:-1])
