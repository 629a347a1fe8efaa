"""Joint-space control laws of the trajectory controller (no rclpy).

- :class:`ComputedTorque`: tau = M(q) (qdd_d + Kp e + Ki int(e) dt + Kd ed) + c(q, qd) + g(q)  (Lynch &
  Park, Modern Robotics, eq. 11.35; Ki = 0 by default, the law of the original controller). With a perfect
  model the closed loop is e^(3) + Kd e'' + Kp e' + Ki e = 0 for every joint, whatever the configuration;
  Kp, Ki, Kd in 1/s^2, 1/s^3 and 1/s.
- :class:`PD`: tau = Kp e + Kd ed (+ g(q) with gravity compensation); Kp, Kd in N*m/rad and N*m*s/rad (N/m,
  N*s/m for prismatic joints). With gravity compensation a constant set point is asymptotically stable
  (Takegaki & Arimoto 1981).

e = q_d - q (the shortest angle for continuous joints), ed = qd_d - qd. Every law clips its output to the
effort limits of the model (joints without a finite, positive limit are not clipped) and reports which
joints saturated. The other laws (pid, robust, adaptive, osc) have one module each; manip_control.laws
registers them all by name.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from manip_core.errors import InputError

__all__ = ["ControlOutput", "ComputedTorque", "PD", "clip_efforts", "gravity_hold", "position_error",
           "computed_torque_default_gains", "pd_default_gains", "make_law", "DEFAULT_NATURAL_FREQUENCY",
           "DEFAULT_PD_NATURAL_FREQUENCY", "CONTROL_LAWS", "Param", "apparent_inertia"]

# Closed-loop natural frequency (rad/s) of the default computed-torque gains (critically damped).
DEFAULT_NATURAL_FREQUENCY = 20.0
# Default PD (scheduled on each joint's apparent inertia): damping ratio 1/sqrt(2) (5 % overshoot: more
# stiffness than critical damping within the same delayed-loop stability margin) and natural frequencies
# from 25 rad/s down to what manip_control.gain_design finds stable with a gain margin of 2.
DEFAULT_PD_NATURAL_FREQUENCY = 25.0
DEFAULT_PD_DAMPING_RATIO = 1.0 / math.sqrt(2.0)
CONTROL_LAWS = ("pd", "pid", "computed_torque", "robust", "adaptive", "osc")  # classes: manip_control.laws

_VECTOR_NAMES = ("q", "qd", "q_d", "qd_d", "qdd_d")  # the laws' argument order (rad, rad/s, rad/s^2)


@dataclass
class ControlOutput:
    """tau: efforts after clipping (N*m or N); tau_unclipped: before; saturated: (n,) bool per joint;
    task_error: laws with a task-space target (osc) set it to the (6,) pose error [rotation (rad, axis-angle);
    position (m)] of the tip in the base frame, the others leave it None."""

    tau: np.ndarray
    tau_unclipped: np.ndarray
    saturated: np.ndarray
    task_error: np.ndarray = None

    @property
    def any_saturated(self):
        return bool(self.saturated.any())


def clip_efforts(tau, limits):
    """ControlOutput of tau clipped to [-limits, limits]; a limit that is not finite and positive leaves the
    joint unclipped. NaN in tau (which a law never produces from finite input) becomes 0 and counts as
    saturated, so that a command is always finite and within the limits."""
    tau = np.asarray(tau, dtype=np.float64)
    lim = np.asarray(limits, dtype=np.float64)
    lim = np.where(np.isfinite(lim) & (lim > 0.0), lim, np.inf)
    out = np.clip(np.where(np.isnan(tau), 0.0, tau), -lim, lim)
    bad = ~np.isfinite(out)
    out[bad] = 0.0
    return ControlOutput(tau=out, tau_unclipped=tau.copy(), saturated=(out != tau) | bad | np.isnan(tau))


def position_error(q_d, q, continuous=None):
    """q_d - q; for the joints flagged in ``continuous`` the shortest angle in [-pi, pi)."""
    e = np.asarray(q_d, dtype=np.float64) - np.asarray(q, dtype=np.float64)
    if continuous is not None and np.any(continuous):
        e = np.where(continuous, (e + math.pi) % (2.0 * math.pi) - math.pi, e)
    return e


def _gain(value, default, n, what):
    if value is None or np.size(value) == 0:
        return np.array(default, dtype=np.float64) * np.ones(n)
    g = np.asarray(value, dtype=np.float64).reshape(-1)
    if g.size == 1:
        g = np.full(n, float(g[0]))
    if g.size != n:
        raise ValueError(f"{what} needs 1 or {n} values (one per joint), got {g.size}")
    if not np.all(np.isfinite(g)) or np.any(g < 0.0):
        raise ValueError(f"{what} must be finite and >= 0, got {g.tolist()}")
    return g


def computed_torque_default_gains(n, natural_frequency=DEFAULT_NATURAL_FREQUENCY, damping_ratio=1.0):
    """(Kp, Kd) = (wn^2, 2 zeta wn) for n joints: every joint's error behaves as a 2nd-order system."""
    wn = float(natural_frequency)
    return np.full(n, wn * wn), np.full(n, 2.0 * damping_ratio * wn)


