"""manip_core._cpython (the single calls' builtin functions): same results as the numba fast path
(manip_core._fast) and Pinocchio, None for everything it does not take, no reference or memory leaks."""
import gc
import sys
import tracemalloc

import numpy as np
import pytest

from manip_core import RobotModel
from manip_core import _cpython as C, _fast as F
from manip_core.reference_robots import PANDA_REL, UR5_REL, example_robot

pin = pytest.importorskip("pinocchio")


@pytest.fixture(scope="module", params=[(UR5_REL, "ee_link"), (PANDA_REL, "panda_hand_tcp")], ids=["ur5", "panda"])
def robot(request):
    rel, tip = request.param
    return RobotModel.from_urdf(example_robot(rel), tip_link=tip)


def _state(m, seed=0):
    return np.random.default_rng(seed).uniform(-1.0, 1.0, (3, m.dof))


def _calls(m):
    """name -> (args builder, the numba fast path's kernel, output shape)."""
    n = m.dof
    return {"fk": (lambda q, v, a: (q,), F.fk, (4, 4)),
            "jacobian_space": (lambda q, v, a: (q,), F.jacobian_space, (6, n)),
            "jacobian_body": (lambda q, v, a: (q,), F.jacobian_body, (6, n)),
            "mass_matrix": (lambda q, v, a: (q,), F.mass_matrix, (n, n)),
            "rnea": (lambda q, v, a: (q, v, a), F.rnea, (n,)),
            "forward_dynamics": (lambda q, v, a: (q, v, a), F.forward_dynamics, (n,))}


def test_available_here_and_bound(robot):
    # this interpreter and numpy have the layout the functions read; a model gets each builtin function on the
    # first call of its method (the constructor calls fk and jacobian_space)
    assert C.AVAILABLE
    assert type(robot._c_fk).__name__ == "builtin_function_or_method"
    m = RobotModel.load("ur5")
    assert type(m._c_rnea).__name__ == "_LazyC"
    q = np.zeros(m.dof)
    m.inverse_dynamics(q, q, q)
    assert type(m._c_rnea).__name__ == "builtin_function_or_method"


def test_same_results_as_the_numba_fast_path_and_pinocchio(robot):
    full = pin.buildModelFromUrdf(str(robot.source))
    locked = [full.getJointId(j) for j in full.names[1:] if j not in robot.joint_names]  # Panda's fingers
    pm = pin.buildReducedModel(full, locked, pin.neutral(full)) if locked else full
    assert list(pm.names[1:]) == robot.joint_names
    pd = pm.createData()
    for seed in range(5):
        q, v, a = _state(robot, seed)
        for name, (args, fast, shape) in _calls(robot).items():
            fn = getattr(robot, f"_c_{name}")
            got = fn(*args(q, v, a))
            ref = np.empty(shape)
            assert fast(robot._h, *args(q, v, a), ref) == 0
            np.testing.assert_array_equal(got, ref, err_msg=name)
            out = np.empty(shape)
            assert fn(*args(q, v, a), out) is out
            np.testing.assert_array_equal(out, ref, err_msg=name)
        # the public methods take this path; Pinocchio as the oracle (1e-12)
        np.testing.assert_allclose(robot.inverse_dynamics(q, v, a), pin.rnea(pm, pd, q, v, a), rtol=0, atol=1e-12)
        np.testing.assert_allclose(robot.forward_dynamics(q, v, a), pin.aba(pm, pd, q, v, a), rtol=0, atol=1e-12)
        M = pin.crba(pm, pd, q)
        np.testing.assert_allclose(robot.mass_matrix(q), np.triu(M) + np.triu(M, 1).T, rtol=0, atol=1e-12)


