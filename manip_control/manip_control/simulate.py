"""Closed-loop simulation of a control law against RobotModel.forward_dynamics, no ROS in between.

The plant: semi-implicit (symplectic) Euler at the control rate, the effort held over each period:
qd_{k+1} = qd_k + dt * FD(q_k, qd_k, tau_k), q_{k+1} = q_k + dt * qd_{k+1}. ``substeps`` > 1 integrates
the plant on a finer grid with the same held effort (a controller at rate_hz on a faster plant).
``delay_periods`` > 0: the law sees the state measured that many ticks earlier (the age of joint_states in
the simulated ROS graph: two periods at 250 Hz); the recorded q, qd are the true ones.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["SimResult", "simulate", "step_plant", "FrictionPlant"]


@dataclass
class SimResult:
    """Arrays over the K control ticks: t (K,), q, qd (K, n) measured before the tick's effort; q_d, qd_d,
    qdd_d (K, n) desired; tau (K, n) applied; saturated (K,) any joint clipped. q_final, qd_final: the state
    after the last tick."""

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    q_d: np.ndarray
    qd_d: np.ndarray
    qdd_d: np.ndarray
    tau: np.ndarray
    saturated: np.ndarray
    q_final: np.ndarray
    qd_final: np.ndarray

    @property
    def position_error(self):
        return self.q_d - self.q

    def rms_error(self, since=0.0):
        """RMS over ticks and joints of q_d - q from time ``since`` (s) on."""
        e = self.position_error[self.t >= since]
        return float(np.sqrt(np.mean(e ** 2))) if e.size else 0.0

    def max_error(self, since=0.0):
        e = self.position_error[self.t >= since]
        return float(np.max(np.abs(e))) if e.size else 0.0


class FrictionPlant:
    """A plant: ``model``'s forward dynamics with joint friction tau_f = viscous qd + coulomb tanh(qd / w)
    subtracted from the effort (viscous in N*m*s/rad, coulomb in N*m, per joint or one value). The
    smoothing velocity w_i (rad/s) is the smallest that the explicit plant step dt (s) integrates stably on
    joint i: w_i = 2 dt coulomb_i (M^-1)_ii at q_ref (so light wrists get a wider, more viscous-like
    friction). The viscous part must itself be stable: viscous_i dt (M^-1)_ii < 1."""

    def __init__(self, model, viscous=0.0, coulomb=0.0, dt=0.004, q_ref=None):
        self.model = model
        self.dof = model.dof
        n = model.dof
        q = np.zeros(n) if q_ref is None else np.asarray(q_ref, float)
        minv = np.diag(np.linalg.inv(model.mass_matrix(q)))
        self.viscous = np.broadcast_to(np.asarray(viscous, float), (n,)).copy()
        self.coulomb = np.broadcast_to(np.asarray(coulomb, float), (n,)).copy()
        if np.any(self.viscous * dt * minv >= 1.0):
            raise ValueError("viscous friction too stiff for the plant step: need viscous_i * dt * (M^-1)_ii < 1")
        self.width = np.maximum(2.0 * dt * self.coulomb * minv, 1e-6)

    def friction(self, qd):
        return self.viscous * qd + self.coulomb * np.tanh(np.asarray(qd, float) / self.width)

    def forward_dynamics(self, q, qd, tau):
        return self.model.forward_dynamics(q, qd, np.asarray(tau, float) - self.friction(qd))


def step_plant(model, q, qd, tau, dt, substeps=1):
    """Advance (q, qd) by dt under a held effort tau; returns new arrays."""
    h = dt / substeps
    q, qd = np.array(q, float), np.array(qd, float)
    for _ in range(substeps):
        qd = qd + h * model.forward_dynamics(q, qd, tau)
        q = q + h * qd
    return q, qd


def simulate(law, desired, q0, qd0=None, duration=1.0, rate_hz=250.0, plant_model=None, substeps=1,
             delay_periods=0):
    """Run ``law`` (a control_laws law: law.compute(q, qd, q_d, qd_d, qdd_d) -> ControlOutput) for
    ``duration`` s at ``rate_hz`` from (q0, qd0) on the plant ``plant_model`` (default: the law's model).

    desired: a function t -> (q_d, qd_d, qdd_d) (e.g. TrajectorySampler.sample) or a constant (n,) set point.
    """
    model = law.model
    plant = plant_model if plant_model is not None else model
    n = model.dof
    dt = 1.0 / float(rate_hz)
    steps = int(round(duration * rate_hz))
    if callable(desired):
        ref = desired
    else:
        qc = np.asarray(desired, float).reshape(n)
        z = np.zeros(n)
        ref = lambda t: (qc, z, z)  # noqa: E731
    q = np.asarray(q0, float).reshape(n).copy()
    qd = np.zeros(n) if qd0 is None else np.asarray(qd0, float).reshape(n).copy()
    T = np.arange(steps) * dt
    Q, QD, QDES, QDDES, QDDDES, TAU = (np.empty((steps, n)) for _ in range(6))
    SAT = np.zeros(steps, bool)
    d = int(delay_periods)
    if d < 0:
        raise ValueError(f"delay_periods must be >= 0, got {delay_periods}")
    for k in range(steps):
        q_d, qd_d, qdd_d = ref(T[k])
        if d and k:
            j = max(k - d, 0)
            q_m, qd_m = Q[j], QD[j]
        else:
            q_m, qd_m = q, qd
        out = law.compute(q_m, qd_m, q_d, qd_d, qdd_d)
        Q[k], QD[k], QDES[k], QDDES[k], QDDDES[k], TAU[k], SAT[k] = q, qd, q_d, qd_d, qdd_d, out.tau, \
            out.any_saturated
        q, qd = step_plant(plant, q, qd, out.tau, dt, substeps)
        if not (np.all(np.isfinite(q)) and np.all(np.isfinite(qd))):
            raise FloatingPointError(f"the closed loop diverged at t = {T[k]:.4f} s")
    return SimResult(T, Q, QD, QDES, QDDES, QDDDES, TAU, SAT, q, qd)