def _reference_q(model):
    lo, hi = np.asarray(model.joint_lower, float), np.asarray(model.joint_upper, float)
    return np.clip(np.zeros(model.dof), np.where(np.isfinite(lo), lo, -np.inf), np.where(np.isfinite(hi), hi,
                                                                                        np.inf))


def apparent_inertia(model, q):
    """(dof,) 1 / (M(q)^-1)_ii: the inertia each joint shows at q with the other joints free (kg*m^2, kg)."""
    return 1.0 / np.diag(np.linalg.inv(model.mass_matrix(q)))


def pd_default_gains(model, period_s=0.004, delay_periods=2.0, max_natural_frequency=DEFAULT_PD_NATURAL_FREQUENCY,
                     damping_ratio=DEFAULT_PD_DAMPING_RATIO, q=None):
    """(Kp, Kd) in N*m/rad, N*m*s/rad of the default PD at configuration q (default: zero, clipped to the
    limits): Kp_i = m_i(q) wn_i^2, Kd_i = 2 zeta wn_i m_i(q), m_i(q) joint i's apparent inertia at q and wn_i
    <= max_natural_frequency lowered until the loop sampled at period_s with delay_periods of measurement
    delay is stable with a gain margin of 2 at every sampled configuration (manip_control.gain_design,
    scheduled)."""
    from .gain_design import design_joint_gains
    g = design_joint_gains(model, "pd", period_s, delay_periods, max_natural_frequency, damping_ratio,
                           scheduled=True)
    m = apparent_inertia(model, _reference_q(model) if q is None else np.asarray(q, float))
    return m * g.natural_frequency ** 2, 2.0 * damping_ratio * g.natural_frequency * m


@dataclass(frozen=True)
class Param:
    """A law-specific parameter: the node declares it as ``<law>.<name>`` with this default and description;
    ``check(value)`` raises ValueError naming what is wrong (run at the node's start, before any model)."""

    name: str
    default: object
    description: str
    check: object = None


def _number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def check_positive(name):
    def check(v):
        if not (_number(v) and v > 0.0):
            raise ValueError(f"{name} must be a finite number > 0, got {v!r}")
    return check


def check_nonnegative(name):
    def check(v):
        vals = list(v) if isinstance(v, (list, tuple)) else [v]
        if not vals or not all(_number(x) and x >= 0.0 for x in vals):
            raise ValueError(f"{name} must be finite and >= 0, got {v!r}")
    return check


def check_choice(name, choices):
    def check(v):
        if v not in choices:
            raise ValueError(f"{name} must be one of {', '.join(choices)}, got {v!r}")
    return check