def test_rnea_derivatives_same_as_the_numba_fast_path(robot):
    n = robot.dof
    for seed in range(3):
        q, v, a = _state(robot, seed)
        ref = tuple(np.empty((n, n)) for _ in range(3))
        assert F.rnea_derivatives(robot._h, q, v, a, *ref) == 0
        out = tuple(np.empty((n, n)) for _ in range(3))
        assert robot._c_rnea_derivatives(q, v, a, *out) is out[0]
        for x, y in zip(out, ref):
            np.testing.assert_array_equal(x, y)
        got = robot.rnea_derivatives(q, v, a)
        assert type(got) is tuple and len(got) == 3 and all(type(x) is np.ndarray for x in got)
        assert len({id(x) for x in got}) == 3 and all(x.flags.owndata and x.flags.writeable for x in got)
        for x, y in zip(got, ref):
            np.testing.assert_array_equal(x, y)
        assert robot.rnea_derivatives(q, v, a, out=out) is out
    bad = q.copy()
    bad[0] = np.nan
    f = robot._c_rnea_derivatives
    for args in [(q, v, a, *out[:2]), (q, v, bad, *out), (q, v, bad), (q, v), (q, v, a[:-1]),
                 (q, v, a, out[0], out[1], out[2].T),
                 (q, v, a, out[0], out[1], np.empty((n, n + 1))), (q, v, list(a), *out)]:
        assert f(*args) is None


def test_none_for_what_it_does_not_take(robot):
    q, v, a = _state(robot)
    n = robot.dof
    bad = q.copy()
    bad[1] = np.inf
    ro = np.empty((4, 4))
    ro.setflags(write=False)
    qro = q.copy()
    qro.setflags(write=False)

    class Sub(np.ndarray):
        pass

    f = robot._c_fk
    for args in [(), (q, np.empty((4, 4)), 1), (bad,), (q[:-1],), (list(q),), (q.astype(np.float32),),
                 (q.astype(">f8"),), (np.tile(q, (2, 1)),), (np.repeat(q, 2)[::2],), (q.view(Sub),),
                 (q, ro), (q, np.empty((4, 4)).T), (q, np.empty((4, 3))), (q, np.empty(16)),
                 (q, np.empty((4, 4), dtype=np.float32)), (q, "out")]:
        assert f(*args) is None, args
    assert f(qro) is not None   # read-only inputs are fine
    fd = robot._c_forward_dynamics
    for args in [(q, v), (q, v, bad), (q, v, a[:-1]), (q, v, a, np.empty(n + 1)), (q, v, list(a))]:
        assert fd(*args) is None, args
    # the public method then takes the checked path: same values, the project's errors
    np.testing.assert_array_equal(robot.fk(list(q)), robot.fk(q))


def test_no_leaks(robot):
    q, v, a = _state(robot)
    bad = q.copy()
    bad[0] = np.nan
    out = np.empty(robot.dof)
    f, fd, rd = robot._c_fk, robot._c_forward_dynamics, robot._c_rnea_derivatives
    for _ in range(100):
        f(q), f(bad), fd(q, v, bad), fd(q, v, a, out), rd(q, v, a), rd(q, v, bad)
    gc.collect()
    refs = (sys.getrefcount(None), sys.getrefcount(out), sys.getrefcount(q))
    for _ in range(2000):
        f(q), f(bad), fd(q, v, bad), fd(q, v, a, out), rd(q, v, a), rd(q, v, bad)
    gc.collect()
    now = (sys.getrefcount(None), sys.getrefcount(out), sys.getrefcount(q))
    # a reference to None or to an array gained or lost per call would show as thousands
    assert abs(now[0] - refs[0]) < 50 and now[1:] == refs[1:]
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        for _ in range(2000):
            f(q)                      # allocates its (4, 4) output, freed at once
            f(bad)                    # allocates, the kernel refuses NaN: freed, None
            fd(q, v, bad)
            fd(q, v, a, out)          # caller's output: nothing allocated
            rd(q, v, a)               # a new tuple of three new arrays, freed at once
            rd(q, v, bad)             # made, then released: None
        grown = tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()
    assert grown < 2000 * 16   # a leaked (4, 4) output per call would be 2000 * 128 bytes and more


def test_steady_state_out_call_allocates_nothing(robot):
    q, v, a = _state(robot)
    n = robot.dof
    outs = {"fk": np.empty((4, 4)), "M": np.empty((n, n)), "tau": np.empty(n)}
    calls = [lambda: robot.fk(q, out=outs["fk"]), lambda: robot.mass_matrix(q, out=outs["M"]),
             lambda: robot.inverse_dynamics(q, v, a, out=outs["tau"]),
             lambda: robot.forward_dynamics(q, v, a, out=outs["tau"])]
    for c in calls:
        c()
    tracemalloc.start()
    try:
        for c in calls:
            tracemalloc.reset_peak()
            start = tracemalloc.get_traced_memory()[0]
            for _ in range(50):
                assert c() is not None
            now, peak = tracemalloc.get_traced_memory()
            # nothing kept, and no array made on the way (an (n,) float64 array costs at least 112 bytes)
            assert now - start <= 0 and peak - start < 112
    finally:
        tracemalloc.stop()


