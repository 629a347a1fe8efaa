"""bench/view.py: how fast the browser viewer's page follows the ROS graph, and what it costs the control loop.

Processes (real DDS between them): this one (publishes joint_states at 100 Hz with every joint moving and a
50,000-point cloud (x, y, z, rgb) at 15 Hz, from the start to the end, and counts the controller's ticks),
manip_control's ``controller`` (250 Hz, effort interface, holding), manip_view's ``viewer`` node and a headless
Chromium showing the page (scripts/install_chromium.sh). Robot: the bundled UR5.

Windows, one after the other, each ``--seconds`` long:
1. controller alone (no viewer, no browser);
2. + the viewer node (no page open);
3. + a wire client: a page elsewhere as the viewer sees it (``WireClient``, a process of its own at nice +10: it
   receives and decodes viser's websocket windows and renders nothing), first with the arm only (an empty cloud is
   published instead), then with the arm and the cloud: what the viewer delivers and costs with a page open,
   without a browser rendering on the same CPUs; then 3 pairs of windows a third as long, alternating: the viewer's
   process stopped (SIGSTOP), then running (arm + cloud to the wire client), so that the machine's other load,
   which drifts over minutes on a shared machine, weighs on both sides of each pair alike;
4. + the page at 1280x800, device pixel ratio 1 (headless Chromium, software WebGL: this machine has no GPU),
   arm only, then arm and cloud;
5. the same at ``?fixedDpr=0.25`` (a sixteenth of the pixels).
In each: the controller's period jitter (intervals between its controller_state stamps, its node clock = wall
time), the CPU time of the controller, the viewer, Chromium (every process of it) and this process, the load
average. In 3 (counted by the wire client), 4 and 5 (counted inside the page: manip_view.page_stats, on the page's
clock):
- received: arm poses / clouds that reached the page from the viewer (viser's websocket batches);
- frames: frames the page drew; shown: drawn frames with a new arm pose / a new cloud in them.
"received" is what the viewer delivers (the issue's target: updates in the page); "shown" is also bounded by how
fast the browser renders (here Chromium's software WebGL on the same 2 CPUs, no GPU). Chromium's CPU time per drawn
frame says what the renderer costs, apart from the load; the viewer's CPU time per arm pose (arm-only window) and
per cloud (the cloud window's extra CPU over the arm-only one) what the viewer costs.

    .venv/bin/python bench/view.py [--quick] [--no-save] [--seconds S] [--redraw-rate-hz HZ] [--viewer-nice N]
                                   [--browser-nice N]

Writes bench/results/view-<time>.md/.json (+ view-latest.md). On a shared 2-core machine the figures move with
the load (recorded with them).
"""
from __future__ import annotations

import argparse
import datetime
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from results_io import save_results  # noqa: E402

RATE_HZ = 250.0
JOINT_STATES_HZ = 100.0
CLOUD_HZ = 15.0
CLOUD_POINTS = 50_000
PAIRS = 3  # viewer stopped / running window pairs
TICK_S = os.sysconf("SC_CLK_TCK")


def chromium():
    p = subprocess.run([str(ROOT / "scripts" / "install_chromium.sh")], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"bench/view.py: no headless Chromium: {p.stderr.strip()}")
    return p.stdout.strip().splitlines()[-1]


def cloud_message(n, seed=0):
    from sensor_msgs.msg import PointCloud2, PointField

    from manip_perception.stereo import pack_pointcloud2

    rng = np.random.default_rng(seed)
    pts = rng.uniform([0.2, -0.4, 0.0], [0.6, 0.4, 0.05], (n, 3))
    c = pack_pointcloud2(pts, rng.integers(0, 256, (n, 3)))
    msg = PointCloud2(height=1, width=n, point_step=c.point_step, row_step=c.row_step, is_dense=True)
    msg.fields = [PointField(name=a, offset=o, datatype=d, count=k) for a, o, d, k in c.fields]
    msg.header.frame_id = "base_link"
    msg.data = c.data
    return msg


