#!/usr/bin/env python3
"""Benchmark of manip_core against Pinocchio and ManipulaPy on the example-robot-data UR5 and Panda.

    python bench/core.py            # full run (about 10-15 min on 2 cores)
    python bench/core.py --quick    # smoke run (under ~2 min)

Measures per-call times (FK, space Jacobian, RNEA, mass matrix, forward dynamics), IK success and time on
random reachable targets, batched throughput (ns per configuration) and cold start (import + load + first
calls, with a warm and with an empty numba cache). Checks on the side that the three libraries agree
(max |difference| against Pinocchio). Prints a markdown table and writes it, with a JSON of every raw
number, to bench/results/. See bench/README.md for the meaning of each column.

It is a benchmark, not a test: targets are marked PASS/FAIL, nothing is asserted.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import hashlib
import io
import json
import logging
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from importlib import metadata
from pathlib import Path

os.environ.setdefault("MANIPULAPY_QUIET", "1")

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from results_io import cpu_model, save_results  # noqa: E402
ROOT = HERE.parent
try:  # until manip_core is installed (editable), use the source tree
    import manip_core  # noqa: F401
except ImportError:
    sys.path.insert(0, str(ROOT / "manip_core"))
    import manip_core  # noqa: F401
from manip_core.model import RobotModel  # noqa: E402
from manip_core.reference_robots import PANDA_REL, UR5_REL, example_robot  # noqa: E402

MANIP_SRC = Path(manip_core.__file__).resolve().parent

ROBOTS = [("ur5", UR5_REL, "ee_link"), ("panda", PANDA_REL, "panda_hand_tcp")]
OPS = [("fk", "FK"), ("jac", "space Jacobian"), ("rnea", "RNEA"), ("crba", "mass matrix"),
       ("fd", "forward dynamics")]
BATCH_OPS = [("fk", "FK"), ("rnea", "RNEA"), ("fd", "forward dynamics"), ("crba", "mass matrix")]
TOL_P, TOL_R = 1e-6, 1e-6          # IK success: position (m), rotation (rad), judged by check_pose()
LIMIT_TOL = 1e-9                   # IK success also needs lower - 1e-9 <= q <= upper + 1e-9
TARGET_SINGLE_RATIO = 1.0          # single calls at most Pinocchio's time (issue 15)
TARGET_BATCH_SPEEDUP = {"rnea": 1.5, "fd": 1.5}   # batched: at least 1.5x faster than rnea/abaInParallel (issue 15)
TARGET_BATCH_NS = {("ur5", "fk"): 150.0, ("ur5", "rnea"): 400.0}
TARGET_IK = {"ur5": (0.1, 99.5), "panda": (0.2, 99.5)}   # mean ms per call, success %


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ============================================================================================ machine
def machine_info():
    cpu = cpu_model()

    def ver(dist):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return None

    import numba
    digest = hashlib.sha256()
    for p in sorted(MANIP_SRC.glob("*.py")):
        digest.update(p.name.encode() + p.read_bytes())
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = os.cpu_count()
    return {
        "cpu_model": cpu, "cpu_count": os.cpu_count(), "cpu_affinity": affinity,
        "numba_threads": numba.config.NUMBA_NUM_THREADS, "platform": platform.platform(),
        "python": platform.python_version(), "numpy": np.__version__, "numba": numba.__version__,
        "pin": ver("pin"), "example-robot-data": ver("example-robot-data"), "ManipulaPy": ver("ManipulaPy"),
        "manip_core_src": str(MANIP_SRC), "manip_core_sha256_12": digest.hexdigest()[:12],
        "loadavg_start": list(os.getloadavg()),
    }


# ============================================================================================ models
def rot_angle(R):
    """Rotation angle (rad) of R, accurate near 0 and pi."""
    s = 0.5 * math.sqrt((R[2, 1] - R[1, 2]) ** 2 + (R[0, 2] - R[2, 0]) ** 2 + (R[1, 0] - R[0, 1]) ** 2)
    c = 0.5 * (R[0, 0] + R[1, 1] + R[2, 2] - 1.0)
    return math.atan2(s, c)


class PinRobot:
    """Pinocchio model of the same chain: the URDF with every joint not in the manip chain locked at 0."""

    def __init__(self, path, tip, joint_names):
        import pinocchio as pin
        self.pin = pin
        full = pin.buildModelFromUrdf(str(path))
        lock = [full.getJointId(n) for n in full.names[1:] if n not in joint_names]
        self.model = pin.buildReducedModel(full, lock, pin.neutral(full)) if lock else full
        names = list(self.model.names[1:])
        if names != list(joint_names) or self.model.nq != len(joint_names) or self.model.nv != self.model.nq:
            raise RuntimeError(f"Pinocchio chain {names} (nq={self.model.nq}) differs from manip's {joint_names}")
        self.data = self.model.createData()
        self.fid = self.model.getFrameId(tip)
        self.lo = np.array(self.model.lowerPositionLimit)
        self.hi = np.array(self.model.upperPositionLimit)

    # --- single calls, as timed (results live in self.data)
    def fk(self, q):
        self.pin.forwardKinematics(self.model, self.data, q)
        return self.pin.updateFramePlacement(self.model, self.data, self.fid)

    def jac(self, q):
        return self.pin.computeFrameJacobian(self.model, self.data, q, self.fid, self.pin.WORLD)

    def rnea(self, q, v, a):
        return self.pin.rnea(self.model, self.data, q, v, a)

    def crba(self, q):
        return self.pin.crba(self.model, self.data, q)

    def aba(self, q, v, tau):
        return self.pin.aba(self.model, self.data, q, v, tau)

    # --- the same results in manip's conventions, for the agreement check
    def fk_matrix(self, q):
        return self.fk(q).homogeneous.copy()

    def jac_space(self, q):
        J = self.jac(q)
        return np.vstack([J[3:], J[:3]])          # Pinocchio WORLD is [v; w] at the base origin

    def mass_matrix(self, q):
        M = np.array(self.crba(q))
        return np.triu(M) + np.triu(M, 1).T       # crba fills the upper triangle only


class MpyRobot:
    """ManipulaPy model from the same URDF with its own loader and the same tip link."""

    def __init__(self, path, tip, joint_names):
        logging.getLogger("ManipulaPy").setLevel(logging.ERROR)     # unresolved mesh URIs: not needed here
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from ManipulaPy import utils
            from ManipulaPy.dynamics import ManipulatorDynamics
            from ManipulaPy.kinematics import SerialManipulator
            from ManipulaPy.urdf import URDF
            urdf = URDF.load(str(path))
            p = urdf.extract_screw_axes(tip_link=tip)
        if list(p["joint_names"]) != list(joint_names):
            raise RuntimeError(f"ManipulaPy chain {p['joint_names']} differs from manip's {joint_names}")
        # as URDFToSerialManipulator.initialize_serial_manipulator / initialize_manipulator_dynamics do
        self.kin = SerialManipulator(M_list=p["M"], omega_list=p["S_list"][:3, :], S_list=p["S_list"],
                                     B_list=p["B_list"], G_list=p["G_list"], joint_limits=p["joint_limits"])
        self.dyn = ManipulatorDynamics(M_list=p["M"], omega_list=p["S_list"][:3, :],
                                       r_list=utils.extract_r_list(p["S_list"]), b_list=None,
                                       S_list=p["S_list"], B_list=p["B_list"], Glist=p["G_list"],
                                       Mlist_per_link=p.get("Mlist_per_link"))
        self.g = np.array([0.0, 0.0, -9.81])
        self.ftip = np.zeros(6)

    def clear(self):
        """ManipulaPy caches M(q) and dM/dq keyed on the exact q (unbounded): empty them between calls."""
        self.dyn._mass_matrix_cache.clear()
        self.dyn._mass_matrix_derivative_cache.clear()

    def fk(self, q):
        return self.kin.forward_kinematics(q)

    def jac(self, q):
        return self.kin.jacobian(q, frame="space")

    def rnea(self, q, v, a):
        return self.dyn.inverse_dynamics(q, v, a, self.g, self.ftip)

    def crba(self, q):
        return self.dyn.mass_matrix(q)

    def aba(self, q, v, tau):
        return self.dyn.forward_dynamics(q, v, tau, self.g, self.ftip)

    def ik(self, T):
        """Its default IK: iterative_inverse_kinematics from the zero seed, eomg = ev = 1e-6."""
        return self.kin.iterative_inverse_kinematics(T, np.zeros(len(self.kin.joint_limits)),
                                                     eomg=TOL_R, ev=TOL_P)


def random_states(lo, hi, n, rng):
    q = rng.uniform(lo, hi, (n, lo.size))
    v = rng.uniform(-1.0, 1.0, (n, lo.size))
    a = rng.uniform(-1.0, 1.0, (n, lo.size))
    tau = rng.uniform(-5.0, 5.0, (n, lo.size))
    return q, v, a, tau


# ======================================================================================== timing
def time_blocks(fns, reps):
    """Per-call time (s) of each fn(*args) over its arglist, warm: `reps` blocks, one block of every function
    in turn (so that all see the same machine load), each block the mean over its arglist; median of blocks.

    fns: {name: (fn, arglist)}."""
    for fn, arglist in fns.values():
        for args in arglist[:5]:
            fn(*args)
    per = {k: np.empty(reps) for k in fns}
    pc = time.perf_counter
    for r in range(reps):
        for k, (fn, arglist) in fns.items():
            t0 = pc()
            for args in arglist:
                fn(*args)
            per[k][r] = (pc() - t0) / len(arglist)
    return {k: {"median_s": float(np.median(v)), "min_s": float(v.min()), "p90_s": float(np.quantile(v, 0.9)),
                "blocks": reps, "calls_per_block": len(fns[k][1])} for k, v in per.items()}


def time_slow(fn, arglist, budget_s, clear=None, min_calls=3, max_calls=200):
    """Per-call times of a slow function, each call on a fresh state, within a time budget; median."""
    fn(*arglist[0])
    ts = []
    start = time.perf_counter()
    for i in range(max_calls):
        args = arglist[(i + 1) % len(arglist)]
        if clear:
            clear()
        t0 = time.perf_counter()
        fn(*args)
        ts.append(time.perf_counter() - t0)
        if len(ts) >= min_calls and time.perf_counter() - start > budget_s:
            break
    ts = np.array(ts)
    return {"median_s": float(np.median(ts)), "min_s": float(ts.min()), "p90_s": float(np.quantile(ts, 0.9)),
            "calls": int(ts.size)}


def time_batch(fns, reps):
    """Seconds per run of each fn(), runs of the functions alternating; {name: list of run times}."""
    for fn, _ in fns.values():
        fn()
    ts = {k: [] for k in fns}
    for r in range(max(n for _, n in fns.values())):
        for k, (fn, n) in fns.items():
            if r < n:
                t0 = time.perf_counter()
                fn()
                ts[k].append(time.perf_counter() - t0)
    return ts


# ======================================================================================= sections
def agreement(robot, pr, mp, rng, n=30):
    """max |x - x_pinocchio| over n random states, per op, for manip and ManipulaPy."""
    q, v, a, tau = random_states(pr.lo, pr.hi, n, rng)
    out = {"manip": {k: 0.0 for k, _ in OPS}, "ManipulaPy": {k: 0.0 for k, _ in OPS} if mp else None}
    for i in range(n):
        ref = {"fk": pr.fk_matrix(q[i]), "jac": pr.jac_space(q[i]), "rnea": np.array(pr.rnea(q[i], v[i], a[i])),
               "crba": pr.mass_matrix(q[i]), "fd": np.array(pr.aba(q[i], v[i], tau[i]))}
        libs = [("manip", {"fk": robot.fk(q[i]), "jac": robot.jacobian_space(q[i]),
                           "rnea": robot.inverse_dynamics(q[i], v[i], a[i]), "crba": robot.mass_matrix(q[i]),
                           "fd": robot.forward_dynamics(q[i], v[i], tau[i])})]
        if mp and i < 5:                          # ManipulaPy's dynamics take ~20 ms a call
            mp.clear()
            libs.append(("ManipulaPy", {"fk": mp.fk(q[i]), "jac": mp.jac(q[i]), "rnea": mp.rnea(q[i], v[i], a[i]),
                                        "crba": mp.crba(q[i]), "fd": mp.aba(q[i], v[i], tau[i])}))
        for name, res in libs:
            for k, _ in OPS:
                d = float(np.max(np.abs(np.asarray(res[k], dtype=float) - ref[k])))
                out[name][k] = max(out[name][k], d)
    return out


def bench_single(robot, pr, mp, rng, quick):
    reps = 60 if quick else 400
    budget = 0.4 if quick else 3.0
    q, v, a, tau = random_states(pr.lo, pr.hi, 50, rng)
    Q1 = [(x,) for x in q]
    S3 = list(zip(q, v, a))
    F3 = list(zip(q, v, tau))
    res = {}
    for key, label in OPS:
        log(f"  single {label}")
        m_fn, m_args = {"fk": (robot.fk, Q1), "jac": (robot.jacobian_space, Q1), "rnea": (robot.inverse_dynamics, S3),
                        "crba": (robot.mass_matrix, Q1), "fd": (robot.forward_dynamics, F3)}[key]
        p_fn, p_args = {"fk": (pr.fk, Q1), "jac": (pr.jac, Q1), "rnea": (pr.rnea, S3), "crba": (pr.crba, Q1),
                        "fd": (pr.aba, F3)}[key]
        entry = time_blocks({"manip": (m_fn, m_args), "pin": (p_fn, p_args)}, reps)
        if isinstance(mp, MpyRobot):
            mp_fn = {"fk": mp.fk, "jac": mp.jac, "rnea": mp.rnea, "crba": mp.crba, "fd": mp.aba}[key]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                entry["ManipulaPy"] = time_slow(mp_fn, m_args, budget, clear=mp.clear)
        res[key] = entry
    return res


def check_pose(pr, q, T):
    """Independent success check (Pinocchio FK): (position error m, rotation error rad, within limits)."""
    q = np.asarray(q, dtype=float)
    Tq = pr.fk_matrix(q)
    dp = float(np.linalg.norm(Tq[:3, 3] - T[:3, 3]))
    dr = rot_angle(Tq[:3, :3].T @ T[:3, :3])
    inside = bool(np.all(q >= pr.lo - LIMIT_TOL) and np.all(q <= pr.hi + LIMIT_TOL))
    return dp, dr, inside


def pin_dls_ik(pr, T, rng, eps=1e-8, it_max=40, restarts=50, damp=1e-6, max_step=0.5):
    """Pinocchio's IK example (damped least squares on log6 of the frame error, Jlog6-corrected Jacobian)
    with full steps capped at max_step rad per joint (instead of the example's DT = 0.1), clipping to the
    joint limits and random restarts after it_max iterations; starts at mid-limits."""
    pin, model, data, fid = pr.pin, pr.model, pr.data, pr.fid
    oMdes = pin.SE3(T[:3, :3].copy(), T[:3, 3].copy())
    q = 0.5 * (pr.lo + pr.hi)
    eye = np.eye(6)
    n = 0
    for _ in range(restarts + 1):
        for _ in range(it_max):
            n += 1
            pin.computeJointJacobians(model, data, q)                    # forward kinematics included
            iMd = pin.updateFramePlacement(model, data, fid).actInv(oMdes)
            err = pin.log6(iMd).vector
            if np.linalg.norm(err) < eps:
                return q, True, n
            J = -pin.Jlog6(iMd.inverse()) @ pin.getFrameJacobian(model, data, fid, pin.LOCAL)
            step = -J.T @ np.linalg.solve(J @ J.T + damp * eye, err)
            big = np.abs(step).max()
            if big > max_step:
                step *= max_step / big
            q = np.clip(q + step, pr.lo, pr.hi)                         # revolute joints: integrate = add
        q = rng.uniform(pr.lo, pr.hi)
    return q, False, n


def bench_ik(name, robot, pr, mp, quick, mp_skip_reason):
    n = 200 if quick else 1000
    rng = np.random.default_rng(0)
    qs = rng.uniform(robot.joint_lower, robot.joint_upper, (n, robot.dof))
    targets = [pr.fk_matrix(q) for q in qs]
    out = {}

    def summarise(times, succ, flag, iters, note=""):
        times = np.array(times)
        d = {"targets": len(times), "success_pct": 100.0 * float(np.mean(succ)), "mean_ms": 1e3 * float(times.mean()),
             "mean_iterations": float(np.mean(iters)), "max_iterations": int(np.max(iters)),
             "median_ms": 1e3 * float(np.median(times)), "max_ms": 1e3 * float(times.max()),
             "p99_ms": 1e3 * float(np.quantile(times, 0.99)), "note": note}
        flag, succ = np.array(flag), np.array(succ)
        d["flag_true_check_false"] = int(np.sum(flag & ~succ))
        d["flag_false_check_true"] = int(np.sum(~flag & succ))
        return d

    log(f"  IK manip ({n} targets)")
    robot.ik(targets[0])
    times, succ, flags, iters, restarts = [], [], [], [], []
    for T in targets:
        t0 = time.perf_counter()
        r = robot.ik(T)
        times.append(time.perf_counter() - t0)
        dp, dr, inside = check_pose(pr, r.q, T)
        succ.append(dp <= TOL_P and dr <= TOL_R and inside)
        flags.append(bool(r.success))
        iters.append(r.iterations)
        restarts.append(r.restarts)
    out["manip"] = summarise(times, succ, flags, iters, "robot.ik(T), defaults")
    out["manip"]["mean_restarts"] = float(np.mean(restarts))
    out["manip"]["max_restarts"] = int(np.max(restarts))

    log(f"  IK Pinocchio DLS ({n} targets)")
    prng = np.random.default_rng(1)
    times, succ, flags, iters = [], [], [], []
    for T in targets:
        t0 = time.perf_counter()
        q, ok, n_it = pin_dls_ik(pr, T, prng)
        times.append(time.perf_counter() - t0)
        dp, dr, inside = check_pose(pr, q, T)
        succ.append(dp <= TOL_P and dr <= TOL_R and inside)
        flags.append(bool(ok))
        iters.append(n_it)
    out["pin"] = summarise(times, succ, flags, iters, "Python DLS loop on pin, steps capped at 0.5 rad, <=50 restarts x 40 it")

    if isinstance(mp, MpyRobot):
        n_mp, budget = (5, 12.0) if quick else (100, 150.0)
        log(f"  IK ManipulaPy (up to {n_mp} targets or {budget:.0f} s)")
        times, succ, flags, iters = [], [], [], []
        start = time.perf_counter()
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            for T in targets[:n_mp]:
                t0 = time.perf_counter()
                theta, ok, n_it = mp.ik(T)
                times.append(time.perf_counter() - t0)
                iters.append(n_it)
                dp, dr, inside = check_pose(pr, theta, T)
                succ.append(dp <= TOL_P and dr <= TOL_R and inside)
                flags.append(bool(ok))
                if time.perf_counter() - start > budget:
                    break
        out["ManipulaPy"] = summarise(times, succ, flags, iters,
                                      f"iterative_inverse_kinematics from q=0; first {len(times)} targets only")
    else:
        out["ManipulaPy"] = {"na": mp_skip_reason}
    return out


def one_thread(fn):
    """fn run with numba limited to one thread (per-thread cost, less sensitive to other jobs' load)."""
    import numba

    def run():
        n = numba.get_num_threads()
        numba.set_num_threads(1)
        try:
            return fn()
        finally:
            numba.set_num_threads(n)
    return run


def bench_batch(name, robot, pr, quick):
    import pinocchio as pin
    nthreads = os.cpu_count() or 1
    pool = pin.ModelPool(pr.model, nthreads)
    res = {}
    for N in ([10_000] if quick else [10_000, 100_000]):
        rng = np.random.default_rng(2)
        Q, V, A, TAU = random_states(pr.lo, pr.hi, N, rng)
        reps = (15 if quick else 41) if N <= 10_000 else 15
        loop_reps = 3
        Qt, Vt, At, TAUt = Q.T, V.T, A.T, TAU.T                   # (nq, N), Fortran order: no copy
        out_t = np.zeros((pr.model.nv, N), order="F")

        def pin_fk_loop():
            m, d, f = pr.model, pr.data, pr.fid
            for q in Q:
                pin.forwardKinematics(m, d, q)
                pin.updateFramePlacement(m, d, f)

        def pin_crba_loop():
            m, d = pr.model, pr.data
            for q in Q:
                pin.crba(m, d, q)

        manip = {"fk": lambda: robot.fk_batch(Q), "rnea": lambda: robot.inverse_dynamics_batch(Q, V, A),
                 "fd": lambda: robot.forward_dynamics_batch(Q, V, TAU), "crba": lambda: robot.mass_matrix_batch(Q)}
        pins = {"fk": (pin_fk_loop, "Python loop, 1 thread", loop_reps),
                "rnea": (lambda: pin.rneaInParallel(nthreads, pool, Qt, Vt, At, out_t),
                         f"rneaInParallel, {nthreads} threads", reps),
                "fd": (lambda: pin.abaInParallel(nthreads, pool, Qt, Vt, TAUt, out_t),
                       f"abaInParallel, {nthreads} threads", reps),
                "crba": (pin_crba_loop, "Python loop, 1 thread", loop_reps)}
        for key, label in BATCH_OPS:
            log(f"  batch {label} N={N}")
            fn, how, r = pins[key]
            ts = time_batch({"manip": (manip[key], reps), "manip_1t": (one_thread(manip[key]), max(3, reps // 3)),
                             "pin": (fn, r)}, reps)
            tm, t1, tp = ts["manip"], ts["manip_1t"], ts["pin"]
            res[f"{key}@{N}"] = {"op": key, "N": N, "manip_ns": 1e9 * float(np.median(tm)) / N,
                                 "manip_min_ns": 1e9 * min(tm) / N, "manip_1thread_ns": 1e9 * float(np.median(t1)) / N,
                                 "pin_ns": 1e9 * float(np.median(tp)) / N, "pin_min_ns": 1e9 * min(tp) / N,
                                 "pin_method": how, "loadavg_1min": os.getloadavg()[0],
                                 "manip_runs_s": tm, "manip_1thread_runs_s": t1, "pin_runs_s": tp}
        # agreement of the batched results on the first 200 configurations
        k = 200
        fkb = robot.fk_batch(Q[:k])
        rb = robot.inverse_dynamics_batch(Q[:k], V[:k], A[:k])
        fb = robot.forward_dynamics_batch(Q[:k], V[:k], TAU[:k])
        mb = robot.mass_matrix_batch(Q[:k])
        diff = {"fk": 0.0, "rnea": 0.0, "fd": 0.0, "crba": 0.0}
        for i in range(k):
            diff["fk"] = max(diff["fk"], float(np.abs(fkb[i] - pr.fk_matrix(Q[i])).max()))
            diff["rnea"] = max(diff["rnea"], float(np.abs(rb[i] - pr.rnea(Q[i], V[i], A[i])).max()))
            diff["fd"] = max(diff["fd"], float(np.abs(fb[i] - pr.aba(Q[i], V[i], TAU[i])).max()))
            diff["crba"] = max(diff["crba"], float(np.abs(mb[i] - pr.mass_matrix(Q[i])).max()))
        for key, _ in BATCH_OPS:
            res[f"{key}@{N}"]["max_abs_diff"] = diff[key]
    return res


# ==================================================================================== derivatives
DERIV_OPS = [("rnead", "RNEA derivatives"), ("abad", "forward dynamics derivatives"),
             ("jdot", "Jacobian time derivative (space)")]


def bench_derivatives(robot, pr, rng, quick):
    """Analytic derivatives against Pinocchio: agreement, single calls (alternating blocks), batches.

    Pinocchio's per-call C++ time is estimated from a Python loop of its binding minus the binding's own
    overhead, measured as (Python loop of pin.rnea / pin.aba) - (rneaInParallel / abaInParallel on 1 thread)."""
    import pinocchio as pin
    pm, pd, fid = pr.model, pr.data, pr.fid
    n = robot.dof
    res = {"agreement": {}, "single": {}, "batch": {}}

    def p_rnead(q, v, a):
        return pin.computeRNEADerivatives(pm, pd, q, v, a)

    def p_abad(q, v, t):
        return pin.computeABADerivatives(pm, pd, q, v, t)

    def p_jdot(q, v):
        pin.computeJointJacobiansTimeVariation(pm, pd, q, v)
        pin.updateFramePlacement(pm, pd, fid)
        return pin.getFrameJacobianTimeVariation(pm, pd, fid, pin.WORLD)

    def sym(M):
        M = np.array(M)
        return np.triu(M) + np.triu(M, 1).T

    # agreement: max |difference| over every matrix of the op
    q, v, a, tau = random_states(pr.lo, pr.hi, 30, rng)
    diff = {k: 0.0 for k, _ in DERIV_OPS}
    for i in range(q.shape[0]):
        got = robot.rnea_derivatives(q[i], v[i], a[i])
        ref = [np.array(x) for x in p_rnead(q[i], v[i], a[i])]
        ref[2] = sym(ref[2])
        diff["rnead"] = max(diff["rnead"], max(float(np.abs(g - r).max()) for g, r in zip(got, ref)))
        got = robot.forward_dynamics_derivatives(q[i], v[i], tau[i])
        ref = [np.array(x) for x in p_abad(q[i], v[i], tau[i])]
        ref[2] = sym(ref[2])
        diff["abad"] = max(diff["abad"], max(float(np.abs(g - r).max()) for g, r in zip(got, ref)))
        dJ = np.array(p_jdot(q[i], v[i]))
        diff["jdot"] = max(diff["jdot"], float(np.abs(robot.jacobian_time_derivative(q[i], v[i])
                                                      - np.vstack([dJ[3:], dJ[:3]])).max()))
    res["agreement"] = diff

    # single calls
    reps = 60 if quick else 300
    q, v, a, tau = random_states(pr.lo, pr.hi, 50, rng)
    S3, F3, S2 = list(zip(q, v, a)), list(zip(q, v, tau)), list(zip(q, v))
    data = robot.create_data()
    D3 = tuple(np.empty((n, n)) for _ in range(3))
    J = np.empty((6, n))
    fns = {
        "rnead": {"manip": (robot.rnea_derivatives, S3),
                  "manip_out": (lambda q, v, a: robot.rnea_derivatives(q, v, a, out=D3, data=data), S3),
                  "pin": (p_rnead, S3)},
        "abad": {"manip": (robot.forward_dynamics_derivatives, F3),
                 "manip_out": (lambda q, v, t: robot.forward_dynamics_derivatives(q, v, t, out=D3, data=data), F3),
                 "pin": (p_abad, F3)},
        "jdot": {"manip": (robot.jacobian_time_derivative, S2),
                 "manip_out": (lambda q, v: robot.jacobian_time_derivative(q, v, out=J, data=data), S2),
                 "pin": (p_jdot, S2)},
    }
    for key, label in DERIV_OPS:
        log(f"  single {label}")
        res["single"][key] = time_blocks(fns[key], reps)
        res["single"][key]["loadavg_1min"] = os.getloadavg()[0]

    # batches
    for N in ([10_000] if quick else [10_000, 100_000]):
        Q, V, A, TAU = random_states(pr.lo, pr.hi, N, np.random.default_rng(2))
        Qt, Vt, At, TAUt = Q.T, V.T, A.T, TAU.T
        out_t = np.zeros((pm.nv, N), order="F")
        pool1 = pin.ModelPool(pm, 1)
        reps = 5 if quick else 9
        loop_reps = 3

        def loop(fn, X):
            def run():
                for k in range(N):
                    fn(pm, pd, Q[k], V[k], X[k])
            return run

        for key, pfn, pbase, ppar, X, mfn in (
                ("rnead", pin.computeRNEADerivatives, pin.rnea, pin.rneaInParallel, A, robot.rnea_derivatives_batch),
                ("abad", pin.computeABADerivatives, pin.aba, pin.abaInParallel, TAU,
                 robot.forward_dynamics_derivatives_batch)):
            log(f"  batch {dict(DERIV_OPS)[key]} N={N}")
            Xt = X.T
            ts = time_batch({"manip": (lambda: mfn(Q, V, X), reps),
                             "manip_1t": (one_thread(lambda: mfn(Q, V, X)), max(3, reps // 3)),
                             "pin_loop": (loop(pfn, X), loop_reps),
                             "pin_base_loop": (loop(pbase, X), loop_reps),
                             "pin_base_par1": (lambda: ppar(1, pool1, Qt, Vt, Xt, out_t), reps)}, reps)
            med = {k: 1e9 * float(np.median(t)) / N for k, t in ts.items()}
            binding = med["pin_base_loop"] - med["pin_base_par1"]
            res["batch"][f"{key}@{N}"] = {
                "op": key, "N": N, "manip_ns": med["manip"], "manip_min_ns": 1e9 * min(ts["manip"]) / N,
                "manip_1thread_ns": med["manip_1t"], "pin_loop_ns": med["pin_loop"],
                "pin_binding_overhead_ns": binding, "pin_cpp_est_ns": med["pin_loop"] - binding,
                "loadavg_1min": os.getloadavg()[0], "runs_s": ts}
        del Q, V, A, TAU
    return res


def render_derivatives(results):
    L = ["## Dynamics derivatives (analytic; Pinocchio computeRNEADerivatives / computeABADerivatives / "
         "getFrameJacobianTimeVariation)", "",
         "### Single calls (µs per call, median of alternating blocks, from Python)", "",
         "| robot | op | manip | manip, out= data= | Pinocchio | manip/Pinocchio | manip out=/Pinocchio | "
         "max abs diff vs Pinocchio | load (1 min) |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for rname, r in results["robots"].items():
        d = r.get("derivatives")
        if not d:
            continue
        for key, label in DERIV_OPS:
            e = d["single"][key]
            tm, to, tp = e["manip"]["median_s"], e["manip_out"]["median_s"], e["pin"]["median_s"]
            L.append(f"| {rname} | {label} | {fmt_us(tm)} | {fmt_us(to)} | {fmt_us(tp)} | {fmt_ratio(tm, tp)} | "
                     f"{fmt_ratio(to, tp)} | {fmt_diff(d['agreement'][key])} | {e['loadavg_1min']:.1f} |")
    L += ["", "manip returns (dtau/dq, dtau/dqd, M) and (dqdd/dq, dqdd/dqd, M^-1), all full; Pinocchio fills its "
          "Data (M and M^-1 upper triangle) and returns references. The max abs diff covers all three matrices "
          "(Pinocchio's triangles symmetrised), over 30 random states; Jacobian time derivative: "
          "WORLD rows swapped to [omega; v].", "",
          "### Batched (ns per configuration, median of runs)", "",
          "| robot | op | N | manip | manip, 1 thread | Pinocchio, Python loop | Pinocchio binding overhead | "
          "Pinocchio C++ per call (est.) | manip/Pinocchio C++ | target: manip <= Pinocchio C++ | load (1 min) |",
          "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    for rname, r in results["robots"].items():
        d = r.get("derivatives")
        if not d:
            continue
        for e in d["batch"].values():
            label = dict(DERIV_OPS)[e["op"]]
            L.append(f"| {rname} | {label} | {e['N']:,} | {e['manip_ns']:.0f} ({e['manip_min_ns']:.0f}) | "
                     f"{e['manip_1thread_ns']:.0f} | {e['pin_loop_ns']:.0f} | {e['pin_binding_overhead_ns']:.0f} | "
                     f"{e['pin_cpp_est_ns']:.0f} | {fmt_ratio(e['manip_ns'], e['pin_cpp_est_ns'])} | "
                     f"{pf(e['manip_ns'] <= e['pin_cpp_est_ns'])} | {e['loadavg_1min']:.1f} |")
    L += ["", "manip: numba parallel over N (all numba threads; output allocation included; fastest run in "
          "brackets); 1 thread: numba.set_num_threads(1). Pinocchio has no parallel derivative API: its per-call "
          "C++ time is estimated as its Python loop minus the binding overhead, (Python loop of pin.rnea or "
          "pin.aba) - (rneaInParallel / abaInParallel on 1 thread), per configuration. The derivative bindings "
          "also return three matrices, so the true overhead is somewhat larger and the estimate favours "
          "Pinocchio.", ""]
    return L


COLD_SNIPPET = r"""
import json, time, sys
t0 = time.perf_counter()
import numpy as np
import manip_core
t1 = time.perf_counter()
from manip_core.reference_robots import example_robot, UR5_REL
robot = manip_core.RobotModel.from_urdf(example_robot(UR5_REL), tip_link="ee_link")
t2 = time.perf_counter()
q = np.array([0.3, -1.0, 1.2, -0.5, 0.8, 0.1])
T = robot.fk(q)
t3 = time.perf_counter()
robot.inverse_dynamics(q, np.zeros(6), np.zeros(6))
t4 = time.perf_counter()
r = robot.ik(T)
t5 = time.perf_counter()
print("COLD " + json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "fk_s": t3 - t2, "rnea_s": t4 - t3,
                            "ik_s": t5 - t4, "total_s": t5 - t0, "ik_success": bool(r.success)}))
"""


def cold_start(quick):
    env = dict(os.environ)
    src = str(MANIP_SRC.parent)
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")

    def run(cache_dir):
        e = dict(env, NUMBA_CACHE_DIR=cache_dir)
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-c", COLD_SNIPPET], env=e, capture_output=True, text=True, cwd=tempfile.gettempdir())
        wall = time.perf_counter() - t0
        line = [ln for ln in p.stdout.splitlines() if ln.startswith("COLD ")]
        if p.returncode or not line:
            raise RuntimeError(f"cold-start subprocess failed (rc {p.returncode}): {p.stderr[-800:]}")
        d = json.loads(line[-1][5:])
        d["process_wall_s"] = wall
        return d

    n_cold, n_warm = (1, 3) if quick else (3, 7)
    out = {"warm_cache": [], "empty_cache": []}
    warm_dir = tempfile.mkdtemp(prefix="manip-bench-numba-warm-")
    try:
        log("  cold start: warming a numba cache")
        run(warm_dir)
        for i in range(n_warm):
            log(f"  cold start, warm cache {i + 1}/{n_warm}")
            out["warm_cache"].append(run(warm_dir))
        for i in range(n_cold):
            log(f"  cold start, empty cache {i + 1}/{n_cold}")
            d = tempfile.mkdtemp(prefix="manip-bench-numba-empty-")
            try:
                out["empty_cache"].append(run(d))
            finally:
                shutil.rmtree(d, ignore_errors=True)
    finally:
        shutil.rmtree(warm_dir, ignore_errors=True)
    return out


# ========================================================================================= report
def fmt_us(s):
    if s is None:
        return "n/a"
    us = s * 1e6
    if us >= 1e4:
        return f"{us / 1e3:,.1f} ms"
    return f"{us:.2f}" if us < 10 else f"{us:.1f}" if us < 1000 else f"{us:,.0f}"


def fmt_ratio(a, b):
    if a is None or b is None or b == 0:
        return "n/a"
    r = a / b
    return f"{r:.2f}x" if r >= 0.1 else f"{r:.2g}x"


def fmt_diff(x):
    return "n/a" if x is None else f"{x:.1e}"


def pf(ok):
    return "PASS" if ok else "FAIL"


def median_of(runs, key):
    return float(np.median([r[key] for r in runs])) if runs else None


def render(results):
    m = results["machine"]
    L = []
    L.append(f"# manip_core benchmark ({results['mode']} run, {results['timestamp']})")
    L.append("")
    L.append(f"Machine: {m['cpu_model']}, {m['cpu_count']} logical cores ({m['cpu_affinity']} usable), "
             f"numba threads {m['numba_threads']}; {m['platform']}; load average at start "
             f"{m['loadavg_start'][0]:.2f}, at end {results.get('loadavg_end', [float('nan')])[0]:.2f}.")
    L.append(f"Versions: Python {m['python']}, numpy {m['numpy']}, numba {m['numba']}, pin {m['pin']}, "
             f"example-robot-data {m['example-robot-data']}, ManipulaPy {m['ManipulaPy'] or 'not installed'}; "
             f"manip_core source sha256 {m['manip_core_sha256_12']}.")
    if results.get("manipulapy_na"):
        L.append(f"ManipulaPy: n/a ({results['manipulapy_na']}).")
    L.append("")

    if results.get("only") == "derivatives":
        return "\n".join(L + render_derivatives(results)) + "\n"
    L.append("## Single calls (µs per call, median, warm, from Python)")
    L.append("")
    L.append("| robot | op | manip | Pinocchio | ManipulaPy | manip/Pinocchio | manip/ManipulaPy "
             f"| max abs diff manip vs Pinocchio | max abs diff ManipulaPy vs Pinocchio | target: <= {TARGET_SINGLE_RATIO:g}x "
             "Pinocchio |")
    L.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for rname, r in results["robots"].items():
        if "single" not in r:
            continue
        for key, label in OPS:
            e = r["single"][key]
            tm, tp = e["manip"]["median_s"], e["pin"]["median_s"]
            tmp = e.get("ManipulaPy", {}).get("median_s")
            ag = r["agreement"]
            dmp = ag["ManipulaPy"][key] if ag.get("ManipulaPy") else None
            L.append(f"| {rname} | {label} | {fmt_us(tm)} | {fmt_us(tp)} | {fmt_us(tmp)} | {fmt_ratio(tm, tp)} | "
                     f"{fmt_ratio(tm, tmp)} | {fmt_diff(ag['manip'][key])} | {fmt_diff(dmp)} | "
                     f"{pf(tm <= TARGET_SINGLE_RATIO * tp)} |")
    L.append("")
    L.append("Pinocchio ops: FK = forwardKinematics + updateFramePlacement(tip); Jacobian = computeFrameJacobian"
             "(tip, WORLD); RNEA = rnea; mass matrix = crba (upper triangle only); forward dynamics = aba. "
             "manip returns new arrays (full symmetric M). ManipulaPy is timed on a fresh state per call with its "
             "M(q) caches emptied (medians of a few calls, see JSON).")
    L.append("")

    if any("derivatives" in r for r in results["robots"].values()):
        L += render_derivatives(results)

    L.append(f"## IK (random reachable targets: FK of uniform in-limit q, default_rng(0); success = "
             f"|dp| <= {TOL_P:g} m and rotation <= {TOL_R:g} rad by Pinocchio FK, q within limits)")
    L.append("")
    L.append("| robot | solver | targets | success % | mean ms | median ms | p99 ms | max ms | mean iterations "
             "| flag says success but check fails | manip/solver mean time | target |")
    L.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for rname, r in results["robots"].items():
        if "ik" not in r:
            continue
        ik = r["ik"]
        tgt_ms, tgt_pct = TARGET_IK[rname]
        for solver, d in ik.items():
            label = {"manip": "manip robot.ik", "pin": "Pinocchio DLS (Python)", "ManipulaPy": "ManipulaPy"}[solver]
            if "na" in d:
                L.append(f"| {rname} | {label} | - | n/a | n/a | n/a | n/a | n/a | n/a | n/a | n/a | {d['na']} |")
                continue
            target = (f"{pf(d['mean_ms'] <= tgt_ms and d['success_pct'] >= tgt_pct)} (<= {tgt_ms} ms, "
                      f">= {tgt_pct} %)") if solver == "manip" else ""
            L.append(f"| {rname} | {label} | {d['targets']} | {d['success_pct']:.1f} | {d['mean_ms']:.3f} | "
                     f"{d['median_ms']:.3f} | {d['p99_ms']:.3f} | {d['max_ms']:.3f} | {d['mean_iterations']:.1f} | "
                     f"{d['flag_true_check_false']} | "
                     f"{fmt_ratio(ik['manip']['mean_ms'], d['mean_ms'])} | {target} |")
    L.append("")
    L.append("Pinocchio DLS: Pinocchio's IK example loop (log6 error, Jlog6-corrected frame Jacobian, DLS) with "
             "damping 1e-6, full steps capped at 0.5 rad per joint, clipping to limits, stop at |log6| < 1e-8, "
             "40 iterations per attempt from mid-limits, then up to 50 random restarts. "
             "ManipulaPy: its `iterative_inverse_kinematics` from q = 0 with eomg = ev = 1e-6 (its defaults "
             "otherwise), on the first targets only (time budget).")
    L.append("")

    L.append("## Batched (ns per configuration; median of runs, fastest run in brackets)")
    L.append("")
    L.append("| robot | op | N | manip | manip, 1 thread | Pinocchio | Pinocchio method | manip/Pinocchio | "
             "max abs diff | target |")
    L.append("|---|---|---:|---:|---:|---:|---|---:|---:|---|")
    for rname, r in results["robots"].items():
        for key, d in r.get("batch", {}).items():
            t = TARGET_BATCH_NS.get((rname, d["op"]))
            targets = []
            if t:
                target = f"{pf(d['manip_ns'] <= t)} (<= {t:.0f} ns)"
                if d["manip_ns"] > t >= d["manip_min_ns"]:
                    target += "; fastest run PASS"
                targets.append(target)
            sp = TARGET_BATCH_SPEEDUP.get(d["op"])
            if sp and "InParallel" in d["pin_method"]:
                targets.append(f"{pf(d['manip_ns'] * sp <= d['pin_ns'])} (<= Pinocchio / {sp:g})")
            target = "; ".join(targets)
            label = dict(BATCH_OPS)[d["op"]]
            L.append(f"| {rname} | {label} | {d['N']:,} | {d['manip_ns']:.0f} ({d['manip_min_ns']:.0f}) | "
                     f"{d['manip_1thread_ns']:.0f} | "
                     f"{d['pin_ns']:.0f} ({d['pin_min_ns']:.0f}) | {d['pin_method']} | "
                     f"{fmt_ratio(d['manip_ns'], d['pin_ns'])} | {fmt_diff(d['max_abs_diff'])} | {target} |")
    L.append("")
    L.append(f"manip: numba parallel over N ({m['numba_threads']} threads, output allocation included). Runs of "
             "manip and Pinocchio alternate, so both see the same load; with other jobs on the machine, a "
             "parallel run waits for a descheduled thread, which shows in the median, less in the fastest run.")
    L.append("ManipulaPy: n/a for batches (no CPU batch API for dynamics; a loop costs N x its single-call time).")
    L.append("")

    cs = results.get("cold_start")
    if cs:
        L.append("## Cold start (UR5, subprocess; median of runs)")
        L.append("")
        L.append("| numba cache | runs | import manip_core s | model load s | first fk s | first rnea s | first ik s "
                 "| import..first ik s | process wall s |")
        L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for key, label in (("warm_cache", "warm (run once before)"), ("empty_cache", "empty (fresh NUMBA_CACHE_DIR)")):
            runs = cs[key]
            if not runs:
                continue
            L.append(f"| {label} | {len(runs)} | {median_of(runs, 'import_s'):.3f} | {median_of(runs, 'load_s'):.3f} | "
                     f"{median_of(runs, 'fk_s'):.4f} | {median_of(runs, 'rnea_s'):.3f} | {median_of(runs, 'ik_s'):.3f} | "
                     f"{median_of(runs, 'total_s'):.2f} | {median_of(runs, 'process_wall_s'):.2f} |")
        L.append("")
        L.append("Model load includes compiling (or loading from cache) the FK and Jacobian kernels, which the "
                 "constructor calls once.")
        L.append("")
    return "\n".join(L) + "\n"


# =========================================================================================== main
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: fewer repetitions, 200 IK targets, N = 10,000")
    ap.add_argument("--robots", default="ur5,panda", help="comma-separated subset of: ur5, panda")
    ap.add_argument("--no-manipulapy", action="store_true", help="skip ManipulaPy")
    ap.add_argument("--no-cold", action="store_true", help="skip the cold-start subprocesses")
    ap.add_argument("--no-save", action="store_true", help="print only; write nothing to bench/results")
    ap.add_argument("--only", choices=("all", "derivatives"), default="all",
                    help="derivatives: only the dynamics-derivatives section (results as core-derivatives-*)")
    args = ap.parse_args(argv)

    t_start = time.perf_counter()
    now = _dt.datetime.now()
    results = {"mode": "quick" if args.quick else "full", "timestamp": now.strftime("%Y-%m-%d %H:%M"),
               "machine": machine_info(), "robots": {}, "only": args.only}
    mp_na = None
    if args.no_manipulapy:
        mp_na = "skipped (--no-manipulapy)"
    else:
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                import ManipulaPy  # noqa: F401
        except Exception as e:  # noqa: BLE001
            mp_na = f"cannot import: {type(e).__name__}: {e}"
    results["manipulapy_na"] = mp_na

    wanted = [s.strip() for s in args.robots.split(",") if s.strip()]
    for name, rel, tip in ROBOTS:
        if name not in wanted:
            continue
        log(f"{name}: loading models")
        path = example_robot(rel)
        robot = RobotModel.from_urdf(path, tip_link=tip)
        pr = PinRobot(path, tip, robot.joint_names)
        mp, mp_reason = None, mp_na
        if mp_na is None:
            try:
                mp = MpyRobot(path, tip, robot.joint_names)
            except Exception as e:  # noqa: BLE001
                mp_reason = f"model from URDF failed: {type(e).__name__}: {e}"
        entry = {"tip": tip, "dof": robot.dof, "urdf": str(path)}
        if mp_reason:
            entry["manipulapy_na"] = mp_reason
        rng = np.random.default_rng(3)
        if args.only == "derivatives":
            log(f"{name}: dynamics derivatives")
            entry["derivatives"] = bench_derivatives(robot, pr, rng, args.quick)
            results["robots"][name] = entry
            continue
        log(f"{name}: agreement with Pinocchio")
        entry["agreement"] = agreement(robot, pr, mp, rng)
        log(f"{name}: single calls")
        entry["single"] = bench_single(robot, pr, mp, rng, args.quick)
        log(f"{name}: IK")
        entry["ik"] = bench_ik(name, robot, pr, mp, args.quick, mp_reason)
        log(f"{name}: batched")
        entry["batch"] = bench_batch(name, robot, pr, args.quick)
        log(f"{name}: dynamics derivatives")
        entry["derivatives"] = bench_derivatives(robot, pr, rng, args.quick)
        results["robots"][name] = entry
    if not args.no_cold and args.only == "all":
        log("cold start")
        results["cold_start"] = cold_start(args.quick)
    results["loadavg_end"] = list(os.getloadavg())
    results["elapsed_s"] = time.perf_counter() - t_start

    table = render(results)
    print(table)
    if not args.no_save:
        kind = "core" if args.only == "all" else f"core-{args.only}"
        log(f"wrote {', '.join(save_results(kind, table, results, args.quick, now))}")
    log(f"done in {results['elapsed_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
