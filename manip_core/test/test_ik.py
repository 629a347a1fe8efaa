"""Numerical IK: success rate on reachable targets, honesty of the success flag, limits, bad input."""
import time

import numpy as np
import pytest

from manip_core import InputError, RobotModel
from manip_core.reference_robots import PANDA_REL, UR5_REL, example_robot
from manip_core.spatial import pose_error

N_TARGETS = 1000


def random_in_limits(model, rng, n=None):
    lo = np.where(np.isfinite(model.joint_lower), model.joint_lower, -np.pi)
    hi = np.where(np.isfinite(model.joint_upper), model.joint_upper, np.pi)
    return rng.uniform(lo, hi, None if n is None else (n, model.dof))


@pytest.fixture(scope="module")
def ur5():
    return RobotModel.from_urdf(example_robot(UR5_REL), tip_link="ee_link")


@pytest.fixture(scope="module")
def panda():
    return RobotModel.from_urdf(example_robot(PANDA_REL), tip_link="panda_hand_tcp")


@pytest.mark.parametrize("name", ["ur5", "panda"])
def test_success_rate_on_reachable_targets(name, request, record_property):
    model = request.getfixturevalue(name)
    rng = np.random.default_rng(0)
    Q = random_in_limits(model, rng, N_TARGETS)
    targets = model.fk_batch(Q)
    model.ik(targets[0])  # compile outside the timing
    ok, t = 0, 0.0
    for T in targets:
        t0 = time.perf_counter()
        r = model.ik(T)
        t += time.perf_counter() - t0
        # The flag is checked independently: FK of the returned q, the tolerances and the limits.
        dp, dr = pose_error(model.fk(r.q), T)
        honest = dp <= 1e-6 and dr <= 1e-6 and model.within_limits(r.q)
        assert r.success == honest
        assert np.all(r.q >= model.joint_lower) and np.all(r.q <= model.joint_upper)
        ok += r.success
    rate = ok / N_TARGETS
    record_property("ik_success_rate", rate)
    record_property("ik_mean_ms", 1e3 * t / N_TARGETS)
    print(f"{name}: IK success {rate:.1%}, mean {1e3 * t / N_TARGETS:.3f} ms")
    assert rate >= 0.995


def test_unreachable_target_fails_honestly(ur5):
    T = np.eye(4)
    T[:3, 3] = [3.0, 0.0, 0.5]  # 3 m away: the UR5 reaches about 0.95 m
    r = ur5.ik(T, max_restarts=5)
    assert not r.success
    assert r.position_error_m > 1.0
    assert "no solution" in r.message
    assert ur5.within_limits(r.q)


def test_target_only_reachable_outside_limits(ur5):
    """With the shoulder limited, a target behind the robot is unreachable: success must say so."""
    rng = np.random.default_rng(3)
    q = random_in_limits(ur5, rng)
    T = ur5.fk(q)
    tree = ur5.tree
    import copy
    narrow = copy.deepcopy(tree)
    j = narrow.joints[ur5.joint_names[0]]
    j.lower, j.upper = q[0] + 0.5, q[0] + 0.6
    for other in ur5.joint_names[1:]:
        narrow.joints[other].lower, narrow.joints[other].upper = -0.01, 0.01
    limited = RobotModel(narrow, ur5.base_link, ur5.tip_link)
    r = limited.ik(T, max_restarts=3)
    assert not r.success
    assert limited.within_limits(r.q)


def test_seed_is_used_and_result_is_repeatable(panda):
    rng = np.random.default_rng(4)
    q = random_in_limits(panda, rng)
    T = panda.fk(q)
    r1 = panda.ik(T, q_seed=q + 0.01)
    r2 = panda.ik(T, q_seed=q + 0.01)
    assert r1.success and r1.restarts == 0
    np.testing.assert_array_equal(r1.q, r2.q)
    # from a nearby seed the 7-DOF arm stays on the nearby solution
    assert np.max(np.abs(r1.q - q)) < 0.1


def test_position_only(panda):
    rng = np.random.default_rng(5)
    q = random_in_limits(panda, rng)
    p = panda.fk(q)[:3, 3]
    r = panda.ik(p)
    assert r.success
    assert np.linalg.norm(panda.fk(r.q)[:3, 3] - p) <= 1e-6


def test_bad_targets_raise(ur5):
    with pytest.raises(InputError, match="NaN"):
        ur5.ik(np.full((4, 4), np.nan))
    with pytest.raises(InputError, match="shape"):
        ur5.ik(np.eye(3))
    bad = np.eye(4)
    bad[:3, :3] *= 2.0
    with pytest.raises(InputError, match="orthonormal"):
        ur5.ik(bad)
    with pytest.raises(InputError, match="q_seed"):
        ur5.ik(np.eye(4), q_seed=[0.0, 1.0])
