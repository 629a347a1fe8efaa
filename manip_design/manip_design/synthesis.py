"""Parameter synthesis: values of the free static parameters (lengths, m) that let the end effector reach a
list of target points, by Levenberg-Marquardt (scipy ``least_squares``) over the parameters and one joint
configuration per target together (loop closure included), with random restarts; the answer is verified
by solving the IK of every target on the synthesised mechanism (``success`` only when all are reached).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import _kernels as K
from .errors import DesignError


@dataclass
class SynthesisResult:
    """params: {name: value} of the free parameters; success: IK reaches every target (position within
    tol_position_m) on the mechanism built with them; errors_m: per-target position error of that IK;
    actuated: per-target actuator values {name: value}; attempts: LM starts used."""

    params: dict
    success: bool
    errors_m: list
    actuated: list
    attempts: int
    message: str = ""


def read_targets(path):
    """Target points (N, 3) m from a text file (``x y z`` per line, ``#`` comments) or a JSON list."""
    import json
    try:
        text = open(path).read()
    except OSError as e:
        raise DesignError(f"cannot read the targets file: {e.strerror}", str(path)) from None
    pts = []
    if text.lstrip().startswith("["):
        try:
            pts = json.loads(text)
        except json.JSONDecodeError as e:
            raise DesignError(f"bad JSON: {e.msg}", str(path), e.lineno, e.colno) from None
    else:
        for i, line in enumerate(text.splitlines(), 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            try:
                pts.append([float(x) for x in line.replace(",", " ").split()])
            except ValueError:
                raise DesignError("expected three numbers x y z (m)", str(path), i, 1) from None
            if len(pts[-1]) != 3:
                raise DesignError(f"expected three numbers x y z (m), got {len(pts[-1])}", str(path), i, 1)
    a = np.asarray(pts, dtype=float)
    if a.ndim != 2 or a.shape[1] != 3 or a.shape[0] == 0 or not np.all(np.isfinite(a)):
        raise DesignError("the targets must be a non-empty list of finite (x, y, z) points in m", str(path))
    return a


def synthesize(structure, targets, fixed=None, bounds=(0.01, 10.0), attempts=20, seed=0, tol_position_m=1e-6):
    """Solve the free parameters of structure (those without a value and not in ``fixed``) for targets
    (N, 3) m. bounds: (lo, hi) of every free parameter (m)."""
    from scipy.optimize import least_squares
    targets = np.asarray(targets, dtype=float).reshape(-1, 3)
    fixed = dict(fixed or {})
    free = [n for n in structure.free_params if n not in fixed]
    if not free:
        raise DesignError("the structure has no free parameter to synthesise (declare one with 'param NAME')",
                          structure.source)
    lo_p, hi_p = bounds
    rng = np.random.default_rng(seed)
    mid = {n: 0.5 * (lo_p + hi_p) if math.isfinite(hi_p) else 1.0 for n in free}
    probe = structure.compile({**fixed, **{n: 0.5 for n in free}})
    nv, nt, np_ = probe.nv, len(targets), len(free)
    wt = np.zeros(6)
    wt[:3] = 1.0
    nrows = probe.n_closure + 6
    Tts = []
    for t in targets:
        T = np.eye(4)
        T[:3, 3] = t
        Tts.append(T)
    qlo = np.where(np.isfinite(probe.lo), probe.lo, -np.inf)
    qhi = np.where(np.isfinite(probe.hi), probe.hi, np.inf)

    def fun(x):
        vals = {**fixed, **dict(zip(free, x[:np_]))}
        m = structure.compile(vals)
        out = np.empty(nt * nrows)
        Tf = np.empty((m.nf, 4, 4))
        r = np.empty(nrows)
        for k in range(nt):
            q = x[np_ + k * nv: np_ + (k + 1) * nv]
            K.frames(m.ep, m.eT, m.ety, m.eax, m.ev, np.ascontiguousarray(q), Tf)
            K.residual(Tf, m.welds, m.ee, Tts[k], wt, r)
            out[k * nrows:(k + 1) * nrows] = r
        return out

    lb = np.concatenate([np.full(np_, lo_p), np.tile(qlo, nt)])
    ub = np.concatenate([np.full(np_, hi_p), np.tile(qhi, nt)])
    best = None
    for a in range(attempts):
        p0 = np.array([mid[n] for n in free]) if a == 0 else rng.uniform(lo_p, min(hi_p, 2.0), np_)
        q0 = []
        for _ in range(nt):
            q = probe.q_home.copy()
            if a:
                lo = np.where(np.isfinite(probe.lo), probe.lo, -math.pi)
                hi = np.where(np.isfinite(probe.hi), probe.hi, math.pi)
                q = rng.uniform(lo, hi)
            q0.append(np.clip(q, qlo + 1e-9, qhi - 1e-9))
        x0 = np.concatenate([p0, *q0])
        sol = least_squares(fun, x0, bounds=(lb, ub), method="trf", xtol=1e-15, ftol=1e-15, gtol=1e-15,
                            max_nfev=2000)
        params = dict(zip(free, map(float, sol.x[:np_])))
        res = _verify(structure, {**fixed, **params}, targets, tol_position_m, sol.x[np_:].reshape(nt, nv))
        res.attempts = a + 1
        if res.success:
            return res
        if best is None or max(res.errors_m) < max(best.errors_m):
            best = res
    best.message = "no parameter values found that reach every target"
    return best


def _verify(structure, values, targets, tol, qs):
    try:
        m = structure.compile(values)
    except DesignError as e:
        return SynthesisResult({k: values[k] for k in structure.free_params if k in values}, False,
                               [math.inf] * len(targets), [], 0, str(e))
    errs, acts, ok = [], [], True
    for t, q in zip(targets, qs):
        ik = m.ik(t, seed=q)
        if not ik.success:
            ik2 = m.ik(t)
            ik = ik2 if ik2.position_error_m < ik.position_error_m else ik
        errs.append(float(ik.position_error_m))
        acts.append(ik.actuated)
        ok &= bool(ik.success and ik.position_error_m <= tol)
    return SynthesisResult({k: values[k] for k in structure.free_params if k in values}, ok, errs, acts, 0)
