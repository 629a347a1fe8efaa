"""Analytic derivatives of the dynamics of a RobotModel (for MPC, trajectory optimisation, learning).

The maths is in _derivative_kernels.py (Carpentier and Mansard, RSS 2018, in the base frame). These functions
check the input, pick or check the output arrays and call the kernels; RobotModel's methods of the same names
are thin wrappers around them.

Units: q rad or m, qd rad/s or m/s, qdd rad/s^2 or m/s^2, tau N*m or N; a derivative's unit is the quotient of
its numerator's and denominator's units (dtau/dq: N*m/rad, ...). gravity (3,) m/s^2 in the base frame; f_tip:
the wrench [moment; force] (N*m; N) that the tip exerts on the environment, in the tip frame at the tip origin.
"""
from __future__ import annotations

import numpy as np

from . import _derivative_kernels as D, _entry as E
from .errors import InputError

_F64 = np.dtype(np.float64)
_EMPTY = np.zeros(0)


def _out(out, n, what):
    """Caller's three (n, n) output arrays (float64, C-contiguous, writeable) or new ones."""
    if out is None:
        return np.empty((n, n)), np.empty((n, n)), np.empty((n, n))
    shapes = ((n, n),) * 3
    if not isinstance(out, (tuple, list)) or len(out) != len(shapes):
        raise InputError(f"{what}: out must be a tuple of {len(shapes)} arrays of shapes {shapes}")
    for a, s in zip(out, shapes):
        if not (a.__class__ is np.ndarray and a.shape == s and a.dtype is _F64 and a.flags.carray):
            raise InputError(f"{what}: out must hold writeable C-contiguous float64 arrays of shapes {shapes}, "
                             f"got {getattr(a, 'shape', type(a).__name__)} "
                             f"{getattr(a, 'dtype', '')}")
    return tuple(out)


def _scratch(robot, data):
    if data is None:
        return robot._ws, robot._dws
    return robot._ws_of(data), data._dws


def rnea_derivatives(robot, q, qd, qdd, gravity, f_tip, out, data=None):
    if not robot._has_inertia:
        robot._need_inertia()
    q, qd, qdd = robot._vec3(q, qd, qdd, ("q", "qd", "qdd"))
    dq, dv, M = _out(out, robot.dof, "rnea_derivatives")
    ws, dws = _scratch(robot, data)
    # compiled entry points (manip_core._entry): every array is checked above; with data= without the GIL
    if (E.rnea_derivatives if data is None else E.rnea_derivatives_nogil)(
            robot._mf, robot._mi, ws, dws, q, qd, qdd, robot._gravity(gravity),
            _EMPTY if f_tip is None else robot._ftip(f_tip), dq, dv, M):
        robot._status(1, "rnea_derivatives")
    return dq, dv, M


def forward_dynamics_derivatives(robot, q, qd, tau, gravity, f_tip, out, data=None):
    if not robot._has_inertia:
        robot._need_inertia()
    q, qd, tau = robot._vec3(q, qd, tau, ("q", "qd", "tau"))
    dq, dv, minv = _out(out, robot.dof, "forward_dynamics_derivatives")
    ws, dws = _scratch(robot, data)
    st = (E.forward_dynamics_derivatives if data is None else E.forward_dynamics_derivatives_nogil)(
        robot._mf, robot._mi, ws, dws, q, qd, tau, robot._gravity(gravity),
        _EMPTY if f_tip is None else robot._ftip(f_tip), dq, dv, minv)
    if st:
        robot._status(st, "forward_dynamics_derivatives")
    return dq, dv, minv


_FRAMES = {"space": False, "body": True}


def jacobian_time_derivative(robot, q, qd, frame, out, data=None):
    if frame not in _FRAMES:
        raise InputError(f"jacobian_time_derivative: frame must be 'space' or 'body', got {frame!r}")
    n = robot.dof
    q, qd = robot._vec(q, n, "q"), robot._vec(qd, n, "qd")
    if out is None:
        dJ = np.empty((6, n))
    elif out.__class__ is np.ndarray and out.shape == (6, n) and out.dtype is _F64 and out.flags.carray:
        dJ = out
    else:
        raise InputError(f"jacobian_time_derivative: out must be a writeable C-contiguous float64 array of "
                         f"shape (6, {n}), got {getattr(out, 'shape', type(out).__name__)} "
                         f"{getattr(out, 'dtype', '')}")
    ws, dws = _scratch(robot, data)
    if (E.jacobian_dot if data is None else E.jacobian_dot_nogil)(robot._mf, robot._mi, ws, dws, q, qd,
                                                                  _FRAMES[frame], dJ):
        robot._status(1, "jacobian_time_derivative")
    return dJ


def _batch_inputs(robot, X, Y, Z, names, what):
    X, Y, Z = robot._batch(X, names[0]), robot._batch(Y, names[1]), robot._batch(Z, names[2])
    if not X.shape == Y.shape == Z.shape:
        raise InputError(f"{what}: {', '.join(names)} must have the same shape, got {X.shape}, {Y.shape}, "
                         f"{Z.shape}")
    return X, Y, Z


def _batch_extras(robot, gravity, f_tip, what):
    g, f = robot._gravity(gravity), robot._ftip(f_tip)
    if not (np.all(np.isfinite(g)) and np.all(np.isfinite(f))):
        raise InputError(f"{what}: gravity or f_tip holds NaN or inf")
    return g, f


def rnea_derivatives_batch(robot, Q, QD, QDD, gravity, f_tip):
    robot._need_inertia()
    what = "rnea_derivatives_batch"
    Q, QD, QDD = _batch_inputs(robot, Q, QD, QDD, ("Q", "QD", "QDD"), what)
    g, f = _batch_extras(robot, gravity, f_tip, what)
    shape = (Q.shape[0], robot.dof, robot.dof)
    dq, dv, M = np.empty(shape), np.empty(shape), np.empty(shape)
    robot._batch_status(D.rnea_derivatives_batch(robot._mf, robot._mi, Q, QD, QDD, g, f, dq, dv, M), what,
                        Q, QD, QDD)
    return dq, dv, M


def forward_dynamics_derivatives_batch(robot, Q, QD, TAU, gravity, f_tip):
    robot._need_inertia()
    what = "forward_dynamics_derivatives_batch"
    Q, QD, TAU = _batch_inputs(robot, Q, QD, TAU, ("Q", "QD", "TAU"), what)
    g, f = _batch_extras(robot, gravity, f_tip, what)
    shape = (Q.shape[0], robot.dof, robot.dof)
    dq, dv, minv = np.empty(shape), np.empty(shape), np.empty(shape)
    robot._batch_status(D.forward_dynamics_derivatives_batch(robot._mf, robot._mi, Q, QD, TAU, g, f, dq, dv,
                                                             minv), what, Q, QD, TAU)
    return dq, dv, minv
