"""Parser of the manip robot-structure language (``.mrs`` files) into a :class:`~.structure.Structure`.

The language (one statement per line, ``#`` starts a comment, newlines inside brackets are ignored)::

    param l1 = 0.3                   # a static parameter (m or rad) with a value
    param l2                         # a free static parameter: solved by synthesis
    arm = Revolute(z, in (-pi, pi), actuated) -> Beam(l1) -> Revolute(yaw) -> Beam(l2)
    other = Clone(arm, preserve=(l1)) -> Revolute()
    tip = Merge(arm, other) -> Beam(0.05)
    Anchor(arm, (-0.1, 0, 0))        # Anchor(chain, (x, y, z) m [, yaw=, pitch=, roll= rad])
    Anchor(other, (0.1, 0, 0))
    EndEffector(tip)

Components (each one starts from the frame where the previous one ends):

- ``Beam(length [, along=x|y|z|(x, y, z)] [, mass=kg])``: a rigid link, ``length`` m along the local axis (x);
- ``Offset((x, y, z) [, yaw=, pitch=, roll=])``: a fixed transform (m, rad; rotation Rz(yaw) Ry(pitch) Rx(roll));
- ``Revolute([axis] [, in (lo, hi)] [, actuated] [, name=id])``: rotation (rad) about the local ``axis``
  (x|y|z, roll|pitch|yaw meaning x|y|z, or a vector; default z);
- ``Prismatic([axis] [, in (lo, hi)] [, actuated] [, name=id])``: translation (m) along ``axis`` (default z);
- ``Spherical([in (lo, hi)] [, name=id])``: three intersecting revolutes z, y, x (3 DOF);
- ``Universal([axis1, axis2] [, in (lo, hi)] [, actuated] [, name=id])``: two revolutes (default x then y).

Structures: ``A -> B`` attaches B after A; ``Clone(RS [, preserve=(p, ...)])`` copies a serial chain with new
joints (parameters listed in ``preserve`` stay shared, the others get independent copies named
``<param>_<chain>``; without ``preserve`` every parameter is shared); ``Merge(RS, RS, ...)`` welds the last
bodies of the chains into one body (a closed chain); each chain's last frame is compared after undoing the
rotation of its own Anchor, so legs cloned and anchored with different yaw meet in one platform frame.
Numbers are expressions of literals, parameters, ``pi``, ``+ - * /``, ``sin cos tan sqrt deg``.
Joint names are ``<chain>.<id>`` (default ids r1, p1, s1, u1 ... numbered per kind within the chain).
"""
from __future__ import annotations

import math
import re
from pathlib import Path

from .errors import DesignError
from .structure import Component, MergeNode, Param, Structure

# one token per match, after the blanks and the comment before it; 'bad' is any other character
_TOKEN = re.compile(r"""
    [ \t\r]* (?:\#[^\n]*)?
    (?: (?P<nl>\n) |
        (?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?) |
        (?P<name>[A-Za-z_][A-Za-z0-9_]*) |
        (?P<op>->|[(),=+\-*/]) |
        (?P<end>\Z) |
        (?P<bad>.) )
""", re.VERBOSE)

_FUNCS = {"sin": math.sin, "cos": math.cos, "tan": math.tan, "sqrt": math.sqrt, "deg": math.radians}
COMPONENTS = ("Beam", "Offset", "Revolute", "Prismatic", "Spherical", "Universal")
_JOINT_PREFIX = {"Revolute": "r", "Prismatic": "p", "Spherical": "s", "Universal": "u", "Beam": "b",
                 "Offset": "o"}


class Tok:
    __slots__ = ("kind", "text", "line", "col")

    def __init__(self, kind, text, line, col):
        self.kind, self.text, self.line, self.col = kind, text, line, col

    def __repr__(self):
        return f"{self.kind}:{self.text!r}@{self.line}:{self.col}"


def tokenize(text, source="<string>"):
    toks, depth, line, lstart = [], 0, 1, 0
    append = toks.append
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup
        start = m.start(kind)
        if kind == "nl":
            if depth == 0:
                append(Tok("nl", "\n", line, start - lstart + 1))
            line, lstart = line + 1, start + 1
            continue
        if kind == "end":
            break
        val = m.group(kind)
        if kind == "bad":
            raise DesignError(f"unexpected character {val!r}", source, line, start - lstart + 1)
        if val == "(":
            depth += 1
        elif val == ")":
            depth = max(0, depth - 1)
        append(Tok(kind, val, line, start - lstart + 1))
    end_col = len(text) - lstart + 1
    toks.append(Tok("nl", "\n", line, end_col))
    toks.append(Tok("eof", "", line, end_col))
    # a statement continues over line breaks next to '->' (a line that ends or starts with an arrow)
    out = []
    for k, t in enumerate(toks):
        if t.kind == "nl" and ((out and out[-1].text == "->") or _next_arrow(toks, k + 1)):
            continue
        out.append(t)
    return out


