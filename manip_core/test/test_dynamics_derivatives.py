"""Analytic dynamics derivatives and the Jacobian's time derivative against Pinocchio (the oracle), with central
finite differences of manip's own functions as a second check.

Chains as in test_model_vs_pinocchio.py: UR5 (world -> ee_link), Panda arm (7 DOF, fingers outside the chain and
locked at 0), Panda through the left finger's prismatic joint whose right finger mimics it (8 actuated, 9
physical joints: Pinocchio's full model projected with q_phys = A q, D = A^T D_pin A).
"""
import numpy as np
import pinocchio as pin
import pytest

from manip_core import RobotModel
from manip_core.errors import InputError
from manip_core.reference_robots import PANDA_REL, UR5_REL, example_robot

UR5, PANDA = example_robot(UR5_REL), example_robot(PANDA_REL)
TOL = 1e-9
N_STATES = 12


def close(a, b, tol=TOL):
    scale = max(1.0, float(np.max(np.abs(b))))
    err = float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
    assert err <= tol * scale, f"max error {err:.3e} > {tol:g} * {scale:.3g}"


def sym(M):
    return np.triu(M) + np.triu(M, 1).T


class Case:
    def __init__(self, path, tip, A=None):
        self.model = RobotModel.from_urdf(path, tip_link=tip)
        self.pm = pin.buildModelFromUrdf(str(path))
        self.pd = self.pm.createData()
        self.fid = self.pm.getFrameId(tip)
        self.A = np.eye(self.model.dof) if A is None else A
        self.square = self.A.shape[0] == self.A.shape[1]
        self.mimic = bool(np.any(self.A.sum(axis=1) > 1.0) or np.any(np.count_nonzero(self.A, axis=0) > 1))

    def random_state(self, rng):
        m = self.model
        lo = np.where(np.isfinite(m.joint_lower), m.joint_lower, -np.pi)
        hi = np.where(np.isfinite(m.joint_upper), m.joint_upper, np.pi)
        return rng.uniform(lo, hi), rng.uniform(-2, 2, m.dof), rng.uniform(-3, 3, m.dof)

    def pin_rnea_derivatives(self, q, qd, qdd, fext=None):
        A = self.A
        args = (self.pm, self.pd, A @ q, A @ qd, A @ qdd) + ((fext,) if fext is not None else ())
        dq, dv, da = pin.computeRNEADerivatives(*args)
        return A.T @ dq @ A, A.T @ dv @ A, A.T @ sym(da) @ A

    def pin_tip_fext(self, q, f_tip):
        """f_tip (the wrench the tip exerts on the environment, tip frame) as Pinocchio's fext: the force ON
        the tip's joint body, [f; m] in that joint's frame."""
        pin.forwardKinematics(self.pm, self.pd, self.A @ q)
        frame = self.pm.frames[self.fid]
        fext = [pin.Force.Zero() for _ in range(self.pm.njoints)]
        fext[frame.parentJoint] = frame.placement.act(pin.Force(-f_tip[3:], -f_tip[:3]))
        return fext


def _arm_A():
    A = np.zeros((9, 7))
    A[:7, :7] = np.eye(7)
    return A


def _finger_A():
    A = np.zeros((9, 8))
    A[:8, :8] = np.eye(8)
    A[8, 7] = 1.0  # panda_finger_joint2 mimics panda_finger_joint1
    return A


CASES = {
    "ur5": lambda: Case(UR5, "ee_link"),
    "panda": lambda: Case(PANDA, "panda_hand_tcp", _arm_A()),
    "panda_finger": lambda: Case(PANDA, "panda_leftfinger", _finger_A()),
}


@pytest.fixture(scope="module", params=list(CASES))
def case(request):
    return CASES[request.param]()


def test_rnea_derivatives_match_pinocchio(case):
    rng = np.random.default_rng(11)
    m = case.model
    for _ in range(N_STATES):
        q, qd, qdd = case.random_state(rng)
        dq, dv, M = m.rnea_derivatives(q, qd, qdd)
        e_dq, e_dv, e_M = case.pin_rnea_derivatives(q, qd, qdd)
        close(dq, e_dq)
        close(dv, e_dv)
        close(M, e_M)
        close(M, m.mass_matrix(q), 1e-12)


