"""The single calls' fast path (manip_core._fast: one handle, numba's type check) against the checked path:
every input it does not take goes on to the checks, with the same results or the same errors."""
import numpy as np
import pytest

from manip_core import InputError, ModelError, RobotModel
from manip_core.urdf import parse_urdf

CALLS = {
    "fk": (lambda m, q, qd, qdd, **k: m.fk(q, **k), (4, 4)),
    "jacobian_space": (lambda m, q, qd, qdd, **k: m.jacobian_space(q, **k), (6, 6)),
    "jacobian_body": (lambda m, q, qd, qdd, **k: m.jacobian_body(q, **k), (6, 6)),
    "inverse_dynamics": (lambda m, q, qd, qdd, **k: m.inverse_dynamics(q, qd, qdd, **k), (6,)),
    "mass_matrix": (lambda m, q, qd, qdd, **k: m.mass_matrix(q, **k), (6, 6)),
    "forward_dynamics": (lambda m, q, qd, qdd, **k: m.forward_dynamics(q, qd, qdd, **k), (6,)),
}


@pytest.fixture(scope="module")
def ur5():
    return RobotModel.load("ur5")


def _state(seed=0):
    return np.random.default_rng(seed).uniform(-1.5, 1.5, (3, 6))


def _unaligned(x):
    buf = np.zeros(x.size * 8 + 1, dtype=np.uint8)
    a = buf[1:].view(np.float64).reshape(x.shape)
    a[...] = x
    assert not a.flags.aligned
    return a


def _variants(x):
    """The same values as: list, read-only, float32-exact, non-contiguous, unaligned, Fortran-ordered 1-D."""
    ro = x.copy()
    ro.setflags(write=False)
    strided = np.zeros(2 * x.size)
    strided[::2] = x
    return {"list": list(x), "read-only": ro, "non-contiguous": strided[::2], "unaligned": _unaligned(x),
            "int": np.round(x).astype(np.int64), "tuple": tuple(x)}


@pytest.mark.parametrize("name", list(CALLS))
def test_any_array_form_gives_the_checked_result(ur5, name):
    fn, shape = CALLS[name]
    q, qd, qdd = _state()
    ref = fn(ur5, q, qd, qdd)
    # the checked path (manip_core._entry) on the same arrays: a non-default gravity equal to the default
    if name in ("inverse_dynamics", "forward_dynamics"):
        checked = getattr(ur5, name)(q, qd, qdd, gravity=np.array([0.0, 0.0, -9.81]))
        np.testing.assert_array_equal(ref, checked)
    for form, qv in _variants(q).items():
        expect = fn(ur5, np.asarray(qv, dtype=float), qd, qdd)
        np.testing.assert_array_equal(fn(ur5, qv, qd, qdd), expect, err_msg=form)
        if form == "int":
            continue
        np.testing.assert_array_equal(fn(ur5, qv, qd, qdd), ref, err_msg=form)
        if name in ("inverse_dynamics", "forward_dynamics"):
            np.testing.assert_array_equal(fn(ur5, q, _variants(qd)[form], _variants(qdd)[form]), ref, err_msg=form)
    data = ur5.create_data()
    out = np.empty(shape)
    assert fn(ur5, q, qd, qdd, out=out, data=data) is out
    np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("name", list(CALLS))
def test_bad_input_still_gets_the_projects_errors(ur5, name):
    fn, shape = CALLS[name]
    q, qd, qdd = _state(1)
    with pytest.raises(InputError, match="q must have shape"):
        fn(ur5, np.zeros(7), qd, qdd)
    with pytest.raises(InputError, match="q must be an array of numbers"):
        fn(ur5, "abc", qd, qdd)
    bad = q.copy()
    bad[2] = np.nan
    with pytest.raises(InputError, match="NaN"):
        fn(ur5, bad, qd, qdd)
    for out in (np.empty((3, 3)), np.empty(shape, dtype=np.float32), np.empty(shape).T.copy(order="F")
                if len(shape) == 2 else np.empty(shape)[::-1]):
        if out.shape == shape and out.flags.c_contiguous and out.dtype == np.float64:
            continue
        with pytest.raises(InputError, match="out must be"):
            fn(ur5, q, qd, qdd, out=out)
    ro_out = np.empty(shape)
    ro_out.setflags(write=False)
    with pytest.raises(InputError, match="out must be"):
        fn(ur5, q, qd, qdd, out=ro_out)
    other = RobotModel.load("ur5").create_data()
    with pytest.raises(InputError, match="another RobotModel"):
        fn(ur5, q, qd, qdd, out=np.empty(shape), data=other)


def test_dynamics_without_inertia_raise_model_error_on_the_fast_path():
    ur5 = RobotModel.load("ur5")
    tree = parse_urdf(str(ur5.source))
    for link in tree.links.values():
        link.inertial = None
    m = RobotModel(tree, ur5.base_link, ur5.tip_link)
    assert not m._has_inertia
    q = np.zeros(m.dof)
    for call in (lambda: m.inverse_dynamics(q, q, q), lambda: m.mass_matrix(q),
                 lambda: m.forward_dynamics(q, q, q), lambda: m.rnea_derivatives(q, q, q)):
        with pytest.raises(ModelError):
            call()
    m.fk(q)   # kinematics still work


def test_rnea_derivatives_fast_path_matches_checked_path(ur5):
    q, qd, qdd = _state(2)
    fast = ur5.rnea_derivatives(q, qd, qdd)
    checked = ur5.rnea_derivatives(list(q), list(qd), list(qdd))
    for a, b in zip(fast, checked):
        np.testing.assert_array_equal(a, b)
    data = ur5.create_data()
    out = tuple(np.empty((6, 6)) for _ in range(3))
    assert ur5.rnea_derivatives(q, qd, qdd, out=out, data=data) is out
    with pytest.raises(InputError):
        ur5.rnea_derivatives(q, qd, np.zeros(5))


def test_a_deep_copy_has_its_own_handle():
    import copy
    import gc
    m = RobotModel.load("ur5")
    q, qd, qdd = _state(3)
    ref = (m.fk(q), m.inverse_dynamics(q, qd, qdd))
    c = copy.deepcopy(m)
    assert c._h != m._h and c._ws is not m._ws
    del m
    gc.collect()
    for _ in range(3):
        np.zeros(10000)   # reuse the freed memory
    np.testing.assert_array_equal(c.fk(q), ref[0])
    np.testing.assert_array_equal(c.inverse_dynamics(q, qd, qdd), ref[1])
    np.testing.assert_array_equal(copy.copy(c).fk(q), ref[0])
