"""``manip-model``: describe a robot, compute FK, solve IK, estimate its workspace, map its singularities.

ROBOT is a bundled name (ur5, ypp3, planar2r, arm3) or a path to a .urdf or .kinematic.json file.
User errors (bad file, bad numbers, unreachable target) print one line on stderr and exit 2; no traceback.
"""
import argparse
import json
import math
import sys

import numpy as np

from .errors import InputError, ModelError
from .spatial import matrix_to_quat_wxyz, matrix_to_rpy, pose_error, rpy_to_matrix, transform


def _load(args):
    from .model import RobotModel
    return RobotModel.load(args.robot, base_link=args.base, tip_link=args.tip)


def _fmt(x):
    return "inf" if x == math.inf else "-inf" if x == -math.inf else f"{x:.6g}"


def _pose_dict(T):
    return {"xyz_m": T[:3, 3].tolist(), "rpy_rad": matrix_to_rpy(T[:3, :3]).tolist(),
            "quat_wxyz": matrix_to_quat_wxyz(T[:3, :3]).tolist(), "matrix": T.tolist()}


def cmd_describe(args, out):
    robot = _load(args)
    d = robot.describe()
    if args.json:
        json.dump(d, out, indent=2)
        out.write("\n")
        return 0
    out.write(f"{d['name']}: {d['base_link']} -> {d['tip_link']}, {d['dof']} joints  ({d['source']})\n")
    out.write(f"{'joint':<24}{'type':<11}{'lower':>10}{'upper':>10}{'vel':>8}{'effort':>8}{'mass kg':>9}"
              f"  screw axis [w; v] (base frame)\n")
    for j, (lo, hi, v, e) in zip(d["joints"], zip(robot.joint_lower, robot.joint_upper, robot.velocity_limits,
                                                  robot.effort_limits)):
        s = " ".join(f"{x:+.4f}" for x in j["screw_axis_space"])
        out.write(f"{j['name']:<24}{j['type']:<11}{_fmt(lo):>10}{_fmt(hi):>10}{_fmt(v):>8}{_fmt(e):>8}"
                  f"{j['moving_mass_kg']:>9.3f}  [{s}]\n")
    home = np.array(d["home"])
    p = _pose_dict(home)
    out.write(f"home pose (tip at q = 0): xyz {np.round(p['xyz_m'], 6).tolist()} m, "
              f"rpy {np.round(p['rpy_rad'], 6).tolist()} rad\n")
    solver = robot.analytic_ik()
    out.write(f"closed-form IK: {solver.kind if solver else 'none (numerical IK only)'}\n")
    return 0


def cmd_fk(args, out):
    robot = _load(args)
    T = robot.fk(np.array(args.q, dtype=float), link=args.link)
    d = _pose_dict(T)
    if args.json:
        json.dump(d, out, indent=2)
        out.write("\n")
        return 0
    frame = args.link or robot.tip_link
    out.write(f"{frame} in {robot.base_link}:\n")
    out.write(f"  xyz  {' '.join(f'{x:.6f}' for x in d['xyz_m'])} m\n")
    out.write(f"  rpy  {' '.join(f'{x:.6f}' for x in d['rpy_rad'])} rad (fixed-axis roll, pitch, yaw)\n")
    out.write(f"  quat {' '.join(f'{x:.6f}' for x in d['quat_wxyz'])} (w, x, y, z)\n")
    return 0


def cmd_ik(args, out):
    robot = _load(args)
    position_only = args.rpy is None
    T = transform(rpy_to_matrix(args.rpy or [0.0, 0.0, 0.0]), args.xyz)
    solver = robot.analytic_ik()
    results = []
    method = ""
    if solver is not None and (position_only or not solver.position_only):
        sols, reason = solver.solve(T)
        method = f"closed form ({solver.kind})"
        for q in sols:
            dp, dr = pose_error(robot.fk(q), T)
            results.append({"q": q.tolist(), "position_error_m": dp,
                            "rotation_error_rad": None if solver.position_only else dr})
        if not sols:
            raise InputError(f"no IK solution: {reason}")
    else:
        seed = None if args.seed is None else np.array(args.seed, dtype=float)
        r = robot.ik(T, q_seed=seed, position_only=position_only or None)
        method = "numerical (Levenberg-Marquardt with restarts)"
        if not r.success:
            raise InputError(f"no IK solution: {r.message}")
        results.append({"q": r.q.tolist(), "position_error_m": r.position_error_m,
                        "rotation_error_rad": None if position_only else r.rotation_error_rad})
    if args.json:
        json.dump({"method": method, "joint_names": robot.joint_names, "solutions": results}, out, indent=2)
        out.write("\n")
        return 0
    out.write(f"{len(results)} solution(s), {method}; joints: {' '.join(robot.joint_names)}\n")
    for k, r in enumerate(results):
        rot = "" if r["rotation_error_rad"] is None else f", {r['rotation_error_rad']:.1e} rad"
        out.write(f"  [{k}] {' '.join(f'{x:+.6f}' for x in r['q'])}   (error {r['position_error_m']:.1e} m{rot})\n")
    return 0


