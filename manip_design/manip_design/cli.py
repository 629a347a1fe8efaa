"""``manip-design``: check, solve and export robot structures written in the .mrs language.

    manip-design dof FILE                          # Grubler-Kutzbach mobility vs actuated joints
    manip-design fk FILE --actuated V ...          # end-effector pose (passive joints solved)
    manip-design fk FILE --actuated V ... --branches N   # and every assembly branch found from N seeds
    manip-design ik FILE --xyz X Y Z [--rpy R P Y] [--method lm|ccd]
    manip-design synthesize FILE --targets FILE    # free lengths that reach the target points
    manip-design urdf FILE -o OUT                  # serial structures only
    manip-design codegen FILE [--no-cache]         # SymPy FK / Jacobians (/ mass matrix), cached
    manip-design plot FILE -o OUT.png [--actuated V ...]

Every command takes ``--param NAME=VALUE`` (values of free parameters, repeatable) and ``--json`` (then the
last line of stdout is one JSON object). Units: m, rad. Exit status: 0 done, 1 the answer is negative (IK
or synthesis failed, a DOF error), 2 user error (one line on stderr, no traceback).
"""
from __future__ import annotations

import argparse
import json
import math
import sys

import numpy as np

from .errors import DesignError


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise _UsageError(f"{self.prog}: {message}")


def _params(args):
    out = {}
    for item in args.param or []:
        name, sep, val = item.partition("=")
        if not sep:
            raise DesignError(f"--param takes NAME=VALUE, got {item!r}")
        try:
            out[name.strip()] = float(val)
        except ValueError:
            raise DesignError(f"--param {name}: {val!r} is not a number") from None
    return out


def _load(args):
    from .language import parse_file
    s = parse_file(args.file)
    return s, s.compile(_params(args))


def _quat_xyzw(R):
    from scipy.spatial.transform import Rotation
    return Rotation.from_matrix(R).as_quat().tolist()  # scipy order: x, y, z, w


def _rpy(R):
    from .serial import _rpy as rpy
    return list(rpy(R))


def cmd_dof(args, out):
    from .mobility import dof_report
    s, m = _load(args)
    d = dof_report(s, m)
    if not args.json:
        out.write(f"{args.file}: mobility {d['mobility']} (Grubler-Kutzbach, lambda {d['lambda']}, {d['bodies']} "
                  f"bodies, {d['joints']} joints with {d['joint_freedoms']} freedoms), {d['actuated']} actuated "
                  f"({', '.join(d['actuated_names'])})\n")
        out.write(f"  loop-closure Jacobian: instantaneous mobility {d['mobility_instantaneous']}, end effector "
                  f"moves in {d['end_effector_dof']} directions, {d['passive_free']} passive motion(s) with the "
                  f"actuators locked\n")
        for msg in d["messages"]:
            out.write(f"  {msg}\n")
        out.write(f"  status: {d['status']}\n")
    return d, 1 if d["status"] == "error" else 0


def cmd_fk(args, out):
    _s, m = _load(args)
    r = m.fk(args.actuated)
    d = {"position": r.pose[:3, 3].tolist(), "orientation_xyzw": _quat_xyzw(r.pose[:3, :3]),
         "rpy": _rpy(r.pose[:3, :3]), "success": bool(r.success), "closure_error": r.closure_error,
         "iterations": r.iterations, "joints": dict(zip(m.variable_names, map(float, r.q)))}
    if not args.json:
        out.write(f"position (m): {np.round(d['position'], 9).tolist()}\n"
                  f"orientation (x, y, z, w): {np.round(d['orientation_xyzw'], 9).tolist()}\n"
                  f"closure error {r.closure_error:.3g} after {r.iterations} LM steps: "
                  f"{'assembled' if r.success else 'FAILED to assemble'}\n")
    if args.branches:
        br = m.fk_branches(args.actuated, attempts=args.branches)
        d["branches"] = [{"position": b.pose[:3, 3].tolist(), "orientation_xyzw": _quat_xyzw(b.pose[:3, :3]),
                          "joints": dict(zip(m.variable_names, map(float, b.q)))} for b in br]
        if not args.json:
            out.write(f"{len(br)} distinct assembly branch(es) from {args.branches} random seeds (home first):\n")
            for i, b in enumerate(d["branches"]):
                out.write(f"  {i}: position (m) {np.round(b['position'], 9).tolist()}, orientation (x, y, z, w) "
                          f"{np.round(b['orientation_xyzw'], 9).tolist()}\n")
    return d, 0 if r.success else 1


def cmd_ik(args, out):
    _s, m = _load(args)
    r = m.ik(args.xyz, args.rpy, method=args.method, restarts=args.restarts)
    d = {"success": bool(r.success), "actuated": r.actuated, "position_error_m": r.position_error_m,
         "rotation_error_rad": r.rotation_error_rad, "iterations": r.iterations, "restarts": r.restarts,
         "method": r.method, "message": r.message}
    if not args.json:
        for k, v in r.actuated.items():
            out.write(f"{k} = {v:.9g}\n")
        out.write(f"reached (position error {r.position_error_m:.3g} m, checked by FK from the home assembly)\n"
                  if r.success else f"NOT reached: {r.message}\n")
    return d, 0 if r.success else 1


