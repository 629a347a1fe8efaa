"""The subset of the ROS 2 XML launch format (launch_xml + launch_ros) that manip's launch files use.

``load_launch_file(path, [(name, value), ...])`` parses and evaluates a launch file the way
``ros2 launch`` would and returns a :class:`LaunchPlan`: the resolved node descriptions (command
line included), in document order. Anything outside the subset is an error naming file, line and
element, raised before anything is evaluated (ros2 launch also rejects unknown entities at parse time).

Supported:

* ``<launch>`` (attribute ``version``) as root.
* ``<arg name default? description?>`` with ``<choice value/>`` children; a value given on the
  command line (``name:=value``) or by an ``<include>`` wins over the default; no value and no
  default is an error (all such arguments of a file are listed at once).
* ``<let name value>``.
* ``<node pkg exec name? namespace? output? respawn? respawn_delay? on_exit?>`` with ``<param name value/>``,
  ``<param from="file.yaml"/>`` and ``<remap from to/>`` children. ``on_exit="shutdown"`` (launch's
  ExecuteProcess attribute, literal, the only value it accepts): the node's exit, with any status, shuts the
  whole launch down; a node with respawn and ``on_exit`` is not respawned (ros2 launch's Shutdown wins too).
* ``<group scoped?>`` (scoped by default: launch configurations set inside, ``<push_ros_namespace>``
  included, do not leak out) and ``<push_ros_namespace namespace/>`` (also ``push-ros-namespace``).
* ``<include file>`` with ``<arg name value/>`` children. As in ros2 launch, an include is NOT a
  scope of its own: the arguments it passes and the configurations the included file sets stay set in
  the enclosing scope afterwards. Wrap it in ``<group>`` to scope it (the project's files do).
* ``if``/``unless`` on arg, let, node, group, push_ros_namespace and include: ``true``/``false``/
  ``1``/``0`` (any case) after substitution.
* Substitutions, nestable and usable inside any part of a substitution-bearing attribute:
  ``$(var name)``, ``$(find-pkg-share pkg)``, ``$(env NAME)``, ``$(env NAME default)``,
  ``$(dirname)``; arguments may be quoted with ``'`` or ``"``.

Node command lines are built as launch_ros does: ``<exe> --ros-args [-r __node:=NAME]
[-r __ns:=/NS] (-p name:=value | --params-file FILE)... (-r from:=to)...``. Parameter values are typed
by YAML-parsing the substituted string (launch_ros' rule: ``1.0`` double, ``5`` integer, ``true``
bool, ``[1, 2]`` integer array, ``''`` empty string; a mapping or ``null`` is an error). One
difference, with the same effect on the node: launch_ros writes ``<param name value/>`` into a
temporary ``/**`` parameters file, manip-launch passes it as ``-p name:=value``.
"""
from __future__ import annotations

import os
import re
import xml.parsers.expat
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple, Union

import yaml

from .packages import PackageNotFoundError, PackageResolver

__all__ = [
    'ArgDeclaration', 'LaunchFileError', 'LaunchPlan', 'NodeDescription', 'declared_arguments',
    'format_param_value', 'load_launch_file', 'parse_launch_arguments', 'parse_substitutions',
    'type_param_value',
]


class LaunchFileError(Exception):
    """An error in a launch file (or in what it asks for): ``FILE:LINE: <element>: message``."""

    def __init__(self, message: str, file: Optional[str] = None, line: Optional[int] = None,
                 element: Optional[str] = None):
        self.message = message
        self.file = file
        self.line = line
        self.element = element
        where = ''
        if file is not None:
            where = f'{file}:{line}: ' if line is not None else f'{file}: '
        if element is not None:
            where += f'<{element}>: '
        super().__init__(where + message)


