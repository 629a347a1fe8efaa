"""SymPy derivation of a mechanism's kinematics, simplified, compiled to numpy and cached on disk.

For a mechanism with joint values q (rad or m, ``mech.variable_names`` order) it derives:

- ``fk(q)``: the end-effector pose (4, 4) in the ground frame along the tree path (no closure solved);
- ``jacobian(q)``: the geometric Jacobian (6, nv), rows [omega; v] of the end effector in the ground frame
  (v: velocity of the frame origin);
- ``closure(q)``: the weld position residuals p_a - p_b (3 * welds,) m, and ``closure_jacobian(q)`` their exact
  derivative (3 * welds, nv);
- ``mass_matrix(q)`` (nv, nv) kg m^2 / kg, for a serial mechanism whose moving bodies all carry a Beam mass:
  M = sum_i m_i Jv_i^T Jv_i + Jw_i^T I_i Jw_i (I_i the rod inertia in the ground frame).

FK and Jacobian of serial arms up to 6 joints are simplified with ``trigsimp`` (the mass matrix is
expanded only: its trigsimp takes tens of seconds); all are compiled with common
subexpression elimination (``lambdify(..., cse=True)``). The generated Python source is cached under
``$MANIP_DESIGN_CACHE`` (default ``~/.cache/manip_design``) in a file named after a SHA-256 of the
mechanism's numeric description and this module's version, so a second call skips SymPy entirely.
"""
from __future__ import annotations

import hashlib
import importlib.util
import inspect
import os
import time
from pathlib import Path

import numpy as np

CODEGEN_VERSION = "1"


def cache_dir():
    return Path(os.environ.get("MANIP_DESIGN_CACHE") or Path.home() / ".cache" / "manip_design")


def model_hash(mech):
    """SHA-256 (hex) of everything the generated code depends on."""
    h = hashlib.sha256(CODEGEN_VERSION.encode())
    for a in (mech.ep, mech.eT, mech.ety, mech.eax, mech.ev, mech.welds):
        h.update(np.ascontiguousarray(a).tobytes())
        h.update(str(a.shape).encode())
    h.update(str(mech.ee).encode())
    h.update(repr([(int(pf), float(m), np.asarray(c).tolist(), float(L), np.asarray(d).tolist())
                   for pf, m, c, L, d in mech.masses]).encode())
    import sympy
    h.update(sympy.__version__.encode())
    return h.hexdigest()


class Generated:
    """Compiled functions (numpy) plus where they came from: ``cached`` (bool), ``path``, ``seconds``."""

    def __init__(self, module, path, cached, seconds, names):
        self.path, self.cached, self.seconds, self.names = path, cached, seconds, names
        self._m = module
        self.has_mass_matrix = hasattr(module, "mass_matrix")

    def fk(self, q):
        return np.array(self._m.fk(*q), dtype=float)

    def jacobian(self, q):
        return np.array(self._m.jacobian(*q), dtype=float)

    def closure(self, q):
        return np.array(self._m.closure(*q), dtype=float).reshape(-1)

    def closure_jacobian(self, q):
        return np.array(self._m.closure_jacobian(*q), dtype=float).reshape(-1, len(self.names))

    def mass_matrix(self, q):
        if not self.has_mass_matrix:
            from .errors import DesignError
            raise DesignError("no mass matrix: it needs a serial structure with a Beam mass on every moving body")
        return np.array(self._m.mass_matrix(*q), dtype=float)