def jitter(stamps_s):
    dt = np.diff(np.asarray(stamps_s)) * 1e3
    if len(dt) < 10:
        return {"ticks": len(stamps_s)}
    dev = np.abs(dt - 1e3 / RATE_HZ)
    return {"ticks": len(stamps_s), "period_mean_ms": float(dt.mean()), "period_std_ms": float(dt.std()),
            "abs_dev_p50_ms": float(np.percentile(dev, 50)), "abs_dev_p99_ms": float(np.percentile(dev, 99)),
            "max_period_ms": float(dt.max()), "late_over_2x": int(np.sum(dt > 2e3 / RATE_HZ))}


def cpu_s(pids):
    """CPU time (user + system, s) of the living processes pids, children already reaped included."""
    total = 0.0
    for pid in pids:
        try:
            f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(x) for x in f[11:15]) / TICK_S  # utime stime cutime cstime
    return total


def tree(pid):
    """pid and every process below it."""
    children = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


class WireClient:
    """A page on another machine, as far as the viewer can tell: a websocket client of the viewer's viser server
    (its own protocol version) that decodes every window of messages it receives and counts them the way
    manip_view.page_stats counts them in a browser (``arm``: windows holding a new pose of a ``/robot/...`` node,
    ``cloud``: windows holding new points of ``/cloud``), and draws nothing. ``read()`` is page_stats.read's dict
    (frames: 0)."""

    def __init__(self, url):
        import msgspec
        import viser
        import zstandard
        from websockets.sync.client import connect

        self._decode, self._unzip = msgspec.msgpack.decode, zstandard.ZstdDecompressor()
        self._ws = connect(url.replace("http://", "ws://"), subprotocols=[f"viser-v{viser.__version__}"],
                           max_size=None, open_timeout=60)
        self.counts = {"arm": 0, "cloud": 0, "batches": 0, "bytes": 0}
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="wire-client", daemon=True)
        self._thread.start()

    def _run(self):
        from websockets.exceptions import ConnectionClosed

        try:
            while True:
                b = self._ws.recv()
                n, c = int.from_bytes(b[:8], "little"), int.from_bytes(b[8:16], "little")
                arm = cloud = False
                for m in self._decode(self._unzip.decompress(b[16:16 + c], max_output_size=n))["messages"]:
                    t, name = m.get("type"), m.get("name") or ""
                    if t == "SetPositionMessage" and name.startswith("/robot/"):
                        arm = True
                    elif name == "/cloud" and (t == "PointCloudMessage" or (
                            t == "SceneNodeUpdateMessage" and "points" in (m.get("updates") or {}))):
                        cloud = True
                with self._lock:
                    self.counts["batches"] += 1
                    self.counts["bytes"] += len(b)
                    self.counts["arm"] += arm
                    self.counts["cloud"] += cloud
        except (ConnectionClosed, OSError):
            return

    def read(self):
        with self._lock:
            return dict(self.counts, frames=0, armFrames=0, cloudFrames=0, t_ms=1e3 * time.monotonic())

    def close(self):
        self._ws.close()
        self._thread.join(10)