# ---- a tiny DOM with line numbers (expat) ------------------------------------------------------
@dataclass
class _Element:
    tag: str
    attrs: Dict[str, str]
    line: int
    file: str
    children: List['_Element'] = field(default_factory=list)
    parsed: Dict[str, list] = field(default_factory=dict)  # attribute -> parsed substitutions

    def error(self, message: str) -> LaunchFileError:
        return LaunchFileError(message, self.file, self.line, self.tag)


def _parse_xml(path: str) -> _Element:
    try:
        with open(path, 'rb') as f:
            data = f.read()
    except OSError as exc:
        raise LaunchFileError(f'cannot read the launch file: {exc.strerror or exc}', path) from None
    parser = xml.parsers.expat.ParserCreate()
    stack: List[_Element] = []
    root: List[_Element] = []

    def start(tag, attrs):
        el = _Element(tag, dict(attrs), parser.CurrentLineNumber, path)
        (stack[-1].children if stack else root).append(el)
        stack.append(el)

    def end(tag):
        stack.pop()

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    try:
        parser.Parse(data, True)
    except xml.parsers.expat.ExpatError as exc:
        raise LaunchFileError(f'not well-formed XML: {xml.parsers.expat.ErrorString(exc.code)} '
                              f'(column {exc.offset + 1})', path, exc.lineno) from None
    return root[0]


# ---- substitutions -------------------------------------------------------------------------------
@dataclass
class _Sub:
    name: str
    args: List[list]
    text: str


_IDENT = re.compile(r'[A-Za-z0-9_-]+')
_ESCAPABLE = set('$()\\\'" ')
_SPACE = ' \t\r\n'
# name -> (min args, max args)
SUBSTITUTIONS = {'var': (1, 1), 'find-pkg-share': (1, 1), 'env': (1, 2), 'dirname': (0, 0)}


class _SubstitutionSyntaxError(ValueError):
    pass


def _merge(parts: list) -> list:
    out: list = []
    for p in parts:
        if isinstance(p, str) and out and isinstance(out[-1], str):
            out[-1] += p
        elif not (isinstance(p, str) and p == ''):
            out.append(p)
    return out


def _parse_seq(s: str, i: int, stop) -> Tuple[list, int]:
    parts: list = []
    buf: List[str] = []
    while i < len(s):
        c = s[i]
        if c == '\\' and i + 1 < len(s) and s[i + 1] in _ESCAPABLE:
            buf.append(s[i + 1])
            i += 2
            continue
        if s.startswith('$(', i):
            parts.append(''.join(buf))
            buf = []
            sub, i = _parse_sub(s, i + 2)
            parts.append(sub)
            continue
        if stop(c):
            break
        buf.append(c)
        i += 1
    parts.append(''.join(buf))
    return _merge(parts), i


def _parse_sub(s: str, i: int) -> Tuple[_Sub, int]:
    start = i - 2
    m = _IDENT.match(s, i)
    if not m:
        raise _SubstitutionSyntaxError(f"expected a substitution name after '$(' in {s[start:]!r}")
    name = m.group()
    i = m.end()
    args: List[list] = []
    while True:
        while i < len(s) and s[i] in _SPACE:
            i += 1
        if i >= len(s):
            raise _SubstitutionSyntaxError(f"unterminated substitution {s[start:]!r} (missing ')')")
        if s[i] == ')':
            i += 1
            break
        arg, i = _parse_arg(s, i)
        args.append(arg)
    return _Sub(name, args, s[start:i]), i


def _parse_arg(s: str, i: int) -> Tuple[list, int]:
    parts: list = []
    while i < len(s) and s[i] not in _SPACE + ')':
        if s[i] in '\'"':
            quote = s[i]
            seg, i = _parse_seq(s, i + 1, lambda c, q=quote: c == q)
            if i >= len(s):
                raise _SubstitutionSyntaxError(f'unterminated quoted string in {s!r}')
            i += 1
            parts.extend(seg)
        else:
            seg, i = _parse_seq(s, i, lambda c: c in _SPACE + ')\'"')
            parts.extend(seg)
    return _merge(parts), i


