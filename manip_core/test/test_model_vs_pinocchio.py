"""Kinematics and dynamics against Pinocchio (the reference oracle) on real URDFs of example-robot-data.

Chains: UR5 (world -> ee_link), Panda arm (panda_link0 -> panda_hand_tcp, 7 DOF), and Panda through the left
finger's prismatic joint, whose right finger mimics it (8 actuated joints, 9 physical). For the finger chain
Pinocchio's full model (9 independent joints) is projected with q_phys = A q: tau = A^T tau_pin(A q, ...),
M = A^T M_pin A, J = J_pin A, C = A^T C_pin A.
"""
import numpy as np
import pinocchio as pin
import pytest

from manip_core import RobotModel

from manip_core.reference_robots import PANDA_REL, UR5_REL, example_robot

UR5, PANDA = example_robot(UR5_REL), example_robot(PANDA_REL)

RTOL = 1e-9
N_CONFIGS = 25


def close(a, b, rtol=RTOL):
    scale = max(1.0, float(np.max(np.abs(b))))
    err = float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
    assert err <= rtol * scale, f"max error {err:.3e} > {rtol:g} * {scale:.3g}"


class Case:
    def __init__(self, path, tip, A=None):
        self.model = RobotModel.from_urdf(path, tip_link=tip)
        self.pm = pin.buildModelFromUrdf(str(path))
        self.pd = self.pm.createData()
        self.fid = self.pm.getFrameId(tip)
        self.A = np.eye(self.model.dof) if A is None else A
        assert self.pm.nq == self.A.shape[0]

    def random_state(self, rng):
        m = self.model
        lo = np.where(np.isfinite(m.joint_lower), m.joint_lower, -np.pi)
        hi = np.where(np.isfinite(m.joint_upper), m.joint_upper, np.pi)
        return rng.uniform(lo, hi), rng.uniform(-2, 2, m.dof), rng.uniform(-3, 3, m.dof)


def _arm_A():
    A = np.zeros((9, 7))
    A[:7, :7] = np.eye(7)  # the fingers are outside the chain: held at 0
    return A


def _finger_A():
    A = np.zeros((9, 8))
    A[:8, :8] = np.eye(8)
    A[8, 7] = 1.0  # panda_finger_joint2 mimics panda_finger_joint1 (multiplier 1)
    return A


CASES = {
    "ur5": lambda: Case(UR5, "ee_link"),
    "panda": lambda: Case(PANDA, "panda_hand_tcp", _arm_A()),
    "panda_finger": lambda: Case(PANDA, "panda_leftfinger", _finger_A()),
}


@pytest.fixture(scope="module", params=list(CASES))
def case(request):
    return CASES[request.param]()


def test_joint_order_matches_pinocchio(case):
    names = [n for n in case.pm.names[1:]]
    assert case.model.joint_names == names[:case.model.dof]


def test_fk_and_jacobians(case):
    rng = np.random.default_rng(1)
    m, pm, pd, A = case.model, case.pm, case.pd, case.A
    for _ in range(N_CONFIGS):
        q, _, _ = case.random_state(rng)
        qp = A @ q
        pin.forwardKinematics(pm, pd, qp)
        pin.updateFramePlacements(pm, pd)
        T = pd.oMf[case.fid].homogeneous
        close(m.fk(q), T)
        # Pinocchio's LOCAL_WORLD_ALIGNED Jacobian is [v_point; omega] in base axes; ours is [omega; v] with v
        # the velocity of the point at the base origin: v_point = v + omega x p.
        J_lwa = pin.computeFrameJacobian(pm, pd, qp, case.fid, pin.LOCAL_WORLD_ALIGNED) @ A
        Js = m.jacobian_space(q)
        close(Js[:3], J_lwa[3:])
        close(Js[3:] + np.cross(Js[:3].T, T[:3, 3]).T, J_lwa[:3])
        J_local = pin.computeFrameJacobian(pm, pd, qp, case.fid, pin.LOCAL) @ A
        close(m.jacobian_body(q), np.vstack([J_local[3:], J_local[:3]]))


def test_fk_of_other_links(case):
    rng = np.random.default_rng(2)
    m, pm, pd = case.model, case.pm, case.pd
    q, _, _ = case.random_state(rng)
    pin.forwardKinematics(pm, pd, case.A @ q)
    pin.updateFramePlacements(pm, pd)
    checked = 0
    for link in m.link_names:
        if not pm.existFrame(link):
            continue
        close(m.fk(q, link=link), pd.oMf[pm.getFrameId(link)].homogeneous)
        checked += 1
    assert checked >= m.dof


def test_inverse_dynamics_mass_matrix_coriolis_gravity(case):
    rng = np.random.default_rng(3)
    m, pm, pd, A = case.model, case.pm, case.pd, case.A
    for _ in range(N_CONFIGS):
        q, qd, qdd = case.random_state(rng)
        qp, qdp, qddp = A @ q, A @ qd, A @ qdd
        close(m.inverse_dynamics(q, qd, qdd), A.T @ pin.rnea(pm, pd, qp, qdp, qddp))
        M = pin.crba(pm, pd, qp)
        M = np.triu(M) + np.triu(M, 1).T
        close(m.mass_matrix(q), A.T @ M @ A)
        close(m.gravity_torques(q), A.T @ pin.computeGeneralizedGravity(pm, pd, qp))
        C = pin.computeCoriolisMatrix(pm, pd, qp, qdp)
        close(m.coriolis_matrix(q, qd), A.T @ C @ A)
        close(m.coriolis_torques(q, qd), A.T @ C @ qdp)


