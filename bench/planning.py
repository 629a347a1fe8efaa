"""Benchmark of manip_planning's RRT-Connect on the shared MotionBenchMaker problems, next to VAMP's figures.

    .venv/bin/python bench/planning.py [--mbm ../shared/benchmarks/mbm] [--robots ur5 panda] [--quick]
                                       [--time-limit 1] [--seed 0] [--no-save]

For each robot (the spherized URDF and its SRDF) it runs ``manip-plan-bench`` (manip_planning.plan_bench.main,
the same code as the console script) over every scenario folder, then re-reads the JSON lines and re-checks
every successful path with a fresh collision checker at 0.005 rad steps. Table per scenario: problems, valid,
solved, median and p95 of planning + simplification time (ms), median path length (rad), paths that collide
at 0.005 rad; then per robot the totals, with ratios to VAMP 0.6.4 (RRT-Connect, single thread, 2 cores:
UR5 689/689 solved, median 0.21 ms, p95 1.0 ms; Panda 699/699, 0.21 ms, 0.86 ms; from the MBM README) and the
issue's targets (>= 99.5 % solved within 1 s, median <= 2 ms, p95 <= 20 ms, no colliding path). Results go to
bench/results/planning-YYYYMMDD-HHMM.md/.json (and planning-latest.md for full runs). Progress on stderr.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for p in (ROOT / "manip_core", ROOT / "manip_planning", HERE):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from manip_planning.plan_bench import main as plan_bench_main, model_for_joints  # noqa: E402
from manip_planning.planning_scene import PlanningScene  # noqa: E402
from manip_planning.robot_collision import CollisionChecker  # noqa: E402
from results_io import save_results  # noqa: E402

VAMP = {"ur5": dict(valid=689, solved=689, median_ms=0.21, p95_ms=1.0),
        "panda": dict(valid=699, solved=699, median_ms=0.21, p95_ms=0.86)}
TARGET = dict(solved_fraction=0.995, median_ms=2.0, p95_ms=20.0)


def _recheck(robot_model, rec, problem_dir, resolution=0.005):
    """True when the path of rec collides at resolution (rad) in a fresh checker."""
    import yaml
    req = yaml.safe_load((problem_dir / f"{rec['problem']}.yaml").read_text())
    names = [c["joint_name"] for c in req["goal_constraints"][0]["joint_constraints"]]
    order = [names.index(j) for j in robot_model.model.joint_names]
    P = np.array(rec["path"])[:, order]
    scene = PlanningScene.from_moveit_yaml(problem_dir / (rec["problem"].replace("request", "scene", 1) + ".yaml"))
    return CollisionChecker(robot_model, scene).first_colliding_segment(P, resolution) >= 0


def run_robot(mbm, robot, args):
    rdir = mbm / "robots" / robot
    urdf, srdf = rdir / f"{robot}_spherized.urdf", rdir / f"{robot}.srdf"
    dirs = sorted(p for p in (mbm / "problems" / robot).iterdir() if p.is_dir())
    if args.quick:
        tmpdirs = []
        root = Path(tempfile.mkdtemp(prefix="manip-plan-quick-"))
        for d in dirs:   # the first 10 problems of each scenario
            q = root / d.name
            q.mkdir()
            for f in sorted(d.glob("request*.yaml"))[:10]:
                (q / f.name).symlink_to(f)
                (q / f.name.replace("request", "scene", 1)).symlink_to(d / f.name.replace("request", "scene", 1))
            tmpdirs.append(q)
        run_dirs = tmpdirs
    else:
        run_dirs = dirs
    out = Path(tempfile.mkdtemp(prefix="manip-plan-bench-")) / f"{robot}.jsonl"
    sys.stderr.write(f"{robot}: {len(run_dirs)} scenarios\n")
    plan_bench_main([str(d) for d in run_dirs] + ["--urdf", str(urdf), "--srdf", str(srdf), "--time-limit",
                                                   str(args.time_limit), "--seed", str(args.seed), "--out", str(out)])
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    model = None
    for r in recs:
        if r["success"]:
            if model is None:
                import yaml
                req = yaml.safe_load((mbm / "problems" / robot / r["scenario"] / f"{r['problem']}.yaml").read_text())
                model = model_for_joints(urdf, [c["joint_name"] for c in
                                                req["goal_constraints"][0]["joint_constraints"]], srdf)
            r["collides_at_0.005"] = bool(_recheck(model, r, mbm / "problems" / robot / r["scenario"]))
        r.pop("path", None)
    return recs


def _stats(recs):
    valid = [r for r in recs if r["valid"]]
    solved = [r for r in valid if r["success"]]
    t = np.array([r["planning_time_s"] + r["simplification_time_s"] + r.get("validation_time_s", 0.0)
                  for r in solved]) * 1e3
    ps = np.array([r["planning_time_s"] + r["simplification_time_s"] for r in solved]) * 1e3
    def med(key, scale=1.0):
        return float(np.median([r[key] for r in solved]) * scale) if solved else float("nan")
    return dict(problems=len(recs), valid=len(valid), solved=len(solved),
                median_ms=float(np.median(t)) if len(t) else float("nan"),
                p95_ms=float(np.percentile(t, 95)) if len(t) else float("nan"),
                median_ps_ms=float(np.median(ps)) if len(ps) else float("nan"),
                p95_ps_ms=float(np.percentile(ps, 95)) if len(ps) else float("nan"),
                median_plan_ms=med("planning_time_s", 1e3), median_simplify_ms=med("simplification_time_s", 1e3),
                median_validate_ms=med("validation_time_s", 1e3) if solved and "validation_time_s" in solved[0]
                else float("nan"),
                median_length_rad=med("path_length_rad"),
                colliding=sum(1 for r in solved if r.get("collides_at_0.005")))


def _row(name, s):
    return (f"| {name} | {s['problems']} | {s['valid']} | {s['solved']} | {s['median_ms']:.2f} | {s['p95_ms']:.2f} | "
            f"{s['median_ps_ms']:.2f} | {s['p95_ps_ms']:.2f} | {s['median_plan_ms']:.2f} | "
            f"{s['median_simplify_ms']:.2f} | {s['median_validate_ms']:.2f} | {s['median_length_rad']:.2f} | "
            f"{s['colliding']} |")


def table(results, meta):
    lines = [f"# manip_planning RRT-Connect on MotionBenchMaker ({meta['when']})", "",
             f"CPU: {meta['cpu']}, {meta['cores']} cores, load {meta['load_start']} -> {meta['load_end']} "
             f"(1-min average; other jobs share the machine). Time limit {meta['time_limit']} s, seed "
             f"{meta['seed']}{', QUICK (10 problems per scenario)' if meta['quick'] else ''}. Times in ms: "
             f"'plan+simplify' as VAMP measures it; 'total' adds the planner's own re-check of the final path "
             f"every 0.005 rad (validate); the targets are judged on the total.", ""]
    for robot, recs in results.items():
        lines += [f"## {robot}", "", "| scenario | problems | valid | solved | total median | total p95 | "
                  "plan+simplify median | plan+simplify p95 | plan (median) | simplify (median) | validate (median) "
                  "| path length rad (median) | colliding at 0.005 rad |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for sc in sorted({r["scenario"] for r in recs}):
            s = _stats([r for r in recs if r["scenario"] == sc])
            lines.append(_row(sc, s))
        s = _stats(recs)
        v = VAMP[robot]
        frac = s["solved"] / max(s["valid"], 1)
        lines.append(_row("**all**", s))
        lines += ["", f"Against VAMP ({v['solved']}/{v['valid']} solved, median {v['median_ms']} ms, p95 "
                      f"{v['p95_ms']} ms): plan+simplify median x{s['median_ps_ms'] / v['median_ms']:.1f}, p95 "
                      f"x{s['p95_ps_ms'] / v['p95_ms']:.1f}; total median x{s['median_ms'] / v['median_ms']:.1f}, p95 "
                      f"x{s['p95_ms'] / v['p95_ms']:.1f}. Targets (total): solved {100 * frac:.2f} % (>= 99.5 %: "
                      f"{'PASS' if frac >= TARGET['solved_fraction'] else 'FAIL'}), median "
                      f"{'PASS' if s['median_ms'] <= TARGET['median_ms'] else 'FAIL'} (<= 2 ms), p95 "
                      f"{'PASS' if s['p95_ms'] <= TARGET['p95_ms'] else 'FAIL'} (<= 20 ms), colliding paths "
                      f"{'PASS' if s['colliding'] == 0 else 'FAIL'} (0).", ""]
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mbm", default=str(ROOT.parent / "shared" / "benchmarks" / "mbm"))
    ap.add_argument("--robots", nargs="+", default=["ur5", "panda"], choices=["ur5", "panda"])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--time-limit", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-save", action="store_true")
    a = ap.parse_args(argv)
    mbm = Path(a.mbm)
    if not (mbm / "problems").is_dir():
        sys.stderr.write(f"bench/planning.py: error: {mbm}/problems not found (pass --mbm)\n")
        return 2
    when = dt.datetime.now()
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.processor())
    meta = dict(when=when.strftime("%Y-%m-%d %H:%M"), cpu=cpu, cores=os.cpu_count(),
                load_start=round(os.getloadavg()[0], 2), time_limit=a.time_limit, seed=a.seed, quick=a.quick)
    results = {r: run_robot(mbm, r, a) for r in a.robots}
    meta["load_end"] = round(os.getloadavg()[0], 2)
    text = table(results, meta)
    print(text)
    if not a.no_save:
        summary = {r: _stats(recs) for r, recs in results.items()}
        for w in save_results("planning", text, dict(meta=meta, summary=summary, vamp=VAMP, problems=results),
                              a.quick, when):
            sys.stderr.write(f"wrote {w}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
