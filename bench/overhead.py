#!/usr/bin/env python3
"""Where the time of one manip_core call from Python goes, next to Pinocchio's call (UR5 and Panda).

    python bench/overhead.py            # ~1-2 min
    python bench/overhead.py --quick    # ~20 s

For each op (FK, space Jacobian, RNEA, mass matrix, forward dynamics, RNEA derivatives) it times, in one run with the
variants alternating block by block (so that all see the same load):

- call: ``robot.op(args)`` as a user writes it (a new output array, manip_core._cpython's builtin function,
  kernel);
- call, out=: the same with a caller-owned output (no allocation; the model's own workspace);
- call, out= data=: with a caller-owned output and RobotData (this path releases the GIL: numba's dispatcher);
- builtin + kernel: manip_core._cpython's builtin function with ready arrays (what robot.op calls first since
  2026-11-27: a numba cfunc with CPython's METH_FASTCALL signature, its checks read from the ndarray structs);
- fast path + kernel: manip_core._fast's dispatcher with ready arrays (one int handle reaches the model's
  arrays, numba checks the argument types in C, no NRT meminfo per array; the path of data= calls);
- entry point + kernel: the kernel's compiled entry point (manip_core._entry, the checked path robot.op takes
  for inputs the fast path does not accept) from Python with ready arrays: unboxing and kernel;
- dispatcher + kernel: the kernel's own numba dispatcher with ready arrays (type dispatch, unboxing, kernel);
- no-op dispatcher: a numba function with the same argument types that does nothing (unboxing, type dispatch);
- kernel: the kernel as the single calls run it (manip_core._fast's function on the model's handle), called in a
  compiled loop (no Python at all), per call;
- Pinocchio: the same op through its Python bindings (results in its Data, as manip's out= call).

and derives: Python wrapper = (call, out=) - (builtin + kernel); allocation = call - (call, out=);
builtin's call = (builtin + kernel) - kernel; numba dispatch saved by the builtin = (fast path + kernel) -
(builtin + kernel).
Times are CPU time of the benchmark's thread (time.thread_time: a thread that other jobs deschedule does not
count the wait; caches and a shared core still slow it), median and minimum over blocks, each block the mean
of a loop over 50 states, ns. Then two Python threads: the wall-clock speed-up over one thread doing the same
calls, with a RobotData per thread (the kernels release the GIL) and on the model's own workspace (they hold
it); only meaningful when two cores are free.
Writes bench/results/overhead-YYYYMMDD-HHMM[-quick].md/.json and overhead-latest.md (full runs).
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
from core import PinRobot, machine_info, random_states, ROBOTS, log  # noqa: E402
from results_io import save_results  # noqa: E402

from numba import njit  # noqa: E402

from manip_core import _derivative_kernels as D, _entry as E, _fast as F, _kernels as K  # noqa: E402
from manip_core.model import RobotModel  # noqa: E402
from manip_core.reference_robots import example_robot  # noqa: E402


@njit(cache=True)
def _noop(*args):
    return 0


# the kernels as the single calls run them (manip_core._fast's functions: the model's arrays reached through the
# handle h, array views without NRT reference counting), in a compiled loop: no Python at all
@njit(cache=True)
def _loop_fk(h, Q, out, reps):
    s = 0
    for _ in range(reps):
        for k in range(Q.shape[0]):
            s += F._fk(h, Q[k], out)
    return s


@njit(cache=True)
def _loop_jac(h, Q, out, reps):
    s = 0
    for _ in range(reps):
        for k in range(Q.shape[0]):
            s += F._jacobian_space(h, Q[k], out)
    return s


@njit(cache=True)
def _loop_rnea(h, Q, V, A, out, reps):
    s = 0
    for _ in range(reps):
        for k in range(Q.shape[0]):
            s += F._rnea(h, Q[k], V[k], A[k], out)
    return s


@njit(cache=True)
def _loop_crba(h, Q, out, reps):
    s = 0
    for _ in range(reps):
        for k in range(Q.shape[0]):
            s += F._mass_matrix(h, Q[k], out)
    return s


@njit(cache=True)
def _loop_fd(h, Q, V, T, out, reps):
    s = 0
    for _ in range(reps):
        for k in range(Q.shape[0]):
            s += F._forward_dynamics(h, Q[k], V[k], T[k], out)
    return s


@njit(cache=True)
def _loop_rnead(h, Q, V, A, o1, o2, o3, reps):
    s = 0
    for _ in range(reps):
        for k in range(Q.shape[0]):
            s += F._rnea_derivatives(h, Q[k], V[k], A[k], o1, o2, o3)
    return s


OPS = [("fk", "FK"), ("jac", "space Jacobian"), ("rnea", "RNEA"), ("crba", "mass matrix"), ("fd", "forward dynamics"),
       ("rnead", "RNEA derivatives")]


def variants(robot, pr, data, Q, V, A, TAU):
    """{op: {variant: (fn, arglist)}} and {op: compiled-loop timer}."""
    n = robot.dof
    mf, mi, ws, dws, g, f = robot._mf, robot._mi, data.ws, data.dws, robot._g_default, np.zeros(0)
    h = data._h   # the fast path's handle of this RobotData (manip_core._fast)
    T, tau, M, J = np.empty((4, 4)), np.empty(n), np.empty((n, n)), np.empty((6, n))
    D3 = tuple(np.empty((n, n)) for _ in range(3))
    q1 = [(q,) for q in Q]
    s3 = list(zip(Q, V, A))
    f3 = list(zip(Q, V, TAU))
    pin = pr.pin
    v = {
        "fk": {"call": (lambda q: robot.fk(q), q1),
               "call, out=": (lambda q: robot.fk(q, out=T), q1),
               "call, out= data=": (lambda q: robot.fk(q, out=T, data=data), q1),
               "builtin + kernel": (lambda q: robot._c_fk(q, T), q1),
               "fast path + kernel": (lambda q: F.fk_nogil(h, q, T), q1),
               "entry point + kernel": (lambda q: E.fk(mf, mi, ws, q, T), q1),
               "dispatcher + kernel": (lambda q: K.fk(mf, mi, ws, q, T), q1),
               "no-op dispatcher": (lambda q: _noop(mf, mi, ws, q, T), q1),
               "Pinocchio": (pr.fk, q1)},
        "jac": {"call": (lambda q: robot.jacobian_space(q), q1),
                "call, out=": (lambda q: robot.jacobian_space(q, out=J), q1),
                "call, out= data=": (lambda q: robot.jacobian_space(q, out=J, data=data), q1),
                "builtin + kernel": (lambda q: robot._c_jacobian_space(q, J), q1),
                "fast path + kernel": (lambda q: F.jacobian_space_nogil(h, q, J), q1),
                "entry point + kernel": (lambda q: E.jacobian_space(mf, mi, ws, q, J), q1),
                "dispatcher + kernel": (lambda q: K.jacobian_space(mf, mi, ws, q, J), q1),
                "no-op dispatcher": (lambda q: _noop(mf, mi, ws, q, J), q1),
                "Pinocchio": (pr.jac, q1)},
        "rnea": {"call": (lambda q, v, a: robot.inverse_dynamics(q, v, a), s3),
                 "call, out=": (lambda q, v, a: robot.inverse_dynamics(q, v, a, out=tau), s3),
                 "call, out= data=": (lambda q, v, a: robot.inverse_dynamics(q, v, a, out=tau, data=data), s3),
                 "builtin + kernel": (lambda q, v, a: robot._c_rnea(q, v, a, tau), s3),
                 "fast path + kernel": (lambda q, v, a: F.rnea_nogil(h, q, v, a, tau), s3),
                 "entry point + kernel": (lambda q, v, a: E.rnea(mf, mi, ws, q, v, a, g, f, tau), s3),
                 "dispatcher + kernel": (lambda q, v, a: K.rnea(mf, mi, ws, q, v, a, g, f, tau), s3),
                 "no-op dispatcher": (lambda q, v, a: _noop(mf, mi, ws, q, v, a, g, f, tau), s3),
                 "Pinocchio": (pr.rnea, s3)},
        "crba": {"call": (lambda q: robot.mass_matrix(q), q1),
                 "call, out=": (lambda q: robot.mass_matrix(q, out=M), q1),
                 "call, out= data=": (lambda q: robot.mass_matrix(q, out=M, data=data), q1),
                 "builtin + kernel": (lambda q: robot._c_mass_matrix(q, M), q1),
                 "fast path + kernel": (lambda q: F.mass_matrix_nogil(h, q, M), q1),
                 "entry point + kernel": (lambda q: E.mass_matrix(mf, mi, ws, q, M), q1),
                 "dispatcher + kernel": (lambda q: K.mass_matrix(mf, mi, ws, q, M), q1),
                 "no-op dispatcher": (lambda q: _noop(mf, mi, ws, q, M), q1),
                 "Pinocchio": (pr.crba, q1)},
        "fd": {"call": (lambda q, v, t: robot.forward_dynamics(q, v, t), f3),
               "call, out=": (lambda q, v, t: robot.forward_dynamics(q, v, t, out=tau), f3),
               "call, out= data=": (lambda q, v, t: robot.forward_dynamics(q, v, t, out=tau, data=data), f3),
               "builtin + kernel": (lambda q, v, t: robot._c_forward_dynamics(q, v, t, tau), f3),
               "fast path + kernel": (lambda q, v, t: F.forward_dynamics_nogil(h, q, v, t, tau), f3),
               "entry point + kernel": (lambda q, v, t: E.forward_dynamics(mf, mi, ws, q, v, t, g, f, tau), f3),
               "dispatcher + kernel": (lambda q, v, t: K.forward_dynamics(mf, mi, ws, q, v, t, g, f, tau), f3),
               "no-op dispatcher": (lambda q, v, t: _noop(mf, mi, ws, q, v, t, g, f, tau), f3),
               "Pinocchio": (pr.aba, f3)},
        "rnead": {"call": (lambda q, v, a: robot.rnea_derivatives(q, v, a), s3),
                  "call, out=": (lambda q, v, a: robot.rnea_derivatives(q, v, a, out=D3), s3),
                  "call, out= data=": (lambda q, v, a: robot.rnea_derivatives(q, v, a, out=D3, data=data), s3),
                  "builtin + kernel": (lambda q, v, a: robot._c_rnea_derivatives(q, v, a, *D3), s3),
                  "fast path + kernel": (lambda q, v, a: F.rnea_derivatives_nogil(h, q, v, a, *D3), s3),
                  "entry point + kernel": (lambda q, v, a: E.rnea_derivatives(mf, mi, ws, dws, q, v, a, g, f,
                                                                              *D3), s3),
                  "dispatcher + kernel": (lambda q, v, a: D.rnea_derivatives(mf, mi, ws, dws, q, v, a, g, f, *D3),
                                          s3),
                  "no-op dispatcher": (lambda q, v, a: _noop(mf, mi, ws, dws, q, v, a, g, f, *D3), s3),
                  "Pinocchio": (lambda q, v, a: pin.computeRNEADerivatives(pr.model, pr.data, q, v, a), s3)},
    }
    hm = robot._h  # the model's own workspace, as the builtin functions use
    loops = {
        "fk": lambda r: _loop_fk(hm, Q, T, r),
        "jac": lambda r: _loop_jac(hm, Q, J, r),
        "rnea": lambda r: _loop_rnea(hm, Q, V, A, tau, r),
        "crba": lambda r: _loop_crba(hm, Q, M, r),
        "fd": lambda r: _loop_fd(hm, Q, V, TAU, tau, r),
        "rnead": lambda r: _loop_rnead(hm, Q, V, A, *D3, r),
    }
    return v, loops


def time_op(fns, loop, n_states, blocks):
    """Median ns per call of every variant (blocks alternate) and of the compiled loop."""
    for fn, arglist in fns.values():
        for args in arglist[:5]:
            fn(*args)
    loop(1)
    per = {k: np.empty(blocks) for k in list(fns) + ["kernel"]}
    pc = time.thread_time  # CPU time of this thread: less sensitive to other jobs than the wall clock
    inner = 1
    for b in range(blocks):
        for k, (fn, arglist) in fns.items():
            t0 = pc()
            for args in arglist:
                fn(*args)
            per[k][b] = (pc() - t0) / len(arglist)
        t0 = pc()
        loop(inner)
        per["kernel"][b] = (pc() - t0) / (inner * n_states)
    return {k: {"median_ns": 1e9 * float(np.median(x)), "min_ns": 1e9 * float(x.min())} for k, x in per.items()}


def thread_scaling(robot, Q, V, A, reps):
    """Wall-clock speed-up of 2 Python threads over 1 for the same calls: each thread with its own RobotData
    (kernels without the GIL) and, for contrast, both on the model's own workspace (kernels hold the GIL).
    Returns {op: {"own data": x, "model's workspace": x}} (median of 5 rounds)."""
    import threading
    ops = {"RNEA derivatives": lambda q, v, a, d: robot.rnea_derivatives(q, v, a, data=d),
           "forward dynamics": lambda q, v, a, d: robot.forward_dynamics(q, v, a, data=d),
           "FK": lambda q, v, a, d: robot.fk(q, data=d)}
    out = {}
    for name, fn in ops.items():
        def work(d, n):
            for _ in range(n):
                for k in range(Q.shape[0]):
                    fn(Q[k], V[k], A[k], d)

        res = {}
        for label, own in (("own data", True), ("model's workspace", False)):
            ratios = []
            for _ in range(5):
                d1 = robot.create_data() if own else None
                t0 = time.perf_counter()
                work(d1, 2 * reps)
                t1 = time.perf_counter() - t0
                ths = [threading.Thread(target=work, args=(robot.create_data() if own else None, reps))
                       for _ in range(2)]
                t0 = time.perf_counter()
                for th in ths:
                    th.start()
                for th in ths:
                    th.join()
                ratios.append(t1 / (time.perf_counter() - t0))
            res[label] = float(np.median(ratios))
        out[name] = res
    return out


COLS = ["call", "call, out=", "call, out= data=", "builtin + kernel", "fast path + kernel", "entry point + kernel",
        "dispatcher + kernel", "no-op dispatcher", "kernel", "Pinocchio"]


def render(res):
    m = res["machine"]
    L = [f"# manip_core single-call overhead ({res['mode']} run, {res['timestamp']})", "",
         f"Machine: {m['cpu_model']}, {m['cpu_count']} logical cores; numba {m['numba']}, pin {m['pin']}, "
         f"manip_core sha256 {m['manip_core_sha256_12']}; load average (1 min) at start "
         f"{res['loadavg_start'][0]:.2f}, at end {res['loadavg_end'][0]:.2f} (other jobs on the machine inflate "
         f"every column; compare columns of one row, taken in the same blocks).", "",
         "## Measured (ns of CPU time per call, median of blocks)", "",
         "| robot | op | " + " | ".join(COLS) + " | call / Pinocchio | out= call / Pinocchio |",
         "|---|---|" + "---:|" * (len(COLS) + 2)]
    for rname, ops in res["robots"].items():
        for op, label in OPS:
            d = ops[op]
            cells = [f"{d[c]['median_ns']:.0f}" if c in d else "n/a" for c in COLS]
            out_col = "call, out=" if "call, out=" in d else "call, out= data="
            L.append(f"| {rname} | {label} | " + " | ".join(cells) +
                     f" | {d['call']['median_ns'] / d['Pinocchio']['median_ns']:.2f}x"
                     f" | {d[out_col]['median_ns'] / d['Pinocchio']['median_ns']:.2f}x |")
    L += ["", "## Breakdown of `call` (ns, derived from the minima over blocks: the least disturbed)", "",
          "| robot | op | Python wrapper | output allocation | the builtin's call (checks in the cfunc) | kernel | "
          "call | numba fast path minus builtin |",
          "|---|---|---:|---:|---:|---:|---:|---:|"]
    for rname, ops in res["robots"].items():
        for op, label in OPS:
            d = {k: v["min_ns"] for k, v in ops[op].items()}
            path = "builtin + kernel" if "builtin + kernel" in d else "fast path + kernel"
            out_col = "call, out=" if "call, out=" in d else "call, out= data="
            checks = d[out_col] - d[path]
            alloc = d["call"] - d[out_col]
            entry = d[path] - d["kernel"]
            saved = f"{d['fast path + kernel'] - d[path]:.0f}" if path == "builtin + kernel" else "n/a"
            L.append(f"| {rname} | {label} | {checks:.0f} | {alloc:.0f} | {entry:.0f} | "
                     f"{d['kernel']:.0f} | {d['call']:.0f} | {saved} |")
    L += ["", "## Two Python threads (wall-clock speed-up over one thread doing the same calls)", "",
          "| robot | op | each thread its own RobotData (kernels release the GIL) | both on the model's workspace "
          "(kernels hold the GIL) |", "|---|---|---:|---:|"]
    for rname, sc in res.get("threads", {}).items():
        for op, d in sc.items():
            shared = d["model's workspace"]
            L.append(f"| {rname} | {op} | {d['own data']:.2f}x | {shared:.2f}x |")
    L += ["", "Columns: *call* `robot.op(...)`; *call, out=* with a caller-owned output; *call, out= data=* with "
          "caller-owned output and RobotData (numba's dispatcher, the kernel without the GIL); *builtin + kernel* "
          "what the methods call first since 2026-11-27 (manip_core._cpython: a numba cfunc behind a CPython "
          "METH_FASTCALL builtin function, checks read from the ndarray structs) with ready arrays; "
          "*fast path + kernel* manip_core._fast (one int "
          "handle for the model's arrays, numba's type check in C, no NRT meminfo) with ready arrays; "
          "*entry point + kernel* the kernel's compiled entry point (manip_core._entry, the checked path's call, no "
          "type dispatch) called from Python with ready arrays; *dispatcher + kernel* the numba dispatcher with ready arrays; "
          "*no-op dispatcher* a numba function with the same argument types (as *args) that returns 0; "
          "*kernel* the kernel as the single calls run it (manip_core._fast's function on the model's handle) in a "
          "compiled loop; "
          "*Pinocchio* its Python binding (`forwardKinematics`+`updateFramePlacement`, `rnea`, `crba`, `aba`, "
          "`computeRNEADerivatives`, each through one Python function like manip's variants). Every time "
          "includes a Python loop over 50 states and one Python call (a lambda or PinRobot method, ~50-80 ns "
          "together).", ""]
    return "\n".join(L) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer blocks")
    ap.add_argument("--robots", default="ur5,panda")
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args(argv)
    now = _dt.datetime.now()
    res = {"mode": "quick" if args.quick else "full", "timestamp": now.strftime("%Y-%m-%d %H:%M"),
           "machine": machine_info(), "loadavg_start": list(os.getloadavg()), "robots": {}}
    blocks = 40 if args.quick else 200
    for name, rel, tip in ROBOTS:
        if name not in args.robots.split(","):
            continue
        log(f"{name}: models")
        path = example_robot(rel)
        robot = RobotModel.from_urdf(path, tip_link=tip)
        pr = PinRobot(path, tip, robot.joint_names)
        rng = np.random.default_rng(3)
        Q, V, A, TAU = (np.ascontiguousarray(x) for x in random_states(pr.lo, pr.hi, 50, rng))
        fns, loops = variants(robot, pr, robot.create_data(), Q, V, A, TAU)
        res["robots"][name] = {}
        for op, label in OPS:
            log(f"{name}: {label}")
            res["robots"][name][op] = time_op(fns[op], loops[op], Q.shape[0], blocks)
        log(f"{name}: two threads")
        res.setdefault("threads", {})[name] = thread_scaling(robot, Q, V, A, 10 if args.quick else 40)
    res["loadavg_end"] = list(os.getloadavg())
    table = render(res)
    print(table)
    if not args.no_save:
        log(f"wrote {', '.join(save_results('overhead', table, res, args.quick, now))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
