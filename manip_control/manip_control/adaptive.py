"""Adaptive computed torque (Slotine & Li 1987; Applied Nonlinear Control, sec. 9.2); no rclpy.

Reference velocity and acceleration (rad/s, rad/s^2) and the sliding variable s = qr' - qd (rad/s), e = q_d - q:
by default on the integral surface (as manip_control.robust, Slotine & Li sec. 7.1.3) qr' = qd_d + 2 Lambda e +
Lambda^2 z, qr'' = qdd_d + 2 Lambda ed + Lambda^2 e, z = int(e) dt (rad*s); with ``integral`` off qr' = qd_d +
Lambda e, qr'' = qdd_d + Lambda ed. Law:

    tau = Y(q, qd, qr', qr'') pi^ + Y_f(qr') phi^ + M^(q) Ks s,   d pi^/dt = Gamma Y_a^T s,
    d phi^/dt = Gamma_f Y_f^T s   (both then projected)

Y pi = M(q) qr'' + C(q, qd) qr' + g(q) is linear in the 10 inertial parameters of each body
(manip_control.regressor); the law adapts those of ``adapt`` ("tip": the tip body, which an unknown payload
changes; "all": every body) and keeps the model's values for the others. With V = 1/2 s^T M s + 1/2
pi~^T Gamma^-1 pi~, dV/dt = -s^T M^ Ks s <= 0: s -> 0 and e -> 0 (s is e filtered by (p + Lambda)^2 / p, or
p + Lambda); the estimates converge to the true parameters on a persistently exciting trajectory.

Why the integral surface: with ``adapt`` "tip" every model error is attributed to the tip body. With 20 %
heavier links the tip mass estimate rises (0.19 -> 0.6 kg) to carry the links' extra weight at the shoulder,
and that mass then loads the light wrists with a torque no tip parameter can remove: 6e-2 rad RMS on PyBullet
(computed torque: 8e-3). The integral of e cancels such a slowly varying residual: 9e-3 rad in the library
simulation with two periods of delay, and the payload still 23x better than computed torque.

Joint friction (``friction_gains`` > 0): phi = [Fv (N*m*s/rad); Fc (N*m)] per joint, Y_f(v) = [diag(v),
diag(tanh(v / w))], w = ``friction_width`` (rad/s), evaluated at the reference velocity qr' (Sadegh & Horowitz's
desired compensation), not at the measured qd: on the UR5's light wrists (1.3e-4 kg*m^2) a Coulomb term
switching on the delayed, measured velocity chattered and diverged in the library simulation. With qr', the
viscous mismatch Fv (qd - qr') = -Fv s only adds damping to dV/dt; the Coulomb mismatch is bounded by 2 Fc.
Box: 0 <= Fc <= ``friction_nm`` and 0 <= Fv <= friction_nm / v_max (the friction torque stays within
friction_nm up to the joint's velocity limit). Why: with 20 % heavier links plus friction (bench/control.py,
Coulomb 1 % of the effort limit), the inertial parameters cannot carry the wrists' friction and the integral
surface hunted on it (wrist 3: 0.39 rad RMS, computed torque 0.19); adapting friction: 7.2e-3 rad RMS against
computed torque's 1.0e-1. Friction columns get the same normalised caps as the inertial ones.

Gamma is diagonal, one gain per kind of parameter: [mass, first moments h, inertias] in SI units of
(parameter unit)^2 / (N*m*rad). Default [5, 0, 0]: only the mass adapts. The first moments of the UR5's
wrist-3 body are seen almost only by wrist 3 (1.3e-4 kg*m^2); while the mass was still being learnt, the
shoulder's errors drove them to 0.01-0.02 kg*m, the torque that put on wrist 3 swung it by 0.03-0.1 rad and
the normalised caps (below) let them unwind only slowly: with the payload, 2 periods of delay and gains
[2, 0.05, 0.002], 5.2e-3 rad RMS (wrist 3 max 0.031 rad), against 2.6e-3 (0.005 rad) adapting the mass
alone (1.0e-2 against 2.7e-3 rad on PyBullet). Set the other gains for a payload whose centre is off the
tool axis.

Projection: after each step pi^ is clipped to the box of :func:`parameter_box` (the model's values +- the
stated ModelErrorBounds, robust.parameter_error_bound, with the masses and diagonal inertias kept above the
model's values less the relative error: a payload only adds those), so the estimates stay bounded whatever
the excitation and noise (the box contains the true parameters when the bounds hold, which keeps dV/dt <= 0).
The box is not the physically consistent set (positive-definite inertias). With noisy velocities the
estimates drift (noise in s drives them): ``dead_zone`` stops the adaptation while |s| is within the noise
(bench/control.py uses 2 rad/s with 1e-3 rad encoder noise).

Normalised gains. The update closes a second loop: d(Y pi^)/dt = Y Gamma Y^T s acts on s like a spring of
rate^2 Gamma_j Y_j^T M^-1 Y_j per parameter j (column Y_j). On a light joint (the UR5's wrist 3: 2e-4 kg*m^2)
a first-moment parameter's gravity column makes that rate ~200/s, far beyond what a 250 Hz loop with two
periods of measurement delay supports: the wrist chattered on PyBullet. Each parameter's gain is therefore
capped at every tick (a normalised update, Ioannou & Sun, Robust Adaptive Control, 1996, sec. 4.5 and 8.5):

    Gamma_j(t) = min(Gamma_j, w_a^2 / (Y_j^T M^(q)^-1 Y_j)),   w_a = ``adaptation_rate`` (1/s, default Ks / 2)

so that no parameter's loop is faster than critically damped by Ks. With a time-varying Gamma the
Lyapunov argument above holds only while no cap is active (it assumes an undelayed loop anyway); the
estimates stay bounded by the projection whatever the caps. z integrates only while no joint saturates in
the direction that would wind it up further; :meth:`SlotineLi.reset` clears it and keeps the estimates.
"""
from __future__ import annotations