def test_deep_copy_and_pickle_bind_their_own_functions(robot):
    import copy
    import pickle
    q, v, a = _state(robot, 3)
    ref = robot.forward_dynamics(q, v, a)
    for c in (copy.deepcopy(robot), pickle.loads(pickle.dumps(robot))):
        assert c._c_forward_dynamics is not robot._c_forward_dynamics
        np.testing.assert_array_equal(c.forward_dynamics(q, v, a), ref)


def test_a_function_that_cannot_be_built_leaves_the_numba_fast_path(monkeypatch):
    ref = RobotModel.load("ur5")
    q, v, a = _state(ref, 4)
    tau_ref, T_ref = ref.inverse_dynamics(q, v, a), ref.fk(q)

    def broken(name, c):
        raise RuntimeError("no cfunc here")

    monkeypatch.setattr(C, "function", broken)
    with pytest.warns(RuntimeWarning, match="no builtin function"):
        m = RobotModel.load("ur5")
        tau = m.inverse_dynamics(q, v, a)
    np.testing.assert_array_equal(tau, tau_ref)
    np.testing.assert_array_equal(m.fk(q), T_ref)
    assert type(ref._c_rnea).__name__ == "builtin_function_or_method" and m._c_rnea(q, v, a) is None


def test_forward_dynamics_derivatives_and_jacobian_dot_same_as_the_checked_path(robot):
    from manip_core import _entry as E
    n = robot.dof
    g, e = robot._g_default, np.zeros(0)
    for seed in range(3):
        q, v, t = _state(robot, seed)
        ref = tuple(np.empty((n, n)) for _ in range(3))
        assert E.forward_dynamics_derivatives(robot._mf, robot._mi, robot._ws, robot._dws, q, v, t, g, e, *ref) == 0
        got = robot.forward_dynamics_derivatives(q, v, t)
        assert type(got) is tuple and len(got) == 3 and len({id(x) for x in got}) == 3
        out = tuple(np.empty((n, n)) for _ in range(3))
        assert robot.forward_dynamics_derivatives(q, v, t, out=out) is out
        for x, y, z in zip(got, out, ref):
            np.testing.assert_array_equal(x, z)
            np.testing.assert_array_equal(y, z)
        for frame, body in (("space", False), ("body", True)):
            J = np.empty((6, n))
            assert E.jacobian_dot(robot._mf, robot._mi, robot._ws, robot._dws, q, v, body, J) == 0
            np.testing.assert_array_equal(robot.jacobian_time_derivative(q, v, frame), J)
            o = np.empty((6, n))
            assert robot.jacobian_time_derivative(q, v, frame, out=o) is o
            np.testing.assert_array_equal(o, J)
    bad = q.copy()
    bad[0] = np.inf
    fd, jd = robot._c_forward_dynamics_derivatives, robot._c_jacobian_dot_space
    for args in [(q, v, bad), (q, v), (q, v, list(t)), (q, v, t, *out[:2]), (q, v, t, out[0], out[1], out[2][:, :-1])]:
        assert fd(*args) is None
    for args in [(bad, v), (q,), (q, v, np.empty((6, n + 1))), (q, v[:-1]), (q, v, np.empty((6, n)).T.copy().T)]:
        assert jd(*args) is None
    # the checked path's errors
    from manip_core.errors import InputError
    with pytest.raises(InputError):
        robot.forward_dynamics_derivatives(q, v, bad)
    with pytest.raises(InputError):
        robot.jacobian_time_derivative(bad, v)
    with pytest.raises(InputError, match="frame"):
        robot.jacobian_time_derivative(q, v, "world")
    f, r = robot._c_forward_dynamics_derivatives, robot._c_jacobian_dot_body
    gc.collect()
    refs = sys.getrefcount(None)
    for _ in range(2000):
        f(q, v, t), f(q, v, bad), r(q, v), r(bad, v)
    gc.collect()
    assert abs(sys.getrefcount(None) - refs) < 50
