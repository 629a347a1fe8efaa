"""`make demo DEMO_ARGS=--view`: the demo prints the viewer's URL, the page is up while the pick-and-place runs and
shows what the graph sees (the left camera image, the perceived point cloud, the tool path of the plans), and the
demo still succeeds. MANIP_VIEW_WRITE_DOCS=1 also writes the page's screenshot to docs/manip_view_demo.png."""
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from manip_view.browser import Browser, free_port

ROOT = Path(__file__).resolve().parents[2]


def progress(lines):
    """The demo's last reported task progress, % (its 'phase ... progress P %' lines)."""
    vals = [float(m.group(1)) for x in lines for m in [re.search(r"progress\s+([\d.]+) %", x)] if m]
    return max(vals, default=0.0)


@pytest.mark.slow
def test_demo_with_view_serves_the_page_while_the_task_runs(chromium, tmp_path):
    port = free_port()
    out = tmp_path / "demo"
    proc = subprocess.Popen([sys.executable, "-m", "manip_sim.demo", "--output", str(out), "--timeout", "240",
                             "--view", "--view-port", str(port)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)
    reader.start()
    url = f"http://127.0.0.1:{port}"
    png = None
    try:
        deadline = time.monotonic() + 300
        while not any(f"viewer: {url}" in x for x in lines):
            assert proc.poll() is None and time.monotonic() < deadline, "".join(lines)[-3000:]
            time.sleep(0.2)
        while True:
            try:
                urllib.request.urlopen(url, timeout=2)
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "the page never came up"
                time.sleep(0.5)
        with Browser(chromium, 1280, 800) as b:
            b.open(url)
            b.wait_for("document.body.innerText.includes('condition number')", 120, "the arm's readout")
            b.evaluate("document.querySelectorAll('.mantine-Notification-closeButton').forEach(e => e.click()) || 1")
            # The left camera image (the simulator's 640 x 480) appears in the panel while the task runs.
            b.wait_for("Array.from(document.querySelectorAll('img')).some(i => i.naturalWidth == 640)", 240,
                       "the left camera image")
            assert proc.poll() is None, "the demo ended before the page showed the camera"
            png = b.screenshot_png()  # at least one while the task runs (on a loaded machine it may be past 60 %)
            while proc.poll() is None and progress(lines) < 60 and not any("graph stopped" in x for x in lines):
                png = b.screenshot_png()  # the last one: the task under way, its plan and what perception saw
                time.sleep(3)
        assert png is not None
        (tmp_path / "demo_view.png").write_bytes(png)
        assert proc.wait(600) == 0, "".join(lines)[-3000:]
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(60)
    log = (out / "launch.log").read_text()
    assert "first point cloud:" in log and "page at http://127.0.0.1:" in log, log[-3000:]
    if os.environ.get("MANIP_VIEW_WRITE_DOCS") == "1":
        (ROOT / "docs" / "manip_view_demo.png").write_bytes(png)