def cmd_workspace(args, out):
    from .analysis.pictures import ProgressBar, workspace_png, write_ply
    from .analysis.workspace import estimate_workspace
    robot = _load(args)
    est = estimate_workspace(robot, args.samples, seed=args.seed, samples_per_voxel=args.samples_per_voxel,
                             device=args.device, approach_axis=args.approach_axis,
                             dexterity_threshold=args.dexterity_threshold,
                             progress=None if args.quiet else ProgressBar(f"{robot.name} workspace"))
    summary = est.summary()
    if args.png:
        workspace_png(est, args.png)
        summary["png"] = args.png
    if args.ply:
        pts, dex = est.to_points("occupied")
        write_ply(args.ply, pts, dex)
        summary["ply"] = args.ply
    if args.json:
        out.write(json.dumps(summary) + "\n")
        return 0
    unit = {3: "m^3", 2: "m^2", 1: "m"}[est.dimension]
    out.write(f"{robot.name}: reachable {'volume' if est.dimension == 3 else 'area' if est.dimension == 2 else 'length'}"
              f" {est.measure:.5g} +- {est.uncertainty:.2g} {unit} ({est.samples:,} samples, voxel "
              f"{1000 * est.voxel_m:.2f} mm, {est.samples_per_s / 1e6:.2f} M samples/s end to end, "
              f"{est.kernel_samples_per_s / 1e6:.2f} M/s sampling + FK, {est.device})\n")
    out.write(f"  dexterous (approach axis {est.approach_axis}, >= {100 * est.dexterity_threshold:.0f} % of "
              f"directions): {est.dexterous_measure:.5g} {unit}\n")
    out.write("  convergence: " + ", ".join(f"{c['samples']:,}: {c['measure']:.5g}" for c in est.convergence) + "\n")
    for k in ("png", "ply"):
        if k in summary:
            out.write(f"  wrote {summary[k]}\n")
    return 0


def cmd_singularity_map(args, out):
    from .analysis.pictures import ProgressBar, singularity_map_png, write_ply
    from .analysis.singularity_map import singularity_map
    robot = _load(args)
    m = singularity_map(robot, plane=args.plane, offset_m=args.offset, u_range=args.u_range, v_range=args.v_range,
                        cells=args.cells, levels=args.levels, threshold=args.threshold, band=args.band,
                        part=args.part, orientation=None if args.rpy is None else rpy_to_matrix(args.rpy),
                        ik=args.ik, progress=None if args.quiet else ProgressBar(f"{robot.name} singularity map"))
    summary = m.summary()
    if args.png:
        singularity_map_png(m, args.png)
        summary["png"] = args.png
    if args.ply:
        I, J = np.nonzero(m.node_computed)
        write_ply(args.ply, m.node_points(I, J), m.node_values[I, J])
        summary["ply"] = args.ply
    if args.json:
        out.write(json.dumps(summary) + "\n")
        return 0
    out.write(f"{robot.name}: min singular value ({m.part}) map, {m.points_evaluated} of {m.node_values.size} "
              f"nodes evaluated in {m.time_s:.2f} s, threshold {m.threshold:.4g}, IK: {m.ik}\n")
    for st in m.steps:
        out.write(f"  level {st['level']}: cell {1000 * st['cell_m']:.1f} mm, {st['cells_refined']} cells refined, "
                  f"{st['points_evaluated']} points, {st['time_s']:.3f} s\n")
    for k in ("png", "ply"):
        if k in summary:
            out.write(f"  wrote {summary[k]}\n")
    return 0