class WireProcess:
    """A WireClient in a process of its own at nice +10 (``bench/view.py --wire URL``: it stands for a page on
    another machine, so it must not take the controller's CPU): ``read()`` asks it for its counts, ``pid`` for its
    CPU time."""

    def __init__(self, url):
        self._p = subprocess.Popen(["nice", "-n", "10", sys.executable, __file__, "--wire", url],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.pid = self._p.pid

    def read(self):
        import json

        self._p.stdin.write("\n")
        self._p.stdin.flush()
        line = self._p.stdout.readline()
        if not line:
            sys.exit(f"bench/view.py: the wire client exited ({self._p.wait(10)})")
        return json.loads(line)

    def close(self):
        self._p.stdin.close()
        try:
            self._p.wait(30)
        except subprocess.TimeoutExpired:
            self._p.kill()


def wire_main(url):
    """--wire URL: a WireClient; one line of JSON counts on stdout per line read on stdin, until stdin closes."""
    import json

    client = WireClient(url)
    for _ in sys.stdin:
        print(json.dumps(client.read()), flush=True)
    client.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="5 s windows")
    ap.add_argument("--seconds", type=float, default=None, help="length of each measuring window (default 15)")
    ap.add_argument("--redraw-rate-hz", type=float, default=None, help="the viewer's redraw_rate_hz (its default)")
    ap.add_argument("--viewer-nice", type=int, default=None,
                    help="the viewer's nice parameter (added to its nice value; default: the node's default)")
    ap.add_argument("--viewer-param", action="append", default=[], metavar="NAME:=VALUE",
                    help="another parameter of the viewer node (repeatable), e.g. sched_idle:=true")
    ap.add_argument("--browser-nice", type=int, default=0,
                    help="added to Chromium's nice value (default 0: as a user starts it)")
    ap.add_argument("--no-save", action="store_true")
    ap.add_argument("--wire", metavar="URL", help=argparse.SUPPRESS)  # the wire client's own process
    args = ap.parse_args()
    if args.wire:
        return wire_main(args.wire)
    window = args.seconds or (5.0 if args.quick else 15.0)

    from manip_core.ros.transport import use_large_data_profile
    use_large_data_profile()  # before the first participant (50,000 points: ~800 kB messages)
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from sensor_msgs.msg import JointState, PointCloud2

    from manip_core.robots import robot_path
    from manip_msgs.msg import ControllerState
    from manip_view import page_stats
    from manip_view.browser import Browser, free_port
    from manip_view.scene import RobotScene, load_robot

    browser_exe = chromium()
    if args.browser_nice:  # Chromium and every process it starts at a lower priority
        wrapper = Path(tempfile.mkdtemp(prefix="manip-bench-view-")) / "chromium-nice"
        wrapper.write_text(f'#!/bin/sh\nexec nice -n {int(args.browser_nice)} {browser_exe} "$@"\n')
        wrapper.chmod(0o755)
        browser_exe = str(wrapper)
    urdf = str(robot_path("ur5"))
    scene = RobotScene(*load_robot("ur5"))
    names = scene.robot.joint_names
    tip_node = "/robot/" + scene.robot.tip_link.replace("/", "_")
    q0 = np.array([0.3, -1.2, 1.4, -0.8, 0.6, 0.2])
    domain = random.randint(100, 200)
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    rclpy.init(domain_id=domain)
    node = rclpy.create_node("view_bench")
    ex = SingleThreadedExecutor()
    ex.add_node(node)
    ticks, t0 = [], time.monotonic()
    node.create_subscription(ControllerState, "joint_trajectory_controller/controller_state",
                             lambda m: ticks.append(m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec), 100)
    pub_js = node.create_publisher(JointState, "joint_states", 10)
    pub_cloud = node.create_publisher(PointCloud2, "stereo/points2", 1)
    # Consecutive clouds differ (viser sends nothing for points equal to those shown): three, in turn.
    # An empty cloud clears the page's cloud for the "arm only" windows (sent at the same rate: best effort QoS).
    clouds = [cloud_message(CLOUD_POINTS, seed) for seed in range(3)]
    empty = cloud_message(0)
    sent = {"clouds": 0, "on": True}

    def publish_cloud():
        if sent["on"]:
            pub_cloud.publish(clouds[sent["clouds"] % len(clouds)])
            sent["clouds"] += 1
        else:
            pub_cloud.publish(empty)

    def publish_js():  # the robot's state at 100 Hz, every joint moving (the viewer redraws the arm from it)
        q = q0 + 0.3 * np.sin(2.0 * (time.monotonic() - t0))
        msg = JointState(name=list(names), position=q.tolist(), velocity=[0.0] * 6)
        msg.header.stamp = node.get_clock().now().to_msg()
        pub_js.publish(msg)

    node.create_timer(1.0 / JOINT_STATES_HZ, publish_js)
    node.create_timer(1.0 / CLOUD_HZ, publish_cloud)
    spinner = threading.Thread(target=ex.spin, daemon=True)
    spinner.start()

    def start(module, *params):
        cmd = [sys.executable, "-m", module, "--ros-args", "-p", f"urdf_path:={urdf}"]
        for p in params:
            cmd += ["-p", p]
        log = open(Path(logs) / f"{module.rsplit('.', 1)[-1]}.log", "w")
        return subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)

    logs = tempfile.mkdtemp(prefix="manip-bench-view-")
    print(f"node logs in {logs}", file=sys.stderr)
    procs = {"controller": start("manip_control.controller_node", f"rate_hz:={RATE_HZ}", "state_timeout:=1.0")}
    results = {"machine": {"cpus": os.cpu_count()}, "window_s": window, "windows": {}}
    rows_page, rows_ctrl = [], []
    paired = []  # [(window with the viewer stopped, window with it running)]

    def measure(name, browser=None, wire=None, seconds=None):
        """One window: jitter, CPU per process, load; the page's counters when a browser shows it (or those of
        the WireClient ``wire``)."""
        groups = {"controller": [procs["controller"].pid]}
        if "viewer" in procs:
            groups["viewer"] = [procs["viewer"].pid]
        if browser is not None:
            groups["chromium"] = tree(browser.pid)
        if wire is not None:
            groups["wire client"] = [wire.pid]
        length = seconds or window
        print(f"{name}: {length:.0f} s", file=sys.stderr)
        page0 = (page_stats.read(browser, tip_node) if browser is not None
                 else wire.read() if wire is not None else None)
        c0 = {k: cpu_s(v) for k, v in groups.items()}
        own0, w0, n0 = sum(os.times()[:2]), time.monotonic(), len(ticks)
        time.sleep(length)
        n1, wall = len(ticks), time.monotonic() - w0
        c1 = {k: cpu_s(v) for k, v in groups.items()}
        own1 = sum(os.times()[:2])
        page1 = page_stats.read(browser) if browser is not None else wire.read() if wire is not None else None
        r = {"jitter": jitter(ticks[n0:n1]), "load_1min": os.getloadavg()[0], "wall_s": wall,
             "cpu_cores": {k: (c1[k] - c0[k]) / wall for k in groups} | {"bench": (own1 - own0) / wall}}
        if page0 is not None:
            r["page_hz"] = page_stats.rates(page0, page1)
            r["viewer_cpu_ms_per_arm_pose"] = 1e3 * r["cpu_cores"]["viewer"] / max(r["page_hz"]["arm"], 1e-9)
            if browser is not None:
                frames = max(page1["frames"] - page0["frames"], 1)
                r["chromium_cpu_s_per_frame"] = (c1["chromium"] - c0["chromium"]) / frames
                r["tip_m"] = page1["tip"]
            else:
                r["wire_MB_per_s"] = (page1["bytes"] - page0["bytes"]) / 1e6 / wall
        results["windows"][name] = r
        j = r["jitter"]
        cpu = ", ".join(f"{k} {v:.2f}" for k, v in r["cpu_cores"].items())
        rows_ctrl.append(f"| {name} | {j.get('period_mean_ms', 0):.3f} | {j.get('period_std_ms', 0):.3f} | "
                         f"{j.get('abs_dev_p99_ms', 0):.3f} | {j.get('max_period_ms', 0):.2f} | "
                         f"{j.get('late_over_2x', 0)} | {cpu} | {r['load_1min']:.1f} |")
        if page0 is not None:
            h = r["page_hz"]
            drawn = (f"{h['armFrames']:.1f} | {h['cloud']:.1f} | {h['cloudFrames']:.1f} | {h['frames']:.1f}"
                     if browser is not None else f"- | {h['cloud']:.1f} | - | -")
            rows_page.append(f"| {name} | {h['arm']:.1f} | {drawn} | {r['cpu_cores']['viewer']:.2f} | "
                             + (f"{r['chromium_cpu_s_per_frame']:.3f}" if browser is not None
                                else f"- ({r['wire_MB_per_s']:.1f} MB/s received)") + f" | {r['load_1min']:.1f} |")
        return r

    def per_cloud(arm_only, with_cloud):
        """The viewer's CPU ms per cloud that reached the page: its extra CPU with the cloud over the arm only."""
        extra = with_cloud["cpu_cores"]["viewer"] - arm_only["cpu_cores"]["viewer"]
        with_cloud["viewer_cpu_ms_per_cloud"] = 1e3 * extra / max(with_cloud["page_hz"]["cloud"], 1e-9)
        return with_cloud["viewer_cpu_ms_per_cloud"]

    try:
        deadline = time.monotonic() + 180
        while len(ticks) < 100:
            if time.monotonic() > deadline:
                sys.exit("bench/view.py: the controller never ticked")
            time.sleep(0.2)
        time.sleep(2.0)
        results["load_before"] = os.getloadavg()[0]
        measure("controller alone")

        port = free_port()
        params = [f"port:={port}", f"max_cloud_points:={CLOUD_POINTS}"]
        if args.redraw_rate_hz:
            params.append(f"redraw_rate_hz:={args.redraw_rate_hz}")
        if args.viewer_nice is not None:
            params.append(f"nice:={args.viewer_nice}")
        params += args.viewer_param
        procs["viewer"] = start("manip_view.viewer_node", *params)
        url = f"http://127.0.0.1:{port}"
        viewer_log = Path(logs) / "viewer_node.log"
        # Its start-up is over (and its priority lowered) when it logs the page's address: the HTTP server answers
        # before the page is built.
        while "page at http" not in viewer_log.read_text(errors="replace"):
            if time.monotonic() > deadline + 120 or procs["viewer"].poll() is not None:
                sys.exit(f"bench/view.py: the viewer's page never came up (its log: {viewer_log})")
            time.sleep(0.5)
        urllib.request.urlopen(url, timeout=30)
        time.sleep(3.0)
        measure("+ viewer, no page")
        # A page elsewhere (nothing rendered on this machine): what the viewer delivers and costs by itself.
        sent["on"] = False
        wire = WireProcess(url)
        try:
            deadline_wire = time.monotonic() + 120
            while wire.read()["arm"] < 10 and time.monotonic() < deadline_wire:
                time.sleep(0.2)
            time.sleep(2.0)
            arm_only = measure("+ wire client, arm only", wire=wire)
            sent["on"] = True
            time.sleep(2.0)
            per_cloud(arm_only, measure("+ wire client, arm + cloud", wire=wire))
            # Paired windows, alternating, so that a change of the machine's load hits both alike: the viewer's
            # process stopped (SIGSTOP: it takes no CPU) / running (arm + cloud to the wire client).
            for k in range(PAIRS):
                os.kill(procs["viewer"].pid, signal.SIGSTOP)
                try:
                    time.sleep(0.5)
                    paired.append([measure(f"pair {k + 1}: viewer stopped", seconds=window / 3)])
                finally:
                    os.kill(procs["viewer"].pid, signal.SIGCONT)
                time.sleep(1.0)
                paired[-1].append(measure(f"pair {k + 1}: viewer running, wire client, arm + cloud", wire=wire,
                                          seconds=window / 3))
        finally:
            wire.close()
        for label, query in (("page 1280x800", ""), ("page 1280x800 ?fixedDpr=0.25", "?fixedDpr=0.25")):
            sent["on"] = False
            with Browser(browser_exe, 1280, 800) as b:
                page_stats.install(b)
                b.open(url + query)
                b.wait_for("document.body.innerText.includes('condition number')", 180, "the readout")
                b.evaluate("document.querySelectorAll('.mantine-Notification-closeButton')"
                           ".forEach(e => e.click()) || 1")
                b.wait_for("document.body.innerText.includes(' 0 points drawn')", 180, "the cloud cleared")
                time.sleep(2.0)
                arm_only = measure(f"+ {label}, arm only", b)
                sent["on"] = True
                n = page_stats.read(b)["cloud"]
                b.wait_for(f"window.__manipStats.cloud > {n + 1}", 180, "the clouds in the page")
                time.sleep(2.0)
                per_cloud(arm_only, measure(f"+ {label}, arm + cloud", b))
        results["load_after"] = os.getloadavg()[0]
    finally:
        for p in procs.values():
            p.terminate()
        for p in procs.values():
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        ex.shutdown()
        spinner.join(10)
        node.destroy_node()
        rclpy.shutdown()

    rate = args.redraw_rate_hz or "default"
    w = results["windows"]
    alone, viewer = w["controller alone"]["jitter"], w["+ viewer, no page"]["jitter"]
    page_rows = [(k, v) for k, v in w.items() if "page_hz" in v]

    def verdict(rows, what):
        arm = min(v["page_hz"]["arm"] for _, v in rows)
        cloud = min(v["page_hz"]["cloud"] for k, v in rows if k.endswith("arm + cloud"))
        results["targets"][what] = {"arm_received_min_hz": arm, "cloud_received_min_hz": cloud,
                                    "arm_ok": arm >= 30.0, "cloud_ok": cloud >= 10.0}
        return (f"{what}: arm >= 30 Hz {'PASS' if arm >= 30 else 'FAIL'} (lowest window {arm:.1f} Hz), "
                f"50,000-point cloud >= 10 Hz {'PASS' if cloud >= 10 else 'FAIL'} (lowest window {cloud:.1f} Hz)")

    results["targets"] = {}
    verdicts = [verdict([r for r in page_rows if "wire" in r[0]], "a page elsewhere (wire client)"),
                verdict([r for r in page_rows if "wire" not in r[0]], "headless Chromium on this machine")]
    costs = [f"{v['viewer_cpu_ms_per_arm_pose']:.2f} ms per arm pose ({k[2:]})" for k, v in page_rows
             if k.endswith("arm only")]
    costs += [f"{v['viewer_cpu_ms_per_cloud']:.1f} ms per cloud ({k[2:]})" for k, v in page_rows
              if "viewer_cpu_ms_per_cloud" in v]
    late = [(a["jitter"].get("late_over_2x", 0), b["jitter"].get("late_over_2x", 0)) for a, b in paired]
    p99 = [(a["jitter"].get("abs_dev_p99_ms", 0), b["jitter"].get("abs_dev_p99_ms", 0)) for a, b in paired]
    results["paired"] = {"late_over_2x": late, "abs_dev_p99_ms": p99}
    summary = [
        f"- Updates that reached the page (the target): {'; '.join(verdicts)}.",
        "- Drawn by headless Chromium's software WebGL on this machine: the 'shown' columns (bounded by the renderer, "
        "not by the viewer; Chromium's CPU s per frame).",
        f"- The viewer's CPU: {'; '.join(costs)}.",
        f"- Controller alone vs with the viewer (no page): p99 |period - 4 ms| {alone.get('abs_dev_p99_ms', 0):.3f} "
        f"vs {viewer.get('abs_dev_p99_ms', 0):.3f} ms, ticks > 2 periods {alone.get('late_over_2x', 0)} vs "
        f"{viewer.get('late_over_2x', 0)} per {window:.0f} s; the page rows add Chromium's rendering on the same CPUs.",
        f"- Paired windows of {window / 3:.0f} s, alternating (viewer stopped, then running with the wire client and "
        f"the cloud): ticks > 2 periods {', '.join(f'{a} vs {b}' for a, b in late)}; p99 |period - 4 ms| "
        f"{', '.join(f'{a:.2f} vs {b:.2f}' for a, b in p99)} ms."]
    table = "\n".join([
        f"# manip_view speed ({datetime.datetime.now():%Y-%m-%d %H:%M}, {os.cpu_count()} CPUs, load average "
        f"{results['load_before']:.1f} before / {results['load_after']:.1f} after)", "",
        f"Published by the bench: joint_states {JOINT_STATES_HZ:.0f} Hz (every joint moving), a "
        f"{CLOUD_POINTS:,}-point cloud {CLOUD_HZ:.0f} Hz (an empty one in the arm-only windows); the viewer's "
        f"redraw_rate_hz: {rate}, its nice parameter: "
        f"{'default' if args.viewer_nice is None else args.viewer_nice}"
        + (f", its other parameters: {' '.join(args.viewer_param)}" if args.viewer_param else "")
        + f", Chromium's nice +{args.browser_nice} "
        f"(this process's nice value: {os.nice(0)}). Windows of {window:.0f} s.", "", *summary, "",
        "In the page (wire client: a page elsewhere, nothing drawn; or headless Chromium, software WebGL: no GPU "
        "here), per second of the page's clock. Received: what reached the page from the viewer; shown: drawn frames "
        "that held a new arm pose / cloud; frames: all frames drawn (targets: arm >= 30 Hz, cloud >= 10 Hz):", "",
        "| page | arm received Hz | arm shown Hz | cloud received Hz | cloud shown Hz | frames/s | viewer CPU cores | "
        "Chromium CPU s per frame | load |", "|---|---|---|---|---|---|---|---|---|", *rows_page, "",
        f"Controller ({RATE_HZ:.0f} Hz, period {1e3 / RATE_HZ:.0f} ms) tick intervals, and CPU use (cores) of each "
        "process over the window:", "",
        "| condition | mean ms | std ms | p99 abs deviation ms | max ms | ticks > 2 periods | CPU cores | load |",
        "|---|---|---|---|---|---|---|---|", *rows_ctrl, ""])
    print(table)
    if not args.no_save:
        for f in save_results("view", table, results, args.quick, datetime.datetime.now()):
            print(f"wrote {f}", file=sys.stderr)


if __name__ == "__main__":
    main()