class _Law:
    name = ""
    PARAMETERS = ()  # Param tuple of the law's own parameters (beyond kp, kd)

    @classmethod
    def check_params(cls, params):
        """Raise ValueError for a bad law-specific parameter value (params: short name -> value)."""
        for p in cls.PARAMETERS:
            if p.check is not None and p.name in params:
                p.check(params[p.name])

    @classmethod
    def from_params(cls, model, kp=None, kd=None, period_s=0.004, params=None):
        """The law for ``model`` from the node's parameters (law-specific ones by their short name)."""
        return cls(model, kp, kd)

    def __init__(self, model, period_s=0.004):
        self.period_s = float(period_s)
        if not (math.isfinite(self.period_s) and self.period_s > 0.0):
            raise ValueError(f"period_s must be > 0, got {period_s}")
        self.model = model
        self.effort_limits = np.asarray(model.effort_limits, dtype=np.float64)
        types = list(getattr(model, "joint_types", []) or [])
        self.continuous = np.array([t == "continuous" for t in types], dtype=bool) if types else None
        self._zero = np.zeros(model.dof)

    def _vectors(self, *xs):
        n = self.model.dof
        out = []
        for i, x in enumerate(xs):
            what = _VECTOR_NAMES[i] if i < len(_VECTOR_NAMES) else f"argument {i}"
            try:
                a = np.asarray(x, dtype=np.float64).reshape(-1)
            except (TypeError, ValueError) as e:  # text, None, ragged lists: InputError (a ValueError) naming it
                raise InputError(f"{what} must be {n} numbers, got {type(x).__name__}: {e}") from None
            if a.shape != (n,):
                raise InputError(f"{what}: expected {n} values, got {a.shape[0]}")
            if not np.isfinite(a).all():
                raise InputError(f"{what} holds NaN or inf: {a.tolist()}")
            out.append(a)
        return out

    def errors(self, q, qd, q_d, qd_d):
        """(e, ed) = (q_d - q, qd_d - qd)."""
        return position_error(q_d, q, self.continuous), np.asarray(qd_d, float) - np.asarray(qd, float)

    def reset(self):
        """Forget the internal state (integrators); a no-op for memoryless laws."""

    def hold(self, q_hold, q, qd):
        """Output holding the set point q_hold (zero desired velocity and acceleration)."""
        return self.compute(q, qd, q_hold, self._zero, self._zero)

    def compute(self, q, qd, q_d, qd_d, qdd_d):  # pragma: no cover - abstract
        raise NotImplementedError

    def __call__(self, q, qd, q_d, qd_d, qdd_d):
        return self.compute(q, qd, q_d, qd_d, qdd_d)


class ComputedTorque(_Law):
    """tau = M(q) (qdd_d + Kp e + Ki int(e) dt + Kd ed) + c(q, qd) + g(q), clipped to the effort limits
    (Modern Robotics eq. 11.35).

    kp, kd: per joint (1/s^2, 1/s) or one value for all; None or empty: critically damped at
    ``natural_frequency`` rad/s (Kp = wn^2, Kd = 2 wn). ki (1/s^3): 0 (default) leaves the integral out;
    the integral is a sum of e over the control periods (period_s), frozen for a joint while its effort
    is clipped and e would drive it further (anti-windup by clamping). The term M (...) + c + g is one
    recursive Newton-Euler call: inverse_dynamics(q, qd, qdd_d + Kp e + Ki int(e) + Kd ed).
    """

    name = "computed_torque"
    PARAMETERS = (Param("ki", [0.0], "integral gains per joint (1/s^3), one value or one per joint; 0 leaves "
                                     "the integral term out (Modern Robotics eq. 11.35)",
                        check_nonnegative("computed_torque.ki")),)

    @classmethod
    def from_params(cls, model, kp=None, kd=None, period_s=0.004, params=None):
        return cls(model, kp, kd, ki=(params or {}).get("ki", 0.0), period_s=period_s)

    def __init__(self, model, kp=None, kd=None, natural_frequency=DEFAULT_NATURAL_FREQUENCY, damping_ratio=1.0,
                 ki=0.0, period_s=0.004):
        super().__init__(model, period_s)
        kp0, kd0 = computed_torque_default_gains(model.dof, natural_frequency, damping_ratio)
        self.kp = _gain(kp, kp0, model.dof, "kp")
        self.kd = _gain(kd, kd0, model.dof, "kd")
        self.ki = _gain(ki, 0.0, model.dof, "ki")
        self.integral = np.zeros(model.dof)  # int(e) dt, rad*s

    def reset(self):
        self.integral[:] = 0.0

    def compute(self, q, qd, q_d, qd_d, qdd_d):
        q, qd, q_d, qd_d, qdd_d = self._vectors(q, qd, q_d, qd_d, qdd_d)
        e, ed = self.errors(q, qd, q_d, qd_d)
        a = qdd_d + self.kp * e + self.kd * ed
        if not self.ki.any():
            return clip_efforts(self.model.inverse_dynamics(q, qd, a), self.effort_limits)
        trial = self.integral + e * self.period_s
        out = clip_efforts(self.model.inverse_dynamics(q, qd, a + self.ki * trial), self.effort_limits)
        # clamping: keep the new integral only where the effort is not pushed further into its limit
        winding = out.saturated & (np.sign(out.tau_unclipped) == np.sign(e))
        self.integral = np.where(winding, self.integral, trial)
        return out


