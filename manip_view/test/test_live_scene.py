"""The live viewer's page on a real ROS graph (model_server, planner and viewer processes over DDS), in headless
Chromium: obstacles, the point cloud (moved into the base frame with /tf_static) and the left image are drawn where
they are; dragging the goal gizmo with the mouse lists the IK branches that compute_ik returns (each one checked with
Pinocchio's FK against the goal shown); the Plan button draws the planner's path (its tool path on the pixels where
Pinocchio's FK of the returned trajectory projects). MANIP_VIEW_WRITE_DOCS=1 also writes that page to
docs/manip_view_live.png.

The robot is a parameter of the test (here the UR5; sizes and positions scale with its reach): the viewer takes
everything from the robot model (test_overlays.py covers ypp3, planar2r and a URDF without a closed-form IK).
"""
import io
import os
import re
import time
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
from PIL import Image as PILImage

from manip_core.robots import robot_path
from manip_view.browser import Browser, free_port
from manip_view.camera import project
from manip_view.scene import RobotScene, load_robot


W, H = 1280, 800

Q0 = {"ur5": [0.3, -1.2, 1.4, -0.8, 0.6, 0.2]}


def colour_mask(png, rgb, tol=45):
    """Pixels of rgb's hue: each channel's offset from the pixel's mean within tol of rgb's (shading and
    translucency over the white background change the brightness, not these offsets), outside the GUI panel
    (right) and the axes gizmo (bottom left)."""
    im = np.asarray(PILImage.open(io.BytesIO(png)).convert("RGB")).astype(float)
    rgb = np.asarray(rgb, float)
    want = rgb - rgb.mean()
    scale = np.ptp(want)
    got = im - im.mean(axis=2, keepdims=True)
    # Compare the chroma after scaling the pixel's to rgb's spread (a lighter magenta is still magenta).
    spread = np.ptp(got, axis=2)
    m = (spread > 0.35 * scale) & np.all(np.abs(got / np.maximum(spread, 1)[..., None] * scale - want) < tol, axis=2)
    m[:, 930:] = False
    m[H - 80:, :80] = False
    return m


def near(mask, uv, r=4):
    u, v = np.round(uv).astype(int)
    return bool(mask[max(v - r, 0):v + r + 1, max(u - r, 0):u + r + 1].any())


def pin_tip(robot, q):
    model = pin.buildModelFromUrdf(str(robot_path(robot)))
    data = model.createData()
    pin.framesForwardKinematics(model, data, np.asarray(q, dtype=float))
    return data.oMf[model.getFrameId(load_robot(robot)[0].tip_link)]


def _rgb_cloud_msg(points, rgb, frame):
    from sensor_msgs.msg import PointCloud2, PointField

    n = len(points)
    rec = np.zeros(n, dtype=[("x", "<f4"), ("y", "<f4"), ("z", "<f4"), ("rgb", "<u4")])
    rec["x"], rec["y"], rec["z"] = points.T
    rec["rgb"] = (rgb[0] << 16) | (rgb[1] << 8) | rgb[2]
    msg = PointCloud2(height=1, width=n, point_step=16, row_step=16 * n, is_dense=True, is_bigendian=False)
    msg.fields = [PointField(name=k, offset=4 * i, datatype=7, count=1) for i, k in enumerate(("x", "y", "z", "rgb"))]
    msg.header.frame_id = frame
    msg.data = rec.tobytes()
    return msg


def drag(b, start, end, steps=12):
    """Mouse drag from start to end (viewport px) with the left button held (each event waits for the page)."""
    b.send("Input.dispatchMouseEvent", type="mouseMoved", x=float(start[0]), y=float(start[1]))
    time.sleep(0.3)
    b.send("Input.dispatchMouseEvent", type="mousePressed", x=float(start[0]), y=float(start[1]), button="left",
           buttons=1, clickCount=1)
    time.sleep(0.3)
    for t in np.linspace(0, 1, steps)[1:]:
        p = (1 - t) * np.asarray(start) + t * np.asarray(end)
        b.send("Input.dispatchMouseEvent", timeout_s=120, type="mouseMoved", x=float(p[0]), y=float(p[1]),
               button="left", buttons=1)
        time.sleep(0.05)
    b.send("Input.dispatchMouseEvent", type="mouseReleased", x=float(end[0]), y=float(end[1]), button="left",
           buttons=0, clickCount=1)


