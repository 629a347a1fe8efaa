"""manip-view in a real browser: headless Chromium (Debian's package, installed by scripts/install_chromium.sh)
opens the page of a running offline viewer, driven over the DevTools protocol (manip_view.browser).

Checks: the page is drawn (not blank) and the arm's pixels sit where Pinocchio's link frames project through the
viewer's camera; pressing ArrowRight on a joint slider (the page's own control) moves that joint, the readout shows
the tip position Pinocchio computes for the new value and the drawn arm follows; the page fetched nothing but the
viewer's own address. MANIP_VIEW_WRITE_DOCS=1 also writes the screenshot to docs/manip_view_ur5.png.
"""
import io
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
from PIL import Image

from manip_core.robots import robot_path
from manip_view import page_stats
from manip_view.browser import Browser, free_port
from manip_view.camera import project
from manip_view.scene import RobotScene, load_robot

ROOT = Path(__file__).resolve().parents[2]
W, H = 1280, 800
Q0 = [0.3, -1.2, 1.4, -0.8, 0.6, 0.2]


def robot_mask(png):
    """Pixels of the arm's orange (ROBOT_RGB under the lights), outside the GUI panel and the axes gizmo."""
    im = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    r, g, b = im[..., 0], im[..., 1], im[..., 2]
    m = (r - b > 50) & (g - b > 20) & (r > 150)
    m[:, 930:] = False       # the control panel (right)
    m[H - 80:, :80] = False  # the orientation gizmo (bottom left)
    return im, m


def track_of(b, index):
    """(left, middle y, width) px of the index-th slider's track, once the panel's layout has settled."""
    b.wait_for("document.body.innerText.includes('condition number')", 60, "the readout")
    js = (f"(() => {{ const r = document.querySelectorAll('.mantine-Slider-track')[{index}]"
          ".getBoundingClientRect(); return [r.left, r.top + r.height / 2, r.width]; })()")
    last, deadline = None, time.monotonic() + 30
    while True:
        rect = b.evaluate(js)
        if rect == last or time.monotonic() > deadline:
            return rect
        last = rect
        time.sleep(0.5)


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


def ur5_without_visuals(tmp_path):
    """The bundled UR5 without its <visual> cylinders: the page then draws the orange skeleton between the link
    origins, which check_arm_where_fk_projects measures (same kinematics as the bundled file)."""
    out = tmp_path / "ur5_skeleton.urdf"
    out.write_text(re.sub(r"<visual>.*?</visual>", "", robot_path("ur5").read_text(), flags=re.S))
    return out