import math

import numpy as np

from . import regressor as R
from .control_laws import Param, _gain, _Law, check_choice, check_nonnegative, check_positive, clip_efforts
from .robust import ModelErrorBounds, _check_bool, parameter_error_bound

__all__ = ["SlotineLi", "parameter_box"]

_KIND = np.array([0] + [1] * 3 + [2] * 6)


def _rate_check(v):
    if v in (-1, -1.0):
        return
    check_nonnegative("adaptive.adaptation_rate")(v)


_ADDS = np.array([0, 4, 7, 9])   # m, Ixx, Iyy, Izz: what a payload can only increase


def parameter_box(model, bounds, pi_model=None):
    """(lower, upper), each (n_bodies, 10): the projection box of the estimates. Every parameter within
    relative_inertia_error of the model's; the tip body's parameters also within what a payload of up to
    payload_kg, centred within payload_radius_m of the tip, adds (robust.parameter_error_bound), except that
    a payload only adds mass and diagonal inertia (m >= 0, I_kk = m (|c|^2 - c_k^2) >= 0): for those the
    lower bound is the model's value less the relative error alone. The one-sided bounds keep the estimated
    wrist inertia positive: with the payload's +-1.2e-3 kg*m^2 (3 kg within 0.02 m) on the UR5's 1.3e-4
    kg*m^2 wrist 3, an estimate of -1e-3 kg*m^2 turned the Lambda (I^ - I) ed term of the law into a negative
    damping larger than M Ks, and wrist 3 swung 3.9 rad with 20 % heavier links (all gains set)."""
    pi = R.parameters(model) if pi_model is None else np.asarray(pi_model, float)
    dpi = parameter_error_bound(model, bounds, pi)
    rel = float(bounds.relative_inertia_error) * np.abs(pi)
    lower, upper = pi - dpi, pi + dpi
    lower[:, _ADDS] = pi[:, _ADDS] - rel[:, _ADDS]
    lower[:, 0] = np.maximum(lower[:, 0], 0.0)
    return lower, upper