@pytest.mark.parametrize("robot", ["ur5"])
def test_live_page_shows_obstacles_cloud_image_ik_branches_and_the_plan(chromium, robot, tmp_path, ros_graph):
    from geometry_msgs.msg import TransformStamped
    from rclpy.qos import DurabilityPolicy, QoSProfile
    from sensor_msgs.msg import Image, JointState, PointCloud2
    from tf2_msgs.msg import TFMessage

    from manip_msgs.msg import Obstacle, ObstacleArray

    from manip_view.panels import IK_RGB, OBSTACLE_RGB, PLAN_RGB

    urdf = str(robot_path(robot))
    scene = RobotScene(*load_robot(robot))
    names, q0 = scene.robot.joint_names, np.array(Q0[robot])
    reach = scene.reach_m()
    port = free_port()
    graph = ros_graph([("manip_view.viewer_node", {"port": port, "max_cloud_points": 5000}),
                   ("manip_core.model_server_node", {}),
                   ("manip_planning.planner_node", {"path_planner": "heuristics"})], urdf, "viewer_scene_test")
    node = graph.node
    pub_js = node.create_publisher(JointState, "joint_states", 10)
    pub_obs = node.create_publisher(ObstacleArray, "obstacles", 10)
    pub_cloud = node.create_publisher(PointCloud2, "stereo/points2", 10)
    pub_img = node.create_publisher(Image, "stereo/left/image_rect", 10)
    pub_tf = node.create_publisher(TFMessage, "/tf_static",
                                   QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL))

    # An obstacle box on the -y side and a blue square patch of cloud on the +y side, both at half the reach, seen
    # by a camera 'cam' whose frame is the base frame turned by 90 deg about z and shifted: the viewer must apply it.
    base = scene.robot.base_link
    box_c, box_s = np.array([0.45, -0.45, 0.1]) * reach / 0.95, np.array([0.12, 0.12, 0.2]) * reach / 0.95
    obs = ObstacleArray()
    obs.header.frame_id = base
    obs.obstacles = [Obstacle(id=0)]
    obs.obstacles[0].center.x, obs.obstacles[0].center.y, obs.obstacles[0].center.z = box_c.tolist()
    obs.obstacles[0].size.x, obs.obstacles[0].size.y, obs.obstacles[0].size.z = box_s.tolist()
    obs.obstacles[0].radius = float(np.linalg.norm(box_s) / 2)
    T_base_cam = np.eye(4)
    T_base_cam[:3, :3] = [[0, -1, 0], [1, 0, 0], [0, 0, 1]]
    T_base_cam[:3, 3] = [0.1, 0.2, 0.05]
    g = np.linspace(-0.08, 0.08, 141) * reach / 0.95
    patch_base = np.array([[0.45 * reach / 0.95 + a, 0.5 * reach / 0.95 + c, 0.05] for a in g for c in g])
    patch_cam = (patch_base - T_base_cam[:3, 3]) @ T_base_cam[:3, :3]  # R^T (p - t), 19,881 points
    cloud_rgb = (40, 40, 255)
    cloud = _rgb_cloud_msg(patch_cam.astype(np.float32), cloud_rgb, "cam")
    tf = TransformStamped()
    tf.header.frame_id, tf.child_frame_id = base, "cam"
    tf.transform.translation.x, tf.transform.translation.y, tf.transform.translation.z = T_base_cam[:3, 3].tolist()
    tf.transform.rotation.z = tf.transform.rotation.w = np.sqrt(0.5)  # 90 deg about z
    img = Image(height=48, width=64, encoding="rgb8", step=64 * 3)
    img.data = np.tile(np.array([200, 30, 30], np.uint8), 48 * 64).tobytes()

    def publish():
        js = JointState(name=list(names), position=q0.tolist(), velocity=[0.0] * len(names))
        js.header.stamp = node.get_clock().now().to_msg()
        pub_js.publish(js)

    def publish_slow():  # what perception publishes at its camera rate
        pub_obs.publish(obs)
        pub_cloud.publish(cloud)
        pub_img.publish(img)

    node.create_timer(0.05, publish)
    node.create_timer(2.0, publish_slow)
    pub_tf.publish(TFMessage(transforms=[tf]))
    url = f"http://127.0.0.1:{port}"
    graph.wait_page(port, 120)
    camera = scene.default_camera()
    proj = lambda pts: project(np.atleast_2d(pts), *camera, W, H)  # noqa: E731
    with Browser(chromium, W, H) as b:
        b.open(url)
        t0 = pin_tip(robot, q0).translation
        expected = f"x {t0[0]:+.4f} y {t0[1]:+.4f} z {t0[2]:+.4f}"
        b.wait_for(f"document.body.innerText.includes('{expected}')", 90, f"the arm at q0 ({expected})")
        b.evaluate("document.querySelectorAll('.mantine-Notification-closeButton').forEach(e => e.click()) || 1")
        b.wait_for("Array.from(document.querySelectorAll('img')).some(i => i.naturalWidth == 64)", 30,
                   "the left image (64 x 48)")
        deadline = time.monotonic() + 180
        while True:
            png = b.screenshot_png()
            obs_m, cloud_m = colour_mask(png, OBSTACLE_RGB, 60), colour_mask(png, cloud_rgb, 60)
            if (near(obs_m, proj(box_c)[0]) and near(cloud_m, proj(patch_base.mean(0))[0])) \
                    or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        (tmp_path / "scene.png").write_bytes(png)
        assert near(obs_m, proj(box_c)[0]), "no obstacle pixels where the box projects"
        assert near(cloud_m, proj(patch_base.mean(0))[0]), "no cloud pixels where the patch projects"
        # Not where the cloud would be without the camera transform.
        assert not near(cloud_m, proj(patch_cam.mean(0))[0], r=2)
        corners = proj(patch_base[[0, 140, -141, -1]])
        lo, hi = np.floor(corners.min(0)).astype(int) - 40, np.ceil(corners.max(0)).astype(int) + 40
        ys, xs = np.nonzero(cloud_m[lo[1]:hi[1], lo[0]:hi[0]])  # the patch's pixels and what is around it
        np.testing.assert_allclose([xs.min() + lo[0], xs.max() + lo[0], ys.min() + lo[1], ys.max() + lo[1]],
                                   [*np.sort(corners[:, 0])[[0, -1]], *np.sort(corners[:, 1])[[0, -1]]], atol=12)
        # The left image in the panel: its pixels' mean colour is the published red.
        mean = b.evaluate("(() => { const i = Array.from(document.querySelectorAll('img')).find("
                          "i => i.naturalWidth == 64); const c = document.createElement("
                          "'canvas'); c.width = i.naturalWidth; c.height = i.naturalHeight; const x = "
                          "c.getContext('2d'); x.drawImage(i, 0, 0); const d = x.getImageData(0, 0, c.width, "
                          "c.height).data; let s = [0, 0, 0]; for (let k = 0; k < d.length; k += 4) { s[0] += "
                          "d[k]; s[1] += d[k + 1]; s[2] += d[k + 2]; } return s.map(v => v / (d.length / 4)); })()")
        np.testing.assert_allclose(mean, [200, 30, 30], atol=12)

        # The goal gizmo appears at the tool, axes along the tool's; drag its z arrow outwards with the mouse.
        b.evaluate("Array.from(document.querySelectorAll('button')).find(e => e.innerText.includes("
                   "'Show the goal gizmo')).click() || 1")
        b.wait_for("document.body.innerText.includes('IK: ')", 60, "the IK branches of the tool pose")
        tip0 = pin_tip(robot, q0)
        scale, z_tool = 0.35 * max(reach, 0.1), tip0.rotation[:, 2]
        # (0.35 of the arrow: away from the rotation arcs that meet its end)
        a0 = proj(tip0.translation + 0.35 * scale * z_tool)[0]
        a1 = proj(tip0.translation + (0.35 * scale + 0.15) * z_tool)[0]
        (tmp_path / "before_drag.png").write_bytes(b.screenshot_png())
        drag(b, a0, a1)
        text = b.wait_for("(() => { const t = document.body.innerText; const m = t.match(/goal m: x (\\S+) y "
                          "(\\S+) z (\\S+)/); const p = m && [1, 2, 3].map(k => parseFloat(m[k])); "
                          f"const d = p && Math.hypot(p[0] - ({tip0.translation[0]}), p[1] - "
                          f"({tip0.translation[1]}), p[2] - ({tip0.translation[2]})); return d > 0.03 && "
                          "t.includes('IK: ') && t; })()", 30, "the goal to move")
        (tmp_path / "dragged.png").write_bytes(b.screenshot_png())
        m = re.search(r"goal m: x (\S+) y (\S+) z (\S+)", text)
        goal = np.array([float(v) for v in m.groups()])
        d = goal - tip0.translation
        assert d @ z_tool > 0.03 and np.linalg.norm(np.cross(d, z_tool)) < 0.01  # along the tool's z axis
        sols = [np.array([float(v) for v in s.split(",")]) for s in re.findall(r"\d+: \[([^\]]+)\]", text)]
        assert len(sols) >= 2 and "compute_ik" in text, text
        for q in sols:  # every branch reaches the goal shown (Pinocchio), orientation unchanged
            T = pin_tip(robot, q)
            np.testing.assert_allclose(T.translation, goal, atol=2e-3)
            np.testing.assert_allclose(T.rotation, tip0.rotation, atol=2e-3)
        ik_m = colour_mask(b.screenshot_png(), IK_RGB, 50)
        assert ik_m.sum() > 300, "no IK branch drawn"

        # Plan to the first branch (the one closest to where the arm is): the path appears.
        b.evaluate("Array.from(document.querySelectorAll('button')).find(e => e.innerText.includes("
                   "'Plan to the branch')).click() || 1")
        text = b.wait_for("(() => { const t = document.body.innerText; return /Plan\\*?\\*?: \\d+ points/"
                          ".test(t) && t; })()", 60, "the plan")
        assert "clearance" in text
        time.sleep(1.0)
        png = b.screenshot_png()
        (tmp_path / "plan.png").write_bytes(png)
        if os.environ.get("MANIP_VIEW_WRITE_DOCS") == "1":
            (Path(__file__).resolve().parents[2] / "docs" / "manip_view_live.png").write_bytes(png)
        plan_m = colour_mask(png, PLAN_RGB, 50)
        # The heuristics planner's first method is the straight joint-space line when it is clear (the box is
        # far): the tool path is Pinocchio's FK along q0 + s (q_goal - q0).
        for s_ in (0.25, 0.5, 0.75):
            uv = proj(pin_tip(robot, q0 + s_ * (sols[0] - q0)).translation)[0]
            assert near(plan_m, uv, 5), f"no tool path pixel at s = {s_} ({uv})"
    outs = graph.stop()  # the processes' logs stay in tmp_path
    assert graph.returncodes == [0, 0, 0], [o[-1500:] for o in outs]
    assert "plan: " in outs[0], outs[0][-2000:]
    assert "first point cloud: 19881 points in 'cam', 4971 drawn" in outs[0]  # every 4th: ceil(19881 / 5000)


