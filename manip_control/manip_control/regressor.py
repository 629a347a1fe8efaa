"""Inertial parameters of a RobotModel and the dynamics regressor linear in them (no rclpy).

Each moving body b of the compiled chain has 10 inertial parameters, in its own body frame (the frame of
the joint that moves it):

    pi_b = [m, hx, hy, hz, Ixx, Ixy, Ixz, Iyy, Iyz, Izz]

m in kg, h = m c in kg*m (c: centre of mass), I: rotational inertia about the body-frame origin in body
axes, kg*m^2 (I = I_com - m [c]^2). The recursive Newton-Euler algorithm is linear in these parameters,
so the regressor column of a parameter is one RNEA call on a copy of the model whose bodies all have zero
inertia except that one parameter set to 1 ("RNEA with unit parameters"); the sum of the columns times
the true parameters is inverse_dynamics exactly (to rounding).

:func:`slotine_li_regressor` gives Y with Y pi = M(q) a + C(q, qd) v + g(q) for any v, a (the Slotine-Li
reference terms; C from the Christoffel symbols), by polarisation of two RNEA calls per column:
C(q, qd) v = (c(qd + v) - c(qd - v)) / 4 with c(w) = C(q, w) w.

These read the packed parameter array of manip_core's compiled model (``model._mf``, layout in
manip_core._layout); :func:`with_parameters` gives a copy of a model with other inertial parameters (a
payload, inertias off by a factor), used as a plant model by the tests and the bench.
"""
from __future__ import annotations

import copy

import numpy as np

from manip_core import _kernels as K
from manip_core._layout import BODY_STRIDE, O_H, O_I, O_M

__all__ = ["N_PARAMS", "parameters", "with_parameters", "tip_point_mass", "slotine_li_regressor",
           "regressor", "n_bodies", "tip_body"]

N_PARAMS = 10
_SYM = ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2))


def n_bodies(model):
    """Number of moving bodies of the compiled chain (== dof for a chain without mimic joints)."""
    return int(model._mi[0])


def tip_body(model):
    """Index of the body that carries the tip frame."""
    return int(model._mi[2])


def parameters(model):
    """(n_bodies, 10) inertial parameters [m, h (3), Ixx, Ixy, Ixz, Iyy, Iyz, Izz] of each body (see module)."""
    nb = n_bodies(model)
    out = np.empty((nb, N_PARAMS))
    for b in range(nb):
        o = b * BODY_STRIDE
        out[b, 0] = model._mf[o + O_M]
        out[b, 1:4] = model._mf[o + O_H:o + O_H + 3]
        Ibar = model._mf[o + O_I:o + O_I + 9].reshape(3, 3)
        out[b, 4:] = [Ibar[r, c] for r, c in _SYM]
    return out


def _write(mf, pi):
    for b in range(pi.shape[0]):
        o = b * BODY_STRIDE
        mf[o + O_M] = pi[b, 0]
        mf[o + O_H:o + O_H + 3] = pi[b, 1:4]
        Ibar = np.zeros((3, 3))
        for k, (r, c) in enumerate(_SYM):
            Ibar[r, c] = Ibar[c, r] = pi[b, 4 + k]
        mf[o + O_I:o + O_I + 9] = Ibar.reshape(-1)


def with_parameters(model, pi):
    """A copy of ``model`` (same kinematics, limits, names) whose bodies have the inertial parameters
    ``pi`` (n_bodies, 10). The copy owns its parameter array and scratch space."""
    pi = np.asarray(pi, dtype=np.float64)
    nb = n_bodies(model)
    if pi.shape != (nb, N_PARAMS):
        raise ValueError(f"inertial parameters must have shape ({nb}, {N_PARAMS}), got {pi.shape}")
    if not np.all(np.isfinite(pi)):
        raise ValueError("inertial parameters hold NaN or inf")
    # a fresh model of the same tree owns its arrays (and whatever manip_core derives from them), so the new
    # parameters are written in place; a shallow copy with a new array would leave such derived state behind
    out = type(model)(model.tree, model.base_link, model.tip_link)
    for k, v in vars(model).items():   # what was set after construction (e.g. by RobotModel.load)
        if k not in vars(out) and not isinstance(v, np.ndarray):
            setattr(out, k, copy.copy(v))
    _write(out._mf, pi)
    return out


def tip_offset(model):
    """(R (3, 3), p (3,)): the tip frame in the tip body's frame (m)."""
    o = n_bodies(model) * BODY_STRIDE
    return model._mf[o:o + 9].reshape(3, 3).copy(), model._mf[o + 9:o + 12].copy()