def parse_substitutions(text: str) -> list:
    """Parse an attribute value into literal strings and substitution calls (syntax only)."""
    parts, i = _parse_seq(text, 0, lambda c: False)
    assert i == len(text)
    return parts


def _check_template(parts: list) -> None:
    for p in parts:
        if isinstance(p, _Sub):
            if p.name not in SUBSTITUTIONS:
                raise _SubstitutionSyntaxError(
                    f"unsupported substitution '{p.text}' (manip-launch supports: "
                    + ', '.join(f'$({n} ...)' if SUBSTITUTIONS[n][1] else f'$({n})'
                                for n in SUBSTITUTIONS) + ')')
            lo, hi = SUBSTITUTIONS[p.name]
            if not lo <= len(p.args) <= hi:
                want = str(lo) if lo == hi else f'{lo} or {hi}'
                raise _SubstitutionSyntaxError(
                    f"'{p.text}': $({p.name}) takes {want} argument(s), got {len(p.args)}")
            for a in p.args:
                _check_template(a)


# ---- element grammar -------------------------------------------------------------------------
_ACTIONS = ('arg', 'let', 'node', 'group', 'push_ros_namespace', 'push-ros-namespace', 'include')
_COND = ('if', 'unless')


@dataclass(frozen=True)
class _Spec:
    attrs: Tuple[str, ...]                 # every allowed attribute
    subst: Tuple[str, ...] = ()            # those that take substitutions
    required: Tuple[str, ...] = ()
    children: Tuple[str, ...] = ()


_SPECS = {
    'launch': _Spec(('version',), children=_ACTIONS),
    'arg': _Spec(('name', 'default', 'description') + _COND, ('default',) + _COND, ('name',),
                 ('choice',)),
    'choice': _Spec(('value',), required=('value',)),
    'let': _Spec(('name', 'value') + _COND, ('name', 'value') + _COND, ('name', 'value')),
    'node': _Spec(('pkg', 'exec', 'name', 'namespace', 'output', 'respawn', 'respawn_delay', 'on_exit')
                  + _COND,
                  ('pkg', 'exec', 'name', 'namespace', 'output', 'respawn') + _COND,
                  ('pkg', 'exec'), ('param', 'remap')),
    'param': _Spec(('name', 'value', 'from'), ('name', 'value', 'from')),
    'remap': _Spec(('from', 'to'), ('from', 'to'), ('from', 'to')),
    'group': _Spec(('scoped',) + _COND, _COND, children=_ACTIONS),
    'push_ros_namespace': _Spec(('namespace',) + _COND, ('namespace',) + _COND, ('namespace',)),
    'include': _Spec(('file',) + _COND, ('file',) + _COND, ('file',), ('arg',)),
    'include/arg': _Spec(('name', 'value'), ('name', 'value'), ('name', 'value')),
}
_SPECS['push-ros-namespace'] = _SPECS['push_ros_namespace']


