"""Process management of manip-launch: start nodes, prefix their output, respawn, shut down.

* Every node runs in its own session and process group (``start_new_session``), its stdout and
  stderr lines are copied to ours prefixed with ``[label]`` (coloured when our output is a terminal).
* ``respawn``: a node that exits is started again after ``respawn_delay`` seconds (logged).
* Fail fast (``stop_on_failure``, the default): when a node without respawn exits with an error (a non-zero
  code or a signal) or prints a ``[FATAL]`` log line, the runner logs ``FAILED: <node> <exit or FATAL>; last error: <its last
  error line>``, shuts everything down and returns non-zero. ``stop_on_failure=False`` (``manip-launch
  --keep-going``): the exit is logged and the others keep running, like ros2 launch without
  ``on_exit="shutdown"``; with ``exit_on_first_exit`` the first exit shuts everything down.
  When no node is left running (and none is waiting to respawn), the runner returns.
* ``on_exit="shutdown"`` on a node (ros2 launch's attribute): its exit, with any status and whether or not it
  has respawn, logs ``<node> exited ...; on_exit="shutdown": shutting down`` and stops every node, with
  ``--keep-going`` too; the status is that node's (ros2 launch itself returns 0 then).
* Shutdown (SIGINT, SIGTERM or SIGHUP to us, or the end of the run): SIGINT to every node's process
  group, up to ``sigterm_timeout`` s, then SIGTERM, up to ``sigkill_timeout`` s, then SIGKILL. A second
  Ctrl-C skips to SIGTERM, a third to SIGKILL. Whole groups are signalled, so what a node started
  goes too. On Linux the runner is a child subreaper (orphaned descendants are reparented to it and
  reaped), the nodes get SIGTERM if the runner itself dies (PR_SET_PDEATHSIG), and it only returns
  when no process of any group it started is left (zombies reaped).

Exit status of :meth:`Runner.run`: 128+N when signal N came before every node was started (the graph
never came up; what was started is stopped as above and nothing more is started); 0 after a requested
shutdown (signal) of the running graph or when every node exited with 0; 1 when the nodes all ended by
themselves and one failed; with ``exit_on_first_exit`` the status of that first node (128+N when killed
by signal N). Signals are recorded by a :class:`~.signals.StopSignals` that ``manip-launch`` installs
before it parses the launch file and hands to the runner.
"""
from __future__ import annotations

import ctypes
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, TextIO

from .signals import StopSignals
from .xml_frontend import NodeDescription

_ANSI = re.compile(r'\x1b\[[0-9;]*m')
_EXCEPTION_LINE = re.compile(r'^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b(: .*)?$')
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_COLORS = (36, 32, 33, 35, 34, 96, 92, 93, 95, 94)

try:
    _prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith('linux') else None
except (OSError, AttributeError):  # pragma: no cover
    _prctl = None


def _child_preexec() -> None:  # runs in the child between fork and exec
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)


def process_table() -> List[tuple]:
    """``(pid, ppid, pgid, state)`` of every process (Linux /proc); empty when unavailable."""
    out = []
    try:
        entries = os.listdir('/proc')
    except OSError:
        return out
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f'/proc/{entry}/stat', 'rb') as f:
                data = f.read().decode('ascii', 'replace')
        except OSError:
            continue
        fields = data[data.rfind(')') + 2:].split()
        if len(fields) >= 3:
            out.append((int(entry), int(fields[1]), int(fields[2]), fields[0]))
    return out


def group_alive(pgid: int, table: Optional[List[tuple]] = None) -> bool:
    """Whether a process group has a member that is not a zombie."""
    if table is None and not os.path.isdir('/proc'):  # pragma: no cover (non-Linux)
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    table = process_table() if table is None else table
    return any(g == pgid and s not in ('Z', 'X') for _, _, g, s in table)


def exit_status(returncode: int) -> int:
    """Popen returncode -> shell-style exit status (128+N for a signal)."""
    return 128 - returncode if returncode < 0 else returncode


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f'signal {-returncode}'
        return f'was killed by {name}'
    return f'exited with code {returncode}'


