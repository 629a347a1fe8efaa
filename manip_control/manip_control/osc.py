"""Operational-space control (Khatib 1987) with a null-space posture task and damped inversion; no rclpy.

Task Jacobian J (rows [omega; v], base frame, v the velocity of the tip point): from the space Jacobian,
J = [Jw; Jv - [p] Jw], p the tip position (m). Task-space inertia (kg, kg*m^2 blocks):

    Lambda = (J M^-1 J^T)^-1, damped near singularities. The rows of J mix units (rad/s and m/s), so the
    singularity is measured and damped in homogeneous units: S = diag(L, L, L, 1, 1, 1) (pose task; the identity
    for the position task), L the characteristic length (m: a rotation of 1 rad counts as a move of L at the
    tip), A_s = S J M^-1 J^T S (1/kg) = sum_i s_i u_i u_i^T, Lambda = S Lambda_s S with
    Lambda_s = sum_i s_i / (s_i^2 + mu^2) u_i u_i^T, mu^2 = mu_max^2 (1 - (s_min / eps)^2) when s_min < eps,
    else 0 (variable damping, Nakamura & Hanafusa 1986 / Maciejewski): ||Lambda_s|| <= 1 / (2 mu) when damped.
    Without S (L = 1 m) the light wrist's rotational mobility (~80 1/(kg*m^2) on the UR5, against ~0.1 1/kg
    for translation) fell below eps only within ~0.03 rad of a wrist singularity, too late: crossing one at
    1.3 rad/s with a 0.1 kg object the model lacks, the undamped task turned wrists 1 and 3 against each other
    by 0.4 rad (the demo's pick-and-place) to 1.1 rad (test_osc_kalman's offline crossing).

Law ("osc"): tau = J^T Lambda (a* - Jdot qd) + c(q, qd) + g(q) + N^T M (qdd_n + Kp_n (q_n - q) + Kd_n (qd_n - qd)),
a* = A_d + Kp x_e + Kd (V_d - J qd), with the dynamically consistent null-space projector
N = I - Jbar J, Jbar = M^-1 J^T Lambda (Khatib): the posture torque does not accelerate the task
(J M^-1 N^T = 0 when Lambda is undamped), and the posture task moves only in the task's null space. Where
Lambda is damped, N keeps the damped directions: the posture task, computed torque along the joint trajectory
(its acceleration qdd_n = qdd_d is fed forward), tracks the trajectory there instead of the task.
Task error x_e = [log(R_d R^T) (rad, axis-angle, base frame); p_d - p (m)].

Law ("impedance", the special case without inertia shaping and without feed-forward): tau = J^T (K x_e +
D (V_d - J qd)) + g(q) + the same null-space term; K in N*m/rad and N/m, D in N*m*s/rad and N*s/m.

Targets: by default the joint trajectory's pose, T_d = fk(q_d), V_d = J(q_d) qd_d, A_d = J qdd_d + Jdot qd_d,
and the posture is q_d; :meth:`OperationalSpace.set_target_pose` fixes a Cartesian target (base frame, zero
velocity) and the posture becomes the hold position (``posture`` = trajectory) or the middle of the joint
limits (``posture`` = centre, the joint-centring task), both with qdd_n = 0. ``task`` = position controls the
tip position only (3 rows), leaving orientation to the null space.
"""
from __future__ import annotations

import math

import numpy as np

from .control_laws import Param, _gain, _Law, check_choice, check_nonnegative, check_positive, clip_efforts

__all__ = ["OperationalSpace", "pose_error", "task_jacobian", "damped_task_inertia", "so3_log"]


def _skew(p):
    return np.array([[0.0, -p[2], p[1]], [p[2], 0.0, -p[0]], [-p[1], p[0], 0.0]])


def so3_log(Rm):
    """Axis-angle vector (rad) of a rotation matrix (robust near 0 and pi)."""
    c = max(-1.0, min(1.0, 0.5 * (np.trace(Rm) - 1.0)))
    th = math.acos(c)
    w = np.array([Rm[2, 1] - Rm[1, 2], Rm[0, 2] - Rm[2, 0], Rm[1, 0] - Rm[0, 1]])
    if th < 1e-6:
        return 0.5 * w
    if math.pi - th < 1e-4:
        B = 0.5 * (Rm + np.eye(3))
        k = int(np.argmax(np.diag(B)))
        axis = B[:, k] / math.sqrt(max(B[k, k], 1e-300))
        axis /= np.linalg.norm(axis)
        if np.dot(axis, w) < 0:
            axis = -axis
        return th * axis
    return th / (2.0 * math.sin(th)) * w