def _check_element(el: _Element, spec_key: str) -> None:
    spec = _SPECS[spec_key]
    for attr in el.attrs:
        if attr not in spec.attrs:
            raise el.error(f"unsupported attribute '{attr}' (manip-launch supports on <{el.tag}>: "
                           f"{', '.join(spec.attrs) or 'none'})")
    for attr in spec.required:
        if attr not in el.attrs:
            raise el.error(f"missing required attribute '{attr}'")
    if el.tag == 'param':
        if ('from' in el.attrs) == ('name' in el.attrs):
            raise el.error("needs either 'name' (with 'value') or 'from', not both")
        if 'name' in el.attrs and 'value' not in el.attrs:
            raise el.error("'value' is required with 'name' (nested <param> are not supported)")
        if 'from' in el.attrs and 'value' in el.attrs:
            raise el.error("'value' cannot be used with 'from'")
    if 'if' in el.attrs and 'unless' in el.attrs:
        raise el.error("'if' and 'unless' cannot be used together")
    for attr in spec.subst:
        if attr in el.attrs:
            try:
                parts = parse_substitutions(el.attrs[attr])
                _check_template(parts)
            except _SubstitutionSyntaxError as exc:
                raise el.error(f"attribute '{attr}': {exc}") from None
            el.parsed[attr] = parts
    for child in el.children:
        if child.tag not in spec.children:
            allowed = ', '.join(f'<{c}>' for c in spec.children) or 'none'
            known = child.tag in _SPECS or child.tag in _ACTIONS
            what = 'not allowed here' if known else 'unsupported element'
            raise child.error(f'{what} (manip-launch supports inside <{el.tag}>: {allowed})')
        _check_element(child, f'{el.tag}/{child.tag}' if f'{el.tag}/{child.tag}' in _SPECS
                       else child.tag)


# ---- results ------------------------------------------------------------------------------
@dataclass
class ArgDeclaration:
    name: str
    default: Optional[str]  # unevaluated text
    description: str
    choices: Optional[List[str]]
    file: str
    line: int
    conditional: bool


@dataclass
class NodeDescription:
    """One ``<node>``, fully resolved."""
    package: str
    executable: str
    name: Optional[str]
    namespace: Optional[str]
    parameters: List[Tuple[str, ...]]   # ('value', name, typed value) or ('file', path)
    remappings: List[Tuple[str, str]]
    output: str
    respawn: bool
    respawn_delay: float
    file: str
    line: int
    label: str = ''
    on_exit: Optional[str] = None            # 'shutdown': its exit (any status) shuts the launch down
    command: Optional[List[str]] = None      # how to start the executable (before --ros-args)
    command_error: Optional[str] = None      # why it could not be resolved

    @property
    def ros_arguments(self) -> List[str]:
        args = ['--ros-args']
        if self.name is not None:
            args += ['-r', f'__node:={self.name}']
        if self.namespace is not None:
            args += ['-r', f'__ns:={self.namespace}']
        for p in self.parameters:
            if p[0] == 'file':
                args += ['--params-file', p[1]]
            else:
                args += ['-p', f'{p[1]}:={format_param_value(p[2])}']
        for src, dst in self.remappings:
            args += ['-r', f'{src}:={dst}']
        return args

    @property
    def cmd(self) -> List[str]:
        if self.command is None:
            raise LaunchFileError(self.command_error or 'executable not resolved', self.file,
                                  self.line, 'node')
        return list(self.command) + self.ros_arguments


@dataclass
class LaunchPlan:
    file: str
    nodes: List[NodeDescription]
    configurations: Dict[str, str]           # launch configurations of the root scope at the end
    declared: List[ArgDeclaration]           # every <arg> of every file loaded
    warnings: List[str]


# ---- parameter values (launch_ros typing) -------------------------------------------------------
_SCALARS = (bool, int, float, str)


def type_param_value(text: str, name: str = '?'):
    """Type a parameter value string the way launch_ros does (YAML, uniform lists)."""
    if text == '':
        return ''
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        raise ValueError(f"parameter '{name}': value {text!r} is not valid YAML") from None
    if type(value) in _SCALARS:
        return value
    if isinstance(value, list):
        if not value or type(value[0]) not in _SCALARS or \
                any(type(v) is not type(value[0]) for v in value):
            raise ValueError(f"parameter '{name}': {text!r} must be a non-empty list of items of one "
                             f'type (bool, int, float or str)')
        return list(value)
    raise ValueError(f"parameter '{name}': value {text!r} is a YAML {type(value).__name__}; allowed: "
                     'bool, int, float, str or a uniform list of them (quote it to pass a string)')


