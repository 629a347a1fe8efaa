"""control_laws and simulate on the UR5 plant (RobotModel.forward_dynamics, no ROS)."""
import math

import numpy as np
import pytest

from manip_control.control_laws import (PD, ComputedTorque, clip_efforts, computed_torque_default_gains, make_law,
                                        pd_default_gains, position_error)
from manip_control.simulate import simulate, step_plant
from manip_control.trajectory_sampler import Trajectory, TrajectorySampler, validate

RATE = 250.0
Q_HOME = np.array([0.0, -1.2, 1.4, -1.5, -1.57, 0.0])


def random_states(model, rng, k):
    for _ in range(k):
        yield (rng.uniform(-math.pi, math.pi, model.dof), rng.uniform(-1, 1, model.dof),
               rng.uniform(-2, 2, model.dof))


def test_computed_torque_zero_error_is_inverse_dynamics(ur5):
    law = ComputedTorque(ur5)
    rng = np.random.default_rng(0)
    for q, qd, qdd in random_states(ur5, rng, 20):
        out = law.compute(q, qd, q, qd, qdd)
        expected = ur5.inverse_dynamics(q, qd, qdd)
        if np.all(np.abs(expected) < ur5.effort_limits):
            np.testing.assert_array_equal(out.tau, expected)  # the very same RNEA call: exactly equal
            assert not out.any_saturated


def test_computed_torque_is_eq_11_35(ur5):
    # tau = M(q) (qdd_d + Kp e + Kd ed) + c(q, qd) + g(q), built from the separate model terms.
    kp = np.array([100.0, 200.0, 300.0, 50.0, 60.0, 70.0])
    kd = 2.0 * np.sqrt(kp)
    law = ComputedTorque(ur5, kp, kd)
    rng = np.random.default_rng(1)
    for q, qd, qdd_d in random_states(ur5, rng, 10):
        q_d = q + rng.uniform(-0.01, 0.01, 6)
        qd_d = qd + rng.uniform(-0.05, 0.05, 6)
        out = law.compute(q, qd, q_d, qd_d, qdd_d)
        expected = (ur5.mass_matrix(q) @ (qdd_d + kp * (q_d - q) + kd * (qd_d - qd))
                    + ur5.coriolis_torques(q, qd) + ur5.gravity_torques(q))
        np.testing.assert_allclose(out.tau_unclipped, expected, rtol=1e-9, atol=1e-9)


def test_default_gains(ur5):
    law = ComputedTorque(ur5)
    np.testing.assert_allclose(law.kp, 400.0)  # wn = 20 rad/s
    np.testing.assert_allclose(law.kd, 40.0)   # critically damped: 2 wn
    kp, kd = computed_torque_default_gains(3, 10.0, 0.5)
    np.testing.assert_allclose(kp, 100.0)
    np.testing.assert_allclose(kd, 10.0)
    # PD: Kp = m(q) wn^2, Kd = 2 m(q) wn per joint, m(q) = 1 / (M(q)^-1)_ii, wn from gain_design (scheduled)
    pd = PD(ur5)
    from manip_control.gain_design import design_joint_gains
    z = 1.0 / math.sqrt(2.0)
    wn = design_joint_gains(ur5, "pd", 0.004, max_natural_frequency=25.0, damping_ratio=z,
                            scheduled=True).natural_frequency
    m0 = 1.0 / np.diag(np.linalg.inv(ur5.mass_matrix(np.zeros(6))))
    np.testing.assert_allclose(pd.kp, m0 * wn ** 2)
    np.testing.assert_allclose(pd.kd, 2.0 * z * m0 * wn)
    q, e, ed = Q_HOME, np.full(6, 0.01), np.full(6, -0.02)
    m = 1.0 / np.diag(np.linalg.inv(ur5.mass_matrix(q)))
    np.testing.assert_allclose(pd.compute(q, -ed, q + e, np.zeros(6)).tau_unclipped,
                               m * wn ** 2 * e + 2.0 * z * m * wn * ed + ur5.gravity_torques(q), rtol=1e-10)
    np.testing.assert_allclose(PD(ur5, kp=[5.0], kd=[]).kp, 5.0)
    assert np.allclose(PD(ur5, kp=[5.0], kd=[]).kd, pd_default_gains(ur5)[1])


@pytest.mark.parametrize("kp,kd,text", [([1.0, 2.0], None, "1 or 6 values"), ([-1.0], None, ">= 0"),
                                        (None, [math.nan], "finite")])
