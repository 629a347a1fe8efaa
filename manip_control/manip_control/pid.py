"""PID control per joint with anti-windup and optional gravity compensation (no rclpy).

tau = Kp e + Ki z + Kd ed (+ g(q)), z the integral of e (rad*s), clipped to the effort limits.

Anti-windup (Astrom & Hagglund, Advanced PID Control, 2006, sec. 3.5):
- ``clamping`` (conditional integration): z stops for a joint while its effort is clipped and e pushes it
  further into the limit;
- ``back_calculation``: dz/dt = e + (tau_clipped - tau_unclipped) / (Ki Tt), tracking time Tt in s
  (default sqrt(Ti Td) with Ti = Kp/Ki, Td = Kd/Kp, Astrom-Hagglund's rule), so z unwinds while saturated.

Gains in N*m/rad, N*m/(rad*s), N*m*s/rad (N/m... for prismatic joints). Defaults
(manip_control.gain_design, for the control period and ``delay_periods`` of measurement delay), scheduled on
the inertia each joint shows at q, m_i(q) = 1 / (M(q)^-1)_ii: Kp_i = m_i(q) wn_i^2, Kd_i = 2 m_i(q) wn_i,
Ki_i = Kp_i wn_i / beta_i, with wn_i <= 20 rad/s and the integral slowed (beta_i) as far as the loop needs to
stay stable with a gain margin of 2 at every sampled configuration (``kp``, ``ki``, ``kd`` hold the values
at the zero configuration; gains given explicitly stay constant). The textbook triple pole at -wn (Kp = 3 m
wn^2, Ki = m wn^3, Kd = 3 m wn, :func:`pid_default_gains`) with constant m is unstable on an inertia above
9 m: the UR5's base joint varies 35:1 over its workspace.
"""
from __future__ import annotations

import math

import numpy as np

from .control_laws import (DEFAULT_NATURAL_FREQUENCY, DEFAULT_PD_NATURAL_FREQUENCY, Param, _gain, _Law, _reference_q,
                           apparent_inertia, check_choice, check_nonnegative, clip_efforts)

__all__ = ["PID", "pid_default_gains"]

ANTI_WINDUP = ("clamping", "back_calculation")


def pid_default_gains(model, natural_frequency=DEFAULT_PD_NATURAL_FREQUENCY, q_ref=None):
    """(Kp, Ki, Kd) per joint: the triple pole at -wn for joint i's inertia M_ii(q_ref)."""
    q = _reference_q(model) if q_ref is None else np.asarray(q_ref, float)
    m = np.diag(model.mass_matrix(q)).copy()
    wn = float(natural_frequency)
    return 3.0 * m * wn ** 2, m * wn ** 3, 3.0 * m * wn