def _derive(mech, simplify):
    import sympy as sp
    nv = mech.nv
    q = sp.symbols(f"q0:{nv}", real=True) if nv else ()
    ne = len(mech.ep)
    needed = set()

    def need(f):
        while f != 0 and f not in needed:
            needed.add(f)
            f = int(mech.ep[f - 1])
    need(mech.ee)
    for a, b in mech.welds:
        need(int(a))
        need(int(b))
    for pf, *_ in mech.masses:
        need(int(pf))

    def num(x):
        x = float(x)
        return sp.Integer(int(x)) if x == int(x) and abs(x) < 1e9 else sp.Float(x, 17)

    frames = {0: sp.eye(4)}
    for e in range(ne):
        f = e + 1
        if f not in needed:
            continue
        T = frames[int(mech.ep[e])] * sp.Matrix(4, 4, [num(x) for x in mech.eT[e].reshape(-1)])
        t = int(mech.ety[e])
        if t:
            a = [num(x) for x in mech.eax[e]]
            x = q[int(mech.ev[e])]
            M = sp.eye(4)
            if t == 1:
                axis = sp.Matrix(a)
                K = sp.Matrix([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
                M[:3, :3] = sp.eye(3) + sp.sin(x) * K + (1 - sp.cos(x)) * K * K
                del axis
            else:
                M[:3, 3] = sp.Matrix(a) * x
            T = T * M
        frames[f] = T
    Tee = frames[mech.ee]
    serial_small = simplify and not len(mech.welds) and nv <= 6
    if serial_small:
        Tee = Tee.applyfunc(sp.trigsimp)
    p = Tee[:3, 3]
    cols = []
    for v in range(nv):
        e = int(mech.ev_elem[v])
        if not mech.anc[e, mech.ee]:
            cols.append(sp.zeros(6, 1))
            continue
        w = frames[e + 1][:3, :3] * sp.Matrix([num(x) for x in mech.eax[e]]) if mech.ety[e] == 1 else sp.zeros(3, 1)
        dp = p.diff(q[v])
        cols.append(sp.Matrix.vstack(w, dp))
    J = sp.Matrix.hstack(*cols) if cols else sp.zeros(6, 0)
    if serial_small:
        J = J.applyfunc(sp.trigsimp)
    res = []
    for a, b in mech.welds:
        res.extend(list(frames[int(a)][:3, 3] - frames[int(b)][:3, 3]))
    R = sp.Matrix(res) if res else sp.zeros(0, 1)
    CJ = R.jacobian(sp.Matrix(q)) if res and nv else sp.zeros(len(res), nv)
    out = {"fk": Tee, "jacobian": J, "closure": R, "closure_jacobian": CJ}
    # mass matrix: serial, every moving body (frame after a joint) carries at least one Beam mass
    if not len(mech.welds) and mech.masses and nv:
        Mm = sp.zeros(nv, nv)
        body_mass = set()
        for pf, m, com, L, d in mech.masses:
            T = frames[int(pf)]
            c = T[:3, :3] * sp.Matrix([num(x) for x in com]) + T[:3, 3]
            Jv = c.jacobian(sp.Matrix(q))
            wcols = []
            for v in range(nv):
                e = int(mech.ev_elem[v])
                if mech.anc[e, int(pf)] and mech.ety[e] == 1:
                    wcols.append(frames[e + 1][:3, :3] * sp.Matrix([num(x) for x in mech.eax[e]]))
                else:
                    wcols.append(sp.zeros(3, 1))
            Jw = sp.Matrix.hstack(*wcols)
            dd = sp.Matrix([num(x) for x in d])
            Ic_local = num(m * L * L / 12.0) * (sp.eye(3) - dd * dd.T) + num(1e-9) * sp.eye(3)
            Rw = T[:3, :3]
            Mm += num(m) * Jv.T * Jv + Jw.T * (Rw * Ic_local * Rw.T) * Jw
            # which body moves this mass: the last joint element above pf
            f = int(pf)
            while f != 0 and mech.ety[f - 1] == 0:
                f = int(mech.ep[f - 1])
            body_mass.add(f)
        bodies = {e + 1 for e in range(ne) if mech.ety[e] != 0}
        if bodies <= body_mass:
            if serial_small:  # expanded only: a trigsimp of M takes tens of seconds for 4 joints
                Mm = Mm.applyfunc(sp.expand)
            out["mass_matrix"] = Mm
    return q, out


def generate(mech, simplify=True, use_cache=True):
    """Generated (compiled) kinematics of the mechanism; from the disk cache when present."""
    t0 = time.perf_counter()
    key = model_hash(mech)
    d = cache_dir()
    path = d / f"mechanism_{key[:32]}.py"
    if use_cache and path.is_file():
        return Generated(_load(path), path, True, time.perf_counter() - t0, mech.variable_names)
    import sympy as sp
    q, exprs = _derive(mech, simplify)
    parts = [f"# generated by manip_design.symbolic from {mech.source}; model hash {key}",
             "import numpy", "from numpy import *", ""]
    for name, ex in exprs.items():
        f = sp.lambdify(list(q), ex, modules="numpy", cse=True)
        src = inspect.getsource(f).replace("def _lambdifygenerated(", f"def {name}(", 1)
        parts.append(src)
    text = "\n".join(parts)
    if use_cache:
        d.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(text)
        os.replace(tmp, path)
        mod = _load(path)
    else:
        mod = _exec(text)
    return Generated(mod, path if use_cache else None, False, time.perf_counter() - t0, mech.variable_names)


def _load(path):
    spec = importlib.util.spec_from_file_location(f"manip_design_gen_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _exec(text):
    import types
    mod = types.ModuleType("manip_design_gen")
    exec(compile(text, "<manip_design generated>", "exec"), mod.__dict__)
    return mod
