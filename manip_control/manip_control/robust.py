"""Robust control: sliding-mode computed torque with a boundary layer (Slotine & Li, Applied Nonlinear
Control, 1991, ch. 7 and 9.2); no rclpy.

Sliding variable (rad/s), e = q_d - q: by default the integral surface (Slotine & Li sec. 7.1.3, s = (d/dt +
Lambda)^2 int(e) dt) s = ed + 2 Lambda e + Lambda^2 z, z = int(e) dt (rad*s), with reference velocity and
acceleration qr' = qd_d + 2 Lambda e + Lambda^2 z, qr'' = qdd_d + 2 Lambda ed + Lambda^2 e; with ``integral``
off, s = ed + Lambda e, qr' = qd_d + Lambda e, qr'' = qdd_d + Lambda ed. Either way s = qr' - qd. Law:

    tau = M^(q) qr'' + C^(q, qd) qr' + g^(q) + M^(q) Ks s + K(t) sat(s / phi)

with the model's terms (hats), Ks (1/s) a linear damping of s and K(t) (N*m) the switching gain. With the
true arm, d/dt (1/2 s^T M s) = s^T (Delta - M^ Ks s - K sat(s/phi)) (dM/dt - 2C skew), Delta = Y(q, qd,
qr', qr'') (pi - pi^) + tau_friction the model error. The gain is derived from stated bounds on it
(:class:`ModelErrorBounds`):

    |Delta_i| <= rho_i = sum_k |Y_ik| dpi_k + friction_i,   K_i = rho_i + eta_i,

dpi_k = relative_inertia_error * |pi^_k| for every body's 10 inertial parameters, plus, for the tip body,
the largest parameters of an unknown payload of up to payload_kg with its centre within payload_radius_m
of the tip frame's origin (m |c_j| and m |c|^2 per entry). Outside the layer every |s_i| then decreases at
eta_i / M-scale (the reaching condition); inside, sat is linear and s stays within phi, so that |e_i| settles
within phi_i / Lambda_i (integral surface: the L1 norm of p / (p + Lambda)^2 is 2 / (e Lambda) < 1 / Lambda).

Why the integral surface: inside the layer the law is a linear loop whose stiffness the sampled, delayed
loop caps (below); a payload is a slowly varying torque, which the integral of e cancels instead of
balancing it by a steady error (on the UR5 with a 1.5 kg payload and two periods of delay: 10x less RMS
error than computed torque, against 1.7x with s = ed + Lambda e). z integrates only while no joint saturates
in the direction that would wind it up further (conditional integration, as pid's clamping) and is cleared
by :meth:`SlidingMode.reset`.

Boundary layer: phi (rad/s) per joint, widened at each tick to phi_i >= h (M^-1)_ii K_i, then all by the
factor h lambda_max(D^1/2 M^-1 D^1/2) when it exceeds 1 (D = diag(K / phi)), so that the layer's gain adds at
most 1/h to the decay rate of s. Defaults from the control period dt and the stated measurement delay
(``delay_periods``, 2 control periods: the simulated pick-and-place's ROS graph), not from any arm:
Lambda = Ks = 1/h = w = gain_design.sliding_mode_rate(dt, delay_periods, integral), the largest rate for which
the decoupled loop inside the layer (s' = -a s, a in [Ks, Ks + 1/h]) sampled with that delay stays stable with
every gain doubled: 16.8/s at 4 ms and 2 periods with the integral surface, 23.2/s without. (The earlier fixed Lambda = Ks = 40/s
with 1/h = 1 / (2 (1 + delay) dt) = 42/s put that loop at its stability limit with two periods of delay: the
wrists of the simulated pick-and-place oscillated.) The layer actually used is ``last_phi`` (reported with the
sliding variable ``last_s``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from manip_core.errors import InputError

from . import regressor as R
from .control_laws import Param, _gain, _Law, check_nonnegative, check_positive, clip_efforts
from .gain_design import sliding_mode_rate

__all__ = ["ModelErrorBounds", "SlidingMode", "parameter_error_bound"]


@dataclass
class ModelErrorBounds:
    """Bounds on what the model gets wrong. relative_inertia_error: dimensionless, |pi_k - pi^_k| <=
    it * |pi^_k| for each inertial parameter; payload_kg: kg of unknown payload at the tool;
    payload_radius_m: m, the payload's centre lies within this distance of the tip frame origin;
    friction_nm: N*m (N), per joint or one value, bound on unmodelled joint friction and disturbances."""

    relative_inertia_error: float = 0.2
    payload_kg: float = 2.0
    payload_radius_m: float = 0.05
    friction_nm: object = 2.0

    def __post_init__(self):
        for name in ("relative_inertia_error", "payload_kg", "payload_radius_m"):
            v = float(getattr(self, name))
            if not (math.isfinite(v) and v >= 0.0):
                raise ValueError(f"{name} must be finite and >= 0, got {v}")
        f = np.atleast_1d(np.asarray(self.friction_nm, dtype=np.float64))
        if not np.all(np.isfinite(f) & (f >= 0.0)):
            raise ValueError(f"friction_nm must be finite and >= 0, got {f.tolist()}")


def parameter_error_bound(model, bounds, pi_model=None):
    """(n_bodies, 10) elementwise bound dpi on |pi_true - pi_model| from ``bounds`` (see module)."""
    pi = R.parameters(model) if pi_model is None else np.asarray(pi_model, float)
    d = float(bounds.relative_inertia_error) * np.abs(pi)
    m = float(bounds.payload_kg)
    if m > 0.0:
        Rt, p = R.tip_offset(model)
        c = np.abs(p) + float(bounds.payload_radius_m)   # |c_j| bound per axis (m), tip-body frame
        r2 = float(np.dot(p, p)) + 2.0 * float(bounds.payload_radius_m) * float(np.linalg.norm(p)) \
            + float(bounds.payload_radius_m) ** 2        # |c|^2 bound (m^2)
        pay = np.concatenate([[m], m * c, np.full(6, m * r2)])
        d[R.tip_body(model)] += pay
    return d


def _derived_or_nonnegative(name):
    def check(v):
        vals = list(v) if isinstance(v, (list, tuple)) else [v]
        if vals in ([-1.0], [-1]):
            return None
        return check_nonnegative(name)(v)
    return check


def _check_bool(name):
    def check(v):
        if not isinstance(v, (bool, np.bool_)):
            raise ValueError(f"{name} must be true or false, got {v!r}")
    return check


def _derived(v):
    """None for the 'derive it' value -1 (one value or [-1.0])."""
    vals = list(np.atleast_1d(np.asarray(v, dtype=np.float64)))
    return None if len(vals) == 1 and vals[0] == -1.0 else v


PARAMS = (
    Param("lambda", [-1.0], "sliding surface slope Lambda (1/s), one value or one per joint; [-1.0]: derived from "
          "the control period and delay_periods", _derived_or_nonnegative("robust.lambda")),
    Param("boundary_layer", 0.05, "boundary layer thickness phi (rad/s); widened when the control period needs it",
          check_positive("robust.boundary_layer")),
    Param("damping", -1.0, "linear damping Ks of s (1/s); -1: derived from the control period and delay_periods",
          _derived_or_nonnegative("robust.damping")),
    Param("delay_periods", 2.0, "control periods of measurement delay the boundary layer is sized for",
          check_nonnegative("robust.delay_periods")),
    Param("integral", True, "integral sliding surface s = ed + 2 lambda e + lambda^2 int(e) dt (true) or "
          "s = ed + lambda e (false)", _check_bool("robust.integral")),
    Param("eta", 0.5, "reaching margin eta (N*m) added to the derived gain", check_nonnegative("robust.eta")),
    Param("relative_inertia_error", 0.2, "bound on each inertial parameter's relative error (dimensionless)",
          check_nonnegative("robust.relative_inertia_error")),
    Param("payload_kg", 2.0, "bound on the unknown payload at the tool (kg)", check_nonnegative("robust.payload_kg")),
    Param("payload_radius_m", 0.05, "the payload's centre lies within this distance of the tip frame (m)",
          check_nonnegative("robust.payload_radius_m")),
    Param("friction_nm", [2.0], "bound on unmodelled friction/disturbance per joint (N*m), one or per joint",
          check_nonnegative("robust.friction_nm")),
)


def bounds_from_params(p):
    return ModelErrorBounds(p.get("relative_inertia_error", 0.2), p.get("payload_kg", 2.0),
                            p.get("payload_radius_m", 0.05), p.get("friction_nm", [2.0]))


class SlidingMode(_Law):
    """Sliding-mode computed torque with a boundary layer (see module)."""

    name = "robust"
    PARAMETERS = PARAMS

    @classmethod
    def from_params(cls, model, kp=None, kd=None, period_s=0.004, params=None):
        p = params or {}
        return cls(model, bounds_from_params(p), lam=_derived(p.get("lambda", [-1.0])),
                   boundary_layer=p.get("boundary_layer", 0.05), damping=_derived(p.get("damping", -1.0)),
                   eta=p.get("eta", 0.5), period_s=period_s, delay_periods=p.get("delay_periods", 2.0),
                   integral=p.get("integral", True))

    def __init__(self, model, bounds=None, lam=None, boundary_layer=0.05, damping=None, eta=0.5, period_s=0.004,
                 delay_periods=2.0, integral=True):
        super().__init__(model, period_s)
        n = model.dof
        self.bounds = bounds if bounds is not None else ModelErrorBounds()
        self.delay_periods = float(delay_periods)
        # w: the rate the sampled, delayed loop supports (gain_design.sliding_mode_rate); lam, damping None: w
        self.integral = bool(integral)
        self.rate = sliding_mode_rate(self.period_s, self.delay_periods, integral=self.integral)
        self.lam = _gain(lam, self.rate, n, "lambda")
        self.phi = float(boundary_layer)
        if not (math.isfinite(self.phi) and self.phi > 0):
            raise ValueError(f"boundary_layer must be > 0, got {boundary_layer}")
        self.damping = self.rate if damping is None else float(damping)
        if not (math.isfinite(self.damping) and self.damping >= 0.0):
            raise ValueError(f"damping must be finite and >= 0, got {damping}")
        if self.damping * self.period_s > 0.5:
            raise ValueError(f"damping {damping} 1/s is too high for the control period {self.period_s} s "
                             f"(damping * period must be <= 0.5)")
        self.eta = _gain(eta, 0.5, n, "eta")
        self.friction = _gain(self.bounds.friction_nm, 0.0, n, "friction_nm")
        self.dpi = parameter_error_bound(model, self.bounds).ravel()
        self.kp, self.kd = self.lam, np.ones(n)  # for the node's log line: s = ed + lambda e (+ integral)
        self.z = np.zeros(n)    # int(e) dt (rad*s), integral surface only
        self.last_s = np.zeros(n)
        self.last_phi = np.full(n, self.phi)
        self.last_gain = np.zeros(n)
        self._g = np.array([0.0, 0.0, -9.81])
        self.pi_model = R.parameters(model).ravel()

    def reset(self):
        """Clears the integral of the error."""
        self.z[:] = 0.0

    def compute(self, q, qd, q_d, qd_d, qdd_d):
        q, qd, q_d, qd_d, qdd_d = self._vectors(q, qd, q_d, qd_d, qdd_d)
        e, ed = self.errors(q, qd, q_d, qd_d)
        lam = self.lam
        if self.integral:
            p = 2.0 * lam * e + lam * lam * self.z
            v, a = qd_d + p, qdd_d + 2.0 * lam * ed + lam * lam * e
        else:
            v, a = qd_d + lam * e, qdd_d + lam * ed
        s = v - qd
        Y = R.slotine_li_regressor(self.model, q, qd, v, a, self._g)
        nominal = Y @ self.pi_model
        rho = np.abs(Y) @ self.dpi + self.friction
        k = rho + self.eta
        M = self.model.mass_matrix(q)
        Minv = np.linalg.inv(M)
        h = 1.0 / self.rate
        phi = np.maximum(self.phi, h * np.diag(Minv) * k)
        # coupling: the layer's gain D = diag(k / phi) must keep h lambda_max(M^-1 D) <= 1
        d = np.sqrt(k / phi)
        if not (np.isfinite(d).all() and np.isfinite(Minv).all()):  # finite input so large that the bounds overflow
            raise InputError(f"robust law: the model-error bounds overflow (|q_d - q| {np.max(np.abs(e)):.3g} rad, "
                             f"|qd| {np.max(np.abs(qd)):.3g} rad/s)")
        rho = h * float(np.linalg.eigvalsh(d[:, None] * Minv * d[None, :])[-1])
        if rho > 1.0:
            phi = phi * rho
        tau = nominal + M @ (self.damping * s) + k * np.clip(s / phi, -1.0, 1.0)
        self.last_s, self.last_phi, self.last_gain = s, phi, k
        out = clip_efforts(tau, self.effort_limits)
        if self.integral:   # conditional integration: not while a joint saturates in the direction of its error
            winding = out.saturated & (np.sign(out.tau_unclipped) == np.sign(e))
            self.z = np.where(winding, self.z, self.z + e * self.period_s)
        return out