def test_gain_errors(ur5, kp, kd, text):
    with pytest.raises(ValueError, match=text):
        ComputedTorque(ur5, kp, kd)


def test_make_law(ur5):
    assert isinstance(make_law("computed_torque", ur5), ComputedTorque)
    assert isinstance(make_law("pd", ur5), PD)
    with pytest.raises(ValueError, match="unknown control law"):
        make_law("lqr", ur5)


def quintic_trajectory(model, q0, q1, T):
    """A rest-to-rest quintic from q0 to q1 in T s as one trajectory point (the sampler's start state is
    q0 at rest), and its max |qdd| and |qddd| per joint (analytic: 10/sqrt(3) d/T^2 and 60 d/T^3)."""
    tr = validate(Trajectory(tuple(model.joint_names), np.array([T]), q1[None], np.zeros((1, 6)),
                             np.zeros((1, 6))), model.joint_names, model.joint_lower, model.joint_upper)
    d = np.abs(q1 - q0)
    return (TrajectorySampler(tr, (q0, np.zeros(6), np.zeros(6))), 10.0 / math.sqrt(3.0) * d / T ** 2,
            60.0 * d / T ** 3)


def tracking_error_bound(kp, kd, dt, acc_max, jerk_max):
    """Bound on |q_d - q| for computed torque with a perfect model on the semi-implicit Euler plant.

    Per joint the closed loop is exactly linear: with qdd_k = qdd_d(t_k) + kp e_k + kd ed_k,
      ed_{k+1} = ed_k - dt (kp e_k + kd ed_k) + rv_k,   e_{k+1} = e_k + dt ed_{k+1} + rp_k,
    where the desired trajectory's one-step residuals are rv_k = qd_d(t_k+1) - qd_d(t_k) - dt qdd_d(t_k)
    (|rv| <= dt^2/2 max|qddd|) and rp_k = q_d(t_k+1) - q_d(t_k) - dt qd_d(t_k+1) (|rp| <= dt^2/2 max|qdd|).
    From e_0 = ed_0 = 0, |e_k| <= ||h_v||_1 max|rv| + ||h_p||_1 max|rp| with h the impulse responses of
    this system (computed here); the RMS is below the maximum."""
    A = np.array([[1.0 - dt * dt * kp, dt * (1.0 - dt * kd)], [-dt * kp, 1.0 - dt * kd]])  # (e, ed)
    assert np.max(np.abs(np.linalg.eigvals(A))) < 1.0
    norms = []
    for b in (np.array([dt, 1.0]), np.array([1.0, 0.0])):  # rv enters ed and, through it, e; rp enters e
        x, s = b.copy(), 0.0
        for _ in range(20000):
            s += abs(x[0])
            x = A @ x
        norms.append(s)
    return norms[0] * dt * dt / 2 * jerk_max + norms[1] * dt * dt / 2 * acc_max


def test_computed_torque_tracks_quintic_on_ur5(ur5):
    q0 = Q_HOME
    q1 = q0 + np.array([0.8, -0.5, 0.6, 0.7, -0.6, 1.0])
    T = 2.0
    sampler, acc_max, jerk_max = quintic_trajectory(ur5, q0, q1, T)
    law = ComputedTorque(ur5)
    res = simulate(law, sampler.sample, q0, duration=T + 0.5, rate_hz=RATE)
    assert not res.saturated.any()
    bound = tracking_error_bound(law.kp[0], law.kd[0], 1.0 / RATE, acc_max, jerk_max)  # per joint
    err = np.abs(res.position_error)
    rms_joint = np.sqrt(np.mean(err ** 2, axis=0))
    assert np.all(err.max(axis=0) <= bound * (1 + 1e-6) + 1e-12), (err.max(axis=0), bound)
    assert np.all(rms_joint <= bound)
    # measured (reported): RMS over joints and time
    assert res.rms_error() < 2e-4, res.rms_error()
    np.testing.assert_allclose(res.q_final, q1, atol=1e-5)


