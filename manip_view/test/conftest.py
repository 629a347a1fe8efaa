"""Shared fixtures of the manip_view tests: the headless Chromium of the browser tests (scripts/install_chromium.sh:
Debian's package) and ``ros_graph``, the node processes and the test's own rclpy node of the live-viewer tests."""
import os
import random
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def chromium():
    p = subprocess.run([str(ROOT / "scripts" / "install_chromium.sh")], capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        pytest.skip(f"no headless Chromium: {p.stderr.strip().splitlines()[-1] if p.stderr.strip() else p.returncode}")
    return p.stdout.strip().splitlines()[-1]


class RosGraph:
    """Node processes (``python -m <module> --ros-args -p urdf_path:=<urdf> -p k:=v ...``) on one random
    ROS_DOMAIN_ID (100-200, localhost discovery), their output in ``log_dir/<module>.log``, and the test's own
    rclpy node (``node``, its own Context) spun by a SingleThreadedExecutor on a thread of its own (rclpy's
    multi-threaded one fell behind a 250 Hz controller_state on this loaded machine; an action server's execute
    callback that waits is a coroutine); its publishers, subscriptions, timers and servers may be created at any
    time. ``stop()`` (also at teardown) ends both and returns the
    processes' outputs; ``returncodes`` then holds their exit codes."""

    def __init__(self, nodes, urdf, log_dir, name="manip_view_test"):
        import rclpy
        from rclpy.executors import SingleThreadedExecutor

        self.domain = random.randint(100, 200)
        self.env = dict(os.environ, ROS_DOMAIN_ID=str(self.domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
                        PYTHONUNBUFFERED="1")
        self.modules = [m for m, _ in nodes]
        self.log_paths = [Path(log_dir) / f"{k}_{m.rsplit('.', 1)[-1]}.log" for k, (m, _) in enumerate(nodes)]
        self.procs, self._logs = [], []
        for (module, params), path in zip(nodes, self.log_paths):
            args = [sys.executable, "-m", module, "--ros-args", "-p", f"urdf_path:={urdf}"]
            for k, v in (params or {}).items():
                args += ["-p", f"{k}:={v}"]
            log = open(path, "w")
            self._logs.append(log)
            self.procs.append(subprocess.Popen(args, env=self.env, stdout=log, stderr=subprocess.STDOUT))
        self.returncodes = None
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=self.domain)
        self.node = rclpy.create_node(name, context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        threading.Thread(target=self.executor.spin, daemon=True).start()

    def alive(self):
        return all(p.poll() is None for p in self.procs)

    def wait_page(self, port, timeout_s, ready=lambda: True, what="the viewer's page"):
        """Wait until http://127.0.0.1:port answers and ready() holds (AssertionError when a node exits first or
        after timeout_s)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}", timeout=2)
                if ready():
                    return
            except OSError:
                pass
            assert self.alive(), f"a node exited: {self.outputs()}"
            assert time.monotonic() < deadline, f"{what}: not up within {timeout_s} s"
            time.sleep(0.3)

    def outputs(self):
        return [p.read_text(errors="replace") for p in self.log_paths]

    def stop(self):
        """SIGTERM to every process (SIGKILL after 30 s), the test's node shut down; the processes' outputs."""
        if self.returncodes is None:
            import rclpy

            for p in self.procs:
                p.terminate()
            codes = []
            for p in self.procs:
                try:
                    codes.append(p.wait(30))
                except subprocess.TimeoutExpired:
                    p.kill()
                    codes.append(p.wait())
            for log in self._logs:
                log.close()
            self.returncodes = codes
            self.executor.shutdown()
            self.node.destroy_node()
            rclpy.shutdown(context=self.context)
        return self.outputs()


@pytest.fixture
def ros_graph(tmp_path):
    """``start(nodes, urdf, name=...)`` -> RosGraph; nodes: [(module, {param: value})]; stopped at teardown."""
    graphs = []

    def start(nodes, urdf, name="manip_view_test"):
        g = RosGraph(nodes, urdf, tmp_path, name)
        graphs.append(g)
        return g

    yield start
    for g in graphs:
        g.stop()
