#!/usr/bin/env python3
"""Benchmark of manip_design on its shipped examples, side by side with the MPERL paper's figures.

    python bench/design.py            # 1,000 random reachable targets per example
    python bench/design.py --quick    # 100 targets

Per example (scara, dual_scara, delta, stewart, planar_cable): setup (parse + compile + home assembly, warm
numba cache), the one-time build of the IK seed table (closed chains), FK time per call (passive joints solved
from the home assembly), IK time per call and honest success (FK of the answer from the home assembly reaches
the target within 1e-6 m / 1e-6 rad) by Levenberg-Marquardt and by cyclic coordinate descent, on random
reachable targets (random actuator values within the limits whose FK closes, by default in the central 60 % of
each range; position + orientation for the SCARA, the Stewart platform and the cable robot, position for the
five-bar and the Delta, whose orientation is fixed by the mechanism), and the SymPy generation
time without and with the disk cache. MPERL (Table I/II of the paper): setup 316-1,366 ms, FK 44-273 ms, IK
52-1,287 ms per call; the speed-up columns divide the paper's fastest figure by ours (a lower bound), from
wall-clock and from CPU time (the process's own, which a loaded machine does not inflate). It is a
benchmark, not a test: nothing is asserted. Writes bench/results/design-YYYYMMDD-HHMM[-quick].md/.json (+
design-latest.md)."""
from __future__ import annotations

import argparse
import datetime as _dt
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from results_io import save_results  # noqa: E402

ROOT = HERE.parent
try:
    import manip_design  # noqa: F401
except ImportError:
    sys.path.insert(0, str(ROOT / "manip_design"))
from manip_design import parse_file  # noqa: E402
from manip_design.serial import _rpy  # noqa: E402
from manip_design.symbolic import generate  # noqa: E402

EX = ROOT / "manip_design" / "manip_design" / "examples"
EXAMPLES = ["scara", "dual_scara", "delta", "stewart", "planar_cable"]
WITH_ORIENTATION = {"scara": True, "dual_scara": False, "delta": False, "stewart": True, "planar_cable": True}
PAPER = {"setup_ms": (316, 1366), "fk_ms": (44, 273), "ik_ms": (52, 1287)}
SETUP_REPEATS = 20


def log(msg):
    print(f"[design bench] {msg}", file=sys.stderr, flush=True)


def targets_for(m, n, rng, fraction):
    acts, poses = [], []
    lo = np.where(np.isfinite(m.lo[m.actuated]), m.lo[m.actuated], -np.pi)
    hi = np.where(np.isfinite(m.hi[m.actuated]), m.hi[m.actuated], np.pi)
    mid, half = 0.5 * (lo + hi), 0.5 * fraction * (hi - lo)
    lo, hi = mid - half, mid + half
    tries = 0
    while len(acts) < n and tries < 50 * n:
        tries += 1
        a = rng.uniform(lo, hi)
        fk = m.fk(a)
        if fk.success:
            acts.append(a)
            poses.append(fk.pose)
    return np.array(acts), poses, tries