def build_parser():
    p = argparse.ArgumentParser(prog="manip-model", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)

    def robot_args(sp):
        sp.add_argument("robot", help="bundled name (ur5, ypp3, planar2r, arm3) or a .urdf/.kinematic.json path")
        sp.add_argument("--base", help="base link (default: the root)")
        sp.add_argument("--tip", help="tip link (default: the end of the longest chain)")
        sp.add_argument("--json", action="store_true", help="print JSON")

    d = sub.add_parser("describe", help="joints, limits, screw axes, masses")
    robot_args(d)
    d.set_defaults(func=cmd_describe)
    f = sub.add_parser("fk", help="pose of the tip (or --link) at joint values --q")
    robot_args(f)
    f.add_argument("--q", type=float, nargs="+", required=True, help="joint values (rad or m)")
    f.add_argument("--link", help="another link than the tip")
    f.set_defaults(func=cmd_fk)
    i = sub.add_parser("ik", help="joint values that reach --xyz (and --rpy); all solutions where a closed "
                                  "form exists")
    robot_args(i)
    i.add_argument("--xyz", type=float, nargs=3, required=True, metavar=("X", "Y", "Z"), help="m, base frame")
    i.add_argument("--rpy", type=float, nargs=3, metavar=("R", "P", "Y"),
                   help="rad, fixed-axis roll pitch yaw (omit for position-only)")
    i.add_argument("--seed", type=float, nargs="+", help="start for numerical IK (rad or m)")
    i.set_defaults(func=cmd_ik)
    w = sub.add_parser("workspace", help="reachable and dexterous workspace by Monte Carlo sampling")
    robot_args(w)
    w.add_argument("--samples", type=int, default=2_000_000, help="joint-space samples (default 2e6)")
    w.add_argument("--seed", type=int, default=0, help="sample generator seed")
    w.add_argument("--samples-per-voxel", type=float, default=20.0, help="mean samples per occupied voxel "
                   "(sets the voxel edge)")
    w.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="numba CPU or numba.cuda kernel")
    w.add_argument("--approach-axis", choices=("x", "y", "z"), default="z", help="tip axis for dexterity")
    w.add_argument("--dexterity-threshold", type=float, default=0.5, help="fraction of approach directions")
    w.add_argument("--png", help="write slices and a 3-D view to this PNG")
    w.add_argument("--ply", help="write the occupied voxel centres (value: dexterity index) to this PLY")
    w.add_argument("--quiet", action="store_true", help="no progress bar")
    w.set_defaults(func=cmd_workspace)
    sm = sub.add_parser("singularity-map", help="minimum singular value over a plane, refined near a threshold")
    robot_args(sm)
    sm.add_argument("--plane", choices=("xy", "xz", "yz"), help="plane through the base origin (default: the "
                    "arm's plane for planar arms, else xz)")
    sm.add_argument("--offset", type=float, default=0.0, help="m, plane shift along its normal")
    sm.add_argument("--u-range", type=float, nargs=2, metavar=("MIN", "MAX"), help="m along the first axis")
    sm.add_argument("--v-range", type=float, nargs=2, metavar=("MIN", "MAX"), help="m along the second axis")
    sm.add_argument("--cells", type=int, default=32, help="coarse cells per side")
    sm.add_argument("--levels", type=int, default=3, help="refinement steps (each halves the cell)")
    sm.add_argument("--threshold", type=float, help="singular value to refine around (default: 1/4 of the "
                    "median)")
    sm.add_argument("--band", type=float, default=0.25, help="relative half-width of the threshold band")
    sm.add_argument("--part", choices=("full", "position", "orientation"), help="Jacobian part (default: full "
                    "for 6+ joints, else position)")
    sm.add_argument("--rpy", type=float, nargs=3, metavar=("R", "P", "Y"), help="tool orientation of the "
                    "targets (rad; default: the tip's at q = 0)")
    sm.add_argument("--ik", choices=("auto", "analytic", "numeric"), default="auto")
    sm.add_argument("--png", help="write the map to this PNG")
    sm.add_argument("--ply", help="write the evaluated nodes (value: min singular value) to this PLY")
    sm.add_argument("--quiet", action="store_true", help="no progress bar")
    sm.set_defaults(func=cmd_singularity_map)
    return p


def main(argv=None, out=None):
    out = out or sys.stdout
    args = build_parser().parse_args(argv)
    try:
        return args.func(args, out)
    except (ModelError, InputError, ValueError, FileNotFoundError, NotImplementedError) as e:
        sys.stderr.write(f"manip-model: error: {e}\n")
        return 2


if __name__ == "__main__":
    sys.exit(main())