def test_page_draws_the_arm_where_fk_projects_and_a_slider_moves_it(chromium, tmp_path):
    port = free_port()
    urdf = ur5_without_visuals(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "manip_view.cli", str(urdf), "--port", str(port), "--q",
                             *map(str, Q0)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line, deadline = "", time.monotonic() + 120
        while "at http" not in line and time.monotonic() < deadline and proc.poll() is None:
            line = proc.stdout.readline()
        url = line.split(" at ")[-1].strip()
        assert url == f"http://127.0.0.1:{port}", line
        scene = RobotScene(*load_robot(str(urdf)))
        camera = scene.default_camera()
        with Browser(chromium, W, H) as b:
            b.open(url)
            b.wait_for("document.querySelectorAll('[role=slider]').length == 6", 90, "the six joint sliders")
            b.wait_for("document.body.innerText.includes('condition number')", 30, "the readout")
            # Close the "software WebGL" notice so that it covers nothing.
            b.evaluate("document.querySelectorAll('.mantine-Notification-closeButton').forEach(e => e.click()) || 1")
            deadline = time.monotonic() + 180
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
            x0, y0, width = track_of(b, 1)
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


def type_into(b, label, index, text):
    """Type text into the index-th input after the element labelled ``label`` (as a user would: focus, select
    what is there, type; the page's onChange runs)."""
    b.evaluate("(() => { const lab = Array.from(document.querySelectorAll('*')).find(e => e.childElementCount == 0 "
               f"&& e.textContent.trim() == {json.dumps(label)}); const i = Array.from(document.querySelectorAll("
               "'input')).filter(i => lab.compareDocumentPosition(i) & Node.DOCUMENT_POSITION_FOLLOWING)"
               f"[{index}]; i.focus(); i.select(); return 1; }})()")
    b.send("Input.insertText", text=text)
    b.press("Tab")
    # viser's page sends GUI values through one 50 ms throttle that keeps only the newest message: a value typed
    # into another field within 50 ms would replace this one (a person is slower than that).
    time.sleep(0.5)


def click_button(b, text):
    b.evaluate("Array.from(document.querySelectorAll('button')).find(e => e.innerText.includes("
               f"{json.dumps(text)})).click() || 1")


def test_live_viewer_on_the_ros_graph_draws_joint_states_sends_short_moves_and_pick_place_goals(chromium,
                                                                                               ros_graph):
    """The ``viewer`` node, process to process over DDS: the page shows the published joint_states (its readout,
    and the tool frame's position counted by manip_view.page_stats); a click on a
    slider's track publishes a JointTrajectory that starts at the measured position (no jump) and ends at the
    clicked value; the pick-and-place form, filled in through the page, sends a PickPlace goal with its values
    (the test's action server receives it), and Stop cancels that running goal (the page shows the outcome) and
    publishes the empty trajectory (the controller holds where the arm is)."""
    from rclpy.action import ActionServer, CancelResponse
    from rclpy.task import Future
    from sensor_msgs.msg import JointState
    from trajectory_msgs.msg import JointTrajectory

    from manip_msgs.action import PickPlace

    port = free_port()
    g = ros_graph([("manip_view.viewer_node", {"port": port})], robot_path("ur5"), "viewer_test")
    node = g.node
    got, goals = [], []
    node.create_subscription(JointTrajectory, "joint_trajectory_controller/joint_trajectory", got.append, 10)
    pub = node.create_publisher(JointState, "joint_states", 10)
    scene = RobotScene(*load_robot("ur5"))

    canceled = Future()

    def on_cancel(_):
        canceled.set_result(True)
        return CancelResponse.ACCEPT

    async def pick_place(handle):  # stands where the pick_place node would: runs until the page's Stop cancels it
        goals.append(handle.request)
        await canceled
        handle.canceled()
        return PickPlace.Result(error_code=PickPlace.Result.CANCELED, message="canceled by the page's Stop")

    server = ActionServer(node, PickPlace, "pick_place", pick_place, cancel_callback=on_cancel)

    def publish():
        msg = JointState(name=list(scene.robot.joint_names), position=list(Q0))
        msg.header.stamp = node.get_clock().now().to_msg()
        pub.publish(msg)

    node.create_timer(0.05, publish)
    g.wait_page(port, 120)
    url = f"http://127.0.0.1:{port}"
    tip = pin_link_origins(Q0)["tool0"]
    with Browser(chromium, W, H) as b:
        page_stats.install(b, "/robot/tool0")
        b.open(url)
        b.wait_for("document.querySelectorAll('[role=slider]').length == 6", 90, "the six joint sliders")
        expected = f"x {tip[0]:+.4f} y {tip[1]:+.4f} z {tip[2]:+.4f}"
        b.wait_for(f"document.body.innerText.includes('{expected}')", 60, f"the joint_states pose {expected}")
        # The page's own counters (bench/view.py's rates): arm poses reached it, the newest with the tool frame at
        # Pinocchio's tip of the published joint_states, and frames were drawn with them.
        stats = b.wait_for("(() => { const s = window.__manipStats; return s.arm >= 1 && s.armFrames >= 1 && "
                           "JSON.stringify(s); })()", 60, "the page's counters of the arm")
        stats = json.loads(stats)
        np.testing.assert_allclose(stats["tip"], tip, atol=1e-6)
        assert 1 <= stats["armFrames"] <= stats["frames"], stats
        values = b.wait_for("(() => { const v = Array.from(document.querySelectorAll('[role=slider]'))"
                            f".map(e => parseFloat(e.getAttribute('aria-valuenow'))); return Math.abs(v[0] - "
                            f"{Q0[0]}) < 1e-6 && v; }})()", 30, "the sliders at the measured position")
        np.testing.assert_allclose(values, Q0)
        x0, y0, width = track_of(b, 1)
        b.click(x0 + 0.45 * width, y0)
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            time.sleep(0.1)
        assert got, "no JointTrajectory after the slider click"
        value = float(b.evaluate("document.querySelectorAll('[role=slider]')[1].getAttribute('aria-valuenow')"))
        move = got[-1]
        assert list(move.joint_names) == scene.robot.joint_names
        first, last = np.array(move.points[0].positions), np.array(move.points[-1].positions)
        np.testing.assert_allclose(first, Q0, atol=1e-12)  # from the measured position: no jump
        target = np.array(Q0)
        target[1] = value
        np.testing.assert_allclose(last, target, atol=1e-9)
        t = [p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec for p in move.points]
        # Rest to rest quintic whose peak speed 15 d / (8 T) is 25 % of the velocity limit (or T = 0.5 s).
        d = np.abs(target - np.array(Q0))
        assert t[-1] - t[0] == pytest.approx(max(0.5, np.max(15 * d / (8 * 0.25 * scene.robot.velocity_limits))))
        assert np.abs(move.points[0].velocities).max() == 0 and np.abs(move.points[-1].velocities).max() < 1e-12

        # The pick-and-place form (a folder closed at first), filled in and run through the page.
        assert b.evaluate("(() => { const w = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT); "
                          "let n; while ((n = w.nextNode())) { if (n.textContent.trim() == 'Pick and place') { "
                          "n.parentElement.click(); return 1; } } return 0; })()"), "no 'Pick and place' folder"
        b.wait_for("document.body.innerText.includes('Run pick and place')", 30, "the pick-and-place form")
        pick, place = (0.41, -0.12, 0.035), (0.38, 0.2, 0.05)
        for k, v in enumerate(pick):
            type_into(b, "pick xyz (m)", k, str(v))
        for k, v in enumerate(place):
            type_into(b, "place xyz (m)", k, str(v))
        type_into(b, "object (empty: nearest)", 0, "red_cube")
        type_into(b, "approach height (m)", 0, "0.07")
        click_button(b, "Run pick and place")
        deadline = time.monotonic() + 30
        while not goals and time.monotonic() < deadline:
            time.sleep(0.1)
        assert goals, "no PickPlace goal after 'Run pick and place'"
        goal = goals[0]
        for ps, xyz in ((goal.pick_pose, pick), (goal.place_pose, place)):
            p = ps.pose.position
            np.testing.assert_allclose([p.x, p.y, p.z], xyz, atol=1e-9)
            o = ps.pose.orientation
            assert (o.w, o.x, o.y, o.z) == (1.0, 0.0, 0.0, 0.0) and ps.header.frame_id == scene.robot.base_link
        assert goal.object_name == "red_cube" and goal.approach_height == pytest.approx(0.07)
        assert goal.avoid_obstacles is True

        time.sleep(1.0)  # the viewer holds the goal's handle once the server's acceptance reached it
        n = len(got)
        click_button(b, "Stop")
        b.wait_for("document.body.innerText.includes(\"error -5: canceled by the page's Stop\")", 30,
                   "the pick-and-place outcome in the page")
        deadline = time.monotonic() + 30
        while len(got) == n and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(got) > n, "no hold after Stop"
        assert len(got[-1].points) == 0 and list(got[-1].joint_names) == scene.robot.joint_names  # stop
    server.destroy()
    out = g.stop()[0]
    assert g.returncodes == [0], out[-2000:]
    assert "page at http://127.0.0.1" in out and "move to" in out and "pick and place: " in out, out[-2000:]
    assert "stop: 1 goal(s) canceled, empty trajectory sent" in out, out[-2000:]


@pytest.mark.slow
def test_slider_click_moves_the_controllers_commanded_position(chromium, ros_graph):
    """Page -> viewer -> manip_control controller, process to process: a click on a slider's track makes the
    controller track toward the clicked value (its controller_state desired position moves, mode TRACKING), from
    the measured position; Stop brings it back to HOLD."""
    from sensor_msgs.msg import JointState

    from manip_msgs.msg import ControllerState

    port = free_port()
    g = ros_graph([("manip_view.viewer_node", {"port": port}),
                   ("manip_control.controller_node", {"state_timeout": 1.0})], robot_path("ur5"),
                  "viewer_controller_test")
    node = g.node
    states = []
    node.create_subscription(ControllerState, "joint_trajectory_controller/controller_state", states.append, 50)
    pub = node.create_publisher(JointState, "joint_states", 10)
    names = RobotScene(*load_robot("ur5")).robot.joint_names

    def publish():
        msg = JointState(name=list(names), position=list(Q0), velocity=[0.0] * 6)
        msg.header.stamp = node.get_clock().now().to_msg()
        pub.publish(msg)

    node.create_timer(0.01, publish)
    g.wait_page(port, 180, ready=lambda: bool(states), what="the page and the controller's state")
    assert states[-1].mode == ControllerState.MODE_HOLD
    with Browser(chromium, W, H) as b:
        b.open(f"http://127.0.0.1:{port}")
        b.wait_for("(() => { const s = document.querySelectorAll('[role=slider]'); return s.length == 6 && "
                   f"Math.abs(parseFloat(s[0].getAttribute('aria-valuenow')) - {Q0[0]}) < 1e-6; }})()", 90,
                   "the sliders at the measured position")
        x0, y0, width = track_of(b, 1)
        n = len(states)
        b.click(x0 + 0.45 * width, y0)
        value = float(b.wait_for("(() => { const v = document.querySelectorAll('[role=slider]')[1]"
                                 f".getAttribute('aria-valuenow'); return Math.abs(v - ({Q0[1]})) > 0.05 && v; }})()",
                                 30, "the slider to move"))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            tracking = [s for s in states[n:] if s.mode == ControllerState.MODE_TRACKING]
            if tracking and abs(tracking[-1].desired_positions[1] - Q0[1]) > 0.5 * abs(value - Q0[1]):
                break
            time.sleep(0.1)
        assert tracking, "the controller never tracked the slider's move"
        first = tracking[0].desired_positions
        assert abs(first[1] - Q0[1]) < 0.05 * abs(value - Q0[1]) + 1e-3  # starts where the arm is: no jump
        d = np.array(tracking[-1].desired_positions)
        assert (d[1] - Q0[1]) * (value - Q0[1]) > 0 and abs(d[1] - Q0[1]) > 0.5 * abs(value - Q0[1])
        np.testing.assert_allclose(np.delete(d, 1), np.delete(Q0, 1), atol=1e-9)  # the other joints stay
        b.evaluate("Array.from(document.querySelectorAll('button')).find(e => e.innerText.includes('Stop'))"
                   ".click() || 1")
        n = len(states)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any(s.mode == ControllerState.MODE_HOLD for s in states[n:]):
            time.sleep(0.1)
        assert any(s.mode == ControllerState.MODE_HOLD for s in states[n:]), "Stop did not hold"
    outs = g.stop()
    assert "trajectory accepted (topic)" in outs[1], outs[1][-2000:]
