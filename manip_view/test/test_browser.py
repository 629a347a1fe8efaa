"""manip-view in a real browser: headless Chromium (Debian's package, installed by scripts/install_chromium.sh)
opens the page of a running offline viewer, driven over the DevTools protocol (manip_view.browser).

Checks: the page is drawn (not blank) and the arm's pixels sit where Pinocchio's link frames project through the
viewer's camera; pressing ArrowRight on a joint slider (the page's own control) moves that joint, the readout shows
the tip position Pinocchio computes for the new value and the drawn arm follows; the page fetched nothing but the
viewer's own address. MANIP_VIEW_WRITE_DOCS=1 also writes the screenshot to docs/manip_view_ur5.png.
"""
import io
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
from PIL import Image

from manip_core.robots import robot_path
from manip_view.browser import Browser
from manip_view.camera import project
from manip_view.scene import RobotScene, load_robot

ROOT = Path(__file__).resolve().parents[2]
W, H = 1280, 800
Q0 = [0.3, -1.2, 1.4, -0.8, 0.6, 0.2]


@pytest.fixture(scope="module")
def chromium():
    p = subprocess.run([str(ROOT / "scripts" / "install_chromium.sh")], capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        pytest.skip(f"no headless Chromium: {p.stderr.strip().splitlines()[-1] if p.stderr.strip() else p.returncode}")
    return p.stdout.strip().splitlines()[-1]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def robot_mask(png):
    """Pixels of the arm's orange (ROBOT_RGB under the lights), outside the GUI panel and the axes gizmo."""
    im = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    r, g, b = im[..., 0], im[..., 1], im[..., 2]
    m = (r - b > 50) & (g - b > 20) & (r > 150)
    m[:, 930:] = False       # the control panel (right)
    m[H - 80:, :80] = False  # the orientation gizmo (bottom left)
    return im, m


def pin_link_origins(q):
    model = pin.buildModelFromUrdf(str(robot_path("ur5")))
    data = model.createData()
    pin.framesForwardKinematics(model, data, np.asarray(q, dtype=float))
    return {model.frames[i].name: data.oMf[i].translation.copy() for i in range(len(model.frames))}


def check_arm_where_fk_projects(mask, scene, q, camera):
    """Every skeleton segment's inner points (Pinocchio link origins, projected) lie on orange pixels, and every
    orange pixel lies near a projected segment."""
    pos, look, fov = camera
    origins = pin_link_origins(q)
    segs = []
    for p, c in scene.segments:
        a, b = project(np.array([origins[p], origins[c]]), pos, look, fov, W, H)
        if np.linalg.norm(b - a) > 20:
            segs.append((a, b))
            for t in (0.35, 0.5, 0.65):
                u, v = np.round(a + t * (b - a)).astype(int)
                assert mask[v - 3:v + 4, u - 3:u + 4].any(), f"no arm pixel at ({u}, {v}) on segment {p}->{c}"
    assert len(segs) >= 3
    ys, xs = np.nonzero(mask)
    pts = np.column_stack([xs, ys]).astype(float)
    dmin = np.full(len(pts), np.inf)
    for a, b in segs:
        d = b - a
        t = np.clip((pts - a) @ d / (d @ d), 0, 1)
        dmin = np.minimum(dmin, np.linalg.norm(pts - (a + t[:, None] * d), axis=1))
    # The cylinders are ~20 px wide here; shading and the tool frame's axes stay within 40 px of the segments.
    assert np.mean(dmin < 40) > 0.99, np.percentile(dmin, [50, 99, 100])


def test_page_draws_the_arm_where_fk_projects_and_a_slider_moves_it(chromium, tmp_path):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "manip_view.cli", "ur5", "--port", str(port), "--q",
                             *map(str, Q0)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line, deadline = "", time.monotonic() + 120
        while "at http" not in line and time.monotonic() < deadline and proc.poll() is None:
            line = proc.stdout.readline()
        url = line.split(" at ")[-1].strip()
        assert url == f"http://127.0.0.1:{port}", line
        scene = RobotScene(*load_robot("ur5"))
        camera = scene.default_camera()
        with Browser(chromium, W, H) as b:
            b.open(url)
            b.wait_for("document.querySelectorAll('[role=slider]').length == 6", 90, "the six joint sliders")
            b.wait_for("document.body.innerText.includes('condition number')", 30, "the readout")
            # Close the "software WebGL" notice so that it covers nothing.
            b.evaluate("document.querySelectorAll('.mantine-Notification-closeButton').forEach(e => e.click()) || 1")
            deadline = time.monotonic() + 60
            while True:  # the first frames of the software renderer can take a while on a loaded machine
                png = b.screenshot_png()
                im, mask = robot_mask(png)
                if mask.sum() > 2000 or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            (tmp_path / "before.png").write_bytes(png)
            assert im.std() > 10, "blank screenshot"
            assert mask.sum() > 2000, f"only {mask.sum()} arm pixels"
            check_arm_where_fk_projects(mask, scene, Q0, camera)

            # The page's own control: click the shoulder_lift slider's track at 45 % of its width (arrow keys would
            # also orbit the camera).
            values = b.evaluate("Array.from(document.querySelectorAll('[role=slider]'))"
                                ".map(e => parseFloat(e.getAttribute('aria-valuenow')))")
            np.testing.assert_allclose(values, Q0)
            x0, y0, width = b.evaluate("(() => { const r = document.querySelectorAll('.mantine-Slider-track')[1]"
                                       ".getBoundingClientRect(); return [r.left, r.top + r.height / 2, r.width]; })()")
            b.click(x0 + 0.45 * width, y0)
            value = b.wait_for("(() => { const v = parseFloat(document.querySelectorAll('[role=slider]')[1]"
                               f".getAttribute('aria-valuenow')); return Math.abs(v - ({Q0[1]})) > 0.05 && v; }})()",
                               30, "shoulder_lift to move")
            lo, hi = scene.slider_ranges()[1][1:]
            assert value == pytest.approx(lo + 0.45 * (hi - lo), abs=0.05)  # where the click was
            q1 = list(Q0)
            q1[1] = value
            tip = pin_link_origins(q1)["tool0"]
            expected = f"x {tip[0]:+.4f} y {tip[1]:+.4f} z {tip[2]:+.4f}"
            text = b.wait_for(f"document.body.innerText.includes('{expected}') && document.body.innerText", 30,
                              f"the readout {expected}")
            m = re.search(r"manipulability: ([0-9.]+)", text)
            assert m and float(m.group(1)) > 0
            time.sleep(1.0)
            png = b.screenshot_png()
            (tmp_path / "after.png").write_bytes(png)
            im2, mask2 = robot_mask(png)
            assert (mask2 != mask).sum() > 500, "the drawn arm did not move"
            check_arm_where_fk_projects(mask2, scene, q1, camera)
            outside = [u for u in b.requests if not u.startswith((url, "data:", "blob:"))]
            assert not outside, f"the page fetched from elsewhere: {outside[:3]}"
            assert not b.console, b.console
        if os.environ.get("MANIP_VIEW_WRITE_DOCS") == "1":
            (ROOT / "docs" / "manip_view_ur5.png").write_bytes(png)
    finally:
        proc.terminate()
        proc.wait(30)
