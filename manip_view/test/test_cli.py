"""manip-view offline: every bundled robot and a URDF path served (in process), and the command's errors."""
import socket
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

from manip_core.reference_robots import example_robot
from manip_core.spatial import matrix_to_quat_wxyz
from manip_view.app import OfflineViewer, is_loopback
from manip_view.scene import RobotScene, load_robot

CMD = [sys.executable, "-m", "manip_view.cli"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("robot", ["ur5", "ypp3", "planar2r", "arm3", "ur_description/urdf/ur5_robot.urdf"])
def test_offline_viewer_serves_each_robot(robot):
    name = str(example_robot(robot)) if robot.endswith(".urdf") else robot
    scene = RobotScene(*load_robot(name))
    viewer = OfflineViewer(scene, port=free_port())
    try:
        assert viewer.server.get_host() == "127.0.0.1"
        page = urllib.request.urlopen(viewer.url, timeout=10).read().decode()
        assert "<title>Viser</title>" in page and len(page) > 100_000  # the client, from the installed wheel
        lo, hi = np.array([r[1:] for r in scene.slider_ranges()]).T
        q = lo + 0.3 * (hi - lo)
        viewer.set_q(q)
        np.testing.assert_allclose([s.value for s in viewer.sliders], q)
        T = scene.robot.fk(q)
        tip = viewer._frames[scene.robot.tip_link]  # the tool's axes hang on the tip link's frame
        np.testing.assert_allclose(tip.position, T[:3, 3], atol=1e-12)
        np.testing.assert_allclose(np.abs(tip.wxyz @ matrix_to_quat_wxyz(T[:3, :3])), 1.0, atol=1e-9)
        assert f"x {T[0, 3]:+.4f}" in viewer.readout_md.content
        viewer.set_q(hi + 1.0)  # beyond the limits: clipped
        np.testing.assert_allclose(viewer.q, hi)
    finally:
        viewer.stop()


def test_loopback_addresses():
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1") and is_loopback("127.0.0.2")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.4") and not is_loopback("example.org")


@pytest.mark.parametrize("text, words", [
    ('<robot name="r"><link name="a"/><joint name="j" type="revolute"><parent link="a"/></joint>', "malformed XML"),
    ('<robot name="r"><link name="a"><visual><geometry><cone/></geometry></visual></link><link name="b"/>'
     '<joint name="j" type="revolute"><parent link="a"/><child link="b"/><limit lower="-1" upper="1"/></joint>'
     '</robot>', "link 'a' visual #0: unsupported geometry <cone>"),
])
def test_malformed_urdf_one_line_exit_2(tmp_path, text, words):
    f = tmp_path / "bad.urdf"
    f.write_text(text)
    p = subprocess.run(CMD + [str(f)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stderr
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("manip-view: ") and words in p.stderr, p.stderr
    assert "Traceback" not in p.stderr and p.stdout == ""


def test_unknown_robot_exit_2():
    p = subprocess.run(CMD + ["no_such_robot"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "unknown robot 'no_such_robot'" in p.stderr and p.stderr.count("\n") == 1


def test_non_loopback_host_warns_and_serves():
    port = free_port()
    p = subprocess.Popen(CMD + ["planar2r", "--host", "0.0.0.0", "--port", str(port)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        line = ""
        deadline = time.monotonic() + 120
        while "at http" not in line and time.monotonic() < deadline and p.poll() is None:
            line = p.stdout.readline()
        assert f"at http://0.0.0.0:{port}" in line
        assert urllib.request.urlopen(f"http://127.0.0.1:{port}", timeout=10).status == 200
    finally:
        p.terminate()
        out, err = p.communicate(timeout=30)
    assert p.returncode == 0  # SIGTERM: a clean stop
    assert "WARNING: listening on 0.0.0.0" in err and "move the sliders" in err


def test_viewer_node_bad_redraw_rate_one_fatal_line_exit_2():
    import os
    import random

    env = dict(os.environ, ROS_DOMAIN_ID=str(random.randint(100, 200)), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    p = subprocess.run([sys.executable, "-m", "manip_view.viewer_node", "--ros-args", "-p", "redraw_rate_hz:=0.0"],
                       capture_output=True, text=True, timeout=120, env=env)
    out = p.stdout + p.stderr
    assert p.returncode == 2, out
    assert "redraw_rate_hz must be > 0" in out and "Traceback" not in out, out


def test_viewer_node_nice_parameter_lowers_every_thread():
    """nice:=3 adds 3 to the nice value of every thread of the viewer's process (Linux: nice is per thread), and
    sched_idle:=true puts every thread under SCHED_IDLE, once the page is up."""
    import os
    import random

    from manip_core.robots import robot_path

    env = dict(os.environ, ROS_DOMAIN_ID=str(random.randint(100, 200)), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    p = subprocess.Popen([sys.executable, "-m", "manip_view.viewer_node", "--ros-args", "-p",
                          f"urdf_path:={robot_path('ur5')}", "-p", f"port:={free_port()}", "-p", "nice:=3",
                          "-p", "sched_idle:=true"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        line, deadline = "", time.monotonic() + 120
        while "page at http" not in line and time.monotonic() < deadline and p.poll() is None:
            line = p.stdout.readline()
        assert "page at http" in line, line
        expected = min(19, os.nice(0) + 3)
        values, policies = {}, {}
        for tid in os.listdir(f"/proc/{p.pid}/task"):
            try:
                values[tid] = int(open(f"/proc/{p.pid}/task/{tid}/stat").read().rsplit(")", 1)[1].split()[16])
                policies[tid] = os.sched_getscheduler(int(tid))
            except OSError:  # a thread that ended meanwhile
                pass
        assert len(values) > 3 and set(values.values()) == {expected}, values
        assert set(policies.values()) == {os.SCHED_IDLE}, policies
    finally:
        p.terminate()
        p.wait(30)
