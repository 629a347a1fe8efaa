"""Shared pieces of the robustness tests (issue 12): the seeded hypothesis profile, the outcome checker and the
robustness table.

- Example counts: ``MANIP_FUZZ_EXAMPLES`` when set (e.g. 500 for a long run); else 10 per property when the slow
  tests are deselected (``make test``) and 100 when they run (``make test-all``).
  Hypothesis runs derandomized (the examples follow from the test's source: CI is deterministic) and without an
  example database (nothing written to the tree).
- ``outcome(what, fn, *args)``: calls fn; a success is returned, an exception must be one of the project's own
  (a class defined in a manip_* package, with a message) and is returned as the outcome; anything else (raw
  numpy/numba/IndexError/TypeError...) fails the test naming the input. Every call runs under a wall-clock
  bound (``CALL_TIMEOUT_S``): a call still running then is a hang (SIGALRM interrupts Python code; a native
  loop that never returns trips faulthandler, which prints every thread's stack and ends the run).
- ``robustness`` fixture: ``robustness.add(input, node, outcome)`` rows; the table is written to the path in
  ``MANIP_ROBUSTNESS_TABLE`` at the end of the session (bench/robustness.py sets it to
  bench/results/robustness-latest.md), else only summarised on stderr.
"""
import os
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import fuzz_support  # noqa: E402  (loads the hypothesis profile)
from fuzz_support import _TABLE  # noqa: E402


def pytest_configure(config):
    fuzz_support.load_profile(fuzz_support.examples_for(config.getoption("markexpr", "")))


@pytest.fixture(scope="session")
def robustness():
    return _TABLE


def pytest_sessionfinish(session, exitstatus):
    if not _TABLE.rows:
        return
    path = os.environ.get("MANIP_ROBUSTNESS_TABLE")
    if path:
        head = (f"# Robustness table (issue 12)\n\nWritten by the tests in tests/fuzz "
                f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
                f"{fuzz_support.FUZZ_EXAMPLES} examples per property, "
                f"pytest exit status {int(exitstatus)}). Outcome `ok`: a correct result (checked); an error name: "
                f"the project's own exception with a message naming the input; a raw exception, a hang or a "
                f"limit violation fails the test instead of appearing here.\n\n")
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(head + _TABLE.markdown())
    print(f"\nrobustness: {len(_TABLE.rows)} rows (input x node); MANIP_ROBUSTNESS_TABLE=file writes the table",
          file=sys.stderr)