def test_rnea_derivatives_with_tip_wrench_and_gravity(case):
    rng = np.random.default_rng(12)
    m, pm = case.model, case.pm
    g = np.array([1.5, -2.0, -7.0])
    for _ in range(4):
        q, qd, qdd = case.random_state(rng)
        f_tip = rng.uniform(-10, 10, 6)
        fext = case.pin_tip_fext(q, f_tip)
        pm.gravity.linear = g
        try:
            expected = case.pin_rnea_derivatives(q, qd, qdd, fext)
        finally:
            pm.gravity.linear = np.array([0.0, 0.0, -9.81])
        got = m.rnea_derivatives(q, qd, qdd, gravity=g, f_tip=f_tip)
        for a, b in zip(got, expected):
            close(a, b)


def test_forward_dynamics_derivatives_match_pinocchio(case):
    rng = np.random.default_rng(13)
    m, A = case.model, case.A
    pm = pd = None
    if case.square:
        pm, pd = case.pm, case.pd
    elif not case.mimic:
        # The fingers outside the chain are locked (as in manip's model): Pinocchio's reduced model is the oracle.
        locked = [j for j in range(1, case.pm.njoints) if case.pm.names[j] not in m.joint_names]
        pm = pin.buildReducedModel(case.pm, locked, pin.neutral(case.pm))
        pd = pm.createData()
        assert pm.nq == m.dof
    for _ in range(N_STATES):
        q, qd, tau = case.random_state(rng)
        tau = tau * 5.0
        dq, dv, minv = m.forward_dynamics_derivatives(q, qd, tau)
        if pm is not None:
            e_dq, e_dv, e_minv = pin.computeABADerivatives(pm, pd, q, qd, tau)
            e_minv = sym(e_minv)
        else:
            # mimic joint: d qdd = -M_a^-1 A^T D_pin A at qdd = FD(q, qd, tau), M_a = A^T M_pin A
            qdd = m.forward_dynamics(q, qd, tau)
            r_dq, r_dv, M_a = case.pin_rnea_derivatives(q, qd, qdd)
            e_minv = np.linalg.inv(M_a)
            e_dq, e_dv = -e_minv @ r_dq, -e_minv @ r_dv
        close(dq, e_dq)
        close(dv, e_dv)
        close(minv, e_minv)


def test_jacobian_time_derivative_matches_pinocchio(case):
    rng = np.random.default_rng(14)
    m, pm, pd, A = case.model, case.pm, case.pd, case.A
    for _ in range(N_STATES):
        q, qd, _ = case.random_state(rng)
        pin.computeJointJacobiansTimeVariation(pm, pd, A @ q, A @ qd)
        pin.updateFramePlacements(pm, pd)
        # WORLD: [v; omega] of the body point at the base origin, d/dt of the WORLD Jacobian; ours is [omega; v].
        dJ_world = pin.getFrameJacobianTimeVariation(pm, pd, case.fid, pin.WORLD) @ A
        dJs = m.jacobian_time_derivative(q, qd)
        close(dJs, np.vstack([dJ_world[3:], dJ_world[:3]]))
        # body: d/dt (Ad_{T^-1} J_s) = Ad_{T^-1} dJ_s - ad_{V_b} J_b, checked through Pinocchio's pieces
        T = m.fk(q)
        R, p = T[:3, :3], T[:3, 3]
        Jb = m.jacobian_body(q)
        Vb = Jb @ qd
        w, v = dJs[:3], dJs[3:]
        expected = np.vstack([R.T @ w, R.T @ (v - np.cross(p, w.T).T)])
        ad = np.block([[_skew(Vb[:3]), np.zeros((3, 3))], [_skew(Vb[3:]), _skew(Vb[:3])]])
        close(m.jacobian_time_derivative(q, qd, frame="body"), expected - ad @ Jb)


def _skew(x):
    return np.array([[0, -x[2], x[1]], [x[2], 0, -x[0]], [-x[1], x[0], 0]])


