"""Model / Data split: caller-owned scratch (RobotModel.create_data()) and out= arrays on the single calls.

With out= and data=, a steady-state call allocates nothing beyond what the numba dispatcher itself needs to
call the kernel: the tracemalloc peak of the wrapped call equals that of the bare kernel call with the same
arrays (numpy and numba's NRT allocations are traced by tracemalloc, so an array allocated per call shows up).
"""
import tracemalloc

import numpy as np
import pytest

from manip_core import RobotModel
from manip_core import _derivative_kernels as D, _kernels as K
from manip_core.errors import InputError
from manip_core.reference_robots import PANDA_REL, UR5_REL, example_robot


@pytest.fixture(scope="module")
def ur5():
    return RobotModel.from_urdf(example_robot(UR5_REL), tip_link="ee_link")


def _state(m, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(-1.0, 1.0, (3, m.dof))


def _single_calls(m, q, qd, qdd, data):
    """name -> (call with out=/data=, the same call allocating, bare kernel call with the same arrays)."""
    n = m.dof
    T, J, t = np.empty((4, 4)), np.empty((6, n)), np.empty(n)
    M = np.empty((n, n))
    D3 = tuple(np.empty((n, n)) for _ in range(3))
    mf, mi, ws, dws, g, e = m._mf, m._mi, data.ws, data.dws, m._g_default, np.zeros(0)
    link = m.link_names[2]
    frame = m._link_frames[link]
    return {
        "fk": (lambda: m.fk(q, out=T, data=data), lambda: m.fk(q), lambda: K.fk(mf, mi, ws, q, T)),
        "fk(link)": (lambda: m.fk(q, link, out=T, data=data), lambda: m.fk(q, link),
                     lambda: K.fk_frame(mf, mi, ws, q, frame[0], frame[1], T)),
        "jacobian_space": (lambda: m.jacobian_space(q, out=J, data=data), lambda: m.jacobian_space(q),
                           lambda: K.jacobian_space(mf, mi, ws, q, J)),
        "jacobian_body": (lambda: m.jacobian_body(q, out=J, data=data), lambda: m.jacobian_body(q),
                          lambda: K.jacobian_body(mf, mi, ws, q, J)),
        "inverse_dynamics": (lambda: m.inverse_dynamics(q, qd, qdd, out=t, data=data),
                             lambda: m.inverse_dynamics(q, qd, qdd),
                             lambda: K.rnea(mf, mi, ws, q, qd, qdd, g, e, t)),
        "mass_matrix": (lambda: m.mass_matrix(q, out=M, data=data), lambda: m.mass_matrix(q),
                        lambda: K.mass_matrix(mf, mi, ws, q, M)),
        "forward_dynamics": (lambda: m.forward_dynamics(q, qd, qdd, out=t, data=data),
                             lambda: m.forward_dynamics(q, qd, qdd),
                             lambda: K.forward_dynamics(mf, mi, ws, q, qd, qdd, g, e, t)),
        "gravity_torques": (lambda: m.gravity_torques(q, out=t, data=data), lambda: m.gravity_torques(q),
                            lambda: K.rnea(mf, mi, ws, q, qd, qdd, g, e, t)),
        "rnea_derivatives": (lambda: m.rnea_derivatives(q, qd, qdd, out=D3, data=data),
                             lambda: m.rnea_derivatives(q, qd, qdd),
                             lambda: D.rnea_derivatives(mf, mi, ws, dws, q, qd, qdd, g, e, *D3)),
        "forward_dynamics_derivatives": (
            lambda: m.forward_dynamics_derivatives(q, qd, qdd, out=D3, data=data),
            lambda: m.forward_dynamics_derivatives(q, qd, qdd),
            lambda: D.forward_dynamics_derivatives(mf, mi, ws, dws, q, qd, qdd, g, e, *D3)),
        "jacobian_time_derivative": (lambda: m.jacobian_time_derivative(q, qd, out=J, data=data),
                                     lambda: m.jacobian_time_derivative(q, qd),
                                     lambda: D.jacobian_dot(mf, mi, ws, dws, q, qd, False, J)),
    }


def _peak_bytes(f, n=300):
    """(bytes still held after n calls, peak bytes above the start during them)."""
    for _ in range(20):
        f()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        start = tracemalloc.get_traced_memory()[0]
        for _ in range(n):
            f()
        now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return now - start, peak - start


def test_steady_state_calls_allocate_nothing(ur5):
    q, qd, qdd = _state(ur5)
    data = ur5.create_data()
    for name, (with_out, allocating, bare) in _single_calls(ur5, q, qd, qdd, data).items():
        held, peak = _peak_bytes(with_out)
        _, peak_bare = _peak_bytes(bare)
        _, peak_alloc = _peak_bytes(allocating)
        assert held <= 64, f"{name}: {held} bytes kept after 300 calls"
        assert peak <= peak_bare + 32, f"{name}: peak {peak} B with out=/data= vs {peak_bare} B for the kernel"
        # the measurement sees an allocation: the allocating form peaks higher by at least one joint vector
        assert peak_alloc >= peak + 8 * ur5.dof, f"{name}: allocating call peaks at {peak_alloc} B, out= at {peak} B"


def test_out_and_data_give_the_same_results(ur5):
    q, qd, qdd = _state(ur5, 1)
    data = ur5.create_data()
    for name, (with_out, allocating, _) in _single_calls(ur5, q, qd, qdd, data).items():
        a, b = with_out(), allocating()
        for x, y in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
            np.testing.assert_array_equal(x, y, err_msg=name)
    T = np.full((4, 4), np.nan)
    assert ur5.fk(q, out=T) is T
    tau = np.empty(ur5.dof)
    assert ur5.inverse_dynamics(q, qd, qdd, out=tau, data=data) is tau
    np.testing.assert_array_equal(ur5.coriolis_torques(q, qd, out=tau), ur5.coriolis_torques(q, qd))


def test_two_data_do_not_interfere(ur5):
    """Interleaved calls with two workspaces give what separate calls give."""
    d1, d2 = ur5.create_data(), ur5.create_data()
    (q1, qd1, qdd1), (q2, qd2, qdd2) = _state(ur5, 2), _state(ur5, 3)
    e1 = ur5.rnea_derivatives(q1, qd1, qdd1)
    e2 = ur5.rnea_derivatives(q2, qd2, qdd2)
    r1 = ur5.rnea_derivatives(q1, qd1, qdd1, data=d1)
    r2 = ur5.rnea_derivatives(q2, qd2, qdd2, data=d2)
    for a, b in zip(r1 + r2, e1 + e2):
        np.testing.assert_array_equal(a, b)


def test_bad_out_and_data_errors(ur5):
    q = np.zeros(ur5.dof)
    with pytest.raises(InputError, match=r"out must be .* shape \(4, 4\)"):
        ur5.fk(q, out=np.empty((3, 4)))
    with pytest.raises(InputError, match="out must be"):
        ur5.inverse_dynamics(q, q, q, out=np.empty(ur5.dof, dtype=np.float32))
    with pytest.raises(InputError, match="out must be"):
        ur5.mass_matrix(q, out=np.empty((ur5.dof, ur5.dof), order="F")[:, :ur5.dof - 1])
    ro = np.empty((6, ur5.dof))
    ro.setflags(write=False)
    with pytest.raises(InputError, match="out must be"):
        ur5.jacobian_space(q, out=ro)
    panda = RobotModel.from_urdf(example_robot(PANDA_REL), tip_link="panda_hand_tcp")
    with pytest.raises(InputError, match="another RobotModel"):
        ur5.fk(q, data=panda.create_data())
    with pytest.raises(InputError, match="another RobotModel"):
        ur5.rnea_derivatives(q, q, q, data=panda.create_data())


def test_unusual_inputs_take_the_checked_path(ur5):
    """The single calls run the kernels' compiled entry points (manip_core._entry), which trust their arrays:
    read-only, unaligned, strided, integer and list inputs must still give the results of a plain array."""
    q, qd, qdd = _state(ur5, 4)
    ref = (ur5.fk(q), ur5.inverse_dynamics(q, qd, qdd), ur5.mass_matrix(q))
    ro = q.copy()
    ro.setflags(write=False)
    raw = np.zeros(8 * ur5.dof + 1, dtype=np.uint8)
    unaligned = raw[1:].view(np.float64)
    unaligned[:] = q
    assert not unaligned.flags.aligned
    strided = np.repeat(q, 2)[::2]
    for x in (ro, unaligned, strided, list(q)):
        np.testing.assert_array_equal(ur5.fk(x), ref[0])
        np.testing.assert_array_equal(ur5.inverse_dynamics(x, qd, qdd), ref[1])
        np.testing.assert_array_equal(ur5.mass_matrix(x, data=ur5.create_data()), ref[2])
    qi = np.arange(ur5.dof)
    np.testing.assert_array_equal(ur5.fk(qi), ur5.fk(qi.astype(float)))
    with pytest.raises(InputError, match=r"q must have shape \(6,\)"):
        ur5.fk(np.zeros(5))
    with pytest.raises(InputError, match="NaN"):
        ur5.inverse_dynamics(q, np.full(ur5.dof, np.nan), qdd)


def test_threads_with_their_own_data_agree(ur5):
    """With data=, the kernels run without the GIL (manip_core._kernels.*_nogil): threads that each own a
    RobotData get exactly the serial results."""
    import threading
    states = [_state(ur5, 10 + k) for k in range(40)]
    expected = [(ur5.inverse_dynamics(*s), ur5.forward_dynamics(*s), ur5.rnea_derivatives(*s)[0]) for s in states]
    got = [[None] * len(states) for _ in range(2)]

    def work(t):
        data, tau = ur5.create_data(), np.empty(ur5.dof)
        for _ in range(20):
            for k, s in enumerate(states):
                got[t][k] = (ur5.inverse_dynamics(*s, out=tau, data=data).copy(),
                             ur5.forward_dynamics(*s, data=data), ur5.rnea_derivatives(*s, data=data)[0])

    threads = [threading.Thread(target=work, args=(t,)) for t in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for t in range(2):
        for e, g in zip(expected, got[t]):
            for a, b in zip(e, g):
                np.testing.assert_array_equal(a, b)
    assert K.rnea_nogil.targetoptions["nogil"] and not K.rnea.targetoptions["nogil"]
