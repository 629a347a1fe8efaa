"""Node-starting fixtures of the workspace tests (the one shared place for them).

``node_procs``: a factory that starts node console scripts of the venv (``.venv/bin/<exe>``, what
manip-launch and colcon's lib/<pkg>/<exe> run) with ``--ros-args -p name:=value`` on one random
ROS_DOMAIN_ID (100-200, localhost discovery), logs in tmp files; every process left is stopped at teardown.
``ros_client``: an rclpy context and node on that same domain (its own Context, so other tests' rclpy state
is untouched). ``real_launch``: the ``../shared/tools/real-launch`` tool, built once per test run.
"""
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
UR5_URDF = ROOT / "manip_core" / "manip_core" / "robots" / "ur5.urdf"
REAL_LAUNCH = ROOT.parent / "shared" / "tools" / "real-launch"
# the tool's cache (tools once, then the colcon build of this checkout) inside this checkout's build/, so
# that other checkouts using the tool at the same time cannot rebuild the workspace under a running test
REAL_LAUNCH_CACHE = ROOT / "build" / "real-launch"


class NodeProcess:
    def __init__(self, exe, params, env, log_path, extra_args=()):
        self.exe = exe
        self.log_path = log_path
        self._log = open(log_path, "w")
        args = [str(BIN / exe), "--ros-args"]
        for k, v in (params or {}).items():
            args += ["-p", f"{k}:={v}"]
        self.proc = subprocess.Popen(args + list(extra_args), env=env, stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True)

    @property
    def log(self):
        return self.log_path.read_text(errors="replace")

    def wait_log(self, pattern, timeout=60.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            text = self.log
            if re.search(pattern, text):
                return text
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.exe} exited with {self.proc.returncode}:\n{text}")
            time.sleep(0.05)
        raise AssertionError(f"{self.exe}: '{pattern}' not logged within {timeout} s:\n{self.log}")

    def signal(self, sig):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def wait(self, timeout=20.0):
        """Exit status (None if still running after timeout: then killed)."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            return None
        finally:
            self._log.close()


@pytest.fixture(scope="module")
def ros_domain():
    return random.randint(100, 200)


@pytest.fixture(scope="module")
def ros_env(ros_domain):
    return dict(os.environ, ROS_DOMAIN_ID=str(ros_domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
                PYTHONUNBUFFERED="1")


@pytest.fixture(scope="module")
def node_procs(ros_env, tmp_path_factory):
    """``start(exe, params=None, name=None, extra_args=())`` -> NodeProcess; all stopped at teardown."""
    started = []
    logs = tmp_path_factory.mktemp("nodes")

    def start(exe, params=None, name=None, extra_args=()):
        p = NodeProcess(exe, params, ros_env, logs / f"{name or exe}-{len(started)}.log", extra_args)
        started.append(p)
        return p

    yield start
    for p in started:
        p.signal(signal.SIGINT)
    for p in started:
        if not p._log.closed:
            p.wait(15.0)


class RosClient:
    """An rclpy context, node and executor of its own on the nodes' domain."""

    def __init__(self, domain):
        import rclpy
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor
        self.context = Context()
        rclpy.init(context=self.context, domain_id=domain)
        self.node = rclpy.create_node("contract_test_client", context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)

    def spin_until(self, predicate, timeout):
        end = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > end:
                return False
            self.executor.spin_once(timeout_sec=0.05)
        return True

    def call(self, srv_type, name, request, timeout=30.0):
        """The response of service ``name``, or None after timeout s (waiting for the server included)."""
        cli = self.node.create_client(srv_type, name)
        try:
            end = time.monotonic() + timeout
            if not self.spin_until(cli.service_is_ready, timeout):
                return None
            fut = cli.call_async(request)
            return fut.result() if self.spin_until(fut.done, max(0.0, end - time.monotonic())) else None
        finally:
            self.node.destroy_client(cli)

    def close(self):
        import rclpy
        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.shutdown(context=self.context)


@pytest.fixture(scope="module")
def ros_client(ros_domain):
    client = RosClient(ros_domain)
    yield client
    client.close()


@pytest.fixture(scope="session")
def real_launch(tmp_path_factory):
    """Path of the real-launch runner, after one build of the tool and the workspace per test run (cache:
    REAL_LAUNCH_CACHE; run the tool with that variable set)."""
    tool = REAL_LAUNCH / "ros2-launch"
    if not tool.exists():
        pytest.skip(f"{REAL_LAUNCH} is missing (the shared real-launch tool: ../shared next to the checkout)")
    if shutil.which("cmake") is None:
        pytest.skip("cmake is missing: the real-launch tool builds the workspace with colcon")
    work = tmp_path_factory.mktemp("real_launch")
    log = work / "build.log"
    empty = work / "empty.launch.xml"   # builds the tools cache and the workspace, then ends at once
    empty.write_text("<launch>\n</launch>\n")
    env = dict(os.environ, ROS_DOMAIN_ID=str(random.randint(100, 200)), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
               REAL_LAUNCH_CACHE=str(REAL_LAUNCH_CACHE))
    print(f"real-launch: building the tools cache (once) and the workspace (log {log})", file=sys.stderr)
    with open(log, "w") as f:
        res = subprocess.run([str(tool), str(empty)], cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=f,
                             stderr=subprocess.STDOUT, timeout=1500)
    if res.returncode != 0:
        pytest.fail(f"real-launch build failed (log {log}):\n{log.read_text()[-3000:]}")
    return tool
