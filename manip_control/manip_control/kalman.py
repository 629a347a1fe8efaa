"""Kalman joint-state estimator from noisy encoder positions (no rclpy).

Per joint, a kinematic model (Bar-Shalom, Li & Kirubarajan, Estimation with Applications to Tracking and
Navigation, 2001, sec. 6.2-6.3):
- order 2 (constant velocity, white acceleration noise): x = [q, qd], process noise PSD ``process_noise``
  in rad^2/s^3 (m^2/s^3 for prismatic joints);
- order 3 (constant acceleration, white jerk noise): x = [q, qd, qdd], PSD in rad^2/s^5.
Measurement: q with white noise of standard deviation ``measurement_noise`` (rad). Every joint shares F,
Q, H, R, so one covariance (order x order) serves all joints and the update is a few small matrix products.
The discretisation uses the time between measurements (s), so irregular joint_states are handled.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["JointKalmanFilter", "transition", "process_covariance"]


def transition(order, dt):
    """F (order x order) of the kinematic model over dt (s)."""
    F = np.eye(order)
    for i in range(order):
        for j in range(i + 1, order):
            F[i, j] = dt ** (j - i) / math.factorial(j - i)
    return F


def process_covariance(order, dt, psd):
    """Q of the continuous white-noise model (noise on the highest derivative, PSD psd) over dt (s)."""
    Q = np.empty((order, order))
    for i in range(order):
        for j in range(order):
            a, b = order - 1 - i, order - 1 - j
            Q[i, j] = psd * dt ** (a + b + 1) / ((a + b + 1) * math.factorial(a) * math.factorial(b))
    return Q


class JointKalmanFilter:
    """Estimates (q, qd[, qdd]) of n joints. measurement_noise: std (rad); process_noise: PSD (see module);
    initial_velocity_std: rad/s, prior std of the velocity at the first measurement."""

    def __init__(self, n, measurement_noise=1e-3, process_noise=100.0, order=2, initial_velocity_std=1.0):
        if order not in (2, 3):
            raise ValueError(f"kalman order must be 2 (constant velocity) or 3 (constant acceleration), got {order}")
        for name, v in (("measurement_noise", measurement_noise), ("process_noise", process_noise),
                        ("initial_velocity_std", initial_velocity_std)):
            if not (math.isfinite(v) and v > 0):
                raise ValueError(f"kalman {name} must be > 0, got {v}")
        self.n, self.order = int(n), int(order)
        self.r = float(measurement_noise) ** 2
        self.psd = float(process_noise)
        self.v0 = float(initial_velocity_std)
        self.x = None          # (order, n)
        self.P = None          # (order, order), the same for every joint
        self.t = None

    def reset(self):
        self.x = self.P = self.t = None

    @property
    def position(self):
        return self.x[0].copy()

    @property
    def velocity(self):
        return self.x[1].copy()

    @property
    def acceleration(self):
        return self.x[2].copy() if self.order == 3 else np.zeros(self.n)

    def predict(self, dt):
        F = transition(self.order, dt)
        self.x = F @ self.x
        self.P = F @ self.P @ F.T + process_covariance(self.order, dt, self.psd)

    def update(self, z, t):
        """Fuse positions z (n,) measured at time t (s); returns (q, qd) estimates."""
        z = np.asarray(z, dtype=np.float64).reshape(self.n)
        if self.x is None:
            self.x = np.zeros((self.order, self.n))
            self.x[0] = z
            self.P = np.diag([self.r, self.v0 ** 2] + ([(10.0 * self.v0) ** 2] if self.order == 3 else []))
            self.t = float(t)
            return self.position, self.velocity
        dt = float(t) - self.t
        if dt > 0:
            self.predict(dt)
            self.t = float(t)
        S = self.P[0, 0] + self.r
        Kg = self.P[:, 0] / S
        self.x = self.x + np.outer(Kg, z - self.x[0])
        self.P = self.P - np.outer(Kg, self.P[0, :])
        self.P = 0.5 * (self.P + self.P.T)
        return self.position, self.velocity


# The node's parameters of the estimator, declared as kalman.<name>: (name, default, description).
KALMAN_PARAMETERS = (
    ("measurement_noise", 1e-3, "standard deviation of the encoder positions (rad or m)"),
    ("process_noise", 100.0, "power spectral density of the white acceleration (order 2, rad^2/s^3) or jerk "
                             "(order 3, rad^2/s^5) noise"),
    ("order", 2, "2: [q, qd] (constant velocity); 3: [q, qd, qdd] (constant acceleration)"),
    ("initial_velocity_std", 1.0, "prior standard deviation of the velocity at the first measurement (rad/s)"),
)
ESTIMATORS = ("none", "kalman")


def check_estimator(kind, params):
    """ValueError naming the parameter when ``kind`` or a kalman.* value is bad."""
    if kind not in ESTIMATORS:
        raise ValueError(f"parameter state_estimator must be one of {', '.join(ESTIMATORS)}, got {kind!r}")
    if kind == "kalman":
        try:
            make_estimator(kind, 1, params)
        except (TypeError, ValueError) as e:
            raise ValueError(f"parameters kalman.*: {e}") from None


def make_estimator(kind, n, params):
    """None for "none", else a JointKalmanFilter of n joints from the kalman.* parameters."""
    if kind == "none":
        return None
    p = dict(params)
    return JointKalmanFilter(n, float(p["measurement_noise"]), float(p["process_noise"]), int(p["order"]),
                             float(p["initial_velocity_std"]))