def _next_arrow(toks, k):
    while toks[k].kind == "nl":
        k += 1
    return toks[k].text == "->"


# --------------------------------------------------------------------------------------- expressions
class Expr:
    """A number expression; evaluated with the parameter values when the structure is compiled."""

    def __init__(self, op, args, tok):
        self.op, self.args, self.tok = op, args, tok

    def params(self):
        if self.op == "ref":
            return {self.args[0].name}
        return set().union(*[a.params() for a in self.args if isinstance(a, Expr)]) if self.op != "num" else set()

    def evaluate(self, values, source="<string>"):
        op, a = self.op, self.args
        if op == "num":
            return a[0]
        if op == "ref":
            p = a[0]
            v = values.get(p.name, p.value)
            if v is None:
                raise DesignError(f"free parameter '{p.name}' has no value (give one, e.g. --param "
                                  f"{p.name}=0.3, or solve it with `manip-design synthesize`)",
                                  source, self.tok.line, self.tok.col)
            return float(v)
        if op == "neg":
            return -a[0].evaluate(values, source)
        if op == "call":
            return _FUNCS[a[0]](a[1].evaluate(values, source))
        x, y = a[0].evaluate(values, source), a[1].evaluate(values, source)
        if op == "/" and y == 0:
            raise DesignError("division by zero", source, self.tok.line, self.tok.col)
        return {"+": x + y, "-": x - y, "*": x * y, "/": x / y if y else 0.0}[op]

    def substitute(self, mapping):
        """A copy with parameters renamed through mapping (Param -> Param)."""
        if self.op == "ref":
            return Expr("ref", [mapping.get(self.args[0].name, self.args[0])], self.tok)
        if self.op == "num":
            return self
        return Expr(self.op, [a.substitute(mapping) if isinstance(a, Expr) else a for a in self.args], self.tok)


def _fold(e):
    """e as one number when its operands are numbers (constant folding at parse time); unchanged when it
    holds a parameter or its evaluation fails (the error is then reported at compile time, as before)."""
    if not all(a.op == "num" for a in e.args if isinstance(a, Expr)):
        return e
    try:
        v = e.evaluate({})
    except (DesignError, ValueError, OverflowError, ZeroDivisionError):
        return e
    return Expr("num", [v], e.tok)


# -------------------------------------------------------------------------------------------- values
class Chain:
    """A structure value: the components first .. last (linked through ``prev``), named after a variable."""

    def __init__(self, first, last, tok):
        self.first, self.last, self.tok = first, last, tok


