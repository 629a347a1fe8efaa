#!/usr/bin/env python3
"""The numba.cuda kernels on a real GPU: agreement with the CPU kernels and throughput, side by side in one run.

    PYTHONPATH=manip_core:manip_planning python3 bench/gpu.py [--quick] [--out DIR]

Run it where numba.cuda sees a GPU (the `device` tool of this workplace lends one to some sessions); without
one it stops with a message (the kernels are tested on the CPU under NUMBA_ENABLE_CUDASIM=1 instead). It needs
only numpy, scipy, pyyaml and numba (with numba-cuda), so it runs from the source tree without a setup.

- Workspace sampling (manip_core.analysis, `_sample_cuda`): the same samples k on both devices; the largest
  difference of the tip points (m) and the share of equal approach bins; samples/s of the kernel (best of 3),
  CPU numba on all cores against the GPU with its transfers.
- Collision checking (manip_planning, `collision_cuda`): the MotionBenchMaker scenes of the tests (Panda and
  UR5, spherized), random configurations within the limits and short random edges; the share of equal
  verdicts (a differing one is listed with its signed distance (m) on the CPU: sin/cos of libdevice may differ
  from the CPU's in the last bit, so only configurations touching an obstacle may differ); time per
  configuration of the CPU kernel (one thread, as the planner calls it) against the GPU, end to end (host
  arrays in and out) and kernel only (arrays already on the device), for batch sizes from 10^2 to 10^6.

It is a benchmark, not a test: nothing is asserted. Writes gpu-<stamp>.md/.json to --out (default
bench/results/).
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
for pkg in ("manip_core", "manip_planning"):
    sys.path.insert(1, str(ROOT / pkg))
from results_io import cpu_model, scheduling_note  # noqa: E402

MBM = ROOT / "manip_planning" / "test" / "data" / "mbm"
SCENES = {"panda": ["cage_panda/scene0001.yaml", "bookshelf_thin_panda/scene0001.yaml",
                    "table_under_pick_panda/scene0001.yaml"],
          "ur5": ["cage_ur5/scene0001.yaml", "bookshelf_thin_ur5/scene0001.yaml",
                  "table_under_pick_ur5/scene0001.yaml"]}


SIZES = dict(ws=4_000_000, ws_agree=200_000, sweep=[100, 1_000, 10_000, 100_000, 1_000_000], configs=1_000_000,
             edges=20_000)
QUICK = dict(ws=1_000_000, ws_agree=200_000, sweep=[100, 1_000, 10_000, 100_000], configs=100_000, edges=2_000)
SMOKE = dict(ws=2_000, ws_agree=500, sweep=[100], configs=300, edges=20)  # the CUDA simulator: checks the script


def log(msg):
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


def best_of(f, reps=3):
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t)
    return best


def environment():
    import numba
    from numba import cuda
    if hasattr(cuda, "get_current_device"):
        d = cuda.get_current_device()
        name, cc = (d.name.decode() if isinstance(d.name, bytes) else str(d.name)), list(d.compute_capability)
    else:  # the CUDA simulator
        name, cc = "CUDA simulator", [0, 0]
    cpu = cpu_model()
    try:
        from importlib.metadata import version
        nc = version("numba-cuda")
    except Exception:  # noqa: BLE001 - numba's own cuda target
        nc = "-"
    return {"gpu": name, "compute_capability": cc, "numba": numba.__version__,
            "numba_cuda": nc, "numpy": np.__version__, "cpu": cpu, "cpu_count": os.cpu_count(),
            "numba_threads": numba.get_num_threads(), "python": platform.python_version()}


def bench_workspace():
    from manip_core import RobotModel
    from manip_core.analysis.workspace import TipSampler
    n = SIZES["ws"]
    rows = []
    for name in ("ur5", "ypp3", "planar2r"):
        robot = RobotModel.load(name)
        cpu, gpu = TipSampler(robot, seed=3), TipSampler(robot, seed=3, device="cuda")
        cpu(0, 1000), gpu(0, 1000)  # compile
        pc, bc = cpu(10_000, SIZES["ws_agree"])
        pg, bg = gpu(10_000, SIZES["ws_agree"])
        tc = best_of(lambda: cpu(0, n))
        tg = best_of(lambda: gpu(0, n))
        r = {"robot": name, "dof": robot.dof, "samples": n, "max_tip_diff_m": float(np.max(np.abs(pc - pg))),
             "equal_bins": float(np.mean(bc == bg)), "cpu_samples_per_s": n / tc, "gpu_samples_per_s": n / tg}
        log(f"workspace {name}: {r}")
        rows.append(r)
    return rows


def _configs(checker, n, seed):
    rng = np.random.default_rng(seed)
    return rng.uniform(checker.lower, checker.upper, (n, checker.dof))


def bench_collision():
    from numba import cuda
    from manip_planning import collision_cuda as CC
    from manip_planning.collision_kernels import configs_free
    from manip_planning.planning_scene import PlanningScene
    from manip_planning.robot_collision import CollisionChecker, RobotCollisionModel
    sizes = SIZES["sweep"]
    agree_n = SIZES["configs"]
    rows, sweeps, mismatches = [], [], []
    for robot, scenes in SCENES.items():
        rc = RobotCollisionModel.from_urdf(MBM / "robots" / f"{robot}_spherized.urdf",
                                           MBM / "robots" / f"{robot}.srdf")
        for scene in scenes:
            sc = PlanningScene.from_moveit_yaml(MBM / "problems" / robot / scene)
            cpu, gpu = CollisionChecker(rc, sc), CollisionChecker(rc, sc, backend="cuda")
            Q = _configs(cpu, agree_n, 11)
            gpu.are_free(Q[:256]), cpu.are_free(Q[:256])  # compile
            t0 = time.perf_counter()
            fc = cpu.are_free(Q)
            tc = time.perf_counter() - t0
            t0 = time.perf_counter()
            fg = gpu.are_free(Q)
            tg = time.perf_counter() - t0
            bad = np.flatnonzero(fc != fg)
            for i in bad[:10]:
                mismatches.append({"robot": robot, "scene": scene, "cpu_free": bool(fc[i]),
                                   "distances_m": list(cpu.distances(Q[i]))})
            # edges: a random configuration and a step of at most 0.5 rad per joint, checked at 1/32 rad
            rng = np.random.default_rng(12)
            E = SIZES["edges"]
            A = _configs(cpu, E, 13)
            B = np.clip(A + rng.uniform(-0.5, 0.5, A.shape), cpu.lower, cpu.upper)
            gpu.segments_free(A[:8], B[:8]), cpu.segments_free(A[:8], B[:8])  # compile
            t0 = time.perf_counter()
            ec = cpu.segments_free(A, B)
            tec = time.perf_counter() - t0
            t0 = time.perf_counter()
            eg = gpu.segments_free(A, B)
            teg = time.perf_counter() - t0
            r = {"robot": robot, "scene": scene, "obstacles": len(sc), "configs": agree_n,
                 "free_share": float(fc.mean()), "config_mismatches": int(len(bad)),
                 "cpu_us_per_config": 1e6 * tc / agree_n, "gpu_us_per_config": 1e6 * tg / agree_n,
                 "edges": E, "edge_free_share": float(ec.mean()), "edge_mismatches": int(np.sum(ec != eg)),
                 "cpu_us_per_edge": 1e6 * tec / E, "gpu_us_per_edge": 1e6 * teg / E}
            log(f"collision {robot} {scene}: {r}")
            rows.append(r)
            if scene != scenes[0]:
                continue
            g = gpu._gpu
            for n in sizes:
                Qn = _configs(cpu, n, 21)
                out = np.zeros(n, np.bool_)
                t_cpu = best_of(lambda: configs_free(cpu.ca, Qn, out))
                t_e2e = best_of(lambda: gpu.are_free(Qn))
                dQ = cuda.to_device(Qn)
                dout = cuda.device_array(n, dtype=np.int8)
                tb = min(CC.THREADS, n)

                def kernel_only():
                    CC.configs_kernel[(n + tb - 1) // tb, tb](*g.args, dQ, dout)
                    cuda.synchronize()
                t_k = best_of(kernel_only, 5)
                s = {"robot": robot, "scene": scene, "n": n, "cpu_s": t_cpu, "gpu_end_to_end_s": t_e2e,
                     "gpu_kernel_s": t_k}
                log(f"sweep {s}")
                sweeps.append(s)
    return rows, sweeps, mismatches


def table(env, ws, rows, sweeps, mismatches, quick, when):
    L = [f"# numba.cuda kernels on a GPU ({when:%Y-%m-%d %H:%M} UTC{', quick' if quick else ''})", "",
         f"GPU: {env['gpu']} (compute capability {'.'.join(map(str, env['compute_capability']))}); CPU: "
         f"{env['cpu']}, {env['cpu_count']} cores (numba threads {env['numba_threads']}); numba {env['numba']}, "
         f"numba-cuda {env['numba_cuda']}, numpy {env['numpy']}, Python {env['python']}.", "",
         "## Workspace sampling (sampling + FK per sample; CPU: numba on all cores; GPU: with its transfers)", "",
         "| robot | dof | samples | CPU M samples/s | GPU M samples/s | GPU/CPU | max tip difference (m) | "
         "equal approach bins |", "|---|---|---|---|---|---|---|---|"]
    for r in ws:
        L.append(f"| {r['robot']} | {r['dof']} | {r['samples']:,} | {r['cpu_samples_per_s'] / 1e6:.1f} | "
                 f"{r['gpu_samples_per_s'] / 1e6:.1f} | {r['gpu_samples_per_s'] / r['cpu_samples_per_s']:.1f}x | "
                 f"{r['max_tip_diff_m']:.1e} | {100 * r['equal_bins']:.4f} % |")
    L += ["", "## Collision checks, MotionBenchMaker scenes (CPU: the planner's kernel, one thread; GPU: host "
          "arrays in and out)", "",
          "| robot | scene | obstacles | configs | free | differing verdicts | CPU us/config | GPU us/config | "
          "edges (<= 0.5 rad, 1/32 rad steps) | differing edges | CPU us/edge | GPU us/edge |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        L.append(f"| {r['robot']} | {r['scene']} | {r['obstacles']} | {r['configs']:,} | "
                 f"{100 * r['free_share']:.1f} % | {r['config_mismatches']} | {r['cpu_us_per_config']:.3f} | "
                 f"{r['gpu_us_per_config']:.4f} | {r['edges']:,} | {r['edge_mismatches']} | "
                 f"{r['cpu_us_per_edge']:.2f} | {r['gpu_us_per_edge']:.3f} |")
    L += ["", "## Batch size: where the GPU pays (first scene of each robot; best of 3, kernel only: best of 5)", "",
          "| robot | batch | CPU ms | GPU end to end ms | GPU kernel ms | CPU / GPU end to end |",
          "|---|---|---|---|---|---|"]
    for s in sweeps:
        L.append(f"| {s['robot']} | {s['n']:,} | {1e3 * s['cpu_s']:.3f} | {1e3 * s['gpu_end_to_end_s']:.3f} | "
                 f"{1e3 * s['gpu_kernel_s']:.3f} | {s['cpu_s'] / s['gpu_end_to_end_s']:.1f}x |")
    L += ["", f"Differing verdicts listed (at most 10 per scene): {len(mismatches)}"]
    for m in mismatches:
        L.append(f"- {m['robot']} {m['scene']}: CPU says {'free' if m['cpu_free'] else 'colliding'}, "
                 f"signed distances (obstacles, self) {m['distances_m'][0]:.2e} m, {m['distances_m'][1]:.2e} m")
    note = scheduling_note()
    if note:
        L += ["", note["note"]]
    return "\n".join(L) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller batches (about a minute)")
    ap.add_argument("--smoke", action="store_true",
                    help="tiny sizes; also runs under NUMBA_ENABLE_CUDASIM=1 (checks this script, measures nothing)")
    ap.add_argument("--out", type=Path, default=HERE / "results", help="folder for the .md and .json")
    a = ap.parse_args(argv)
    from numba import config, cuda
    SIZES.update(SMOKE if a.smoke else QUICK if a.quick else {})
    if not (a.smoke and config.ENABLE_CUDASIM) and (config.ENABLE_CUDASIM or not cuda.is_available()):
        sys.exit("bench/gpu.py: numba.cuda sees no GPU here (run it on a machine with one; the kernels are tested "
                 "on the CPU under NUMBA_ENABLE_CUDASIM=1)")
    when = _dt.datetime.now(_dt.timezone.utc)
    env = environment()
    log(f"environment: {env}")
    ws = bench_workspace()
    rows, sweeps, mismatches = bench_collision()
    md = table(env, ws, rows, sweeps, mismatches, a.quick, when)
    print(md)
    a.out.mkdir(parents=True, exist_ok=True)
    stem = f"gpu-{when:%Y%m%d-%H%M}" + ("-quick" if a.quick else "")
    (a.out / f"{stem}.md").write_text(md)
    (a.out / f"{stem}.json").write_text(json.dumps(dict(environment=env, workspace=ws, collision=rows,
                                                        sweeps=sweeps, mismatches=mismatches), indent=1) + "\n")
    log(f"wrote {a.out / stem}.md/.json")


if __name__ == "__main__":
    main()
