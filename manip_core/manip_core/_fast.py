"""Single-call kernels behind one integer handle: the fast path of RobotModel's single-call methods.

Where the time of one call from Python went (bench/results/overhead-latest.md): the Python checks of every
argument, a numba argument unboxing per array (each makes and frees an NRT meminfo), and the kernel. Here:

- the model's constant arrays (mf, mi), its workspace (ws, dws) and its default gravity are reached through one
  int64 *handle*: the address of a small int64 header array [mf address, mf size, mi address, mi size, ws
  address, ws size, dws address, dws size, gravity address, 1 if every moving body has a mass].
  make_handle() builds it; the header and every array it points to must stay alive while the handle is used
  (RobotModel and RobotData keep them as attributes). Inside the kernel, _view_f64 / _view_i64 (manip_core._views)
  turn an address and a size into an array view (no meminfo, no reference count);
- the functions are compiled with ``_nrt=False``: their array arguments are unboxed without an NRT meminfo
  (~50 ns less per array). The kernels they call set ``_nrt=True`` themselves (_kernels._JIT/_SINGLE,
  _derivative_kernels): numba lets a callee inherit the caller's NRT flag unless it sets its own, and the
  kernels need the NRT for their array views;
- the numba dispatcher checks the argument types in C (float64, 1-D or 2-D, C-contiguous, aligned; outputs
  writeable, inputs writeable or read-only):
  each dispatcher here holds one compiled signature and may not compile others (disable_compile), so any other
  argument type raises TypeError, and the function itself checks the sizes against the model (status 3).
  RobotModel then takes its checked path (manip_core._entry), which converts what it can and raises
  InputError naming the input for the rest. Status: 0 done, 1 input holds NaN or inf, 2 singular mass matrix,
  3 an array has the wrong size (nothing was computed).

``<name>`` hold the GIL (the model's own workspace: never two threads at once), ``<name>_nogil`` release it
(a RobotData's handle, owned by one thread). Gravity is the model's default (0, 0, -9.81) m/s^2 in the base
frame and there is no tip wrench: calls with other values take the checked path.

Each name resolves on first use (module __getattr__): Dispatcher.compile(signature) loads the version from
numba's on-disk cache or compiles it, then the dispatcher is frozen to it and replaces the name in this module.
"""
from __future__ import annotations

import numpy as np
from numba import njit, types

from . import _derivative_kernels as _DK, _kernels as _K
from ._views import view_f64 as _view_f64, view_i64 as _view_i64

H_MF, H_MF_N, H_MI, H_MI_N, H_WS, H_WS_N, H_DWS, H_DWS_N, H_G, H_DYN, H_SIZE = range(11)


def make_handle(mf, mi, ws, dws, gravity, has_inertia):
    """(header array, handle int) for these arrays (float64 mf, ws, dws, gravity (3,); int64 mi); without
    has_inertia the dynamics kernels answer 3 (the checked path then raises ModelError)."""
    for a, dt in ((mf, np.float64), (mi, np.int64), (ws, np.float64), (dws, np.float64), (gravity, np.float64)):
        if not (a.dtype == dt and a.ndim == 1 and a.flags.c_contiguous and a.flags.aligned):
            raise ValueError("make_handle: arrays must be 1-D C-contiguous aligned of the kernels' dtypes")
    if gravity.size != 3:
        raise ValueError("make_handle: gravity must have 3 values")
    hdr = np.array([mf.ctypes.data, mf.size, mi.ctypes.data, mi.size, ws.ctypes.data, ws.size,
                    dws.ctypes.data, dws.size, gravity.ctypes.data, int(bool(has_inertia))], dtype=np.int64)
    hdr.setflags(write=False)
    return hdr, int(hdr.ctypes.data)


_HOLD = dict(cache=True, nogil=False, error_model="numpy", _nrt=False)
_FREE = dict(cache=True, nogil=True, error_model="numpy", _nrt=False)


@njit(inline="always", cache=True, _nrt=False)
def _model(h):
    hd = _view_i64(h, H_SIZE)
    mf = _view_f64(hd[H_MF], hd[H_MF_N])
    mi = _view_i64(hd[H_MI], hd[H_MI_N])
    ws = _view_f64(hd[H_WS], hd[H_WS_N])
    g = _view_f64(hd[H_G], 3)
    return hd, mf, mi, ws, g


