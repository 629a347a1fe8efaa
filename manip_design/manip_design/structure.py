"""Graph model of a parsed structure: components, merges, anchors, parameters; bodies and joints.

A :class:`Structure` is what :mod:`.language` builds. ``graph()`` gives the body/joint graph (bodies are the
nodes, joints the edges, welds of Merge join bodies); ``compile(values)`` turns it, with values for the free
parameters, into a :class:`~.mechanism.Mechanism` of numeric elements for the kinematics kernels.
"""
from __future__ import annotations

import math

import numpy as np

from .errors import DesignError

_EYE3 = np.eye(3)
JOINT_DOF = {"Revolute": 1, "Prismatic": 1, "Spherical": 3, "Universal": 2}


class Param:
    """A static parameter (m or rad); value None means free (to be given or synthesised)."""

    def __init__(self, name, value, tok):
        self.name, self.value, self.tok = name, value, tok

    def __repr__(self):
        return f"Param({self.name}={self.value})"


class Component:
    """One component instance (Beam, Offset, Revolute, Prismatic, Spherical, Universal)."""

    def __init__(self, kind, name, args, actuated, tok, source):
        self.kind, self.name, self.args, self.actuated, self.tok, self.source = kind, name, args, actuated, tok, source
        self.prev = None
        self.anchor = None  # (("tuple", [Expr x3], tok), {"yaw": Expr, ...}, tok) for the first one of a chain

    def parents(self):
        return [self.prev] if self.prev is not None else []

    @property
    def dof(self):
        return JOINT_DOF.get(self.kind, 0)

    def exprs(self):
        out = []
        for v in self.args.values():
            if isinstance(v, (list, tuple)):
                for w in v:
                    if isinstance(w, (list, tuple)):
                        out.extend(x for x in w if x is not None)
                    elif w is not None:
                        out.append(w)
            elif v is not None:
                out.append(v)
        return out

    def params(self):
        s = set()
        for e in self.exprs():
            s |= e.params()
        return s

    def copy(self, name, mapping, tok):
        def sub(v):
            if isinstance(v, (list, tuple)):
                return type(v)(sub(w) for w in v)
            return v.substitute(mapping) if v is not None else None
        c = Component(self.kind, name, {k: sub(v) for k, v in self.args.items()}, self.actuated, self.tok,
                      self.source)
        return c

    def where(self):
        return self.source, self.tok.line, self.tok.col

    def __repr__(self):
        return f"{self.kind}({self.name})"


class MergeNode:
    """Merge(A, B, ...): the last bodies of A, B, ... welded into one body."""

    kind = "Merge"
    dof = 0
    actuated = False

    def __init__(self, name, parents, tok, source):
        self.name, self._parents, self.tok, self.source = name, list(parents), tok, source
        self.prev = None  # a merge is never re-attached
        self.anchor = None

    def parents(self):
        return list(self._parents)

    def params(self):
        return set()

    def __repr__(self):
        return f"Merge({', '.join(p.name for p in self._parents)})"


def rpy_matrix(roll, pitch, yaw):
    """R = Rz(yaw) Ry(pitch) Rx(roll) (rad)."""
    cr, sr, cp, sp, cy, sy = math.cos(roll), math.sin(roll), math.cos(pitch), math.sin(pitch), math.cos(yaw), \
        math.sin(yaw)
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])