def tip_point_mass(model, mass_kg, offset_tip_m=(0.0, 0.0, 0.0)):
    """(10,) parameters, in the tip body's frame, of a point mass ``mass_kg`` at ``offset_tip_m`` (m, tip
    frame) from the tip: what a payload held at the tool adds to the tip body's parameters."""
    R, p = tip_offset(model)
    c = p + R @ np.asarray(offset_tip_m, dtype=np.float64)
    m = float(mass_kg)
    Ibar = m * (np.dot(c, c) * np.eye(3) - np.outer(c, c))
    return np.concatenate([[m], m * c, [Ibar[r, k] for r, k in _SYM]])


class _Columns:
    """Scratch for the unit-parameter RNEA calls of one model (its own parameter array)."""

    def __init__(self, model):
        self.model = model
        self.nb = n_bodies(model)
        self.mf = model._mf.copy()
        _write(self.mf, np.zeros((self.nb, N_PARAMS)))
        self.ws = K.new_ws(model._mi)
        self.units = []
        for k in range(N_PARAMS):
            u = np.zeros(N_PARAMS)
            u[k] = 1.0
            self.units.append(u)

    def columns(self, bodies, calls):
        """(dof, len(bodies) * 10): for each unit parameter, sum of sign * RNEA(q, v, a, g) over ``calls``
        (a list of (sign, q, v, a, g))."""
        mi, mf, ws = self.model._mi, self.mf, self.ws
        dof = self.model.dof
        Y = np.zeros((dof, len(bodies) * N_PARAMS))
        tau = np.empty(dof)
        ftip = np.zeros(0)
        zero = np.zeros((self.nb, N_PARAMS))
        for j, b in enumerate(bodies):
            for k in range(N_PARAMS):
                zero[b] = self.units[k]
                _write_body(mf, b, zero[b])
                col = Y[:, j * N_PARAMS + k]
                for sign, q, v, a, g in calls:
                    K.rnea(mf, mi, ws, q, v, a, g, ftip, tau)
                    col += sign * tau
            zero[b] = 0.0
            _write_body(mf, b, zero[b])
        return Y


def _write_body(mf, b, p):
    o = b * BODY_STRIDE
    mf[o + O_M] = p[0]
    mf[o + O_H:o + O_H + 3] = p[1:4]
    Ibar = np.zeros((3, 3))
    for k, (r, c) in enumerate(_SYM):
        Ibar[r, c] = Ibar[c, r] = p[4 + k]
    mf[o + O_I:o + O_I + 9] = Ibar.reshape(-1)


_CACHE = {}


def _cols(model):
    key = id(model)
    c = _CACHE.get(key)
    if c is None or c.model is not model:
        c = _Columns(model)
        _CACHE[key] = c
    return c


def _f(x, n):
    return np.ascontiguousarray(np.asarray(x, dtype=np.float64).reshape(n))


def regressor(model, q, qd, qdd, gravity=(0.0, 0.0, -9.81), bodies=None):
    """Y (dof, 10 * len(bodies)) with Y @ parameters(model)[bodies].ravel() == inverse_dynamics(q, qd, qdd).

    bodies: indices of the bodies whose columns are wanted (default: all, in order); gravity in m/s^2,
    base frame."""
    n = model.dof
    c = _cols(model)
    bodies = list(range(c.nb)) if bodies is None else list(bodies)
    return c.columns(bodies, [(1.0, _f(q, n), _f(qd, n), _f(qdd, n), _f(gravity, 3))])


def slotine_li_regressor(model, q, qd, v, a, gravity=(0.0, 0.0, -9.81), bodies=None):
    """Y (dof, 10 * len(bodies)) with Y pi = M(q) a + C(q, qd) v + g(q), C from the Christoffel symbols
    (dM/dt - 2C skew-symmetric); with v = qd it is the inverse-dynamics regressor."""
    n = model.dof
    c = _cols(model)
    bodies = list(range(c.nb)) if bodies is None else list(bodies)
    q, qd, v, a = _f(q, n), _f(qd, n), _f(v, n), _f(a, n)
    g = _f(gravity, 3)
    # 1/4 [RNEA(q, qd + v, 2a, 2g) - RNEA(q, qd - v, -2a, -2g)] = M a + (c(qd+v) - c(qd-v))/4 + g
    return c.columns(bodies, [(0.25, q, qd + v, 2.0 * a, 2.0 * g), (-0.25, q, qd - v, -2.0 * a, -2.0 * g)])
