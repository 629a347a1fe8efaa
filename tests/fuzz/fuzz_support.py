"""Helpers of the robustness tests (see conftest.py): the seeded hypothesis profile, the outcome checker, the
robustness table."""
import collections
import linecache
import faulthandler
import os
import signal
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, Phase, settings

# Examples per property: MANIP_FUZZ_EXAMPLES when set; else 10 in `make test` (slow tests deselected) and 100 when
# the slow tests run too (`make test-all`): every property runs in both, the long run draws more examples.
FAST_EXAMPLES, SLOW_EXAMPLES = 10, 100
FUZZ_EXAMPLES = int(os.environ.get("MANIP_FUZZ_EXAMPLES") or FAST_EXAMPLES)
CALL_TIMEOUT_S = float(os.environ.get("MANIP_FUZZ_CALL_TIMEOUT", "60"))
PROJECT_PACKAGES = ("manip_core", "manip_planning", "manip_control", "manip_perception", "manip_sim",
                    "manip_design", "manip_view")

# No shrinking by default (a failing example is printed as drawn; shrinking a slow planner case took minutes on
# the 2-core machine): MANIP_FUZZ_SHRINK=1 turns it on.
_PHASES = [Phase.explicit, Phase.reuse, Phase.generate, Phase.target] + (
    [Phase.shrink, Phase.explain] if os.environ.get("MANIP_FUZZ_SHRINK") == "1" else [])


def load_profile(examples):
    """The seeded profile with this many examples per property (conftest: once the marker selection is known)."""
    global FUZZ_EXAMPLES
    FUZZ_EXAMPLES = int(examples)
    settings.register_profile(
        "manip-fuzz", max_examples=FUZZ_EXAMPLES, derandomize=True, database=None, deadline=None,
        print_blob=True, phases=_PHASES,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                               HealthCheck.function_scoped_fixture, HealthCheck.large_base_example])
    settings.load_profile("manip-fuzz")


def examples_for(markexpr):
    """MANIP_FUZZ_EXAMPLES, else SLOW_EXAMPLES when the run keeps the slow tests, else FAST_EXAMPLES."""
    if os.environ.get("MANIP_FUZZ_EXAMPLES"):
        return int(os.environ["MANIP_FUZZ_EXAMPLES"])
    return FAST_EXAMPLES if "not slow" in (markexpr or "").replace("  ", " ") else SLOW_EXAMPLES


load_profile(FUZZ_EXAMPLES)


class Hang(Exception):
    pass


@contextmanager
def bounded(what, timeout_s=CALL_TIMEOUT_S):
    """Fail with Hang if the block runs longer than timeout_s (main thread only)."""
    def on_alarm(signum, frame):
        raise Hang(f"{what}: still running after {timeout_s:g} s")
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    # a native loop never returns to Python: the whole run ends with every thread's stack
    faulthandler.dump_traceback_later(timeout_s * 3, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def is_project_error(e):
    """An exception class of this project (ModelError, InputError, BagError, StereoError, ...), or a ValueError
    that a project module raised itself (``raise ValueError("...")`` in a manip_* file: its own check with its
    own message; a ValueError from inside numpy, even when called from project code, is not)."""
    if not str(e).strip():
        return False
    mod = type(e).__module__ or ""
    if mod.split(".")[0] in PROJECT_PACKAGES:
        return True
    return type(e) is ValueError and raised_by_project(e)


def raised_by_project(e):
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return False
    fname = tb.tb_frame.f_code.co_filename
    return (any(f"/{p}/{p}/" in fname for p in PROJECT_PACKAGES)
            and linecache.getline(fname, tb.tb_lineno).strip().startswith("raise"))


class Outcome:
    def __init__(self, value=None, error=None):
        self.value, self.error = value, error

    @property
    def ok(self):
        return self.error is None

    @property
    def label(self):
        if self.ok:
            return "ok"
        name = type(self.error).__name__
        return f"{name} ({self.error.__traceback__ and _origin(self.error)})" if type(self.error) is ValueError else name


def _origin(e):
    tb = e.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame.f_globals.get("__name__", "?")


def outcome(what, fn, *args, allowed=(), timeout_s=CALL_TIMEOUT_S, **kwargs):
    """Run fn(*args, **kwargs) under the time bound. Returns an Outcome; fails the test on a raw exception
    (not one of the project's own, nor a class in ``allowed``) or an empty message."""
    try:
        with bounded(what, timeout_s):
            return Outcome(value=fn(*args, **kwargs))
    except Hang:
        raise
    except Exception as e:  # noqa: BLE001 (classified below)
        if is_project_error(e) or isinstance(e, allowed):
            return Outcome(error=e)
        raise AssertionError(f"{what}: raw {type(e).__module__}.{type(e).__name__} instead of the project's own "
                             f"exception: {e!r}") from e


class RobustnessTable:
    """Rows (input or fault, node or library function, outcome) aggregated over the examples."""

    def __init__(self):
        self.rows = collections.OrderedDict()

    def add(self, inp, node, outcome_label):
        self.rows.setdefault((inp, node), collections.Counter())[outcome_label] += 1

    def markdown(self):
        lines = ["| input or fault | node / library entry | outcome (count) |", "|---|---|---|"]
        for (inp, node), counts in self.rows.items():
            out = ", ".join(f"{k} x{v}" if v > 1 else k for k, v in sorted(counts.items()))
            lines.append(f"| {inp} | {node} | {out} |")
        return "\n".join(lines) + "\n"


_TABLE = RobustnessTable()


class LimitMonitor:
    """The fault tests' watch on what reaches the arm (issue 12 item 3): every effort command must be finite and
    within the robot's effort limits; every joint_states message finite, within the joint limits (1e-3 rad
    slack) and without a jump (a joint faster than 1.5x its velocity limit between two messages by more than
    0.01 rad). Subscribe ``on_effort`` and ``on_joint_states``; ``violations`` lists what broke a rule."""

    def __init__(self, robot):
        self.robot = robot
        self.vmax, self.tau_max = np.asarray(robot.velocity_limits), np.asarray(robot.effort_limits)
        self.violations, self.efforts, self.states = [], 0, 0
        self.max_rate = 0.0  # largest |dq|/dt over the velocity limit seen
        self.last = None     # (stamp s, q) of the last valid joint_states

    def on_effort(self, msg):
        tau = np.asarray(msg.data)
        self.efforts += 1
        if (tau.shape != self.tau_max.shape or not np.all(np.isfinite(tau))
                or np.any(np.abs(tau) > self.tau_max + 1e-9)):
            self.violations.append(("effort", tau.tolist()))

    def on_joint_states(self, msg):
        """Checks the message; returns its positions when they are finite and of the robot's size, else None."""
        q = np.asarray(msg.position)
        t = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        self.states += 1
        if q.shape != self.vmax.shape or not np.all(np.isfinite(q)):
            self.violations.append(("joint_states", q.tolist()))
            return None
        r = self.robot
        if not (np.all(q >= r.joint_lower - 1e-3) and np.all(q <= r.joint_upper + 1e-3)):
            self.violations.append(("beyond the joint limits", q.tolist()))
        if self.last is not None and t > self.last[0]:
            dt = t - self.last[0]
            rate = float(np.max(np.abs(q - self.last[1]) / (self.vmax * dt)))
            self.max_rate = max(self.max_rate, rate)
            if rate > 1.5 and np.max(np.abs(q - self.last[1])) > 0.01:
                self.violations.append(("jump", t, dt, (q - self.last[1]).tolist()))
        self.last = (t, q)
        return q