def bench_example(name, n, rng, fraction):
    path = EX / f"{name}.mrs"
    parse_file(path).compile()  # warm (numba cache, imports)
    setup, setup_cpu = [], []
    for _ in range(SETUP_REPEATS):
        t, c = time.perf_counter(), time.process_time()
        m = parse_file(path).compile()
        setup.append(time.perf_counter() - t)
        setup_cpu.append(time.process_time() - c)
    acts, poses, tries = targets_for(m, n, rng, fraction)
    t, c = time.perf_counter(), time.process_time()
    for a in acts:
        m.fk(a)
    fk_s = (time.perf_counter() - t) / len(acts)
    fk_cpu_s = (time.process_time() - c) / len(acts)
    t, c = time.perf_counter(), time.process_time()
    table = m.seed_table()  # built once, by the first IK call (closed chains of up to 3 actuators)
    table_s, table_cpu_s = time.perf_counter() - t, time.process_time() - c
    rot = WITH_ORIENTATION[name]
    for method in ("lm", "ccd"):  # warm: the first IK call loads the solver kernels (JIT / numba cache)
        m.ik(poses[0][:3, 3], _rpy(poses[0][:3, :3]) if rot else None, method=method, restarts=0)
    out = {"example": name, "setup_ms": 1e3 * float(np.median(setup)),
           "setup_cpu_ms": 1e3 * float(np.median(setup_cpu)), "fk_ms": 1e3 * fk_s, "fk_cpu_ms": 1e3 * fk_cpu_s,
           "seed_table_points": 0 if table is None else len(table[0]),
           "seed_table_ms": 1e3 * table_s if table is not None else 0.0,
           "seed_table_cpu_ms": 1e3 * table_cpu_s if table is not None else 0.0,
           "targets": len(acts), "samples_drawn": tries, "dof": len(m.actuated), "joint_values": m.nv}
    for method, count in (("lm", len(poses)), ("ccd", min(len(poses), 100 if len(poses) >= 1000 else 30))):
        ok, its, errs, times, cpu, restarted = 0, [], [], [], [], 0
        for T in poses[:count]:
            xyz, rpy = T[:3, 3], (_rpy(T[:3, :3]) if rot else None)
            t, c = time.perf_counter(), time.process_time()
            r = m.ik(xyz, rpy, method=method)
            times.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
            ok += r.success
            restarted += r.restarts > 0
            its.append(r.iterations)
            errs.append(r.position_error_m)
        dt = float(np.mean(times))
        out[f"ik_{method}_ms"] = 1e3 * dt
        out[f"ik_{method}_median_ms"] = 1e3 * float(np.median(times))
        out[f"ik_{method}_cpu_ms"] = 1e3 * float(np.mean(cpu))
        out[f"ik_{method}_success"] = ok / count
        out[f"ik_{method}_restarted"] = restarted / count
        out[f"ik_{method}_targets"] = count
        out[f"ik_{method}_iterations_median"] = float(np.median(its))
        out[f"ik_{method}_position_error_max_m"] = float(np.max(errs))
        log(f"{name}: IK {method} {ok}/{count} in {1e3 * dt:.3f} ms per call (CPU {1e3 * np.mean(cpu):.3f} ms)")
    with tempfile.TemporaryDirectory() as d:
        os.environ["MANIP_DESIGN_CACHE"] = d
        g = generate(m)
        g2 = generate(m)
        out["codegen_cold_s"] = g.seconds
        out["codegen_cached_s"] = g2.seconds
        q = m.q_home
        t = time.perf_counter()
        for _ in range(200):
            g.fk(q)
        out["generated_fk_us"] = 1e6 * (time.perf_counter() - t) / 200
    log(f"{name}: setup {out['setup_ms']:.2f} ms (CPU {out['setup_cpu_ms']:.2f}), FK {out['fk_ms']:.4f} ms (CPU "
        f"{out['fk_cpu_ms']:.4f}), codegen {out['codegen_cold_s']:.2f} s "
        f"/ cached {out['codegen_cached_s'] * 1e3:.1f} ms")
    return out


def _x(paper_ms, ours_ms):
    return f"{paper_ms / ours_ms:.0f}" if ours_ms > 0 else "-"