class PD(_Law):
    """tau = Kp e + Kd ed (+ g(q) when gravity_compensation), clipped to the effort limits.

    kp, kd: per joint (N*m/rad, N*m*s/rad) or one value for all, constant. None or empty: gains scheduled on
    the inertia each joint shows, Kp_i = m_i(q) wn_i^2, Kd_i = 2 zeta wn_i m_i(q) with m_i(q) = 1 / (M(q)^-1)_ii
    and wn_i from manip_control.gain_design for the control period and ``delay_periods`` of measurement delay
    (:func:`pd_default_gains`; ``kp``/``kd`` hold their values at the zero configuration, for the logs). A
    constant-gain PD must be sized for each joint's lightest configuration (the UR5's elbow shows 0.08 to 0.55
    kg*m^2), which leaves it too soft elsewhere to hold a 0.1 kg object within 0.02 rad. The desired
    acceleration is not used.
    """

    name = "pd"
    PARAMETERS = (Param("delay_periods", 2.0, "control periods of measurement delay the default gains are sized "
                                              "for (stable with a gain margin of 2)",
                        check_nonnegative("pd.delay_periods")),)

    @classmethod
    def from_params(cls, model, kp=None, kd=None, period_s=0.004, params=None):
        return cls(model, kp, kd, period_s=period_s, delay_periods=(params or {}).get("delay_periods", 2.0))

    def __init__(self, model, kp=None, kd=None, gravity_compensation=True,
                 natural_frequency=DEFAULT_PD_NATURAL_FREQUENCY, damping_ratio=DEFAULT_PD_DAMPING_RATIO, period_s=0.004,
                 delay_periods=2.0):
        super().__init__(model, period_s)
        need_defaults = kp is None or np.size(kp) == 0 or kd is None or np.size(kd) == 0
        self._wn = None
        kp0 = kd0 = None
        if need_defaults:
            from .gain_design import design_joint_gains
            self._wn = design_joint_gains(model, "pd", self.period_s, delay_periods, natural_frequency,
                                          damping_ratio, scheduled=True).natural_frequency
            self._zeta = float(damping_ratio)
            kp0, kd0 = pd_default_gains(model, self.period_s, delay_periods, natural_frequency, damping_ratio)
        self.kp = _gain(kp, kp0, model.dof, "kp")
        self.kd = _gain(kd, kd0, model.dof, "kd")
        # scheduled only where the defaults are used (a gain given by the user stays constant)
        self._scheduled = (None if self._wn is None else
                           (kp is None or np.size(kp) == 0, kd is None or np.size(kd) == 0))
        self.gravity_compensation = bool(gravity_compensation)

    def compute(self, q, qd, q_d, qd_d, qdd_d=None):
        q, qd, q_d, qd_d = self._vectors(q, qd, q_d, qd_d)
        e, ed = self.errors(q, qd, q_d, qd_d)
        kp, kd = self.kp, self.kd
        if self._scheduled is not None:
            m = apparent_inertia(self.model, q)
            if self._scheduled[0]:
                kp = m * self._wn ** 2
            if self._scheduled[1]:
                kd = 2.0 * self._zeta * self._wn * m
        tau = kp * e + kd * ed
        if self.gravity_compensation:
            tau = tau + self.model.gravity_torques(q)
        return clip_efforts(tau, self.effort_limits)


def gravity_hold(model, q):
    """g(q) clipped to the effort limits: what holds the arm at q when its state is not known any more."""
    return clip_efforts(model.gravity_torques(np.asarray(q, dtype=np.float64)), model.effort_limits)


def make_law(name, model, kp=None, kd=None, period_s=0.004, params=None):
    """A control law by name (CONTROL_LAWS, registered in manip_control.laws); ValueError for another name
    or bad gains."""
    from .laws import make_law as _make
    return _make(name, model, kp, kd, period_s, params)
