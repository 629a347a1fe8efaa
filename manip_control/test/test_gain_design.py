"""gain_design: the per-joint laws' default gains, sized for a sampled loop with measurement delay.

Oracles: the characteristic polynomial of the delayed sampled loop in closed form (z-transform), and the
nonlinear arm (RobotModel.forward_dynamics) driven by the law through a delay line."""
import numpy as np
import pytest

from manip_control import gain_design as G
from manip_control.control_laws import PD
from manip_control.pid import PID
from manip_control.simulate import step_plant

DT = 0.004


@pytest.mark.parametrize("d", [0, 1, 2, 3])
def test_loop_matrix_matches_the_characteristic_polynomial(d):
    # unit inertia, tau = -kp q_(k-d) - kd qd_(k-d); semi-implicit Euler: z^d (z-1)^2 + dt kd (z-1) + dt^2 kp z = 0
    kp, kd = 900.0, 45.0
    A = G.loop_matrix(np.array([[1.0]]), [kp], [kd], None, DT, d)
    poly = np.polymul(np.r_[1.0, np.zeros(d)], [1.0, -2.0, 1.0])
    poly = np.polyadd(poly, [DT * kd + DT * DT * kp, -DT * kd])
    expected = np.sort_complex(np.roots(poly))
    lam = np.linalg.eigvals(A)
    lam = np.sort_complex(lam[np.abs(lam) > 1e-6])
    np.testing.assert_allclose(lam, expected, atol=1e-9)


def test_loop_matrix_with_integral_matches_the_polynomial():
    # + integral z_(k+1) = z_k + dt q_k, tau -= ki z_(k-d): multiply by (z - 1) and add dt^3 ki z
    kp, kd, ki, d = 400.0, 40.0, 2000.0, 2
    A = G.loop_matrix(np.array([[1.0]]), [kp], [kd], [ki], DT, d)
    base = np.polyadd(np.polymul(np.r_[1.0, np.zeros(d)], [1.0, -2.0, 1.0]), [DT * kd + DT * DT * kp, -DT * kd])
    poly = np.polyadd(np.polymul(base, [1.0, -1.0]), [DT ** 3 * ki, 0.0])
    lam = np.linalg.eigvals(A)
    np.testing.assert_allclose(np.sort_complex(lam[np.abs(lam) > 1e-6]), np.sort_complex(np.roots(poly)), atol=1e-8)


def _delayed_run(model, law, q_set, q0, steps, delay):
    """The law on the nonlinear arm, each effort computed from the state `delay` periods old."""
    q, qd = q0.copy(), np.zeros(model.dof)
    past = [(q.copy(), qd.copy())] * (delay + 1)
    z = np.zeros(model.dof)
    err = []
    for _ in range(steps):
        qm, qdm = past[0]
        tau = law.compute(qm, qdm, q_set, z, z).tau
        q, qd = step_plant(model, q, qd, tau, DT)
        past = past[1:] + [(q.copy(), qd.copy())]
        err.append(np.max(np.abs(q - q_set)))
        if not np.isfinite(err[-1]) or err[-1] > 3.0:
            break
    return np.array(err)


