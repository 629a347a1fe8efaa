"""Writing a benchmark's table and raw numbers to bench/results/ (shared by core.py and graph.py)."""
import json
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def save_results(kind, table, results, quick, when):
    """Write <kind>-<YYYYMMDD-HHMM>[-quick].md/.json, and <kind>-latest.md for full runs; return the names."""
    RESULTS.mkdir(exist_ok=True)
    stem = f"{kind}-{when.strftime('%Y%m%d-%H%M')}" + ("-quick" if quick else "")
    (RESULTS / f"{stem}.md").write_text(table)
    (RESULTS / f"{stem}.json").write_text(json.dumps(results, indent=1, default=float) + "\n")
    written = [f"{stem}.md", f"{stem}.json"]
    if not quick:
        (RESULTS / f"{kind}-latest.md").write_text(table)
        written.append(f"{kind}-latest.md")
    return ["bench/results/" + w for w in written]
