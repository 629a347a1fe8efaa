"""Default gains of the per-joint laws (pd, pid) from the model, sized for a sampled loop with measurement delay;
no rclpy.

Why: a per-joint law with constant diagonal gains K sees the arm's inertia M(q), which is neither diagonal nor
constant. The fastest closed-loop mode goes with the largest eigenvalue of K M(q)^-1, which exceeds K_ii /
M_ii(q_ref) by the configuration dependence of each joint's inertia (10:1 for the UR5's base joint between a
folded and a stretched arm) and by the coupling between joints (a light wrist next to parallel axes). Gains
K_i = M_ii(0) wn^2 with wn = 10 rad/s put modes of the UR5 at up to ~50 times the nominal rate: past what a
250 Hz loop with two periods of delay can follow (the wrists of the simulated pick-and-place oscillated).

How (:func:`design_joint_gains`): joint i's inertia is m_i = min over sampled configurations of
1 / (M(q)^-1)_ii, the smallest inertia it shows with the other joints free (apparent inertia); the gains have
the textbook form for a unit-inertia joint scaled by m_i (pd: Kp = m wn^2, Kd = 2 zeta m wn; pid: the triple
pole at -wn: Kp = 3 m wn^2, Ki = m wn^3, Kd = 3 m wn) with a natural frequency wn_i per joint. Starting from
``max_natural_frequency`` for every joint, the loop linearised about rest at each sampled configuration
(gravity compensated, semi-implicit Euler plant at the control period, effort computed from measurements
``delay_periods`` periods old, held over a period: :func:`loop_matrix`) must be stable with a gain margin
(all gains times ``gain_margin`` still give a spectral radius below 1); while it is not, the natural
frequencies of the joints that take part in the worst unstable mode (their share of its eigenvector) are
lowered by 10 %. The result depends only on the model, the control period and the stated delay.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["sample_configurations", "apparent_inertias", "loop_matrix", "spectral_radius", "design_joint_gains",
           "JointGains", "sliding_mode_rate", "DEFAULT_DELAY_PERIODS", "DEFAULT_GAIN_MARGIN"]

DEFAULT_DELAY_PERIODS = 2     # control periods between a measurement and the effort computed from it
DEFAULT_GAIN_MARGIN = 2.0     # the loop must stay stable with every gain doubled (6 dB)


def sample_configurations(model, count=64, seed=0):
    """(count, dof) configurations uniform within the joint limits (+-pi where a limit is not finite);
    the first one is the zero configuration clipped to the limits."""
    lo = np.asarray(model.joint_lower, float)
    hi = np.asarray(model.joint_upper, float)
    lo = np.where(np.isfinite(lo), lo, -math.pi)
    hi = np.where(np.isfinite(hi), hi, math.pi)
    # wide limits (continuous joints given as +-2pi and the like) add nothing beyond one turn
    span = hi - lo
    wide = span > 2.0 * math.pi
    mid = 0.5 * (lo + hi)
    lo = np.where(wide, mid - math.pi, lo)
    hi = np.where(wide, mid + math.pi, hi)
    rng = np.random.default_rng(seed)
    Q = rng.uniform(lo, hi, (int(count), model.dof))
    Q[0] = np.clip(np.zeros(model.dof), lo, hi)
    return Q


def apparent_inertias(model, Q):
    """(N, dof): 1 / (M(q)^-1)_ii at each configuration, the inertia joint i shows with the other joints free
    (kg*m^2, kg for prismatic joints); also returns the (N, dof, dof) inverse mass matrices."""
    Minv = np.array([np.linalg.inv(model.mass_matrix(q)) for q in Q])
    return 1.0 / np.diagonal(Minv, axis1=1, axis2=2), Minv


def loop_matrix(Minv, kp, kd, ki=None, period_s=0.004, delay_periods=DEFAULT_DELAY_PERIODS):
    """Transition matrix of the per-joint law's loop linearised about rest at one configuration.

    Plant (semi-implicit Euler over the period dt): qd+ = qd + dt M^-1 tau, q+ = q + dt qd+. Law with
    measurements d = delay_periods periods old: tau = -Kp q_(k-d) - Kd qd_(k-d) - Ki z_(k-d), z+ = z + dt q
    (the integral of the error). State [x_k, x_(k-1), ..., x_(k-d)], x = [q, qd(, z)]."""
    Minv = np.asarray(Minv, float)
    n = Minv.shape[0]
    d = int(math.ceil(float(delay_periods)))
    use_i = ki is not None and np.any(np.asarray(ki) > 0)
    b = 3 if use_i else 2
    w = b * n
    A = np.zeros((w * (d + 1), w * (d + 1)))
    I = np.eye(n)
    dt = float(period_s)
    off = w * d
    # qd_{k+1}
    A[n:2 * n, n:2 * n] = I
    A[n:2 * n, off:off + n] += -dt * Minv * np.asarray(kp, float)[None, :]
    A[n:2 * n, off + n:off + 2 * n] += -dt * Minv * np.asarray(kd, float)[None, :]
    if use_i:
        A[n:2 * n, off + 2 * n:off + 3 * n] += -dt * Minv * np.asarray(ki, float)[None, :]
        A[2 * n:3 * n, 2 * n:3 * n] += I
        A[2 * n:3 * n, 0:n] += dt * I
    # q_{k+1} = q_k + dt qd_{k+1}
    A[0:n, :] = dt * A[n:2 * n, :]
    A[0:n, 0:n] += I
    for j in range(d):
        A[w * (j + 1):w * (j + 2), w * j:w * (j + 1)] = np.eye(w)
    return A


def spectral_radius(A):
    return float(np.max(np.abs(np.linalg.eigvals(A))))


@dataclass
class JointGains:
    """kp, ki, kd per joint (N*m/rad, N*m/(rad*s), N*m*s/rad; ki None for pd); natural_frequency (rad/s) and
    inertia (kg*m^2, the smallest apparent inertia) per joint; radius: the worst spectral radius of the loop
    over the sampled configurations with the gains times the margin (and divided by it, pid) (< 1)."""

    kp: np.ndarray
    ki: np.ndarray
    kd: np.ndarray
    natural_frequency: np.ndarray
    inertia: np.ndarray
    radius: float
    integral_ratio: np.ndarray = None   # beta per joint (pid): Ki = Kp wn / beta
    iterations: int = 0


def _gains(kind, m, wn, zeta, beta):
    kp, kd = m * wn ** 2, 2.0 * zeta * m * wn
    return kp, (None if kind == "pd" else kp * wn / beta), kd


def design_joint_gains(model, kind="pd", period_s=0.004, delay_periods=DEFAULT_DELAY_PERIODS,
                       max_natural_frequency=20.0, damping_ratio=1.0, gain_margin=DEFAULT_GAIN_MARGIN, count=32,
                       seed=0, max_iterations=200, scheduled=False):
    """Per-joint gains of ``kind`` ("pd" or "pid") for ``model`` (see module): JointGains. The result is kept
    for the same model object and arguments (a node builds its law once per model; tests build many)."""
    key = (id(model), kind, float(period_s), float(delay_periods), float(max_natural_frequency),
           float(damping_ratio), float(gain_margin), int(count), int(seed), bool(scheduled))
    hit = _CACHE.get(key)
    if hit is not None and hit[0] is model:
        return hit[1]
    out = _design(model, kind, period_s, delay_periods, max_natural_frequency, damping_ratio, gain_margin, count,
                  seed, max_iterations, scheduled)
    if len(_CACHE) > 32:
        _CACHE.clear()
    _CACHE[key] = (model, out)
    return out


_CACHE = {}


def _design(model, kind, period_s, delay_periods, max_natural_frequency, damping_ratio, gain_margin, count, seed,
            max_iterations, scheduled):
    if kind not in ("pd", "pid"):
        raise ValueError(f"kind must be pd or pid, got {kind!r}")
    for name, v in (("period_s", period_s), ("max_natural_frequency", max_natural_frequency),
                    ("gain_margin", gain_margin), ("damping_ratio", damping_ratio)):
        if not (math.isfinite(float(v)) and float(v) > 0.0):
            raise ValueError(f"{name} must be a finite number > 0, got {v!r}")
    if not (math.isfinite(float(delay_periods)) and float(delay_periods) >= 0.0):
        raise ValueError(f"delay_periods must be finite and >= 0, got {delay_periods!r}")
    Q = sample_configurations(model, count, seed)
    app, Minv = apparent_inertias(model, Q)
    m = app.min(axis=0)
    g, zeta = float(gain_margin), float(damping_ratio)
    n = model.dof
    wn = np.full(n, float(max_natural_frequency))
    # integral: Ki = Kp wn / beta; a joint whose inertia reaches mu m needs beta > g mu / (2 zeta) (Routh on
    # mu s^3 + Kd/m s^2 + Kp/m s + Ki/m with every gain divided by g)
    if scheduled:   # m = the apparent inertia at each configuration: mu = M_ii / m_i there
        mu = (np.diagonal(np.array([np.linalg.inv(x) for x in Minv]), axis1=1, axis2=2) / app).max(axis=0)
    else:
        mu = app.max(axis=0) / m
    beta = 1.25 * g * mu / (2.0 * zeta)
    scales = (g,) if kind == "pd" else (g, 1.0 / g)
    b = 2 if kind == "pd" else 3
    worst = 0.0
    for iterations in range(int(max_iterations)):
        worst, worst_A, worst_scale = 0.0, None, g
        for j, Mi in enumerate(Minv):
            kp, ki, kd = _gains(kind, app[j] if scheduled else m, wn, zeta, beta)
            for c in scales:
                A = loop_matrix(Mi, c * kp, c * kd, None if ki is None else c * ki, period_s, delay_periods)
                r = spectral_radius(A)
                if r > worst:
                    worst, worst_A, worst_scale = r, A, c
        if worst < 1.0:
            break
        lam, vec = np.linalg.eig(worst_A)
        worst_vec = vec[:, int(np.argmax(np.abs(lam)))]
        # the joints that take part in the worst mode (state blocks [q, qd(, z)] per delayed copy)
        share = np.sum(np.abs(worst_vec.reshape(-1, b, n)) ** 2, axis=(0, 1))
        part = share >= 0.5 * share.max()
        if worst_scale < 1.0:
            beta = np.where(part, 1.5 * beta, beta)   # too little gain for the integral: a slower integral
        else:
            wn = np.where(part, 0.9 * wn, wn)         # too much gain for the delay: a slower joint
    else:
        raise ValueError(f"no stable {kind} gains found for {model.name} at period {period_s} s with "
                         f"{delay_periods} periods of delay")
    kp, ki, kd = _gains(kind, m, wn, zeta, beta)
    return JointGains(kp, ki, kd, wn, m, worst, beta if kind == "pid" else None, iterations)


def sliding_mode_rate(period_s=0.004, delay_periods=DEFAULT_DELAY_PERIODS, gain_margin=DEFAULT_GAIN_MARGIN,
                      integral=False):
    """w (1/s) for the sliding-mode law (manip_control.robust): with Lambda = Ks = w and the boundary layer's
    gain adding at most w to the decay rate of s, the decoupled loop per joint inside the layer is s' = -a s
    with a in [w, 2 w]. For s = e' + Lambda e: e'' = -(Lambda + a) e' - Lambda a e; for the integral surface
    s = e' + 2 Lambda e + Lambda^2 int(e) dt: e'' = -(2 Lambda + a) e' - (Lambda^2 + 2 Lambda a) e - a Lambda^2
    int(e) dt. w is the largest (0.25/s steps) for which that loop, sampled at period_s with delay_periods of
    measurement delay and every gain times gain_margin, is stable at both ends (e.g. 23.2/s at 4 ms with 2 periods,
    37.4/s with 1 period; 16.8/s with the integral surface at 4 ms and 2 periods)."""
    one = np.array([[1.0]])
    g = float(gain_margin)

    def gains(w, a):
        if integral:
            return [g * (w * w + 2.0 * w * a)], [g * (2.0 * w + a)], [g * a * w * w]
        return [g * w * a], [g * (w + a)], None

    def stable(w):
        return all(spectral_radius(loop_matrix(one, *gains(w, a)[:2], gains(w, a)[2], period_s, delay_periods)) < 1.0
                   for a in (w, 2.0 * w))
    lo, hi = 0.0, 4.0 / float(period_s)
    if not stable(0.25):
        raise ValueError(f"no stable sliding-mode rate at period {period_s} s with {delay_periods} periods of delay")
    lo = 0.25
    while hi - lo > 0.25:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if stable(mid) else (lo, mid)
    return lo