class Parser:
    def __init__(self, text, source="<string>"):
        self.source = str(source)
        self.toks = tokenize(text, self.source)
        self.toks += [self.toks[-1]] * 4  # peek(k) past the end reads eof
        self.i = 0
        self.params = {}
        self.chains = {}
        self.structure = Structure(self.source)
        self._stmt_name = None
        self._counters = {}

    # ---------------------------------------------------------------------------------- helpers
    def err(self, reason, tok=None):
        tok = tok or self.peek()
        return DesignError(reason, self.source, tok.line, tok.col)

    def peek(self, k=0):
        return self.toks[self.i + k]

    def next(self):
        t = self.toks[self.i]
        self.i += 1
        return t

    def accept(self, text):
        t = self.toks[self.i]
        if t.text == text and (t.kind == "op" or t.kind == "name"):
            self.i += 1
            return t
        return None

    def expect(self, text, what=None):
        t = self.toks[self.i]
        if t.text != text:
            got = "end of line" if t.kind == "nl" else "end of file" if t.kind == "eof" else repr(t.text)
            raise self.err(f"expected '{text}'{' ' + what if what else ''}, got {got}", t)
        return self.next()

    # ------------------------------------------------------------------------------- statements
    def parse(self):
        while self.peek().kind != "eof":
            if self.peek().kind == "nl":
                self.next()
                continue
            self.statement()
        return self.structure

    def statement(self):
        t = self.peek()
        if t.kind == "name" and t.text == "param":
            self.next()
            nt = self.next()
            if nt.kind != "name":
                raise self.err("expected a parameter name after 'param'", nt)
            if nt.text in self.params or nt.text in self.chains:
                raise self.err(f"'{nt.text}' is already defined", nt)
            value = None
            if self.accept("="):
                value = self.expr().evaluate({}, self.source)
            self.params[nt.text] = self.structure.params.setdefault(nt.text, Param(nt.text, value, nt))
            self.end_of_statement()
            return
        if t.kind == "name" and self.peek(1).text == "=":
            if t.text in COMPONENTS or t.text in ("Clone", "Merge", "Anchor", "EndEffector", "param", "pi"):
                raise self.err(f"'{t.text}' is a reserved word and cannot name a structure", t)
            if t.text in self.params or t.text in self.chains:
                raise self.err(f"'{t.text}' is already defined", t)
            self.next()
            self.next()
            self._stmt_name, self._counters = t.text, {}
            chain = self.structure_expr()
            self._stmt_name = None
            self.chains[t.text] = chain
            self.structure.chains[t.text] = (chain.first, chain.last)
            self.end_of_statement()
            return
        if t.kind == "name" and t.text in ("Anchor", "EndEffector"):
            self.next()
            self.expect("(")
            chain = self.structure_expr()
            if t.text == "Anchor":
                self.expect(",", "then the anchor position (x, y, z)")
                xyz = self.tuple3()
                kw = {}
                while self.accept(","):
                    k = self.next()
                    if k.text not in ("yaw", "pitch", "roll"):
                        raise self.err(f"Anchor takes yaw=, pitch=, roll=, not {k.text!r}", k)
                    self.expect("=")
                    kw[k.text] = self.expr()
                self.expect(")")
                first = chain.first
                if first.prev is not None or first.anchor is not None:
                    raise self.err("this chain is already attached (its first component has a parent or an "
                                   "anchor)", t)
                first.anchor = (xyz, kw, t)
                self.structure.anchors.append(first)
            else:
                self.expect(")")
                if self.structure.end_effector is not None:
                    raise self.err("EndEffector is given twice", t)
                self.structure.end_effector = (chain.last, t)
            self.end_of_statement()
            return
        raise self.err(f"expected 'param', 'NAME = ...', Anchor(...) or EndEffector(...), got {t.text!r}", t)

    def end_of_statement(self):
        t = self.peek()
        if t.kind not in ("nl", "eof"):
            raise self.err(f"unexpected {t.text!r} after the end of the statement", t)

    # ------------------------------------------------------------------------- structure values
    def structure_expr(self):
        left = self.structure_term()
        while self.peek().text == "->":
            arrow = self.next()
            right = self.structure_term()
            if right.first.prev is not None or right.first.anchor is not None:
                raise self.err("the right side of '->' is already attached to something", arrow)
            if right.first is left.last or _reaches(left.last, right.first):
                raise self.err("'->' would close a loop; use Merge(...) for closed chains", arrow)
            right.first.prev = left.last
            left = Chain(left.first, right.last, left.tok)
        return left

    def structure_term(self):
        t = self.peek()
        if t.kind != "name":
            raise self.err(f"expected a component, Clone, Merge or a structure name, got {t.text!r}", t)
        if t.text in COMPONENTS:
            c = self.component()
            return Chain(c, c, t)
        if t.text == "Clone":
            return self.clone()
        if t.text == "Merge":
            return self.merge()
        if t.text in self.chains:
            self.next()
            return self.chains[t.text]
        if t.text in self.params:
            raise self.err(f"'{t.text}' is a parameter, not a structure", t)
        raise self.err(f"unknown component or structure '{t.text}' (components: {', '.join(COMPONENTS)}, "
                       f"Clone, Merge)", t)

    def component(self):
        t = self.next()
        kind = t.text
        self.expect("(", f"after {kind}")
        pos, kw = [], {}
        flags = set()
        rng = None
        while self.peek().text != ")":
            a = self.peek()
            if a.kind == "name" and a.text == "in":
                self.next()
                self.expect("(", "after 'in'")
                lo = self.expr()
                self.expect(",")
                hi = self.expr()
                self.expect(")")
                rng = (lo, hi, a)
            elif a.kind == "name" and a.text == "actuated":
                self.next()
                flags.add("actuated")
            elif a.kind == "name" and self.peek(1).text == "=":
                self.next()
                self.next()
                if a.text == "name":
                    n = self.next()
                    if n.kind != "name":
                        raise self.err("name= takes an identifier", n)
                    kw["name"] = n.text
                elif a.text == "along" or a.text.startswith("axis"):
                    kw[a.text] = self.axis_value()
                else:
                    kw[a.text] = self.value()
            else:
                pos.append(self.value())
            if not self.accept(","):
                break
        self.expect(")", f"to close {kind}(")
        return self.make_component(kind, pos, kw, flags, rng, t)

    def axis_value(self):
        t = self.peek()
        if t.kind == "name" and t.text in _AXES:
            self.next()
            return ("axis", _AXES[t.text], t)
        if t.text == "(":
            return self.tuple3()
        raise self.err(f"expected an axis (x, y, z, roll, pitch, yaw or (x, y, z)), got {t.text!r}", t)

    def value(self):
        t = self.peek()
        if t.kind == "name" and t.text in _AXES and t.text not in self.params:
            self.next()
            return ("axis", _AXES[t.text], t)
        if t.text == "(":
            # a tuple (x, y, z) or a parenthesised expression
            save = self.i
            self.next()
            first = self.expr()
            if self.accept(","):
                items = [first, self.expr()]
                while self.accept(","):
                    items.append(self.expr())
                self.expect(")")
                return ("tuple", items, t)
            self.i = save
        return ("expr", self.expr(), t)

    def tuple3(self):
        t = self.expect("(", "to start (x, y, z)")
        items = [self.expr()]
        while self.accept(","):
            items.append(self.expr())
        self.expect(")")
        if len(items) != 3:
            raise self.err(f"expected 3 numbers (x, y, z), got {len(items)}", t)
        return ("tuple", items, t)

    def make_component(self, kind, pos, kw, flags, rng, tok):
        allowed = {"Beam": {"along", "mass"}, "Offset": {"yaw", "pitch", "roll"},
                   "Revolute": {"axis", "name"}, "Prismatic": {"axis", "name"}, "Spherical": {"name"},
                   "Universal": {"axis1", "axis2", "name"}}[kind]
        for k in kw:
            if k not in allowed:
                raise self.err(f"{kind} does not take {k}= (it takes {', '.join(sorted(allowed)) or 'nothing'})",
                               tok)
        if "actuated" in flags and kind in ("Beam", "Offset"):
            raise self.err(f"{kind} has no joint to actuate", tok)
        if rng is not None and kind in ("Beam", "Offset"):
            raise self.err(f"{kind} has no joint range", tok)
        prefix = _JOINT_PREFIX[kind]
        self._counters[prefix] = self._counters.get(prefix, 0) + 1
        local = kw.pop("name", None) or f"{prefix}{self._counters[prefix]}"
        cname = f"{self._stmt_name}.{local}" if self._stmt_name else local
        args = {}
        if kind == "Beam":
            if len(pos) != 1 or pos[0][0] != "expr":
                raise self.err("Beam takes one length: Beam(length [, along=x] [, mass=kg])", tok)
            args["length"] = pos[0][1]
            args["along"] = self._axis(kw.get("along", ("axis", (1.0, 0.0, 0.0), tok)))
            if "mass" in kw:
                args["mass"] = self._expr(kw["mass"], "mass")
        elif kind == "Offset":
            if len(pos) != 1 or pos[0][0] != "tuple" or len(pos[0][1]) != 3:
                raise self.err("Offset takes a position (x, y, z) [, yaw=, pitch=, roll=]", tok)
            args["xyz"] = pos[0][1]
            args["rpy"] = [self._expr(kw[k], k) if k in kw else None for k in ("roll", "pitch", "yaw")]
        elif kind in ("Revolute", "Prismatic"):
            if len(pos) > 1:
                raise self.err(f"{kind} takes at most one axis", tok)
            axis = kw.get("axis", pos[0] if pos else ("axis", (0.0, 0.0, 1.0), tok))
            args["axis"] = self._axis(axis)
        elif kind == "Universal":
            if len(pos) not in (0, 2):
                raise self.err("Universal takes two axes or none: Universal(x, y)", tok)
            a1 = kw.get("axis1", pos[0] if pos else ("axis", (1.0, 0.0, 0.0), tok))
            a2 = kw.get("axis2", pos[1] if pos else ("axis", (0.0, 1.0, 0.0), tok))
            args["axes"] = [self._axis(a1), self._axis(a2)]
        elif kind == "Spherical":
            if pos:
                raise self.err("Spherical takes no axis (it is z, y, x)", tok)
        if rng is not None:
            args["range"] = (rng[0], rng[1])
        return Component(kind, cname, args, "actuated" in flags, tok, self.source)

    def _axis(self, v):
        kind, val, t = v
        if kind == "axis":
            return [Expr("num", [c], t) for c in val]
        if kind == "tuple" and len(val) == 3:
            return val
        raise self.err("expected an axis (x, y, z, roll, pitch, yaw or (x, y, z))", t)

    def _expr(self, v, what):
        if v[0] != "expr":
            raise self.err(f"{what} must be a number", v[2])
        return v[1]

    def clone(self):
        t = self.next()
        self.expect("(")
        src = self.structure_expr()
        preserve = None
        while self.accept(","):
            k = self.next()
            if k.text != "preserve":
                raise self.err(f"Clone takes preserve=(...), not {k.text!r}", k)
            self.expect("=")
            preserve = set()
            par = self.accept("(")
            while True:
                n = self.next()
                if n.kind != "name" or n.text not in self.params:
                    raise self.err(f"preserve lists parameters; '{n.text}' is not one", n)
                preserve.add(n.text)
                if not par or not self.accept(","):
                    break
            if par:
                self.expect(")")
        self.expect(")")
        comps = []
        c = src.last
        while True:
            if isinstance(c, MergeNode):
                raise self.err("Clone copies serial chains only (this one contains a Merge)", t)
            comps.append(c)
            if c is src.first:
                break
            c = c.prev
            if c is None:
                raise self.err("Clone: broken chain", t)
        comps.reverse()
        mapping = {}
        if preserve is not None:
            used = set()
            for c in comps:
                used |= c.params()
            for name in sorted(used - preserve):
                p = self.params[name]
                new = f"{name}_{self._stmt_name or 'clone'}"
                if new not in self.structure.params:
                    self.structure.params[new] = Param(new, p.value, t)
                mapping[name] = self.structure.params[new]
        prev = None
        first = None
        for c in comps:
            prefix = _JOINT_PREFIX[c.kind]
            local = c.name.split(".", 1)[-1]
            if self._stmt_name:
                self._counters[prefix] = self._counters.get(prefix, 0) + 1
            n = c.copy(f"{self._stmt_name}.{local}" if self._stmt_name else local + "'", mapping, t)
            n.prev = prev
            prev = n
            first = first or n
        return Chain(first, prev, t)

    def merge(self):
        t = self.next()
        self.expect("(")
        parts = [self.structure_expr()]
        while self.accept(","):
            parts.append(self.structure_expr())
        self.expect(")")
        if len(parts) < 2:
            raise self.err("Merge needs at least two structures", t)
        lasts = [p.last for p in parts]
        if len(set(map(id, lasts))) != len(lasts):
            raise self.err("Merge of a structure with itself", t)
        m = MergeNode(f"{self._stmt_name or 'merge'}.m", [p.last for p in parts], t, self.source)
        return Chain(m, m, t)

    # ----------------------------------------------------------------------------- number exprs
    def expr(self):
        left = self.term()
        while self.peek().text in ("+", "-") and self.peek().kind == "op":
            op = self.next()
            left = _fold(Expr(op.text, [left, self.term()], op))
        return left

    def term(self):
        left = self.unary()
        while self.peek().text in ("*", "/"):
            op = self.next()
            left = _fold(Expr(op.text, [left, self.unary()], op))
        return left

    def unary(self):
        if self.peek().text == "-":
            t = self.next()
            return _fold(Expr("neg", [self.unary()], t))
        if self.peek().text == "+":
            self.next()
            return self.unary()
        return self.atom()

    def atom(self):
        t = self.next()
        if t.kind == "num":
            return Expr("num", [float(t.text)], t)
        if t.kind == "name":
            if t.text == "pi":
                return Expr("num", [math.pi], t)
            if t.text in _FUNCS:
                self.expect("(", f"after {t.text}")
                e = self.expr()
                self.expect(")")
                return _fold(Expr("call", [t.text, e], t))
            if t.text in self.params:
                return Expr("ref", [self.params[t.text]], t)
            raise self.err(f"unknown name '{t.text}' in a number (declare it with 'param {t.text}')", t)
        if t.text == "(":
            e = self.expr()
            self.expect(")")
            return e
        got = "end of line" if t.kind == "nl" else repr(t.text)
        raise self.err(f"expected a number, got {got}", t)


_AXES = {"x": (1.0, 0.0, 0.0), "y": (0.0, 1.0, 0.0), "z": (0.0, 0.0, 1.0),
         "roll": (1.0, 0.0, 0.0), "pitch": (0.0, 1.0, 0.0), "yaw": (0.0, 0.0, 1.0)}


def _reaches(node, target):
    """True when target is an ancestor of node (following prev / merge parents)."""
    stack, seen = [node], set()
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        if n is target:
            return True
        stack.extend(n.parents())
    return False


def parse_text(text, source="<string>"):
    """Structure described by the text (source names it in error messages)."""
    s = Parser(text, source).parse()
    s.finish()
    return s


def parse_file(path):
    """Structure described by an .mrs file; DesignError names file:line:col on a bad file."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise DesignError(f"cannot read the structure file: {e.strerror}", str(path)) from None
    return parse_text(text, str(path))