class PID(_Law):
    """Per-joint PID (see module). kp, ki, kd: one value or one per joint; None/empty: defaults."""

    name = "pid"
    PARAMETERS = (
        Param("ki", [-1.0], "integral gains per joint (N*m/(rad*s)); [-1.0]: the default (manip_control.gain_design: "
                            "sized with kp, kd for the delay and the inertia's range)",
              lambda v: None if list(v) == [-1.0] else check_nonnegative("pid.ki")(v)),
        Param("anti_windup", "clamping", "clamping (conditional integration) or back_calculation",
              check_choice("pid.anti_windup", ANTI_WINDUP)),
        Param("tracking_time", 0.0, "s: back-calculation tracking time Tt; 0: sqrt(Ti Td)",
              check_nonnegative("pid.tracking_time")),
        Param("gravity_compensation", True, "add g(q) from the model",
              lambda v: None if isinstance(v, bool) else check_choice("pid.gravity_compensation", ("true", "false"))(v)),
        Param("delay_periods", 2.0, "control periods of measurement delay the default gains are sized for "
                                    "(stable with a gain margin of 2)", check_nonnegative("pid.delay_periods")),
    )

    @classmethod
    def from_params(cls, model, kp=None, kd=None, period_s=0.004, params=None):
        p = params or {}
        ki = p.get("ki", [-1.0])
        if ki is not None and len(ki) == 1 and ki[0] < 0:
            ki = None
        return cls(model, kp, ki, kd, anti_windup=p.get("anti_windup", "clamping"),
                   tracking_time=p.get("tracking_time", 0.0),
                   gravity_compensation=p.get("gravity_compensation", True), period_s=period_s,
                   delay_periods=p.get("delay_periods", 2.0))

    def __init__(self, model, kp=None, ki=None, kd=None, anti_windup="clamping", tracking_time=0.0,
                 gravity_compensation=True, period_s=0.004, natural_frequency=DEFAULT_NATURAL_FREQUENCY,
                 delay_periods=2.0):
        super().__init__(model, period_s)
        check_choice("anti_windup", ANTI_WINDUP)(anti_windup)
        n = model.dof
        given = [not (g is None or np.size(g) == 0) for g in (kp, ki, kd)]
        self._schedule = None
        kp0 = ki0 = kd0 = None
        if not all(given):
            from .gain_design import design_joint_gains
            d = design_joint_gains(model, "pid", self.period_s, delay_periods, natural_frequency, scheduled=True)
            self._schedule = (d.natural_frequency, d.integral_ratio, given)
            kp0, ki0, kd0 = self._scheduled_gains(apparent_inertia(model, _reference_q(model)))
        self.kp, self.ki, self.kd = _gain(kp, kp0, n, "kp"), _gain(ki, ki0, n, "ki"), _gain(kd, kd0, n, "kd")
        self.anti_windup = anti_windup
        self.gravity_compensation = bool(gravity_compensation)
        if tracking_time and tracking_time > 0:
            self.tracking_time = np.full(n, float(tracking_time))
        else:
            ti = np.where(self.ki > 0, self.kp / np.where(self.ki > 0, self.ki, 1.0), math.inf)
            td = np.where(self.kp > 0, self.kd / np.where(self.kp > 0, self.kp, 1.0), 0.0)
            tt = np.sqrt(ti * td)
            self.tracking_time = np.where(np.isfinite(tt) & (tt > 0), tt, 10.0 * self.period_s)
        self.integral = np.zeros(n)  # z = int(e) dt, rad*s

    def reset(self):
        self.integral[:] = 0.0

    def _scheduled_gains(self, m):
        """(Kp, Ki, Kd) of the defaults for apparent inertias m: m wn^2, m wn^3 / beta, 2 m wn."""
        wn, beta, _ = self._schedule
        kp = m * wn ** 2
        return kp, kp * wn / beta, 2.0 * m * wn

    def compute(self, q, qd, q_d, qd_d, qdd_d=None):
        q, qd, q_d, qd_d = self._vectors(q, qd, q_d, qd_d)
        e, ed = self.errors(q, qd, q_d, qd_d)
        kp, ki, kd = self.kp, self.ki, self.kd
        if self._schedule is not None:
            given = self._schedule[2]
            skp, ski, skd = self._scheduled_gains(apparent_inertia(self.model, q))
            kp, ki, kd = (kp if given[0] else skp), (ki if given[1] else ski), (kd if given[2] else skd)
        tau = kp * e + kd * ed + ki * self.integral
        if self.gravity_compensation:
            tau = tau + self.model.gravity_torques(q)
        out = clip_efforts(tau, self.effort_limits)
        dt = self.period_s
        if self.anti_windup == "clamping":
            winding = out.saturated & (np.sign(out.tau_unclipped) == np.sign(e))
            self.integral = np.where(winding, self.integral, self.integral + e * dt)
        else:
            back = np.where(ki > 0, (out.tau - out.tau_unclipped) / (np.where(ki > 0, ki, 1.0)
                                                                    * self.tracking_time), 0.0)
            self.integral = self.integral + (e + back) * dt
        return out