def _format_scalar(v) -> str:
    if isinstance(v, bool):
        return 'true' if v else 'false'
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if v != v:
            return '.nan'
        if v in (float('inf'), float('-inf')):
            return '.inf' if v > 0 else '-.inf'
        mantissa, e, exponent = repr(v).partition('e')
        if '.' not in mantissa:  # YAML 1.1 (PyYAML) needs the dot to read a float back
            mantissa += '.0'
        return mantissa + e + exponent
    s = str(v)
    try:
        plain_ok = ('\n' not in s and s == s.strip() and s != '' and
                    yaml.safe_load(s) == s and not any(c in s for c in ',[]{}#&*!|>\'"%@`'))
    except yaml.YAMLError:
        plain_ok = False
    if plain_ok:
        return s
    return "'" + s.replace("'", "''") + "'" if '\n' not in s else \
        '"' + s.replace('\\', '\\\\').replace('"', '\\"').replace('\n', '\\n') + '"'


def format_param_value(value) -> str:
    """The YAML text of a typed value for ``-p name:=value`` (rcl parses it back to the same type)."""
    if isinstance(value, (list, tuple)):
        return '[' + ', '.join(_format_scalar(v) for v in value) + ']'
    return _format_scalar(value)


# ---- namespaces and names (launch_ros rules) ------------------------------------------------------
_NAME_RE = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*$')
_NS_TOKEN_RE = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*$')


def _prefix_namespace(base: Optional[str], ns: Optional[str]) -> Optional[str]:
    if base is None and ns is None:
        return None
    if ns is None:
        combined = base
    elif not base or ns.startswith('/'):
        combined = ns
    else:
        combined = ('' if base == '/' else base) + '/' + ns
    if combined != '/':
        combined = combined.rstrip('/')
    return combined


def _absolute(ns: Optional[str]) -> Optional[str]:
    if ns is None:
        return None
    return ns if ns.startswith('/') else '/' + ns


def _valid_namespace(ns: str) -> bool:
    if ns == '/':
        return True
    if not ns.startswith('/') or ns.endswith('/'):
        return False
    return all(_NS_TOKEN_RE.match(t) for t in ns[1:].split('/'))


# ---- evaluation ---------------------------------------------------------------------------
_LaunchArgs = Union[Dict[str, str], Iterable[Tuple[str, str]]]


class _Context:
    def __init__(self, resolver: PackageResolver, resolve_executables: bool):
        self.configs: Dict[str, str] = {}
        self.file_stack: List[str] = []
        self.resolver = resolver
        self.resolve_executables = resolve_executables
        self.nodes: List[NodeDescription] = []
        self.declared: List[ArgDeclaration] = []
        self.warnings: List[str] = []
        self.cache: Dict[str, _Element] = {}


def _eval_parts(parts: list, ctx: _Context) -> str:
    out = []
    for p in parts:
        if isinstance(p, str):
            out.append(p)
            continue
        args = [_eval_parts(a, ctx) for a in p.args]
        if p.name == 'var':
            if args[0] not in ctx.configs:
                raise ValueError(f"launch configuration '{args[0]}' does not exist "
                                 f'(no <arg>/<let> named so has been set before {p.text})')
            out.append(ctx.configs[args[0]])
        elif p.name == 'env':
            value = os.environ.get(args[0])
            if value is None:
                if len(args) < 2:
                    raise ValueError(f"environment variable '{args[0]}' does not exist "
                                     f"(use $(env {args[0]} DEFAULT) for a default)")
                value = args[1]
            out.append(value)
        elif p.name == 'dirname':
            out.append(os.path.dirname(ctx.file_stack[-1]))
        elif p.name == 'find-pkg-share':
            try:
                out.append(ctx.resolver.share_dir(args[0]))
            except PackageNotFoundError as exc:
                raise ValueError(str(exc)) from None
        else:  # pragma: no cover (rejected by _check_template)
            raise ValueError(f'unsupported substitution {p.text}')
    return ''.join(out)