class SlotineLi(_Law):
    """Slotine-Li adaptive computed torque (see module). ``estimates``: (len(bodies), 10) current pi^."""

    name = "adaptive"
    PARAMETERS = (
        Param("lambda", [10.0], "sliding surface slope Lambda (1/s), one value or one per joint",
              check_nonnegative("adaptive.lambda")),
        Param("damping", 20.0, "linear damping Ks of s (1/s)", check_nonnegative("adaptive.damping")),
        Param("adaptation_gains", [5.0, 0.0, 0.0], "Gamma for [mass, first moment, inertia] parameters, "
              "(parameter unit)^2/(N*m*rad); 0: that kind keeps the model's values", check_nonnegative("adaptive.adaptation_gains")),
        Param("adaptation_rate", -1.0, "w_a (1/s): each parameter's adaptation gain is capped so that its loop "
              "(Gamma_j Y_j^T M^-1 Y_j) is no faster than w_a^2; -1: damping / 2", _rate_check),
        Param("dead_zone", 0.0, "rad/s: no adaptation while |s| (2-norm) is below it (robustness to measurement "
              "noise, Slotine & Li sec. 8.6)", check_nonnegative("adaptive.dead_zone")),
        Param("integral", True, "integral sliding surface s = ed + 2 lambda e + lambda^2 int(e) dt (true) or "
              "s = ed + lambda e (false)", _check_bool("adaptive.integral")),
        Param("adapt", "tip", "which bodies' parameters adapt: tip or all", check_choice("adaptive.adapt",
                                                                                         ("tip", "all"))),
        Param("friction_gains", [1.0, 1.0], "Gamma_f for [viscous (N*m*s/rad), Coulomb (N*m)] joint friction, "
              "(parameter unit)^2/(N*m*rad); 0: no friction term of that kind", check_nonnegative(
                  "adaptive.friction_gains")),
        Param("friction_nm", [2.0], "projection box: Coulomb friction within [0, friction_nm] and viscous within "
              "[0, friction_nm / velocity limit] per joint (N*m), one value or one per joint",
              check_nonnegative("adaptive.friction_nm")),
        Param("friction_width", 0.2, "w (rad/s): the Coulomb term is Fc tanh(qr' / w)",
              check_positive("adaptive.friction_width")),
        Param("relative_inertia_error", 0.2, "projection box: relative error of each inertial parameter "
              "(dimensionless)", check_nonnegative("adaptive.relative_inertia_error")),
        Param("payload_kg", 3.0, "projection box: largest unknown payload at the tool (kg)",
              check_nonnegative("adaptive.payload_kg")),
        Param("payload_radius_m", 0.02, "projection box: payload centre within this distance of the tip (m)",
              check_nonnegative("adaptive.payload_radius_m")),
    )

    @classmethod
    def from_params(cls, model, kp=None, kd=None, period_s=0.004, params=None):
        p = params or {}
        bounds = ModelErrorBounds(p.get("relative_inertia_error", 0.2), p.get("payload_kg", 3.0),
                                  p.get("payload_radius_m", 0.02), p.get("friction_nm", [2.0]))
        return cls(model, bounds, lam=p.get("lambda", [10.0]), damping=p.get("damping", 20.0),
                   gains=p.get("adaptation_gains", [5.0, 0.0, 0.0]), adapt=p.get("adapt", "tip"),
                   dead_zone=p.get("dead_zone", 0.0), period_s=period_s,
                   adaptation_rate=p.get("adaptation_rate", -1.0), integral=p.get("integral", True),
                   friction_gains=p.get("friction_gains", [1.0, 1.0]),
                   friction_width=p.get("friction_width", 0.2))

    def __init__(self, model, bounds=None, lam=10.0, damping=20.0, gains=(5.0, 0.0, 0.0), adapt="tip",
                 period_s=0.004, dead_zone=0.0, adaptation_rate=None, integral=True, friction_gains=(1.0, 1.0),
                 friction_width=0.2):
        super().__init__(model, period_s)
        n = model.dof
        check_choice("adapt", ("tip", "all"))(adapt)
        self.bounds = bounds if bounds is not None else ModelErrorBounds(0.2, 3.0, 0.02, 2.0)
        self.lam = _gain(lam, 10.0, n, "lambda")
        self.damping = float(damping)
        if not (math.isfinite(self.damping) and self.damping >= 0 and self.damping * self.period_s <= 0.5):
            raise ValueError(f"damping must be >= 0 and <= 0.5 / period ({0.5 / self.period_s:g} 1/s), got {damping}")
        g = np.asarray(gains, dtype=np.float64).reshape(-1)
        if g.size != 3 or not np.all(np.isfinite(g) & (g >= 0)):
            raise ValueError(f"adaptation gains must be 3 values >= 0 (mass, first moment, inertia), got {g.tolist()}")
        self.bodies = [R.tip_body(model)] if adapt == "tip" else list(range(R.n_bodies(model)))
        self.adapt = adapt
        pi_model = R.parameters(model)
        lower, upper = parameter_box(model, self.bounds, pi_model)
        self.pi_model = pi_model[self.bodies].ravel()
        self.lower, self.upper = lower[self.bodies].ravel(), upper[self.bodies].ravel()
        self.gamma = np.tile(g[_KIND], len(self.bodies))
        self.pi_hat = self.pi_model.copy()
        self.dead_zone = float(dead_zone)
        rate = 0.5 * self.damping if adaptation_rate is None or float(adaptation_rate) == -1.0 \
            else float(adaptation_rate)
        if not (math.isfinite(rate) and rate >= 0.0):
            raise ValueError(f"adaptation_rate must be >= 0 (1/s) or -1, got {adaptation_rate}")
        self.adaptation_rate = rate
        self.last_gain = self.gamma.copy()   # Gamma_j(t) of the last update
        self.kp, self.kd = self.lam, np.ones(n)  # for the node's log line: s = ed + lambda e
        self._g = np.array([0.0, 0.0, -9.81])
        self.integral = bool(integral)
        self.z = np.zeros(n)    # int(e) dt (rad*s), integral surface only
        gf = np.asarray(friction_gains, dtype=np.float64).reshape(-1)
        if gf.size != 2 or not np.all(np.isfinite(gf) & (gf >= 0)):
            raise ValueError(f"friction gains must be 2 values >= 0 (viscous, Coulomb), got {gf.tolist()}")
        check_positive("friction_width")(float(friction_width))
        self.friction_width = float(friction_width)
        fmax = _gain(self.bounds.friction_nm, 2.0, n, "friction_nm")
        vmax = np.asarray(model.velocity_limits, dtype=np.float64)
        vmax = np.where(np.isfinite(vmax) & (vmax > 0.0), vmax, np.inf)
        self.friction_gamma = np.repeat(gf, n)
        self.friction_upper = np.concatenate([fmax / vmax, fmax])
        self.phi_hat = np.zeros(2 * n)   # [Fv (N*m*s/rad); Fc (N*m)] per joint, the model has none

    @property
    def estimates(self):
        return self.pi_hat.reshape(len(self.bodies), R.N_PARAMS).copy()

    @property
    def friction_estimates(self):
        """(2, n): [viscous (N*m*s/rad); Coulomb (N*m)] per joint."""
        return self.phi_hat.reshape(2, self.model.dof).copy()

    def reset(self):
        """Clears the integral of the error; keeps the estimates (what was learnt about the arm stays valid)."""
        self.z[:] = 0.0

    def compute(self, q, qd, q_d, qd_d, qdd_d):
        q, qd, q_d, qd_d, qdd_d = self._vectors(q, qd, q_d, qd_d, qdd_d)
        e, ed = self.errors(q, qd, q_d, qd_d)
        lam = self.lam
        if self.integral:
            v = qd_d + 2.0 * lam * e + lam * lam * self.z
            a = qdd_d + 2.0 * lam * ed + lam * lam * e
        else:
            v = qd_d + lam * e
            a = qdd_d + lam * ed
        s = v - qd
        model = self.model
        # model terms (all bodies, model parameters) by polarisation: M a + C(q, qd) v + g
        t_plus = model.inverse_dynamics(q, qd + v, 2.0 * a, gravity=2.0 * self._g)
        t_minus = model.inverse_dynamics(q, qd - v, -2.0 * a, gravity=-2.0 * self._g)
        Ya = R.slotine_li_regressor(model, q, qd, v, a, self._g, self.bodies)
        Yf = np.concatenate([np.diag(v), np.diag(np.tanh(v / self.friction_width))], axis=1)
        tau = 0.25 * (t_plus - t_minus) + Ya @ (self.pi_hat - self.pi_model) + Yf @ self.phi_hat
        M = model.mass_matrix(q)
        tau = tau + M @ (self.damping * s)
        out = clip_efforts(tau, self.effort_limits)
        if self.integral:   # conditional integration: not while a joint saturates in the direction of its error
            winding = out.saturated & (np.sign(out.tau_unclipped) == np.sign(e))
            self.z = np.where(winding, self.z, self.z + e * self.period_s)
        if np.linalg.norm(s) > self.dead_zone:
            # normalised gains: Gamma_j Y_j^T M^-1 Y_j <= w_a^2 (see module)
            U = np.linalg.solve(np.linalg.cholesky(M), np.concatenate([Ya, Yf], axis=1))
            c = np.einsum("ij,ij->j", U, U)
            cap = self.adaptation_rate ** 2
            gamma = np.concatenate([self.gamma, self.friction_gamma])
            gain = np.where(gamma * c > cap, cap / np.where(c > 0.0, c, 1.0), gamma)
            k = self.gamma.size
            self.last_gain = gain[:k]
            self.pi_hat = np.clip(self.pi_hat + self.period_s * gain[:k] * (Ya.T @ s), self.lower, self.upper)
            self.phi_hat = np.clip(self.phi_hat + self.period_s * gain[k:] * (Yf.T @ s), 0.0, self.friction_upper)
        return out