def test_computed_torque_bound_is_not_vacuous(ur5):
    # A lower-gain loop tracks worse, as the bound says (kd/kp larger): the test above is sensitive.
    q0 = Q_HOME
    q1 = q0 + np.array([0.8, -0.5, 0.6, 0.7, -0.6, 1.0])
    sampler, acc_max, jerk_max = quintic_trajectory(ur5, q0, q1, 2.0)
    slow = ComputedTorque(ur5, natural_frequency=5.0)
    res = simulate(slow, sampler.sample, q0, duration=2.5, rate_hz=RATE)
    fast_bound = tracking_error_bound(400.0, 40.0, 1.0 / RATE, acc_max, jerk_max)
    assert np.any(np.abs(res.position_error).max(axis=0) > fast_bound)


def test_pd_gravity_compensation_holds_pose(ur5):
    law = PD(ur5)
    # exactly at the set point: tau = g(q), the arm does not move
    res = simulate(law, Q_HOME, Q_HOME, duration=1.0, rate_hz=RATE)
    np.testing.assert_allclose(res.tau[0], ur5.gravity_torques(Q_HOME), rtol=1e-12)
    assert np.max(np.abs(res.q - Q_HOME)) < 1e-9
    # displaced by 0.05 rad: converges back (Takegaki-Arimoto); the default gains are sized for each joint's
    # lightest configuration, so the heavy shoulder settles slowly (2e-3 rad at 3 s, 1.6e-4 rad at 6 s)
    res = simulate(law, Q_HOME, Q_HOME + 0.05, duration=6.0, rate_hz=RATE)
    assert np.max(np.abs(res.q_final - Q_HOME)) < 5e-4
    assert np.max(np.abs(res.qd_final)) < 5e-3


def test_pd_without_gravity_compensation_sags(ur5):
    law = PD(ur5, gravity_compensation=False)
    res = simulate(law, Q_HOME, Q_HOME, duration=2.0, rate_hz=RATE)
    assert np.max(np.abs(res.q_final - Q_HOME)) > 0.01  # the steady-state error g/Kp


def test_pd_tracks_quintic(ur5):
    q0 = Q_HOME
    q1 = q0 + np.array([0.8, -0.5, 0.6, 0.7, -0.6, 1.0])
    sampler, _, _ = quintic_trajectory(ur5, q0, q1, 2.0)
    res = simulate(PD(ur5), sampler.sample, q0, duration=6.0, rate_hz=RATE)
    assert res.rms_error() < 0.05
    np.testing.assert_allclose(res.q_final, q1, atol=2e-3)


def test_saturation_never_exceeds_limits(ur5):
    lim = ur5.effort_limits
    for law in (ComputedTorque(ur5, kp=[1e5], kd=[1e3]), PD(ur5, kp=[1e4], kd=[1e2])):
        rng = np.random.default_rng(5)
        seen = False
        for q, qd, qdd in random_states(ur5, rng, 50):
            out = law.compute(q, qd, q + rng.uniform(-1, 1, 6), qd, qdd)
            assert np.all(np.abs(out.tau) <= lim)
            over = np.abs(out.tau_unclipped) > lim
            np.testing.assert_array_equal(out.saturated, over)
            np.testing.assert_allclose(out.tau[over], np.sign(out.tau_unclipped[over]) * lim[over])
            seen |= over.any()
        assert seen
    # closed loop with a large step: clipped every tick, the simulation stays finite
    res = simulate(ComputedTorque(ur5), Q_HOME + 1.0, Q_HOME, duration=1.0, rate_hz=RATE)
    assert res.saturated.any()
    assert np.all(np.abs(res.tau) <= lim)


def test_clip_efforts_edge_cases():
    out = clip_efforts([5.0, -5.0, math.nan, math.inf, 3.0], [1.0, 1.0, 1.0, math.inf, 0.0])
    np.testing.assert_array_equal(out.tau, [1.0, -1.0, 0.0, 0.0, 3.0])
    np.testing.assert_array_equal(out.saturated, [True, True, True, True, False])


def test_continuous_joint_error_wraps():
    e = position_error([math.pi - 0.1, 1.0], [-math.pi + 0.1, 0.0], np.array([True, False]))
    np.testing.assert_allclose(e, [-0.2, 1.0])


def test_step_plant_free_fall_energy(ur5):
    # Zero effort: the plant falls; semi-implicit Euler keeps the state finite over 1 s at 250 Hz.
    q, qd = Q_HOME.copy(), np.zeros(6)
    for _ in range(250):
        q, qd = step_plant(ur5, q, qd, np.zeros(6), 1.0 / RATE, substeps=2)
    assert np.all(np.isfinite(q)) and np.max(np.abs(q - Q_HOME)) > 0.1