@njit(inline="always", cache=True, _nrt=False)
def _vec_ok(x, n):
    return x.shape[0] == n and x.strides[0] == 8


@njit(inline="always", cache=True, _nrt=False)
def _mat_ok(x, r, c):
    return x.shape[0] == r and x.shape[1] == c and x.strides[1] == 8 and x.strides[0] == 8 * c


@njit(**_HOLD)
def _fk(h, q, out):
    hd, mf, mi, ws, g = _model(h)
    if not (_vec_ok(q, mi[1]) and _mat_ok(out, 4, 4)):
        return 3
    return _K.fk(mf, mi, ws, q, out)


@njit(**_HOLD)
def _jacobian_space(h, q, out):
    hd, mf, mi, ws, g = _model(h)
    if not (_vec_ok(q, mi[1]) and _mat_ok(out, 6, mi[1])):
        return 3
    return _K.jacobian_space(mf, mi, ws, q, out)


@njit(**_HOLD)
def _jacobian_body(h, q, out):
    hd, mf, mi, ws, g = _model(h)
    if not (_vec_ok(q, mi[1]) and _mat_ok(out, 6, mi[1])):
        return 3
    return _K.jacobian_body(mf, mi, ws, q, out)


@njit(**_HOLD)
def _rnea(h, q, qd, qdd, out):
    hd, mf, mi, ws, g = _model(h)
    n = mi[1]
    if not (hd[H_DYN] and _vec_ok(q, n) and _vec_ok(qd, n) and _vec_ok(qdd, n) and _vec_ok(out, n)):
        return 3
    return _K.rnea(mf, mi, ws, q, qd, qdd, g, g[:0], out)


@njit(**_HOLD)
def _mass_matrix(h, q, out):
    hd, mf, mi, ws, g = _model(h)
    if not (hd[H_DYN] and _vec_ok(q, mi[1]) and _mat_ok(out, mi[1], mi[1])):
        return 3
    return _K.mass_matrix(mf, mi, ws, q, out)


@njit(**_HOLD)
def _forward_dynamics(h, q, qd, tau, out):
    hd, mf, mi, ws, g = _model(h)
    n = mi[1]
    if not (hd[H_DYN] and _vec_ok(q, n) and _vec_ok(qd, n) and _vec_ok(tau, n) and _vec_ok(out, n)):
        return 3
    return _K.forward_dynamics(mf, mi, ws, q, qd, tau, g, g[:0], out)


@njit(**_HOLD)
def _rnea_derivatives(h, q, qd, qdd, dq, dv, M):
    hd, mf, mi, ws, g = _model(h)
    n = mi[1]
    if not (hd[H_DYN] and _vec_ok(q, n) and _vec_ok(qd, n) and _vec_ok(qdd, n) and _mat_ok(dq, n, n)
            and _mat_ok(dv, n, n) and _mat_ok(M, n, n)):
        return 3
    dws = _view_f64(hd[H_DWS], hd[H_DWS_N])
    return _DK.rnea_derivatives(mf, mi, ws, dws, q, qd, qdd, g, g[:0], dq, dv, M)



@njit(**_HOLD)
def _forward_dynamics_derivatives(h, q, qd, tau, dq, dv, minv):
    hd, mf, mi, ws, g = _model(h)
    n = mi[1]
    if not (hd[H_DYN] and _vec_ok(q, n) and _vec_ok(qd, n) and _vec_ok(tau, n) and _mat_ok(dq, n, n)
            and _mat_ok(dv, n, n) and _mat_ok(minv, n, n)):
        return 3
    dws = _view_f64(hd[H_DWS], hd[H_DWS_N])
    return _DK.forward_dynamics_derivatives(mf, mi, ws, dws, q, qd, tau, g, g[:0], dq, dv, minv)


@njit(inline="always", cache=True, _nrt=False)
def _jacobian_dot(h, q, qd, body_frame, out):
    hd, mf, mi, ws, g = _model(h)
    n = mi[1]
    if not (_vec_ok(q, n) and _vec_ok(qd, n) and _mat_ok(out, 6, n)):
        return 3
    dws = _view_f64(hd[H_DWS], hd[H_DWS_N])
    return _DK.jacobian_dot(mf, mi, ws, dws, q, qd, body_frame, out)


