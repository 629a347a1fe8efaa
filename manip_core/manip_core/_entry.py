"""Compiled entry points of the single-call kernels, looked up once instead of on every call.

Calling a numba dispatcher first works out the numba type of every argument and picks the compiled version for
them (about 40 ns per array argument plus ~100 ns, bench/results/overhead-latest.md); only then does the
compiled wrapper unbox the arrays and run the kernel. RobotModel's single-call methods check every argument
themselves (float64, C-contiguous, shape: RobotModel._vec / _out), so they call the compiled wrapper of the one
signature they use directly: ``_entry.fk(mf, mi, ws, q, out)``.

SAFETY: an entry point does not check types. Pass only the model's own mf / mi / ws / dws and arrays that passed
RobotModel._vec / _out (a wrong dtype or rank would be read as float64 of that rank).

Each name resolves on first use (module __getattr__): Dispatcher.compile(signature) loads the version from
numba's on-disk cache, or compiles it, and the entry point replaces the name in this module, so later lookups
are plain module attributes. ``<name>_nogil`` are the variants that release the GIL, for callers that pass
their own workspace (RobotModel methods called with ``data=``).
"""
from __future__ import annotations

from numba import types

from . import _derivative_kernels as _DK, _kernels as _K

_A1, _I1, _A2, _B = types.float64[::1], types.int64[::1], types.float64[:, ::1], types.boolean
_M = (_A1, _I1, _A1)                 # mf, mi, ws
_MD = (_A1, _I1, _A1, _A1)           # mf, mi, ws, dws

# name -> (module, kernel name, argument types)
_SIGNATURES = {
    "fk": (_K, "fk", _M + (_A1, _A2)),
    "jacobian_space": (_K, "jacobian_space", _M + (_A1, _A2)),
    "jacobian_body": (_K, "jacobian_body", _M + (_A1, _A2)),
    "rnea": (_K, "rnea", _M + (_A1,) * 6),
    "mass_matrix": (_K, "mass_matrix", _M + (_A1, _A2)),
    "forward_dynamics": (_K, "forward_dynamics", _M + (_A1,) * 6),
    "rnea_derivatives": (_DK, "rnea_derivatives", _MD + (_A1,) * 5 + (_A2,) * 3),
    "forward_dynamics_derivatives": (_DK, "forward_dynamics_derivatives", _MD + (_A1,) * 5 + (_A2,) * 3),
    "jacobian_dot": (_DK, "jacobian_dot", _MD + (_A1, _A1, _B, _A2)),
}
_SIGNATURES.update({f"{k}_nogil": (m, f"{n}_nogil", s) for k, (m, n, s) in list(_SIGNATURES.items())})


def resolve(name):
    """The compiled entry point of kernel ``name`` for its one signature (compiles or loads it once)."""
    module, kernel, sig = _SIGNATURES[name]
    dispatcher = getattr(module, kernel)
    entry = dispatcher.compile(sig)
    globals()[name] = entry
    return entry


def __getattr__(name):
    if name in _SIGNATURES:
        return resolve(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