def cmd_synthesize(args, out):
    from .language import parse_file
    from .synthesis import read_targets, synthesize
    s = parse_file(args.file)
    r = synthesize(s, read_targets(args.targets), fixed=_params(args))
    d = {"success": bool(r.success), "params": r.params, "errors_m": r.errors_m, "actuated": r.actuated,
         "attempts": r.attempts, "message": r.message}
    if not args.json:
        for k, v in r.params.items():
            out.write(f"{k} = {v:.9g}\n")
        out.write(("every target reached" if r.success else f"FAILED: {r.message}") +
                  f" (max position error {max(r.errors_m):.3g} m)\n")
    return d, 0 if r.success else 1


def cmd_urdf(args, out):
    from .serial import to_robot_model, to_urdf
    _s, m = _load(args)
    text = to_urdf(m)
    to_robot_model(m)  # check that manip_core reads it back
    try:
        with open(args.output, "w") as f:
            f.write(text)
    except OSError as e:
        raise DesignError(f"cannot write {args.output}: {e.strerror}") from None
    if not args.json:
        out.write(f"wrote {args.output} ({m.nv} joints)\n")
    return {"output": args.output, "joints": m.variable_names}, 0


def cmd_codegen(args, out):
    from .symbolic import generate
    _s, m = _load(args)
    g = generate(m, use_cache=not args.no_cache)
    funcs = ["fk", "jacobian", "closure", "closure_jacobian"] + (["mass_matrix"] if g.has_mass_matrix else [])
    d = {"path": str(g.path) if g.path else None, "cached": g.cached, "seconds": g.seconds, "functions": funcs,
         "variables": m.variable_names}
    if not args.json:
        out.write(f"{'loaded from cache' if g.cached else 'generated'} in {g.seconds:.3f} s: {', '.join(funcs)}"
                  f"{' -> ' + str(g.path) if g.path else ''}\n")
    return d, 0


def cmd_plot(args, out):
    from .plot import plot_mechanism
    _s, m = _load(args)
    q = m.fk(args.actuated).q if args.actuated else m.q_home
    plot_mechanism(m, q, args.output)
    if not args.json:
        out.write(f"wrote {args.output}\n")
    return {"output": args.output}, 0


def build_parser():
    p = _Parser(prog="manip-design", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Parser)

    def common(sp):
        sp.add_argument("file", help="structure file (.mrs)")
        sp.add_argument("--param", action="append", metavar="NAME=VALUE", help="value of a free parameter")
        sp.add_argument("--json", action="store_true", help="last stdout line: one JSON object")
        return sp
    common(sub.add_parser("dof", help="mobility check")).set_defaults(fn=cmd_dof)
    sp = common(sub.add_parser("fk", help="forward kinematics"))
    sp.add_argument("--actuated", type=float, nargs="+", required=True, metavar="V",
                    help="actuated joint values (rad or m) in file order")
    sp.add_argument("--branches", type=int, default=0, metavar="N",
                    help="also list every distinct assembly branch found from N random seeds (JSON: branches)")
    sp.set_defaults(fn=cmd_fk)
    sp = common(sub.add_parser("ik", help="inverse kinematics"))
    sp.add_argument("--xyz", type=float, nargs=3, required=True, metavar=("X", "Y", "Z"), help="target (m)")
    sp.add_argument("--rpy", type=float, nargs=3, metavar=("R", "P", "Y"), help="target orientation (rad)")
    sp.add_argument("--method", choices=("lm", "ccd"), default="lm")
    sp.add_argument("--restarts", type=int, default=10)
    sp.set_defaults(fn=cmd_ik)
    sp = common(sub.add_parser("synthesize", help="free lengths from target points"))
    sp.add_argument("--targets", required=True, help="file of x y z lines (m) or a JSON list")
    sp.set_defaults(fn=cmd_synthesize)
    sp = common(sub.add_parser("urdf", help="URDF of a serial structure"))
    sp.add_argument("-o", "--output", required=True)
    sp.set_defaults(fn=cmd_urdf)
    sp = common(sub.add_parser("codegen", help="SymPy code generation (cached)"))
    sp.add_argument("--no-cache", action="store_true")
    sp.set_defaults(fn=cmd_codegen)
    sp = common(sub.add_parser("plot", help="PNG picture of the structure"))
    sp.add_argument("-o", "--output", required=True)
    sp.add_argument("--actuated", type=float, nargs="+", metavar="V")
    sp.set_defaults(fn=cmd_plot)
    return p


def main(argv=None, out=None):
    out = out or sys.stdout
    try:
        args = build_parser().parse_args(argv)
        d, rc = args.fn(args, out)
    except _UsageError as e:
        print(str(e), file=sys.stderr)
        return 2
    except DesignError as e:
        print(f"manip-design: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # a user error raised by manip_core (bad URDF etc.) is a ValueError
        from manip_core.errors import InputError, ModelError
        if isinstance(e, (InputError, ModelError)):
            print(f"manip-design: {e}", file=sys.stderr)
            return 2
        raise
    if args.json:
        out.write(json.dumps(d, default=lambda x: None if isinstance(x, float) and not math.isfinite(x) else x)
                  + "\n")
    return rc


if __name__ == "__main__":
    sys.exit(main())
