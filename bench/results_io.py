"""Writing a benchmark's table and raw numbers to bench/results/ (shared by core.py and graph.py)."""
import json
import os
import platform
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def save_results(kind, table, results, quick, when):
    """Write <kind>-<YYYYMMDD-HHMM>[-quick].md/.json, and <kind>-latest.md for full runs; return the names."""
    RESULTS.mkdir(exist_ok=True)
    priority = scheduling_note()
    if priority:
        table = table.rstrip("\n") + "\n\n" + priority["note"] + "\n"
        results = dict(results, scheduling=priority)
    stem = f"{kind}-{when.strftime('%Y%m%d-%H%M')}" + ("-quick" if quick else "")
    (RESULTS / f"{stem}.md").write_text(table)
    (RESULTS / f"{stem}.json").write_text(json.dumps(results, indent=1, default=float) + "\n")
    written = [f"{stem}.md", f"{stem}.json"]
    if not quick:
        (RESULTS / f"{kind}-latest.md").write_text(table)
        written.append(f"{kind}-latest.md")
    return ["bench/results/" + w for w in written]


def scheduling_note():
    """How this process was scheduled against the machine's other jobs, when it was favoured; else None.

    The 2-core machine is shared, and the load average in a table counts every other job. A run started with a
    negative nice value (e.g. ``nice -n -15``) while the kernel's autogroup scheduling is off
    (``/proc/sys/kernel/sched_autogroup_enabled`` = 0; with it on, nice acts only inside one terminal session's
    group) takes a core ahead of those jobs, so its wall times approach those of a quiet machine; the table says so.
    """
    niceness = os.nice(0)
    try:
        autogroup = Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip() == "1"
    except OSError:
        autogroup = False
    if niceness >= 0 or autogroup:
        return None
    return {"nice": niceness, "autogroup": autogroup,
            "note": f"Scheduling: this process ran at nice {niceness} with autogroup scheduling off, ahead of the "
                    "other jobs counted in the load average (they ran at nice >= 0), so its wall times approach a "
                    "quiet machine's; the load average is not the load this process saw."}


def cpu_model():
    """The CPU's model name from /proc/cpuinfo (platform.processor() where there is none)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