def pose_error(T_d, T):
    """(6,) [log(R_d R^T) (rad); p_d - p (m)], base frame."""
    return np.concatenate([so3_log(T_d[:3, :3] @ T[:3, :3].T), T_d[:3, 3] - T[:3, 3]])


def task_jacobian(model, q):
    """(T (4, 4), J (6, dof)): tip pose and the Jacobian of [omega; v_tip] in the base frame."""
    T = model.fk(q)
    Js = model.jacobian_space(q)
    J = Js.copy()
    J[3:] = Js[3:] - _skew(T[:3, 3]) @ Js[:3]
    return T, J


def damped_task_inertia(A, eps, mu_max):
    """(Lambda, mu): the damped inverse of the task mobility A = J M^-1 J^T (see module)."""
    s, U = np.linalg.eigh(0.5 * (A + A.T))
    s = np.maximum(s, 0.0)
    smin = float(s[0])
    mu2 = mu_max ** 2 * (1.0 - (smin / eps) ** 2) if smin < eps else 0.0
    return (U * (s / (s * s + mu2 + (1e-300 if mu2 == 0.0 else 0.0)))) @ U.T, math.sqrt(mu2)


class OperationalSpace(_Law):
    """Khatib operational-space control (see module). kp, kd: task gains (1/s^2, 1/s), one value or one per
    task row ([rotation (3), position (3)], or position (3) with task = position)."""

    name = "osc"
    PARAMETERS = (
        Param("mode", "osc", "osc (task-space inertia, full dynamics) or impedance (J^T (K e + D ed) + g)",
              check_choice("osc.mode", ("osc", "impedance"))),
        Param("task", "pose", "pose (6 rows) or position (3 rows, tip position only)",
              check_choice("osc.task", ("pose", "position"))),
        Param("posture", "trajectory", "null-space posture target: trajectory (the joint set point) or centre "
              "(middle of the joint limits)", check_choice("osc.posture", ("trajectory", "centre"))),
        Param("posture_kp", 100.0, "posture task stiffness Kp_n (1/s^2)", check_nonnegative("osc.posture_kp")),
        Param("posture_kd", 20.0, "posture task damping Kd_n (1/s)", check_nonnegative("osc.posture_kd")),
        Param("singularity_threshold", 0.05, "eps (1/kg): damping starts when the smallest eigenvalue of "
              "S J M^-1 J^T S (S: rotation rows times characteristic_length) is below it",
              check_positive("osc.singularity_threshold")),
        Param("max_damping", 0.05, "mu_max: damping of the inversion at a singularity (same units as eps)",
              check_positive("osc.max_damping")),
        Param("characteristic_length", 0.1, "L (m): the rotation rows count as a move of L per rad at the tip in "
              "the singularity measure (homogeneous units, see osc.py)", check_positive("osc.characteristic_length")),
        Param("impedance_stiffness", [5.0, 500.0], "impedance mode: K for [rotation (N*m/rad), translation (N/m)]",
              check_nonnegative("osc.impedance_stiffness")),
        Param("impedance_damping", [0.03, 20.0], "impedance mode: D for [rotation (N*m*s/rad), translation "
              "(N*s/m)]", check_nonnegative("osc.impedance_damping")),
    )

    @classmethod
    def from_params(cls, model, kp=None, kd=None, period_s=0.004, params=None):
        p = params or {}
        kw = {k: p[k] for k in ("mode", "task", "posture", "posture_kp", "posture_kd", "singularity_threshold",
                                "max_damping", "characteristic_length", "impedance_stiffness",
                                "impedance_damping") if k in p}
        return cls(model, kp, kd, period_s=period_s, **kw)

    def __init__(self, model, kp=None, kd=None, mode="osc", task="pose", posture="trajectory", posture_kp=100.0,
                 posture_kd=20.0, singularity_threshold=0.05, max_damping=0.05, characteristic_length=0.1,
                 impedance_stiffness=(5.0, 500.0), impedance_damping=(0.03, 20.0), period_s=0.004,
                 natural_frequency=20.0):
        super().__init__(model, period_s)
        check_choice("mode", ("osc", "impedance"))(mode)
        check_choice("task", ("pose", "position"))(task)
        check_choice("posture", ("trajectory", "centre"))(posture)
        self.mode, self.task, self.posture = mode, task, posture
        self.rows = slice(0, 6) if task == "pose" else slice(3, 6)
        m = 6 if task == "pose" else 3
        wn = float(natural_frequency)
        self.kp = _gain(kp, wn * wn, m, "kp (task rows)")
        self.kd = _gain(kd, 2.0 * wn, m, "kd (task rows)")
        self.posture_kp, self.posture_kd = float(posture_kp), float(posture_kd)
        self.eps, self.mu_max = float(singularity_threshold), float(max_damping)
        check_positive("characteristic_length")(characteristic_length)
        self.row_scale = np.array([float(characteristic_length)] * 3 + [1.0] * 3)[self.rows]
        ks, ds = np.asarray(impedance_stiffness, float), np.asarray(impedance_damping, float)
        if ks.shape != (2,) or ds.shape != (2,):
            raise ValueError("impedance_stiffness and impedance_damping need 2 values: [rotation, translation]")
        self.K = np.repeat(ks, 3)[self.rows]
        self.D = np.repeat(ds, 3)[self.rows]
        lo, hi = np.asarray(model.joint_lower, float), np.asarray(model.joint_upper, float)
        self.centre = np.where(np.isfinite(lo) & np.isfinite(hi), 0.5 * (lo + hi), 0.0)
        self.target = None
        self.last = {}

    def set_target_pose(self, T):
        """Track the fixed tip pose T (4, 4), base frame; None: back to the joint trajectory's pose."""
        if T is None:
            self.target = None
            return
        T = np.asarray(T, dtype=np.float64)
        if T.shape != (4, 4) or not np.all(np.isfinite(T)):
            raise ValueError("target pose must be a finite 4x4 homogeneous transform")
        Rm = T[:3, :3]
        if not np.allclose(Rm @ Rm.T, np.eye(3), atol=1e-6):
            raise ValueError("target pose rotation is not orthonormal (normalise the quaternion)")
        self.target = T.copy()

    def _jdot_qd(self, q, qd, J):
        h = 1e-7 / max(1.0, float(np.max(np.abs(qd))))
        _, J2 = task_jacobian(self.model, q + h * qd)
        return (J2 - J) @ qd / h

    def compute(self, q, qd, q_d, qd_d, qdd_d):
        q, qd, q_d, qd_d, qdd_d = self._vectors(q, qd, q_d, qd_d, qdd_d)
        model = self.model
        T, J6 = task_jacobian(model, q)
        if self.target is None:
            T_d, Jd = task_jacobian(model, q_d)
            V_d = Jd @ qd_d
            A_d = Jd @ qdd_d + self._jdot_qd(q_d, qd_d, Jd)
            q_n, qd_n, qdd_n = q_d, qd_d, qdd_d
        else:
            T_d, V_d, A_d = self.target, np.zeros(6), np.zeros(6)
            q_n, qd_n, qdd_n = q_d, np.zeros(model.dof), np.zeros(model.dof)
        if self.posture == "centre":
            q_n, qd_n, qdd_n = self.centre, np.zeros(model.dof), np.zeros(model.dof)
        err6 = pose_error(T_d, T)
        r = self.rows
        J = J6[r]
        x_e = err6[r]
        xd_e = (V_d - J6 @ qd)[r]
        M = model.mass_matrix(q)
        Minv = np.linalg.inv(M)
        S = self.row_scale
        Lam_s, mu = damped_task_inertia(S[:, None] * (J @ Minv @ J.T) * S, self.eps, self.mu_max)
        Lam = S[:, None] * Lam_s * S
        Jbar = Minv @ J.T @ Lam
        N = np.eye(model.dof) - Jbar @ J
        e_n = self.errors(q, qd, q_n, qd_n)
        tau0 = M @ (qdd_n + self.posture_kp * e_n[0] + self.posture_kd * e_n[1])
        if self.mode == "osc":
            a = A_d[r] + self.kp * x_e + self.kd * xd_e - self._jdot_qd(q, qd, J6)[r]
            tau = J.T @ (Lam @ a) + model.inverse_dynamics(q, qd, np.zeros(model.dof)) + N.T @ tau0
        else:
            tau = J.T @ (self.K * x_e + self.D * xd_e) + model.gravity_torques(q) + N.T @ tau0
        self.last = {"task_inertia": Lam, "damping": mu, "null_space": N, "jacobian": J}
        out = clip_efforts(tau, self.effort_limits)
        out.task_error = err6
        return out