def test_finite_differences(case):
    """Second check, independent of Pinocchio: central differences of manip's own functions (h = 1e-6)."""
    rng = np.random.default_rng(15)
    m = case.model
    h = 1e-6
    q, qd, qdd = case.random_state(rng)
    f_tip = rng.uniform(-5, 5, 6)
    dq, dv, _ = m.rnea_derivatives(q, qd, qdd, f_tip=f_tip)
    tau = m.inverse_dynamics(q, qd, qdd, f_tip=f_tip)
    fdq, fdv, _ = m.forward_dynamics_derivatives(q, qd, tau, f_tip=f_tip)
    for j in range(m.dof):
        e = np.zeros(m.dof)
        e[j] = h
        close(dq[:, j], (m.inverse_dynamics(q + e, qd, qdd, f_tip=f_tip)
                         - m.inverse_dynamics(q - e, qd, qdd, f_tip=f_tip)) / (2 * h), 1e-6)
        close(dv[:, j], (m.inverse_dynamics(q, qd + e, qdd, f_tip=f_tip)
                         - m.inverse_dynamics(q, qd - e, qdd, f_tip=f_tip)) / (2 * h), 1e-6)
        close(fdq[:, j], (m.forward_dynamics(q + e, qd, tau, f_tip=f_tip)
                          - m.forward_dynamics(q - e, qd, tau, f_tip=f_tip)) / (2 * h), 1e-5)
        close(fdv[:, j], (m.forward_dynamics(q, qd + e, tau, f_tip=f_tip)
                          - m.forward_dynamics(q, qd - e, tau, f_tip=f_tip)) / (2 * h), 1e-5)
    for frame, J in (("space", m.jacobian_space), ("body", m.jacobian_body)):
        close(m.jacobian_time_derivative(q, qd, frame=frame), (J(q + h * qd) - J(q - h * qd)) / (2 * h), 1e-6)


@pytest.mark.slow  # compiles two parallel kernels (~30 s of CPU on an empty numba cache)
def test_batched_match_single(case):
    rng = np.random.default_rng(16)
    m = case.model
    states = [case.random_state(rng) for _ in range(30)]
    Q, QD, X = (np.array(s) for s in zip(*states))
    for batch, single in ((m.rnea_derivatives_batch, m.rnea_derivatives),
                          (m.forward_dynamics_derivatives_batch, m.forward_dynamics_derivatives)):
        got = batch(Q, QD, X)
        for k, s in enumerate(states):
            for a, b in zip(got, single(*s)):
                close(a[k], b, 1e-13)


def test_out_arrays_are_filled_and_returned():
    m = CASES["ur5"]().model
    rng = np.random.default_rng(17)
    q, qd, qdd = rng.uniform(-1, 1, (3, m.dof))
    out = tuple(np.full((m.dof, m.dof), np.nan) for _ in range(3))
    got = m.rnea_derivatives(q, qd, qdd, out=out)
    assert all(a is b for a, b in zip(got, out))
    for a, b in zip(out, m.rnea_derivatives(q, qd, qdd)):
        np.testing.assert_array_equal(a, b)
    dJ = np.empty((6, m.dof))
    assert m.jacobian_time_derivative(q, qd, out=dJ) is dJ
    np.testing.assert_array_equal(dJ, m.jacobian_time_derivative(q, qd))


def test_bad_input_errors():
    m = CASES["ur5"]().model
    z = np.zeros(m.dof)
    with pytest.raises(InputError, match="qd must have shape"):
        m.rnea_derivatives(z, np.zeros(3), z)
    with pytest.raises(InputError, match="NaN"):
        m.forward_dynamics_derivatives(z, np.full(m.dof, np.nan), z)
    with pytest.raises(InputError, match="out must"):
        m.rnea_derivatives(z, z, z, out=(np.empty((m.dof, m.dof)),) * 2)
    with pytest.raises(InputError, match="out must"):
        m.rnea_derivatives(z, z, z, out=(np.empty((m.dof, m.dof), dtype=np.float32),) * 3)
    with pytest.raises(InputError, match="frame must be"):
        m.jacobian_time_derivative(z, z, frame="world")
    Q = np.zeros((4, m.dof))
    Q[2, 0] = np.inf
    with pytest.raises(InputError, match=r"rows \[2\]"):
        m.rnea_derivatives_batch(Q, np.zeros((4, m.dof)), np.zeros((4, m.dof)))
    with pytest.raises(InputError, match="same shape"):
        m.forward_dynamics_derivatives_batch(np.zeros((4, m.dof)), np.zeros((3, m.dof)), np.zeros((4, m.dof)))