def click_button(b, text):
    b.evaluate("Array.from(document.querySelectorAll('button')).find(e => e.innerText.includes("
               f"'{text}')).click() || 1")


@pytest.mark.slow
def test_plan_then_execute_after_the_confirmation_drives_the_controller(chromium, ros_graph):
    """Page -> viewer -> planner -> controller: Show the gizmo, drag it, Plan, Execute, confirm in the page's
    dialog: the controller (manip_control, real process) follows the plan (MODE_TRACKING, its desired positions end
    at the IK branch planned to) and the page reports the action's outcome."""
    from sensor_msgs.msg import JointState

    from manip_msgs.msg import ControllerState

    robot = "ur5"
    urdf = str(robot_path(robot))
    scene = RobotScene(*load_robot(robot))
    names, q0 = scene.robot.joint_names, np.array(Q0[robot])
    port = free_port()
    graph = ros_graph([("manip_view.viewer_node", {"port": port}),
                   ("manip_core.model_server_node", {}),
                   ("manip_planning.planner_node", {"path_planner": "heuristics"}),
                   ("manip_control.controller_node", {"state_timeout": 1.0})], urdf, "viewer_execute_test")
    node = graph.node
    states = []
    node.create_subscription(ControllerState, "joint_trajectory_controller/controller_state", states.append, 50)
    pub = node.create_publisher(JointState, "joint_states", 10)

    def publish():
        js = JointState(name=list(names), position=q0.tolist(), velocity=[0.0] * len(names))
        js.header.stamp = node.get_clock().now().to_msg()
        pub.publish(js)

    node.create_timer(0.01, publish)
    url = f"http://127.0.0.1:{port}"
    camera = scene.default_camera()
    proj = lambda pts: project(np.atleast_2d(pts), *camera, W, H)  # noqa: E731
    graph.wait_page(port, 180, ready=lambda: bool(states), what="the page and the controller's state")
    with Browser(chromium, W, H) as b:
        b.open(url)
        t0 = pin_tip(robot, q0)
        b.wait_for(f"document.body.innerText.includes('x {t0.translation[0]:+.4f}')", 120, "the arm at q0")
        b.evaluate("document.querySelectorAll('.mantine-Notification-closeButton').forEach(e => e.click()) || 1")
        click_button(b, "Show the goal gizmo")
        b.wait_for("document.body.innerText.includes('IK: ')", 60, "the IK branches of the tool pose")
        scale, z_tool = 0.35 * max(scene.reach_m(), 0.1), t0.rotation[:, 2]
        drag(b, proj(t0.translation + 0.35 * scale * z_tool)[0],
             proj(t0.translation + (0.35 * scale + 0.15) * z_tool)[0])
        text = b.wait_for("(() => { const t = document.body.innerText; const m = t.match(/goal m: x (\\S+)/);"
                          f" return m && Math.abs(parseFloat(m[1]) - ({t0.translation[0]})) > 0.005 && "
                          "t.includes('compute_ik') && t; })()", 60, "the goal to move")
        while True:  # the IK of the drag's last pose (the page shows intermediate ones while it drags)
            time.sleep(2.0)
            now = b.evaluate("document.body.innerText")
            if now == text:
                break
            text = now
        branch = np.array([float(v) for v in re.search(r"0: \[([^\]]+)\]", text).group(1).split(",")])
        click_button(b, "Plan to the branch")
        b.wait_for("/Plan\\*?\\*?: \\d+ points/.test(document.body.innerText)", 120, "the plan")
        n = len(states)
        click_button(b, "Execute the plan")
        b.wait_for("document.body.innerText.includes('Yes, execute')", 30, "the confirmation dialog")
        assert not any(s.mode == ControllerState.MODE_TRACKING for s in states[n:])  # nothing before the yes
        click_button(b, "Yes, execute")
        # Nothing moves the arm here (no simulator): the controller ends the goal with its tolerance error,
        # and the page says so.
        b.wait_for("/Execute\\*?\\*?: (done|error)/.test(document.body.innerText)", 120, "the outcome")
        tracking = [np.array(s.desired_positions) for s in states[n:] if s.mode == ControllerState.MODE_TRACKING]
        assert tracking, "the controller never followed the plan"
        # Its set points run along the planned joint-space line from where the arm is towards the branch (on a
        # loaded machine its ticks are tens of ms apart: the last one seen may be short of the end).
        d = branch - q0
        s_ = np.array([(x - q0) @ d / (d @ d) for x in tracking])
        assert s_[0] < 0.05 and s_[-1] > 0.5 and np.all(np.diff(s_) >= -1e-9), s_
        off_line = [np.linalg.norm(x - (q0 + si * d)) for x, si in zip(tracking, s_)]
        assert max(off_line) < 5e-3
    outs = graph.stop()
    assert "execute: " in outs[0], outs[0][-2000:]
