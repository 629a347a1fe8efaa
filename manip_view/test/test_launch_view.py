"""launch/pick_place_sim.launch.xml view:=true: the viewer node is in the graph (manip-launch --print), and the
printed model_server and viewer commands, run process to process, serve the page of the robot that model_server
publishes on robot_description."""
import os
import random
import shlex
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAUNCH = ROOT / "launch" / "pick_place_sim.launch.xml"


def printed(*args):
    p = subprocess.run([sys.executable, "-m", "manip_core.launcher", "--print", str(LAUNCH), *args],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    return {lines[i].split("]")[0].split("[")[-1]: shlex.split(lines[i + 1])
            for i in range(len(lines) - 1) if lines[i].startswith("# [")}


def test_view_argument_starts_the_viewer_that_serves_the_launched_robot(tmp_path):
    assert "viewer" not in printed()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmds = printed("view:=true", f"view_port:={port}")
    viewer = cmds["viewer"]
    assert Path(viewer[0]).name == "viewer" and f"port:={port}" in viewer
    env = dict(os.environ, ROS_DOMAIN_ID=str(random.randint(100, 200)), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    # Without the simulator there is no /clock: the two nodes run on wall time here.
    run = [[a if a != "use_sim_time:=true" else "use_sim_time:=false" for a in c]
           for c in (cmds["model_server"], viewer)]
    logs = [tmp_path / f"{k}.log" for k in ("model_server", "viewer")]
    procs = [subprocess.Popen(c, env=env, stdout=open(f, "w"), stderr=subprocess.STDOUT, text=True)
             for c, f in zip(run, logs)]
    try:
        deadline = time.monotonic() + 120
        # The viewer's line comes once its whole page is built (the HTTP server answers before that).
        while "ur5: page at http://127.0.0.1:" not in logs[1].read_text():
            assert all(p.poll() is None for p in procs) and time.monotonic() < deadline, "no page"
            time.sleep(0.3)
        page = urllib.request.urlopen(f"http://127.0.0.1:{port}", timeout=30).read().decode()
        assert "<title>Viser</title>" in page
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(30)
    outs = [f.read_text() for f in logs]
    assert [p.returncode for p in procs] == [0, 0], outs
