#!/usr/bin/env python3
"""Per-thread cost of manip_core's batched kernels next to Pinocchio's, in CPU time (one thread each).

    python bench/batch_cpu.py            # ~1 min
    python bench/batch_cpu.py --quick

On a machine that other jobs load, wall-clock parallel timings (bench/core.py's batched table) say more
about the scheduler than about the code; CPU time of the calling thread, one thread on each side, does not
count the waits. Rows: manip's RNEA and forward dynamics in SIMD lanes (what inverse_dynamics_batch and
forward_dynamics_batch run), the previous one-configuration-at-a-time RNEA kernel, Pinocchio's rneaInParallel
and abaInParallel with one thread (OpenMP runs it on the calling thread); manip's rnea_derivatives_batch
against a Python loop of computeRNEADerivatives minus the binding's overhead, estimated as (Python loop of
pin.rnea) - (rneaInParallel, 1 thread). ns per configuration, minimum over alternating runs (median in the
JSON). Writes bench/results/batch-cpu-YYYYMMDD-HHMM[-quick].md/.json and batch-cpu-latest.md (full runs).
"""
from __future__ import annotations

import argparse
import datetime as _dt
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from core import PinRobot, ROBOTS, log, machine_info, random_states  # noqa: E402
from results_io import save_results  # noqa: E402

import numba  # noqa: E402

from manip_core import _derivative_kernels as D, _kernels as K, _lane_kernels as LK  # noqa: E402
from manip_core.model import RobotModel  # noqa: E402
from manip_core.reference_robots import example_robot  # noqa: E402


def bench_robot(robot, pr, n, runs):
    import pinocchio as pin
    pm, pd = pr.model, pr.data
    pool = pin.ModelPool(pm, 1)
    Q, V, A, TAU = random_states(pr.lo, pr.hi, n, np.random.default_rng(5))
    Qt, Vt, At, TAUt = Q.T, V.T, A.T, TAU.T
    out_t = np.zeros((pm.nv, n), order="F")
    out = np.empty((n, robot.dof))
    d3 = [np.empty((n, robot.dof, robot.dof)) for _ in range(3)]
    mf, mi, g, e = robot._mf, robot._mi, robot._g_default, np.zeros(0)

    def pin_loop(fn, X):
        def run():
            for k in range(n):
                fn(pm, pd, Q[k], V[k], X[k])
        return run

    fns = {
        "manip RNEA, SIMD lanes": lambda: LK.rnea_batch_lanes(mf, mi, Q, V, A, g, e, out),
        "manip RNEA, one configuration at a time": lambda: K.rnea_batch(mf, mi, Q, V, A, g, e, out),
        "Pinocchio rneaInParallel, 1 thread": lambda: pin.rneaInParallel(1, pool, Qt, Vt, At, out_t),
        "manip forward dynamics, SIMD lanes": lambda: LK.forward_dynamics_batch_lanes(mf, mi, Q, V, TAU, g, e, out),
        "Pinocchio abaInParallel, 1 thread": lambda: pin.abaInParallel(1, pool, Qt, Vt, TAUt, out_t),
        "manip rnea_derivatives_batch": lambda: D.rnea_derivatives_batch(mf, mi, Q, V, A, g, e, *d3),
        "Pinocchio computeRNEADerivatives, Python loop": pin_loop(pin.computeRNEADerivatives, A),
        "Pinocchio rnea, Python loop": pin_loop(pin.rnea, A),
    }
    for f in fns.values():
        f()
    per = {k: [] for k in fns}
    for _ in range(runs):
        for k, f in fns.items():
            t0 = time.thread_time()
            f()
            per[k].append(1e9 * (time.thread_time() - t0) / n)
    res = {k: {"min_ns": float(min(v)), "median_ns": float(np.median(v))} for k, v in per.items()}
    binding = res["Pinocchio rnea, Python loop"]["min_ns"] - res["Pinocchio rneaInParallel, 1 thread"]["min_ns"]
    res["Pinocchio computeRNEADerivatives, C++ (est.)"] = {
        "min_ns": res["Pinocchio computeRNEADerivatives, Python loop"]["min_ns"] - binding, "median_ns": None}
    return res


ROWS = [("manip RNEA, SIMD lanes", "Pinocchio rneaInParallel, 1 thread"),
        ("manip RNEA, one configuration at a time", "Pinocchio rneaInParallel, 1 thread"),
        ("manip forward dynamics, SIMD lanes", "Pinocchio abaInParallel, 1 thread"),
        ("manip rnea_derivatives_batch", "Pinocchio computeRNEADerivatives, C++ (est.)")]


def render(res):
    m = res["machine"]
    L = [f"# Batched kernels, CPU time per configuration on one thread ({res['mode']} run, {res['timestamp']})",
         "", f"Machine: {m['cpu_model']}, {m['cpu_count']} logical cores; numba {m['numba']}, pin {m['pin']}, "
         f"manip_core sha256 {m['manip_core_sha256_12']}; load average (1 min) at start "
         f"{res['loadavg_start'][0]:.2f}, at end {res['loadavg_end'][0]:.2f}. N = {res['N']:,} configurations, "
         f"{res['runs']} alternating runs, minimum (ns of CPU time of the calling thread per configuration).", "",
         "| robot | manip | ns | Pinocchio | ns | manip/Pinocchio |", "|---|---|---:|---|---:|---:|"]
    for rname, r in res["robots"].items():
        for a, b in ROWS:
            L.append(f"| {rname} | {a} | {r[a]['min_ns']:.0f} | {b} | {r[b]['min_ns']:.0f} | "
                     f"{r[a]['min_ns'] / r[b]['min_ns']:.2f}x |")
    L += ["", "Pinocchio's computeRNEADerivatives has no parallel API: its C++ time is its Python loop minus the "
          "binding overhead, (Python loop of pin.rnea) - (rneaInParallel on 1 thread); the derivative binding "
          "also returns three matrices, so this favours Pinocchio. With T threads on a quiet machine both sides "
          "scale with T; bench/core.py measures that (wall clock).", ""]
    return "\n".join(L) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--robots", default="ur5,panda")
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args(argv)
    numba.set_num_threads(1)
    now = _dt.datetime.now()
    n, runs = (2000, 5) if args.quick else (5000, 11)
    res = {"mode": "quick" if args.quick else "full", "timestamp": now.strftime("%Y-%m-%d %H:%M"),
           "machine": machine_info(), "loadavg_start": list(os.getloadavg()), "N": n, "runs": runs, "robots": {}}
    for name, rel, tip in ROBOTS:
        if name not in args.robots.split(","):
            continue
        log(f"{name}")
        path = example_robot(rel)
        robot = RobotModel.from_urdf(path, tip_link=tip)
        res["robots"][name] = bench_robot(robot, PinRobot(path, tip, robot.joint_names), n, runs)
    res["loadavg_end"] = list(os.getloadavg())
    table = render(res)
    print(table)
    if not args.no_save:
        log(f"wrote {', '.join(save_results('batch-cpu', table, res, args.quick, now))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