@dataclass
class _Proc:
    node: NodeDescription
    popen: Optional[subprocess.Popen] = None
    starts: int = 0
    respawn_at: Optional[float] = None
    finished: bool = False           # exited and will not be restarted
    exit_logged: bool = True
    last_error: str = ''             # the node's last error-like output line (FATAL/ERROR/exception)
    pgids: List[int] = field(default_factory=list)
    threads: List[threading.Thread] = field(default_factory=list)


class Runner:
    """Runs resolved nodes until they end or a shutdown is requested (see the module docstring)."""

    def __init__(self, nodes: Sequence[NodeDescription], *, exit_on_first_exit: bool = False,
                 sigterm_timeout: float = 5.0, sigkill_timeout: float = 5.0,
                 color: Optional[bool] = None, pid_file: Optional[str] = None,
                 env: Optional[Dict[str, str]] = None, stdout: Optional[TextIO] = None,
                 stderr: Optional[TextIO] = None, subreaper: bool = True,
                 signals: Optional[StopSignals] = None, stop_on_failure: bool = True):
        self.procs = [_Proc(n) for n in nodes]
        self.stop_on_failure = stop_on_failure
        self.failure: Optional[str] = None   # 'NODE what; last error: LINE' of the first failure (fail fast)
        self._failure_status = 1
        self.exit_on_first_exit = exit_on_first_exit
        self.sigterm_timeout = sigterm_timeout
        self.sigkill_timeout = sigkill_timeout
        self.stdout = stdout or sys.stdout
        self.stderr = stderr or sys.stderr
        if color is None:
            color = (not os.environ.get('NO_COLOR')) and self.stdout.isatty()
        self.color = color
        self.pid_file = pid_file
        self.subreaper = subreaper
        self.env = dict(os.environ if env is None else env)
        self.env.setdefault('PYTHONUNBUFFERED', '1')
        if self.color:
            self.env.setdefault('RCUTILS_COLORIZED_OUTPUT', '1')
        self._lock = threading.RLock()
        self.signals = signals if signals is not None else StopSignals()
        self._wake = self.signals.wake
        self.graph_up = False            # every node was started before any stop signal
        self._stopping = False
        self._first_exit: Optional[int] = None
        self._any_failed = False
        self._required_exit: Optional[int] = None   # status of an on_exit="shutdown" node that exited

    # ---- output ---------------------------------------------------------------------------------
    def _prefix(self, proc: _Proc) -> str:
        label = f'[{proc.node.label}]'
        if self.color:
            c = _COLORS[self.procs.index(proc) % len(_COLORS)]
            return f'\x1b[{c}m{label}\x1b[0m '
        return label + ' '

    def _write(self, stream: TextIO, text: str) -> None:
        with self._lock:
            try:
                stream.write(text)
                stream.flush()
            except (BrokenPipeError, ValueError):
                pass

    def log(self, message: str) -> None:
        head = '[manip-launch]'
        if self.color:
            head = f'\x1b[1m{head}\x1b[0m'
        self._write(self.stderr, f'{head} {message}\n')

    def _pump(self, pipe, stream: TextIO, prefix: str, proc: Optional[_Proc] = None) -> None:
        try:
            for raw in iter(pipe.readline, b''):
                line = raw.decode('utf-8', 'replace').rstrip('\r\n')
                self._write(stream, f'{prefix}{line}\n')
                if proc is not None:
                    self._scan(proc, line)
        except (OSError, ValueError):
            pass
        finally:
            try:
                pipe.close()
            except OSError:
                pass

    def _scan(self, proc: _Proc, line: str) -> None:
        """Remember the node's last error-like line; a [FATAL] line is a failure (fail fast)."""
        text = _ANSI.sub('', line).strip()
        if not text:
            return
        fatal = '[FATAL]' in text
        if fatal or '[ERROR]' in text or _EXCEPTION_LINE.match(text):
            proc.last_error = text
        if fatal and not self._stopping and not proc.node.respawn:   # a respawning node gets restarted
            self._fail(proc, 'logged FATAL', 1)

    def _fail(self, proc: _Proc, what: str, status: int) -> None:
        with self._lock:
            if not self.stop_on_failure or self.failure is not None or self._stopping:
                return
            self.failure = f"{proc.node.label} {what}; last error: {proc.last_error or '(no error line)'}"
            self._failure_status = status or 1
        self._wake.set()

    # ---- processes ------------------------------------------------------------------------------
    def _write_pid_file(self) -> None:
        if not self.pid_file:
            return
        data = {p.node.label: p.pgids for p in self.procs}
        tmp = f'{self.pid_file}.tmp'
        with open(tmp, 'w') as f:
            json.dump(data, f)
        os.replace(tmp, self.pid_file)

    def _start(self, proc: _Proc) -> None:
        proc.respawn_at = None
        cmd = proc.node.cmd
        try:
            popen = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=self.env, start_new_session=True,
                                     preexec_fn=_child_preexec if _prctl is not None else None)
        except OSError as exc:
            self.log(f'{proc.node.label}: cannot start {cmd[0]}: {exc.strerror or exc}')
            proc.finished = True
            self._any_failed = True
            if self.exit_on_first_exit and self._first_exit is None:
                self._first_exit = 127
            return
        proc.popen = popen
        proc.starts += 1
        proc.exit_logged = False
        proc.pgids.append(popen.pid)
        prefix = self._prefix(proc)
        proc.threads = [
            threading.Thread(target=self._pump, args=(popen.stdout, self.stdout, prefix, proc), daemon=True),
            threading.Thread(target=self._pump, args=(popen.stderr, self.stderr, prefix, proc), daemon=True),
        ]
        for t in proc.threads:
            t.start()
        what = 'started' if proc.starts == 1 else f'respawned (start {proc.starts})'
        self.log(f'{proc.node.label} {what}, pid {popen.pid}')
        self._write_pid_file()

    def _on_exit(self, proc: _Proc, now: float) -> None:
        rc = proc.popen.returncode
        for t in proc.threads:  # let the last lines through (not forever: a child may hold the pipe)
            t.join(timeout=0.5)
        proc.exit_logged = True
        proc.popen = None
        if self._stopping:
            self.log(f'{proc.node.label} {describe_exit(rc)}')
            proc.finished = True
            return
        if proc.node.on_exit == 'shutdown' and self._required_exit is None:
            self.log(f'{proc.node.label} {describe_exit(rc)}; on_exit="shutdown": shutting down')
            proc.finished = True
            self._any_failed = self._any_failed or rc != 0
            if rc != 0:
                self._fail(proc, describe_exit(rc), exit_status(rc))
            self._required_exit = exit_status(rc)
            return
        if proc.node.respawn:
            proc.respawn_at = now + proc.node.respawn_delay
            self.log(f'{proc.node.label} {describe_exit(rc)}; respawning in '
                     f'{proc.node.respawn_delay:g} s')
            return
        self.log(f'{proc.node.label} {describe_exit(rc)}')
        proc.finished = True
        if rc != 0:
            self._any_failed = True
        if rc != 0 and not self.exit_on_first_exit:
            self._fail(proc, describe_exit(rc), exit_status(rc))
        if self.exit_on_first_exit and self._first_exit is None:
            self._first_exit = exit_status(rc)

    @property
    def _signals(self) -> int:
        return self.signals.count

    @property
    def _signal_name(self) -> str:
        return self.signals.name

    def _reap_orphans(self, table: List[tuple]) -> None:
        """Reap zombie descendants reparented to us (we are their subreaper)."""
        me = os.getpid()
        ours = {p.popen.pid for p in self.procs if p.popen is not None}
        for pid, ppid, _, state in table:
            if ppid == me and state == 'Z' and pid not in ours:
                try:
                    os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    pass

    def _poll(self) -> None:
        now = time.monotonic()
        for proc in self.procs:
            if proc.popen is not None and proc.popen.poll() is not None:
                self._on_exit(proc, now)

    def _all_groups(self) -> List[int]:
        return [g for p in self.procs for g in p.pgids]

    def _alive_groups(self) -> List[int]:
        self._poll()
        table = process_table()
        if self.subreaper:
            self._reap_orphans(table)
            table = process_table()
        return [g for g in self._all_groups() if group_alive(g, table)]

    def _shutdown(self) -> None:
        self._stopping = True
        for proc in self.procs:
            proc.respawn_at = None
        stages = [(signal.SIGINT, self.sigterm_timeout), (signal.SIGTERM, self.sigkill_timeout),
                  (signal.SIGKILL, 5.0)]
        stage = 0
        while stage < len(stages):
            alive = self._alive_groups()
            if not alive:
                break
            sig, timeout = stages[stage]
            labels = [p.node.label for p in self.procs if any(g in alive for g in p.pgids)]
            self.log(f"sending {sig.name} to {', '.join(labels)}")
            for g in alive:
                try:
                    os.killpg(g, sig)
                except (ProcessLookupError, PermissionError):
                    pass
            deadline = time.monotonic() + timeout
            seen_signals = self._signals
            escalate = False
            while time.monotonic() < deadline:
                if not self._alive_groups():
                    break
                if self._signals > seen_signals and sig != signal.SIGKILL:
                    self.log(f'{self._signal_name} again: escalating')
                    escalate = True
                    break
                self._wake.wait(0.05)
                self._wake.clear()
            else:
                if sig != signal.SIGKILL:
                    self.log(f'still running after {timeout:g} s')
            stage += 1
            if not escalate and not self._alive_groups():
                break
        for proc in self.procs:
            if proc.popen is not None:
                try:
                    proc.popen.wait(timeout=1.0)
                except subprocess.TimeoutExpired:
                    pass
        self._poll()
        left = self._alive_groups()
        if left:
            self.log(f'WARNING: processes of groups {left} survived SIGKILL')

    # ---- main loop -----------------------------------------------------------------------------
    def run(self) -> int:
        """Start every node and supervise them; returns the exit status (module docstring)."""
        own_handlers = not self.signals.installed
        self.signals.install()
        if self.subreaper and _prctl is not None:
            _prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        else:
            self.subreaper = False
        try:
            for proc in self.procs:
                if self._signals:
                    break
                self._start(proc)
            self.graph_up = not self._signals
            if not self.graph_up:
                started = [p.node.label for p in self.procs if p.starts]
                self.log(f"received {self._signal_name} before every node was started (started: "
                         f"{', '.join(started) or 'none'}; not started: "
                         f"{', '.join(p.node.label for p in self.procs if not p.starts) or 'none'})")
            while not self._signals:
                self._poll()
                if self.exit_on_first_exit and self._first_exit is not None:
                    break
                if self.failure is not None or self._required_exit is not None:
                    break
                now = time.monotonic()
                for proc in self.procs:
                    if proc.respawn_at is not None and now >= proc.respawn_at:
                        self._start(proc)
                if all(p.finished for p in self.procs):
                    break
                if self.subreaper:
                    self._reap_orphans(process_table())
                self._wake.wait(0.05)
                self._wake.clear()
            if self._signals:
                self.log(f'received {self._signal_name}, shutting down')
            elif self.exit_on_first_exit and self._first_exit is not None:
                self.log('a node exited and --exit-on-first-exit is set: shutting down')
            elif self.failure is not None:
                self.log(f'FAILED: {self.failure}; stopping every node')
            elif self._required_exit is not None:
                self.log('a node with on_exit="shutdown" exited: stopping every node')
            self._shutdown()
        finally:
            if own_handlers:
                self.signals.restore()
        for proc in self.procs:
            for t in proc.threads:
                t.join(timeout=0.5)
        if self.exit_on_first_exit and self._first_exit is not None and not self._signals:
            return self._first_exit
        if self.failure is not None and not self._signals:
            return self._failure_status
        if self._required_exit is not None and not self._signals:
            return self._required_exit
        if not self.graph_up:
            return self.signals.exit_status
        if self._signals:
            return 0
        return 1 if self._any_failed else 0
