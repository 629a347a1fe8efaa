#!/usr/bin/env python3
"""Benchmark of the manip_core analyses: Monte Carlo workspace throughput and singularity-map times.

    python bench/analysis.py            # full run (a few minutes on 2 cores)
    python bench/analysis.py --quick    # smoke run (under ~1 min)

Workspace: samples per second of the sampling + FK kernel and of the whole estimate (voxels, boundary,
convergence levels), CPU (numba, all cores) and, when numba.cuda sees a real GPU, the CUDA kernel; the volume
estimate against the closed-form values of the planar 2R (area) and the yaw-pitch-pitch arm (volume).
Singularity map: time for the UR5 (full Jacobian, tool orientation of q = 0) and the bundled 3-DOF arm ypp3
(position Jacobian) on the x-z plane, refined (coarse grid + 3 refinement levels near the threshold) with the
closed-form IK at each node (numba batch, the default) and with LM continuation, and unrefined (every node of
the same finest grid, closed form), against the 34-621 s per map reported by the MPERL paper; wall time and
the process's CPU time (all threads) with the load average, since the machine is shared. Prints a markdown table and writes it with the raw numbers to bench/results/.
It is a benchmark, not a test: nothing is asserted.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import math
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from results_io import save_results  # noqa: E402
try:
    import manip_core  # noqa: F401
except ImportError:
    sys.path.insert(0, str(HERE.parent / "manip_core"))
from manip_core import RobotModel  # noqa: E402
from manip_core.analysis.singularity_map import singularity_map  # noqa: E402
from manip_core.analysis.workspace import TipSampler, estimate_workspace, ypp3_volume_m3  # noqa: E402

MPERL_S = (34.0, 621.0)  # seconds per singularity map reported by the MPERL paper


def log(msg):
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


def gpu_available():
    try:
        from numba import config, cuda
        return (not config.ENABLE_CUDASIM) and cuda.is_available()
    except Exception:  # noqa: BLE001 - no CUDA driver
        return False


def kernel_rate(robot, device, n, reps):
    s = TipSampler(robot, seed=1, device=device)
    s(0, 1000)  # compile
    best = math.inf
    for r in range(reps):
        t = time.perf_counter()
        s(r * n, n)
        best = min(best, time.perf_counter() - t)
    return n / best


def bench_workspace(quick):
    rows, raw = [], []
    N = 1_000_000 if quick else 10_000_000
    devices = ["cpu"] + (["cuda"] if gpu_available() else [])
    truth = {"planar2r": math.pi * (0.9 ** 2 - 0.1 ** 2), "ypp3": ypp3_volume_m3(0.3, 0.25, 2.6)}
    for name in ("ur5", "ypp3", "planar2r"):
        robot = RobotModel.load(name)
        for dev in devices:
            log(f"workspace {name} {dev} ...")
            kr = kernel_rate(robot, dev, min(N, 2_000_000), 3)
            estimate_workspace(robot, 10_000, device=dev)  # compile the rest
            e = estimate_workspace(robot, N, seed=7, device=dev)
            t = truth.get(name)
            r = {"robot": name, "device": dev, "samples": N, "kernel_samples_per_s": kr,
                 "end_to_end_samples_per_s": e.samples_per_s, "measure": e.measure, "uncertainty": e.uncertainty,
                 "dimension": e.dimension, "voxel_m": e.voxel_m, "truth": t, "dexterous": e.dexterous_measure,
                 "time_s": e.time_s, "convergence": e.convergence}
            raw.append(r)
            unit = "m^3" if e.dimension == 3 else "m^2"
            err = "" if t is None else f"{e.measure - t:+.4f} ({100 * (e.measure - t) / t:+.2f} %), " \
                f"{'within' if abs(e.measure - t) <= e.uncertainty else 'OUTSIDE'} ±U"
            rows.append(f"| {name} | {dev} | {N:,} | {kr / 1e6:.2f} | {e.samples_per_s / 1e6:.2f} | "
                        f"{e.measure:.4f} ± {e.uncertainty:.4f} {unit} | {'-' if t is None else f'{t:.4f}'} | "
                        f"{err or '-'} |")
    head = ("| robot | device | samples | kernel M samples/s | end-to-end M samples/s | estimate ± U | exact | "
            "error |\n|---|---|---|---|---|---|---|---|")
    return head + "\n" + "\n".join(rows), raw, devices


def _timed_map(robot, **kw):
    """(map, wall s, CPU s of the process (all threads), 1-min load average at the end)."""
    c0, w0 = time.process_time(), time.perf_counter()
    m = singularity_map(robot, plane="xz", **kw)
    return m, time.perf_counter() - w0, time.process_time() - c0, os.getloadavg()[0]


def bench_maps(quick):
    rows, raw = [], []
    cells, levels = (8, 3) if quick else (16, 3)
    fine = cells << levels
    # warm-up: numba compile (or cache load) of the closed-form batch, the batched LM and the measures
    for name in ("ypp3", "ur5"):
        singularity_map(RobotModel.load(name), cells=4, levels=1)
        singularity_map(RobotModel.load(name), cells=4, levels=1, continuation=True)
    for name in ("ur5", "ypp3"):
        robot = RobotModel.load(name)
        log(f"singularity map {name}: refined ({cells} cells, {levels} levels, closed form) ...")
        a = _timed_map(robot, cells=cells, levels=levels)
        m0 = a[0]
        same = dict(threshold=m0.threshold, u_range=m0.u_range, v_range=m0.v_range)
        log(f"singularity map {name}: refined, LM continuation ...")
        c = _timed_map(robot, cells=cells, levels=levels, continuation=True, **same)
        log(f"singularity map {name}: unrefined ({fine} x {fine} cells, closed form) ...")
        b = _timed_map(robot, cells=fine, levels=0, **same)
        # agreement on the nodes both evaluated
        both = m0.node_computed & b[0].node_computed
        va, vb = m0.node_values[both], b[0].node_values[both]
        ok = np.isfinite(va) & np.isfinite(vb)
        agree = float(np.max(np.abs(va[ok] - vb[ok]))) if ok.any() else None
        for kind, (m, wall, cpu, load) in (("refined near threshold, closed form at each node", a),
                                           ("refined near threshold, LM continuation", c),
                                           ("unrefined, closed form at every node", b)):
            s = m.summary()
            nodes = s["points_evaluated"]
            raw.append({"robot": name, "kind": kind, **s, "wall_s": wall, "cpu_s": cpu, "load_1min": load,
                        "max_abs_diff_vs_unrefined": agree})
            rows.append(f"| {name} | {kind} | {fine + 1}^2 = {(fine + 1) ** 2:,} | {nodes:,} | "
                        f"{1000 * s['finest_cell_m']:.1f} | {wall:.2f} | {cpu:.2f} | {nodes / cpu:,.0f} | "
                        f"{MPERL_S[0] / wall:,.0f}x - {MPERL_S[1] / wall:,.0f}x | "
                        f"{MPERL_S[0] / cpu:,.0f}x - {MPERL_S[1] / cpu:,.0f}x | {load:.1f} |")
        steps = "; ".join(f"L{st['level']}: {st['cells_refined']} cells refined, {st['points_evaluated']} pts, "
                          f"{st['time_s']:.2f} s" for st in m0.steps)
        rows.append(f"| {name} | refinement steps (closed form) | | | | | | | {steps} | | |")
    head = ("| robot | map | finest grid (nodes) | nodes evaluated | finest cell (mm) | wall (s) | CPU (s) | "
            "nodes per CPU s | MPERL 34-621 s / our wall | MPERL / our CPU | load (1 min) |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|")
    return head + "\n" + "\n".join(rows), raw


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args(argv)
    when = _dt.datetime.now(_dt.timezone.utc)
    import numba
    ws_table, ws_raw, devices = bench_workspace(args.quick)
    map_table, map_raw = bench_maps(args.quick)
    machine = (f"{platform.machine()}, {os.cpu_count()} CPUs, numba {numba.__version__} "
               f"({numba.get_num_threads()} threads), load average {os.getloadavg()[0]:.1f} at the end; "
               f"devices: {', '.join(devices)}{'' if 'cuda' in devices else ' (no GPU here)'}")
    table = (f"# analysis benchmark, {when:%Y-%m-%d %H:%M} UTC{' (quick)' if args.quick else ''}\n\n{machine}\n\n"
             f"## Monte Carlo workspace\n\n{ws_table}\n\n## Singularity maps (x-z plane through the base)\n\n"
             f"{map_table}\n\nMPERL columns: the paper's 34 s and 621 s per map divided by our wall time and by our "
             f"CPU time (the wall time of a quiet machine is between the CPU time / threads and the CPU time). "
             f"Its grids were not available to this benchmark, so the comparison is per map; nodes per CPU "
             f"second lets any grid size be compared.\n")
    print(table)
    if not args.no_save:
        for w in save_results("analysis", table, {"workspace": ws_raw, "maps": map_raw, "machine": machine},
                              args.quick, when):
            log(f"wrote {w}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