def table(rows, quick, when, fraction):
    lines = [f"# manip_design benchmark ({when:%Y-%m-%d %H:%M} UTC{', quick' if quick else ''})", "",
             f"CPU: {platform.processor() or platform.machine()}, {os.cpu_count()} logical cores, load average at "
             f"end {os.getloadavg()[0]:.1f}; Python {platform.python_version()}, numpy {np.__version__}.", "",
             "MPERL paper (Table I/II): setup 316-1,366 ms, FK 44-273 ms, IK 52-1,287 ms per call. Speed-up "
             "columns ('x') = the paper's fastest figure (setup 316, FK 44, IK 52 ms) / ours, as wall / CPU: wall "
             "from wall-clock time, CPU from this process's CPU time (which leaves out the time other processes "
             "take from it on a loaded machine; on a quiet machine the two agree). Setup: parse + compile + home "
             f"assembly, median of {SETUP_REPEATS}. FK: mean per call, passive joints solved from the home assembly. "
             "IK: mean per call over every target, failures and restarts included; 'restarted' = share of IK "
             "calls that needed more than one attempt. Seed table: the IK seed table of a closed chain (FK on a "
             "64-point actuator grid), built once by the first IK call, not in setup nor in the IK means.", "",
             f"Targets: FK of actuator values uniform in the central {100 * fraction:.0f} % of each actuator's range "
             "(assembled from the home configuration); success = FK of the IK answer from the home assembly "
             "reaches the target within 1e-6 m (and 1e-6 rad for scara/stewart/planar_cable).", "",
             "| example | DOF | setup ms wall / CPU | FK ms wall / CPU | IK (LM) ms mean / median / CPU mean | "
             "IK (LM) success | restarted | seed table ms wall / CPU (points) | IK (CCD) ms | IK (CCD) success | "
             "setup x wall / CPU | FK x wall / CPU | IK x wall / CPU | codegen s (cold / cached) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    p = {k: v[0] for k, v in PAPER.items()}
    for r in rows:
        tab = (f"{r['seed_table_ms']:.1f} / {r['seed_table_cpu_ms']:.1f} ({r['seed_table_points']})"
               if r["seed_table_points"] else "-")
        lines.append(
            f"| {r['example']} | {r['dof']} | {r['setup_ms']:.2f} / {r['setup_cpu_ms']:.2f} | "
            f"{r['fk_ms']:.4f} / {r['fk_cpu_ms']:.4f} | {r['ik_lm_ms']:.3f} / "
            f"{r['ik_lm_median_ms']:.3f} / {r['ik_lm_cpu_ms']:.3f} | "
            f"{100 * r['ik_lm_success']:.1f} % of {r['targets']} | {100 * r['ik_lm_restarted']:.1f} % | {tab} | "
            f"{r['ik_ccd_ms']:.2f} | {100 * r['ik_ccd_success']:.1f} % of {r['ik_ccd_targets']} | "
            f"{_x(p['setup_ms'], r['setup_ms'])} / {_x(p['setup_ms'], r['setup_cpu_ms'])} | "
            f"{_x(p['fk_ms'], r['fk_ms'])} / {_x(p['fk_ms'], r['fk_cpu_ms'])} | "
            f"{_x(p['ik_ms'], r['ik_lm_ms'])} / {_x(p['ik_ms'], r['ik_lm_cpu_ms'])} | "
            f"{r['codegen_cold_s']:.2f} / {r['codegen_cached_s']:.4f} |")
    lines.append("")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="100 targets instead of 1,000")
    ap.add_argument("--examples", nargs="+", default=EXAMPLES, choices=EXAMPLES)
    ap.add_argument("--no-save", action="store_true")
    ap.add_argument("--range-fraction", type=float, default=0.6,
                    help="targets from actuator values uniform in this central fraction of each range")
    args = ap.parse_args()
    n = 100 if args.quick else 1000
    rng = np.random.default_rng(0)
    when = _dt.datetime.now(_dt.timezone.utc)
    rows = []
    for name in args.examples:
        log(f"{name}: {n} targets")
        rows.append(bench_example(name, n, rng, args.range_fraction))
    text = table(rows, args.quick, when, args.range_fraction)
    print(text)
    if not args.no_save:
        raw = {"rows": rows, "paper": PAPER, "quick": args.quick, "range_fraction": args.range_fraction}
        for w in save_results("design", text, raw, args.quick, when):
            log(f"wrote {w}")


if __name__ == "__main__":
    main()