def test_forward_dynamics(case):
    rng = np.random.default_rng(4)
    m, pm, pd, A = case.model, case.pm, case.pd, case.A
    for _ in range(N_CONFIGS):
        q, qd, tau = case.random_state(rng)
        qp, qdp = A @ q, A @ qd
        if A.shape[0] == A.shape[1]:
            expected = pin.aba(pm, pd, qp, qdp, tau)
        else:
            M = pin.crba(pm, pd, qp)
            M = np.triu(M) + np.triu(M, 1).T
            bias = pin.rnea(pm, pd, qp, qdp, np.zeros(pm.nv))
            expected = np.linalg.solve(A.T @ M @ A, tau - A.T @ bias)
        close(m.forward_dynamics(q, qd, tau), expected)
        # and it inverts inverse dynamics
        close(m.inverse_dynamics(q, qd, m.forward_dynamics(q, qd, tau)), tau)


def test_forward_dynamics_as_accurate_as_aba(case):
    """qdd to 2e-12 rad/s^2 of Pinocchio's ABA over 2000 states (|qdd| up to about 1000), single and batched.
    Solving M qdd = tau - bias alone amplifies M's rounding by its condition number (about 600 on the Panda):
    4e-12 single, 6e-11 batched before the refinement step; ABA's own error is up to 1e-12 (against ABA in
    long double)."""
    m, pm = case.model, case.pm
    if (case.A.sum(axis=0) != 1.0).any():
        pytest.skip("the finger chain's mimic joint has no ABA counterpart in Pinocchio")
    if pm.nq != m.dof:  # the Panda arm: the fingers outside the chain locked at 0
        lock = [pm.getJointId(name) for name in pm.names[1:] if name not in m.joint_names]
        pm = pin.buildReducedModel(pm, lock, pin.neutral(pm))
    assert list(pm.names[1:]) == list(m.joint_names)
    pd = pm.createData()
    rng = np.random.default_rng(11)
    lo = np.where(np.isfinite(m.joint_lower), m.joint_lower, -np.pi)
    hi = np.where(np.isfinite(m.joint_upper), m.joint_upper, np.pi)
    n = 2000
    Q, QD, TAU = rng.uniform(lo, hi, (n, m.dof)), rng.uniform(-1, 1, (n, m.dof)), rng.uniform(-5, 5, (n, m.dof))
    expected = np.array([pin.aba(pm, pd, q, qd, tau) for q, qd, tau in zip(Q, QD, TAU)])
    single = np.array([m.forward_dynamics(q, qd, tau) for q, qd, tau in zip(Q, QD, TAU)])
    batch = m.forward_dynamics_batch(Q, QD, TAU)
    assert np.abs(expected).max() > 100.0
    assert np.abs(single - expected).max() <= 2e-12
    assert np.abs(batch - expected).max() <= 2e-12


def test_tip_wrench(case):
    """f_tip is the wrench the tip exerts on the environment, in the tip frame: tau += J_b^T f_tip.
    Pinocchio's fext is the force applied ON each joint's body, [f; m] in that joint frame."""
    rng = np.random.default_rng(5)
    m, pm, pd, A = case.model, case.pm, case.pd, case.A
    q, qd, qdd = case.random_state(rng)
    f_tip = rng.uniform(-10, 10, 6)
    qp = A @ q
    pin.forwardKinematics(pm, pd, qp)
    pin.updateFramePlacements(pm, pd)
    frame = pm.frames[case.fid]
    jid = frame.parentJoint
    # wrench on the environment -> wrench on the body is its negative; move it from the tip frame to the joint
    f_tip_pin = pin.Force(-f_tip[3:], -f_tip[:3])
    fext = [pin.Force.Zero() for _ in range(pm.njoints)]
    fext[jid] = frame.placement.act(f_tip_pin)
    expected = A.T @ pin.rnea(pm, pd, qp, A @ qd, A @ qdd, fext)
    close(m.inverse_dynamics(q, qd, qdd, f_tip=f_tip), expected)
    close(m.inverse_dynamics(q, qd, qdd, f_tip=f_tip) - m.inverse_dynamics(q, qd, qdd),
          m.jacobian_body(q).T @ f_tip)


def test_batched_match_single(case):
    rng = np.random.default_rng(6)
    m = case.model
    states = [case.random_state(rng) for _ in range(40)]
    Q, QD, QDD = (np.array(s) for s in zip(*states))
    close(m.fk_batch(Q), np.array([m.fk(q) for q in Q]))
    close(m.jacobian_space_batch(Q), np.array([m.jacobian_space(q) for q in Q]))
    close(m.jacobian_body_batch(Q), np.array([m.jacobian_body(q) for q in Q]))
    close(m.inverse_dynamics_batch(Q, QD, QDD), np.array([m.inverse_dynamics(*s) for s in states]))
    close(m.mass_matrix_batch(Q), np.array([m.mass_matrix(q) for q in Q]))
    close(m.forward_dynamics_batch(Q, QD, QDD), np.array([m.forward_dynamics(*s) for s in states]))


def test_custom_gravity(case):
    rng = np.random.default_rng(7)
    m, pm, pd, A = case.model, case.pm, case.pd, case.A
    q, qd, qdd = case.random_state(rng)
    g = np.array([1.0, -2.0, -3.0])
    pm.gravity.linear = g
    try:
        expected = A.T @ pin.rnea(pm, pd, A @ q, A @ qd, A @ qdd)
    finally:
        pm.gravity.linear = np.array([0.0, 0.0, -9.81])
    close(m.inverse_dynamics(q, qd, qdd, gravity=g), expected)