class Structure:
    """A robot structure: components linked by ``prev``, anchors on the ground, merges and an end effector."""

    def __init__(self, source="<string>"):
        self.source = source
        self.params = {}        # name -> Param (declaration order)
        self.chains = {}        # variable name -> (first, last)
        self.anchors = []       # first components of anchored chains
        self.end_effector = None  # (node, tok)
        self.nodes = []         # every node, parents before children

    # ------------------------------------------------------------------------------- validation
    def err(self, reason, tok):
        return DesignError(reason, self.source, tok.line, tok.col)

    def finish(self):
        if self.end_effector is None:
            raise DesignError("no EndEffector(...) statement: say which body carries the tool", self.source)
        # every node reachable from any named chain
        seen, order = set(), []

        def visit(n):
            stack = [(n, False)]
            while stack:
                node, done = stack.pop()
                if done:
                    order.append(node)
                    continue
                if id(node) in seen:
                    continue
                seen.add(id(node))
                stack.append((node, True))
                for p in node.parents():
                    stack.append((p, False))
        for first, last in self.chains.values():
            visit(last)
        visit(self.end_effector[0])
        self.nodes = order
        for n in order:
            if not n.parents() and n.anchor is None:
                owner = next((k for k, (f, _l) in self.chains.items() if f is n), None)
                what = f"chain '{owner}'" if owner else f"component {n.name}"
                raise self.err(f"{what} is not attached to the ground: add Anchor({owner or '...'}, (x, y, z))",
                               n.tok)
        if not self.anchors:
            raise DesignError("no Anchor(...) statement: fix at least one chain to the ground", self.source)
        return self

    # ----------------------------------------------------------------------------------- queries
    @property
    def free_params(self):
        return [p.name for p in self.params.values() if p.value is None]

    @property
    def joints(self):
        return [n for n in self.nodes if n.dof]

    @property
    def merges(self):
        return [n for n in self.nodes if isinstance(n, MergeNode)]

    @property
    def is_serial(self):
        return not self.merges and len(self.anchors) == 1

    def graph(self):
        """Body/joint graph: {'bodies': [names], 'joints': [{name, kind, dof, actuated, parent, child}],
        'welds': [[body, body], ...]}. A body is named after the joint that moves it ('ground' for the base)."""
        body_of = {}
        joints, welds = [], []
        for n in self.nodes:
            parents = n.parents()
            parent_body = body_of[id(parents[0])] if parents else "ground"
            if isinstance(n, MergeNode):
                body_of[id(n)] = parent_body
                for p in parents[1:]:
                    welds.append([parent_body, body_of[id(p)]])
            elif n.dof:
                body_of[id(n)] = n.name
                joints.append({"name": n.name, "kind": n.kind, "dof": n.dof, "actuated": n.actuated,
                               "parent": parent_body, "child": n.name})
            else:
                body_of[id(n)] = parent_body
        # bodies joined by welds are one body: union-find
        root = {}

        def find(b):
            while root.get(b, b) != b:
                b = root[b]
            return b
        for a, b in welds:
            ra, rb = find(a), find(b)
            if ra != rb:
                root[rb] = ra
        bodies = []
        for b in ["ground"] + [j["child"] for j in joints]:
            if find(b) not in bodies:
                bodies.append(find(b))
        for j in joints:
            j["parent"], j["child"] = find(j["parent"]), find(j["child"])
        return {"bodies": bodies, "joints": joints, "welds": welds,
                "end_effector_body": find(body_of[id(self.end_effector[0])])}

    # ------------------------------------------------------------------------------------ compile
    def compile(self, values=None):
        """Numeric mechanism with the given parameter values (name -> float; free ones must be given)."""
        from .mechanism import Mechanism
        values = dict(values or {})
        for k in values:
            if k not in self.params:
                raise DesignError(f"unknown parameter '{k}' (parameters: {', '.join(self.params) or 'none'})",
                                  self.source)
        src = self.source
        elems = []   # (parent_frame, T(4x4), type 0/1/2, axis(3), var or -1)
        variables = []  # dicts name, kind, actuated, lo, hi, component
        frame_of = {}
        welds = []
        masses = []  # (frame, mass kg, com(3) local, length m, direction(3)) for Beams with mass=
        frame_names = {0: "ground"}

        def ev(e):
            return e.evaluate(values, src)

        def unit(ax, tok):
            x, y, z = ev(ax[0]), ev(ax[1]), ev(ax[2])
            nv = math.sqrt(x * x + y * y + z * z)
            if not nv > 1e-12:
                raise self.err("an axis must not be zero", tok)
            return (x / nv, y / nv, z / nv)

        def add(parent, T, typ=0, axis=(0.0, 0.0, 1.0), var=-1, name=None):
            elems.append((parent, T, typ, np.asarray(axis, float), var))
            f = len(elems)
            if name:
                frame_names[f] = name
            return f

        def add_var(name, kind, actuated, rng, node):
            lo, hi = -math.inf, math.inf
            if rng is not None:
                lo, hi = ev(rng[0]), ev(rng[1])
                if not lo < hi:
                    raise self.err(f"empty joint range ({lo:g}, {hi:g})", node.tok)
            variables.append({"name": name, "kind": kind, "actuated": actuated, "lo": lo, "hi": hi,
                              "component": node.name})
            return len(variables) - 1

        rot_of = {}  # id(node) -> rotation (3x3) of the anchor its chain starts from (identity after a merge)

        for n in self.nodes:
            if isinstance(n, MergeNode):
                ps = n.parents()
                T = np.eye(4)
                T[:3, :3] = rot_of[id(ps[0])].T
                f = add(frame_of[id(ps[0])], T, name=n.name)
                for p in ps[1:]:
                    T = np.eye(4)
                    T[:3, :3] = rot_of[id(p)].T
                    g = add(frame_of[id(p)], T, name=f"{n.name}<-{p.name}")
                    welds.append((f, g))
                frame_of[id(n)] = f
                rot_of[id(n)] = _EYE3
                continue
            if n.prev is not None:
                parent = frame_of[id(n.prev)]
                rot_of[id(n)] = rot_of[id(n.prev)]
            else:
                (_k, xyz, _t), kw, _tok = n.anchor
                T = np.eye(4)
                T[:3, 3] = [ev(c) for c in xyz]
                T[:3, :3] = rot_of[id(n)] = rpy_matrix(*(ev(kw[k]) if k in kw else 0.0
                                                         for k in ("roll", "pitch", "yaw")))
                parent = add(0, T, name=f"anchor of {n.name}")
            a = n.args
            if n.kind == "Beam":
                L = ev(a["length"])
                d = np.array(unit(a["along"], n.tok))
                T = np.eye(4)
                T[:3, 3] = L * d
                f = add(parent, T, name=n.name)
                if "mass" in a:
                    m = ev(a["mass"])
                    if not m > 0:
                        raise self.err(f"mass must be positive, got {m:g}", n.tok)
                    masses.append((parent, m, 0.5 * L * d, abs(L), d))
            elif n.kind == "Offset":
                T = np.eye(4)
                T[:3, 3] = [ev(c) for c in a["xyz"]]
                T[:3, :3] = rpy_matrix(*(ev(r) if r is not None else 0.0 for r in a["rpy"]))
                f = add(parent, T, name=n.name)
            elif n.kind in ("Revolute", "Prismatic"):
                typ = 1 if n.kind == "Revolute" else 2
                v = add_var(n.name, "R" if typ == 1 else "P", n.actuated, a.get("range"), n)
                f = add(parent, np.eye(4), typ, unit(a["axis"], n.tok), v, name=n.name)
            elif n.kind == "Spherical":
                f = parent
                for suffix, ax in (("z", (0, 0, 1)), ("y", (0, 1, 0)), ("x", (1, 0, 0))):
                    v = add_var(f"{n.name}.{suffix}", "R", n.actuated, a.get("range"), n)
                    f = add(f, np.eye(4), 1, ax, v, name=f"{n.name}.{suffix}")
            elif n.kind == "Universal":
                f = parent
                for k, ax in enumerate(a["axes"]):
                    v = add_var(f"{n.name}.{k + 1}", "R", n.actuated, a.get("range"), n)
                    f = add(f, np.eye(4), 1, unit(ax, n.tok), v, name=f"{n.name}.{k + 1}")
            else:  # pragma: no cover - the parser makes no other kinds
                raise self.err(f"unknown component {n.kind}", n.tok)
            frame_of[id(n)] = f
        return Mechanism(self, elems, variables, welds, frame_of[id(self.end_effector[0])], masses, frame_names,
                         values)