def _attr(el: _Element, name: str, ctx: _Context, default: Optional[str] = None) -> Optional[str]:
    if name not in el.attrs:
        return default
    if name not in el.parsed:
        return el.attrs[name]
    try:
        return _eval_parts(el.parsed[name], ctx)
    except ValueError as exc:
        raise el.error(f"attribute '{name}': {exc}") from None


def _bool_text(text: str) -> Optional[bool]:
    t = text.lower()
    if t in ('true', '1'):
        return True
    if t in ('false', '0'):
        return False
    return None


def _condition(el: _Element, ctx: _Context) -> bool:
    for attr, want in (('if', True), ('unless', False)):
        if attr in el.attrs:
            value = _attr(el, attr, ctx)
            b = _bool_text(value)
            if b is None:
                raise el.error(f"attribute '{attr}': condition evaluated to {value!r}; expected "
                               "true, false, 1 or 0")
            return b == want
    return True


def _literal_bool(el: _Element, attr: str, default: bool) -> bool:
    """A typed boolean attribute (no substitutions, like launch_xml's data_type=bool)."""
    if attr not in el.attrs:
        return default
    value = el.attrs[attr].lower()
    if value not in ('true', 'false'):
        raise el.error(f"attribute '{attr}': expected true or false, got {el.attrs[attr]!r}")
    return value == 'true'


def _load(path: str, ctx: _Context) -> _Element:
    path = os.path.abspath(path)
    if path not in ctx.cache:
        if path.endswith('.py') or path.endswith(('.yaml', '.yml')):
            raise LaunchFileError('only XML launch files are supported by manip-launch', path)
        root = _parse_xml(path)
        if root.tag != 'launch':
            raise root.error('the root element of a launch file must be <launch>')
        _check_element(root, 'launch')
        ctx.cache[path] = root
        _collect_declarations(root, ctx, conditional=False)
    return ctx.cache[path]


def _collect_declarations(el: _Element, ctx: _Context, conditional: bool) -> None:
    for child in el.children:
        cond = conditional or 'if' in child.attrs or 'unless' in child.attrs
        if child.tag == 'arg':
            choices = [c.attrs['value'] for c in child.children] or None
            ctx.declared.append(ArgDeclaration(
                child.attrs['name'], child.attrs.get('default'), child.attrs.get('description', ''),
                choices, child.file, child.line, cond))
        elif child.tag == 'group':
            _collect_declarations(child, ctx, cond)


def _required_args(root: _Element) -> List[Tuple[str, str]]:
    """Unconditional <arg>s without a default (the file itself and its groups, not includes)."""
    out: List[Tuple[str, str]] = []

    def walk(el):
        for child in el.children:
            if 'if' in child.attrs or 'unless' in child.attrs:
                continue
            if child.tag == 'arg' and 'default' not in child.attrs:
                out.append((child.attrs['name'], child.attrs.get('description', '')))
            elif child.tag == 'group':
                walk(child)
    walk(root)
    return out


def _check_required(root: _Element, given: Iterable[str], file: str, line: Optional[int],
                    element: Optional[str], how: str) -> None:
    given = set(given)
    missing = [(n, d) for n, d in _required_args(root) if n not in given]
    if missing:
        listing = '; '.join(f"'{n}'" + (f' ({d})' if d else '') for n, d in missing)
        raise LaunchFileError(f'missing required launch argument(s) of {root.file}: {listing}; {how}',
                              file, line, element)


def _visit_children(el: _Element, ctx: _Context, depth: int) -> None:
    for child in el.children:
        _visit(child, ctx, depth)