def test_pd_defaults_stable_where_the_old_ones_oscillate(ur5):
    """The old defaults (Kp = M_ii(0) wn^2, wn = 10 rad/s) at the configuration where their delayed loop is
    least stable (two periods of delay, the demo's graph) oscillate and grow on the nonlinear UR5; the designed
    gains settle there (and at every sampled configuration the linear loop is stable with a gain margin 2)."""
    law = PD(ur5, period_s=DT)  # gains scheduled on the apparent inertia m(q): Kp = m(q) wn^2, Kd = 2 m(q) wn
    Q = G.sample_configurations(ur5, 32)
    app, Minv = G.apparent_inertias(ur5, Q)
    m0 = np.diag(ur5.mass_matrix(np.zeros(6)))
    old_kp, old_kd = m0 * 100.0, m0 * 20.0
    wn, z = law._wn, law._zeta
    r_old = [G.spectral_radius(G.loop_matrix(Mi, old_kp, old_kd, None, DT, 2)) for Mi in Minv]
    r_new = [G.spectral_radius(G.loop_matrix(Mi, 2 * m * wn ** 2, 4 * z * m * wn, None, DT, 2))
             for Mi, m in zip(Minv, app)]
    assert max(r_new) < 1.0 < max(r_old)
    q_set = Q[int(np.argmax(r_old))]
    q0 = q_set + 0.02
    old = _delayed_run(ur5, PD(ur5, old_kp, old_kd, period_s=DT), q_set, q0, 500, 2)
    new = _delayed_run(ur5, law, q_set, q0, 500, 2)
    assert old[-1] > 0.1  # diverged (or oscillating far beyond the 0.02 rad start)
    assert new.size == 500 and new[-1] < 0.005 and new.max() < 0.05  # 0.02 rad -> 2.3e-3 rad in 2 s


def test_pid_defaults_stable_and_remove_a_constant_load(ur5):
    """PID defaults on the UR5, arm nearly stretched (large shoulder inertia): stable
    with two periods of delay, and the integral removes a load the model does not know (0.5 kg at the tool)."""
    from manip_control import regressor as R
    law = PID(ur5, period_s=DT)
    pi = R.parameters(ur5)
    pi[R.tip_body(ur5)] += R.tip_point_mass(ur5, 0.5)
    plant = R.with_parameters(ur5, pi)
    q_set = np.array([0.0, -0.3, 0.3, -1.5, -1.57, 0.0])
    err = _delayed_run(plant, law, q_set, q_set + 0.02, 2500, 2)
    # the load first pushes the light wrist ~0.2 rad away (what PD would keep); the integral brings it back
    assert err.size == 2500 and err.max() > 0.1 and err[-1] < 0.025 * err.max(), (err[-1], err.max())


@pytest.mark.parametrize("name", ["ypp3", "planar2r"])
def test_design_on_other_arms(name):
    from manip_core import RobotModel
    model = RobotModel.load(name)
    for kind in ("pd", "pid"):
        g = G.design_joint_gains(model, kind, DT)
        assert g.radius < 1.0 and np.all(g.kp > 0) and np.all(g.kd > 0)
        assert np.all(g.natural_frequency <= 20.0)


def test_bad_arguments(ur5):
    with pytest.raises(ValueError, match="kind must be pd or pid"):
        G.design_joint_gains(ur5, "lqr")
    with pytest.raises(ValueError, match="delay_periods must be finite and >= 0"):
        G.design_joint_gains(ur5, "pd", DT, -1.0)


def test_pd_and_pid_defaults_on_the_panda():
    """An arm the defaults were never looked at on (example-robot-data's Panda, 7 joints): the designed gains
    are stable on the linearised delayed loop, and on the nonlinear arm through a two-period delay line both
    laws bring a 0.03 rad displacement back to the set point."""
    from manip_core import RobotModel
    from manip_core.reference_robots import PANDA_REL, example_robot
    panda = RobotModel.from_urdf(example_robot(PANDA_REL), tip_link="panda_hand_tcp")  # requirements-test.txt
    q_set = np.clip(np.array([0.0, -0.3, 0.0, -2.0, 0.0, 1.8, 0.8]), panda.joint_lower, panda.joint_upper)
    for law in (PD(panda, period_s=DT), PID(panda, period_s=DT)):
        # PD: 0.057 rad peak, 0.017 rad at 2 s, 2.5e-3 rad at 6 s (a slow mode of joints 1, 3 and 5)
        err = _delayed_run(panda, law, q_set, q_set + 0.03, 1500, 2)
        assert err.size == 1500 and err.max() < 0.08 and err[-1] < 0.005, (type(law).__name__, err[-1], err.max())
