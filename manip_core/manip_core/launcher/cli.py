"""``manip-launch``: run a ROS 2 XML launch file without ros2 launch (see ``manip-launch --help``)."""
from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path
from typing import List, Optional

from .packages import (PACKAGE_PATH_ENV, PackageNotFoundError, PackageResolver,
                       default_ament_prefix_path, split_path_list)
from .signals import StopSignals
from .xml_frontend import (LaunchFileError, LaunchPlan, declared_arguments, load_launch_file,
                           parse_launch_arguments)

DESCRIPTION = """\
Start the nodes of a ROS 2 XML launch file, like `ros2 launch FILE name:=value ...` (which cannot be
installed from PyPI). Supports the subset of launch_xml/launch_ros the manip launch files use: <arg>,
<let>, <node> (respawn, respawn_delay, on_exit="shutdown") with <param>/<remap>, <group>,
<push_ros_namespace>, <include> with <arg>, if/unless, $(var), $(find-pkg-share), $(env), $(dirname).
Anything else is an error naming file, line and element.
"""

EPILOG = """\
Packages: $(find-pkg-share P) is, in this order, a --package-path folder holding P's package.xml,
the source folder of an editable (pip install -e) Python distribution P that has a package.xml,
or <prefix>/share/P from the ament index (AMENT_PREFIX_PATH; when unset, this Python's prefix if it
has an ament index). Executables: <prefix>/lib/P/EXEC (ament prefix of P), else the console script
EXEC of the Python distribution P.

Shutdown: Ctrl-C/SIGTERM/SIGHUP (at any moment from the launcher's first line of Python on, even when
SIGINT was inherited as ignored) sends SIGINT to every node's process group, then SIGTERM after
--sigterm-timeout s, then SIGKILL after --sigkill-timeout s (a second Ctrl-C escalates at once); no
node is started after the signal.
Exit status: 128+N (130 for SIGINT, 143 for SIGTERM) when signal N came before every node was started;
0 after Ctrl-C/SIGTERM of the running graph or when all nodes exited with 0; fail fast: when a node
without respawn exits non-zero or logs FATAL, every node is stopped and the status is that node's (1
for FATAL), after a line `[manip-launch] FAILED: NODE ...; last error: LINE`; with --keep-going 1 when
a node failed and the others ended by themselves; with --exit-on-first-exit the status of the first node to exit; 2 for errors
in the launch file or its packages. A node with on_exit="shutdown" (as in ros2 launch) stops every node when
it exits, with any status, --keep-going or not; the status is then that node's (ros2 launch returns 0).
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog='manip-launch', description=DESCRIPTION, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('file', help='launch file (or: PACKAGE FILE_NAME, searched in the share folder)')
    p.add_argument('launch_arguments', nargs='*', metavar='name:=value',
                   help='launch arguments')
    p.add_argument('--print', '--dry-run', dest='print_only', action='store_true',
                   help='print the resolved command lines, start nothing')
    p.add_argument('-s', '--show-args', action='store_true',
                   help="list the launch file's arguments and exit")
    p.add_argument('--exit-on-first-exit', action='store_true',
                   help='shut everything down when the first node without respawn exits, and exit '
                        'with its status (for tests)')
    p.add_argument('--keep-going', action='store_true',
                   help='keep the other nodes running when a node (without respawn) fails (exits non-zero or '
                        'logs FATAL; default: fail fast, stop every node and exit non-zero naming it and '
                        'its last error line)')
    p.add_argument('--sigterm-timeout', type=float, default=5.0, metavar='S',
                   help='seconds between SIGINT and SIGTERM at shutdown (default 5)')
    p.add_argument('--sigkill-timeout', type=float, default=5.0, metavar='S',
                   help='seconds between SIGTERM and SIGKILL at shutdown (default 5)')
    p.add_argument('--pid-file', metavar='PATH',
                   help='write {label: [pid, ...]} (JSON, every start; each pid is also the process '
                        'group id) to PATH')
    p.add_argument('--package-path', action='append', default=[], metavar='DIR',
                   help=f'folder with package sources, searched first by $(find-pkg-share) '
                        f'(repeatable, ":"-separated; also ${PACKAGE_PATH_ENV})')
    p.add_argument('--color', choices=('auto', 'always', 'never'), default='auto',
                   help='colour the [name] prefixes (auto: when stdout is a terminal and NO_COLOR '
                        'is unset)')
    return p


def _error(message: str) -> int:
    print(f'manip-launch: error: {message}', file=sys.stderr)
    return 2


def _find_launch_file(args, resolver: PackageResolver) -> Optional[str]:
    """``manip-launch PKG FILE_NAME ...`` like ``ros2 launch PKG FILE_NAME``."""
    if os.path.exists(args.file) or not args.launch_arguments or ':=' in args.launch_arguments[0]:
        return None
    pkg, name = args.file, args.launch_arguments[0]
    try:
        share = Path(resolver.share_dir(pkg))
    except PackageNotFoundError:
        return None
    found = sorted(share.rglob(name))
    if not found:
        return None
    args.launch_arguments = args.launch_arguments[1:]
    return str(found[0])


def _print_plan(plan: LaunchPlan) -> None:
    for node in plan.nodes:
        where = f'{os.path.relpath(node.file)}:{node.line}'
        extra = f', respawn after {node.respawn_delay:g} s' if node.respawn else ''
        extra += f', on_exit={node.on_exit}' if node.on_exit else ''
        print(f'# [{node.label}] {node.package}/{node.executable} ({where}{extra})')
        if node.command is None:
            print(f'# NOT FOUND: {node.command_error}')
            print(shlex.join([f'<{node.package}/{node.executable}>'] + node.ros_arguments))
        else:
            print(shlex.join(node.cmd))


def _show_args(path: str) -> None:
    decls = declared_arguments(path)
    if not decls:
        print('No arguments.')
        return
    print("Arguments (pass arguments as '<name>:=<value>'):\n")
    for d in decls:
        print(f"    '{d.name}':")
        print(f'        {d.description or "no description given"}')
        if d.choices:
            print(f"        (one of: {', '.join(d.choices)})")
        print('        (default: ' + (repr(d.default) if d.default is not None else 'required')
              + ')' + (' [conditional]' if d.conditional else ''))
        print()


def main(argv: Optional[List[str]] = None, signals: Optional[StopSignals] = None) -> int:
    """``manip-launch``; ``signals``: the stop-signal recorder already installed by the caller (the
    console script installs it before importing this module), else one is installed here."""
    own = signals is None
    signals = StopSignals().install() if own else signals
    try:
        return _main(argv, signals)
    finally:
        if own:
            signals.restore()


def _interrupted(signals: StopSignals) -> Optional[int]:
    if not signals.count:
        return None
    print(f'manip-launch: received {signals.name} before any node was started; nothing started',
          file=sys.stderr)
    return signals.exit_status


def _main(argv: Optional[List[str]], signals: StopSignals) -> int:
    args = _parser().parse_args(argv)
    if not os.environ.get('AMENT_PREFIX_PATH'):
        default = default_ament_prefix_path()
        if default:  # the PyPI venv: its ament index (the nodes inherit it too)
            os.environ['AMENT_PREFIX_PATH'] = default
    package_path = split_path_list(args.package_path + [os.environ.get(PACKAGE_PATH_ENV, '')])
    resolver = PackageResolver(package_path)
    path = _find_launch_file(args, resolver) or args.file
    try:
        if args.show_args:
            _show_args(path)
            return 0
        launch_args = parse_launch_arguments(args.launch_arguments)
        plan = load_launch_file(path, launch_args, resolver=resolver)
    except LaunchFileError as exc:
        return _error(str(exc))
    except ValueError as exc:
        return _error(str(exc))
    stopped = _interrupted(signals)
    if stopped is not None:
        return stopped
    for w in plan.warnings:
        print(f'manip-launch: warning: {w}', file=sys.stderr)
    if args.print_only:
        _print_plan(plan)
        return 0
    missing = [n for n in plan.nodes if n.command is None]
    if missing:
        return _error('cannot start, executables not found:\n' + '\n'.join(
            f'  {os.path.relpath(n.file)}:{n.line}: <node> {n.label}: {n.command_error}'
            for n in missing))
    if not plan.nodes:
        print('manip-launch: nothing to start (no <node> is enabled)', file=sys.stderr)
        return 0
    from .runner import Runner  # noqa: PLC0415  (not needed for --print)
    color = {'auto': None, 'always': True, 'never': False}[args.color]
    stopped = _interrupted(signals)
    if stopped is not None:
        return stopped
    runner = Runner(plan.nodes, exit_on_first_exit=args.exit_on_first_exit,
                    sigterm_timeout=args.sigterm_timeout, sigkill_timeout=args.sigkill_timeout,
                    color=color, pid_file=args.pid_file, signals=signals,
                    stop_on_failure=not args.keep_going)
    return runner.run()