@njit(**_HOLD)
def _jacobian_dot_space(h, q, qd, out):
    return _jacobian_dot(h, q, qd, False, out)


@njit(**_HOLD)
def _jacobian_dot_body(h, q, qd, out):
    return _jacobian_dot(h, q, qd, True, out)


_V, _M2, _I = types.float64[::1], types.float64[:, ::1], types.int64
_R = types.Array(types.float64, 1, "C", readonly=True)
# name -> argument types: h, inputs (read-only or writeable: numba converts writeable to read-only, registered
# once per type), outputs (writeable); aligned C-contiguous float64 arrays
_SIGNATURES = {
    "fk": (_I, _R, _M2),
    "jacobian_space": (_I, _R, _M2),
    "jacobian_body": (_I, _R, _M2),
    "rnea": (_I, _R, _R, _R, _V),
    "mass_matrix": (_I, _R, _M2),
    "forward_dynamics": (_I, _R, _R, _R, _V),
    "rnea_derivatives": (_I, _R, _R, _R, _M2, _M2, _M2),
    "forward_dynamics_derivatives": (_I, _R, _R, _R, _M2, _M2, _M2),
    "jacobian_dot_space": (_I, _R, _R, _M2),
    "jacobian_dot_body": (_I, _R, _R, _M2),
}


# the same without the GIL (each its own function: numba's cache is keyed by module and name)
@njit(**_FREE)
def _fk_nogil(h, q, out):
    return _fk(h, q, out)


@njit(**_FREE)
def _jacobian_space_nogil(h, q, out):
    return _jacobian_space(h, q, out)


@njit(**_FREE)
def _jacobian_body_nogil(h, q, out):
    return _jacobian_body(h, q, out)


@njit(**_FREE)
def _rnea_nogil(h, q, qd, qdd, out):
    return _rnea(h, q, qd, qdd, out)


@njit(**_FREE)
def _mass_matrix_nogil(h, q, out):
    return _mass_matrix(h, q, out)


@njit(**_FREE)
def _forward_dynamics_nogil(h, q, qd, tau, out):
    return _forward_dynamics(h, q, qd, tau, out)


@njit(**_FREE)
def _rnea_derivatives_nogil(h, q, qd, qdd, dq, dv, M):
    return _rnea_derivatives(h, q, qd, qdd, dq, dv, M)



@njit(**_FREE)
def _forward_dynamics_derivatives_nogil(h, q, qd, tau, dq, dv, minv):
    return _forward_dynamics_derivatives(h, q, qd, tau, dq, dv, minv)


@njit(**_FREE)
def _jacobian_dot_space_nogil(h, q, qd, out):
    return _jacobian_dot_space(h, q, qd, out)


@njit(**_FREE)
def _jacobian_dot_body_nogil(h, q, qd, out):
    return _jacobian_dot_body(h, q, qd, out)


_DISPATCHERS = {name: globals()[f"_{name}"] for name in (*_SIGNATURES, *(f"{k}_nogil" for k in _SIGNATURES))}


def _arrays_only(search):
    def search_arrays(h, *arrays):
        return all(a.__class__ is np.ndarray for a in arrays) and search(h, *arrays)
    return search_arrays


def _mismatch(*args, **kws):
    raise TypeError("argument types other than writeable aligned C-contiguous float64 arrays")


def resolve(name):
    """The dispatcher ``name`` compiled (or loaded from the cache) for its one signature, then frozen to it."""
    base = name[:-6] if name.endswith("_nogil") else name
    d = _DISPATCHERS[name]
    d.compile(_SIGNATURES[base])
    d.disable_compile()
    # other argument types: a plain TypeError at once (numba's own search and message cost ~100 us per call;
    # its search runs for arrays only, where it registers the conversion writeable -> read-only once), then the
    # caller's checked path converts what it can or says what is wrong
    d._search_new_conversions = _arrays_only(d._search_new_conversions)
    d._explain_matching_error = _mismatch
    globals()[name] = d
    return d


def __getattr__(name):
    if name in _DISPATCHERS:
        return resolve(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