def _visit(el: _Element, ctx: _Context, depth: int) -> None:
    if not _condition(el, ctx):
        return
    tag = el.tag
    if tag == 'arg':
        name = el.attrs['name']
        if name not in ctx.configs:
            if 'default' not in el.attrs:
                desc = el.attrs.get('description')
                raise el.error(f"required launch argument '{name}'" + (f' ({desc})' if desc else '')
                               + ' was not provided')
            ctx.configs[name] = _attr(el, 'default', ctx)
        choices = [c.attrs['value'] for c in el.children]
        if choices and ctx.configs[name] not in choices:
            raise el.error(f"argument '{name}': value {ctx.configs[name]!r} is not one of "
                           f"{', '.join(choices)}")
    elif tag == 'let':
        ctx.configs[_attr(el, 'name', ctx)] = _attr(el, 'value', ctx)
    elif tag in ('push_ros_namespace', 'push-ros-namespace'):
        pushed = _attr(el, 'namespace', ctx)
        ns = _absolute(_prefix_namespace(ctx.configs.get('ros_namespace'), pushed))
        if not _valid_namespace(ns):
            raise el.error(f'invalid namespace {ns!r} (pushed {pushed!r})')
        ctx.configs['ros_namespace'] = ns
    elif tag == 'group':
        if _literal_bool(el, 'scoped', True):
            saved = dict(ctx.configs)
            _visit_children(el, ctx, depth)
            ctx.configs = saved
        else:
            _visit_children(el, ctx, depth)
    elif tag == 'include':
        _visit_include(el, ctx, depth)
    elif tag == 'node':
        _visit_node(el, ctx)
    else:  # pragma: no cover (rejected by _check_element)
        raise el.error('unsupported element')


def _visit_include(el: _Element, ctx: _Context, depth: int) -> None:
    if depth >= 32:
        raise el.error('includes nested more than 32 deep (an include cycle?)')
    path = os.path.abspath(_attr(el, 'file', ctx))
    try:
        root = _load(path, ctx)
    except LaunchFileError as exc:
        if exc.file == path and exc.line is None:
            raise el.error(f'{path}: {exc.message}') from None
        raise
    names = []
    for arg in el.children:  # evaluated and set in order, like ros2 launch's SetLaunchConfiguration
        name = _attr(arg, 'name', ctx)
        ctx.configs[name] = _attr(arg, 'value', ctx)
        names.append(name)
    _check_required(root, names, el.file, el.line, el.tag, 'pass them as <arg name value/> children')
    ctx.file_stack.append(path)
    try:
        _visit_children(root, ctx, depth + 1)
    finally:
        ctx.file_stack.pop()


def _visit_node(el: _Element, ctx: _Context) -> None:
    pkg = _attr(el, 'pkg', ctx)
    exe = _attr(el, 'exec', ctx)
    name = _attr(el, 'name', ctx)
    if name is not None and not _NAME_RE.match(name):
        raise el.error(f'invalid node name {name!r} (letters, digits and _, not starting with a digit)')
    ns = _absolute(_prefix_namespace(ctx.configs.get('ros_namespace'), _attr(el, 'namespace', ctx)))
    if ns is not None and not _valid_namespace(ns):
        raise el.error(f'invalid namespace {ns!r}')
    output = _attr(el, 'output', ctx, 'log')
    if output not in ('screen', 'log', 'both'):
        raise el.error(f"attribute 'output': {output!r} is not screen, log or both")
    respawn_text = _attr(el, 'respawn', ctx, 'false')
    respawn = _bool_text(respawn_text)
    if respawn is None:
        raise el.error(f"attribute 'respawn': expected true or false, got {respawn_text!r}")
    try:
        delay = float(el.attrs.get('respawn_delay', '0'))
    except ValueError:
        raise el.error(f"attribute 'respawn_delay': {el.attrs['respawn_delay']!r} is not a number "
                       '(seconds)') from None
    if delay < 0:
        raise el.error("attribute 'respawn_delay' must be >= 0")
    on_exit = el.attrs.get('on_exit')  # literal, as launch's ExecuteProcess.parse compares it
    if on_exit is not None and on_exit != 'shutdown':
        raise el.error(f"attribute 'on_exit': expected shutdown (the only on_exit action of ros2 launch's "
                       f'XML), got {on_exit!r}')
    if on_exit and respawn:
        ctx.warnings.append(f'{el.file}:{el.line}: <node>: respawn="true" with on_exit="shutdown": the first '
                            'exit shuts the launch down and the node is not respawned (as in ros2 launch)')
    params: List[Tuple[str, ...]] = []
    remaps: List[Tuple[str, str]] = []
    for child in el.children:
        if child.tag == 'param':
            if 'from' in child.attrs:
                path = os.path.abspath(_attr(child, 'from', ctx))
                if not os.path.isfile(path):
                    # launch_ros warns and leaves the file out.
                    ctx.warnings.append(f'{child.file}:{child.line}: <param>: parameter file path is '
                                        f'not a file: {path} (left out, as ros2 launch does)')
                    continue
                params.append(('file', path))
            else:
                pname = _attr(child, 'name', ctx)
                text = _attr(child, 'value', ctx)
                try:
                    params.append(('value', pname, type_param_value(text, pname)))
                except ValueError as exc:
                    raise child.error(str(exc)) from None
        else:
            remaps.append((_attr(child, 'from', ctx), _attr(child, 'to', ctx)))
    node = NodeDescription(pkg, exe, name, ns, params, remaps, output, bool(respawn), delay,
                           el.file, el.line, on_exit=on_exit)
    if ctx.resolve_executables:
        try:
            node.command = ctx.resolver.executable(pkg, exe)
        except PackageNotFoundError as exc:
            node.command_error = str(exc)
    ctx.nodes.append(node)


