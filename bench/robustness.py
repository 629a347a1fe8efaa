#!/usr/bin/env python3
"""The robustness table of issue 12: runs the fuzz and fault tests of tests/fuzz with more examples and writes
bench/results/robustness-latest.md (input or fault, node or library entry, outcome).

    .venv/bin/python bench/robustness.py                  # 200 examples per property, slow cases included
    .venv/bin/python bench/robustness.py --examples 10 --fast   # what `make test` runs (seeded, ~1 min)

The tests fail on a crash (a raw exception or a traceback in a node's log), a hang (a call or a service past its
bound) or a limit violation (a command beyond the robot's effort/position limits, a NaN in a success); the table
lists what each input got. Exit status: pytest's.
"""
import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=200, help="hypothesis examples per property (MANIP_FUZZ_EXAMPLES)")
    ap.add_argument("--fast", action="store_true", help="leave out the tests marked slow")
    ap.add_argument("--output", default=str(ROOT / "bench" / "results" / "robustness-latest.md"))
    ap.add_argument("pytest_args", nargs="*", help="extra pytest arguments, e.g. -k core")
    a = ap.parse_args()
    env = dict(os.environ, MANIP_FUZZ_EXAMPLES=str(a.examples), MANIP_ROBUSTNESS_TABLE=a.output,
               ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    cmd = [sys.executable, "-m", "pytest", "tests/fuzz", "-q", "-p", "no:cacheprovider",
           "-m", "not slow" if a.fast else "", *a.pytest_args]
    print("running:", " ".join(cmd), file=sys.stderr)
    rc = subprocess.call(cmd, cwd=ROOT, env=env)
    print(f"table: {a.output} (pytest exit status {rc})", file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())
