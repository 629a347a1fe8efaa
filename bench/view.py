"""bench/view.py: how fast the browser viewer's page follows the ROS graph, and what it costs the control loop.

Processes (real DDS between them): this one (publishes joint_states and a point cloud, counts the controller's
ticks), manip_view's ``viewer`` node, manip_control's ``controller`` (250 Hz, effort interface, holding), and a
headless Chromium showing the page (scripts/install_chromium.sh). Robot: the bundled UR5.

Measured in the page (JavaScript polling the panel every 5 ms, counting distinct values):
- arm updates per second: the readout (tip pose), redrawn with the arm from each joint_states the viewer draws,
  while joint_states arrive at 100 Hz with every joint moving (the viewer draws at most ``redraw_rate_hz`` = 30);
- clouds per second: the panel's cloud line (``point cloud #N``), while a 50,000-point cloud (x, y, z, rgb) is
  published at 15 Hz.
Controller period jitter: the intervals between its controller_state stamps (its node clock, wall time here) over
the same window, without the viewer (no viewer, no browser) and with it (viewer + page + both streams).

    .venv/bin/python bench/view.py [--quick] [--no-save] [--seconds S]

Writes bench/results/view-<time>.md/.json (+ view-latest.md). On a shared 2-core machine the figures move with
the load (the load average is recorded with them).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from results_io import save_results  # noqa: E402

RATE_HZ = 250.0
CLOUD_POINTS = 50_000
COUNTER_JS = """(() => {
  window.__counts = {arm: 0, cloud: 0};
  let arm = null, cloud = null;
  const find = (s) => Array.from(document.querySelectorAll('p')).find(e => e.innerText.includes(s));
  setInterval(() => {
    const a = find('position m:'), c = find('point cloud #');
    if (a && a.innerText !== arm) { arm = a.innerText; window.__counts.arm++; }
    if (c && c.innerText !== cloud) { cloud = c.innerText; window.__counts.cloud++; }
  }, 5);
  return 1;
})()"""


def chromium():
    p = subprocess.run([str(ROOT / "scripts" / "install_chromium.sh")], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"bench/view.py: no headless Chromium: {p.stderr.strip()}")
    return p.stdout.strip().splitlines()[-1]


def cloud_message(n):
    from sensor_msgs.msg import PointCloud2, PointField

    from manip_perception.stereo import pack_pointcloud2

    rng = np.random.default_rng(0)
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="5 s windows")
    ap.add_argument("--seconds", type=float, default=None, help="length of each measuring window (default 15)")
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()
    window = args.seconds or (5.0 if args.quick else 15.0)

    from manip_core.ros.transport import use_large_data_profile
    use_large_data_profile()  # before the first participant (50,000 points: ~800 kB messages)
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from sensor_msgs.msg import JointState

    from manip_core.robots import robot_path
    from manip_msgs.msg import ControllerState
    from manip_view.browser import Browser, free_port
    from manip_view.scene import RobotScene, load_robot

    browser_exe = chromium()
    urdf = str(robot_path("ur5"))
    names = RobotScene(*load_robot("ur5")).robot.joint_names
    q0 = np.array([0.3, -1.2, 1.4, -0.8, 0.6, 0.2])
    domain = random.randint(100, 200)
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    rclpy.init(domain_id=domain)
    node = rclpy.create_node("view_bench")
    ex = SingleThreadedExecutor()
    ex.add_node(node)
    ticks, state = [], {"moving": False, "cloud": False, "t0": time.monotonic()}
    node.create_subscription(ControllerState, "joint_trajectory_controller/controller_state",
                             lambda m: ticks.append(m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec), 100)
    pub_js = node.create_publisher(JointState, "joint_states", 10)
    from sensor_msgs.msg import PointCloud2
    pub_cloud = node.create_publisher(PointCloud2, "stereo/points2", 1)
    cloud = cloud_message(CLOUD_POINTS)

    def publish_js():  # the controller's feedback at its own rate; the arm's displayed pose moves when "moving"
        t = time.monotonic() - state["t0"]
        q = q0 + (0.3 * np.sin(2.0 * t) if state["moving"] else 0.0)
        msg = JointState(name=list(names), position=q.tolist(), velocity=[0.0] * 6)
        msg.header.stamp = node.get_clock().now().to_msg()
        pub_js.publish(msg)

    def publish_cloud():
        if state["cloud"]:
            pub_cloud.publish(cloud)

    node.create_timer(0.01, publish_js)
    node.create_timer(1 / 15, publish_cloud)
    threading.Thread(target=ex.spin, daemon=True).start()

    def start(module, *params):
        cmd = [sys.executable, "-m", module, "--ros-args", "-p", f"urdf_path:={urdf}"]
        for p in params:
            cmd += ["-p", p]
        return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def measure_ticks(seconds):
        n0 = len(ticks)
        time.sleep(seconds)
        return jitter(ticks[n0:])

    procs = [start("manip_control.controller_node", f"rate_hz:={RATE_HZ}", "state_timeout:=1.0")]
    results = {"machine": {"cpus": os.cpu_count()}, "window_s": window}
    try:
        deadline = time.monotonic() + 180
        while len(ticks) < 100:
            if time.monotonic() > deadline:
                sys.exit("bench/view.py: the controller never ticked")
            time.sleep(0.2)
        time.sleep(2.0)
        print(f"controller alone: {window:.0f} s", file=sys.stderr)
        results["load_before"] = os.getloadavg()[0]
        results["controller_without_viewer"] = measure_ticks(window)

        port = free_port()
        procs.append(start("manip_view.viewer_node", f"port:={port}", f"max_cloud_points:={CLOUD_POINTS}"))
        url = f"http://127.0.0.1:{port}"
        while True:
            try:
                urllib.request.urlopen(url, timeout=2)
                break
            except OSError:
                if time.monotonic() > deadline + 120:
                    sys.exit("bench/view.py: the viewer's page never came up")
                time.sleep(0.5)
        with Browser(browser_exe, 1280, 800) as b:
            b.open(url)
            b.wait_for("document.body.innerText.includes('condition number')", 180, "the readout")
            b.evaluate("document.querySelectorAll('.mantine-Notification-closeButton').forEach(e => e.click()) || 1")
            b.evaluate(COUNTER_JS)
            state["moving"] = True
            time.sleep(2.0)
            print(f"viewer + page + joint_states 100 Hz: {window:.0f} s", file=sys.stderr)
            a0 = b.evaluate("JSON.stringify([performance.now(), window.__counts])", 300)
            time.sleep(window)
            a1 = b.evaluate("JSON.stringify([performance.now(), window.__counts])", 300)
            (ta0, ca0), (ta1, ca1) = json.loads(a0), json.loads(a1)
            results["page_arm_updates_hz_without_cloud"] = (ca1["arm"] - ca0["arm"]) / ((ta1 - ta0) / 1e3)
            state["cloud"] = True
            b.wait_for("window.__counts.cloud > 1", 180, "the first clouds in the page")
            print(f"viewer + page + joint_states 100 Hz + {CLOUD_POINTS}-point cloud 15 Hz: {window:.0f} s",
                  file=sys.stderr)
            # The page's own clock brackets the window (a loaded renderer answers late).
            c0 = b.evaluate("JSON.stringify([performance.now(), window.__counts])", 300)
            results["controller_with_viewer"] = measure_ticks(window)
            c1 = b.evaluate("JSON.stringify([performance.now(), window.__counts])", 300)
        (t0, c0), (t1, c1) = json.loads(c0), json.loads(c1)
        dt = (t1 - t0) / 1e3
        results["page_arm_updates_hz"] = (c1["arm"] - c0["arm"]) / dt
        results["page_clouds_hz"] = (c1["cloud"] - c0["cloud"]) / dt
        results["load_after"] = os.getloadavg()[0]
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        ex.shutdown()
        rclpy.shutdown()

    a, w = results["controller_without_viewer"], results["controller_with_viewer"]
    rows = [f"| without the viewer | {a.get('period_mean_ms', 0):.3f} | {a.get('period_std_ms', 0):.3f} | "
            f"{a.get('abs_dev_p99_ms', 0):.3f} | {a.get('max_period_ms', 0):.2f} | {a.get('late_over_2x', 0)} |",
            f"| with the viewer (page open, both streams) | {w.get('period_mean_ms', 0):.3f} | "
            f"{w.get('period_std_ms', 0):.3f} | {w.get('abs_dev_p99_ms', 0):.3f} | {w.get('max_period_ms', 0):.2f} | "
            f"{w.get('late_over_2x', 0)} |"]
    table = "\n".join([
        f"# manip_view speed ({datetime.datetime.now():%Y-%m-%d %H:%M}, {os.cpu_count()} CPUs, load average "
        f"{results['load_before']:.1f} before / {results['load_after']:.1f} after)", "",
        f"In the page (headless Chromium, software WebGL), {window:.0f} s windows:", "",
        "| stream | published | drawn in the page | target |", "|---|---|---|---|",
        f"| joint_states (every joint moving), alone | 100 Hz | "
        f"{results['page_arm_updates_hz_without_cloud']:.1f} Hz | >= 30 Hz |",
        f"| joint_states, with the cloud below | 100 Hz | {results['page_arm_updates_hz']:.1f} Hz | >= 30 Hz |",
        f"| point cloud, {CLOUD_POINTS:,} points | 15 Hz | {results['page_clouds_hz']:.1f} Hz | >= 10 Hz |", "",
        "The page's figures count what its own thread shows: with the machine's cores busy, software WebGL (no GPU "
        "here) and the 5 ms poll share them with every other process.", "",
        f"Controller ({RATE_HZ:.0f} Hz, period {1e3 / RATE_HZ:.0f} ms) tick intervals:", "",
        "| condition | mean ms | std ms | p99 abs deviation ms | max ms | ticks > 2 periods |",
        "|---|---|---|---|---|---|", *rows, ""])
    print(table)
    if not args.no_save:
        for f in save_results("view", table, results, args.quick, datetime.datetime.now()):
            print(f"wrote {f}", file=sys.stderr)


if __name__ == "__main__":
    main()