def _assign_labels(nodes: List[NodeDescription]) -> None:
    seen: Dict[str, int] = {}
    for n in nodes:
        base = n.name or n.executable
        seen[base] = seen.get(base, 0) + 1
        n.label = base if seen[base] == 1 else f'{base}-{seen[base]}'


def parse_launch_arguments(items: Sequence[str]) -> List[Tuple[str, str]]:
    """``['a:=1', 'b:=x']`` -> ``[('a', '1'), ('b', 'x')]`` (ValueError for anything else)."""
    out = []
    for item in items:
        name, sep, value = item.partition(':=')
        if not sep or not name:
            raise ValueError(f"launch argument {item!r} is not of the form name:=value")
        out.append((name, value))
    return out


def load_launch_file(path: str, launch_arguments: _LaunchArgs = (), *,
                     resolver: Optional[PackageResolver] = None,
                     resolve_executables: bool = True) -> LaunchPlan:
    """Parse and evaluate a launch file; raises LaunchFileError.

    ``resolve_executables=False`` skips finding the node executables; when they are resolved, one
    that is not found is recorded in ``NodeDescription.command_error`` (``cmd`` then raises).
    """
    ctx = _Context(resolver or PackageResolver(), resolve_executables)
    path = os.path.abspath(path)
    root = _load(path, ctx)
    given = list(launch_arguments.items()) if isinstance(launch_arguments, dict) \
        else list(launch_arguments)
    _check_required(root, [n for n, _ in given], path, None, None,
                    'pass them as name:=value on the command line')
    for name, value in given:
        ctx.configs[name] = value
    ctx.file_stack.append(path)
    _visit_children(root, ctx, 0)
    declared_names = {d.name for d in ctx.declared}
    for name, _ in given:
        if name not in declared_names:
            ctx.warnings.append(f"launch argument '{name}' is not declared by {path} or the files it "
                                'includes (typo?)')
    _assign_labels(ctx.nodes)
    return LaunchPlan(path, ctx.nodes, dict(ctx.configs), ctx.declared, ctx.warnings)


def declared_arguments(path: str) -> List[ArgDeclaration]:
    """The <arg>s of a launch file itself (not of its includes), without evaluating anything."""
    ctx = _Context(PackageResolver(), False)
    _load(os.path.abspath(path), ctx)
    return ctx.declared
