"""The viser glue of the offline viewer: a RobotScene drawn in the browser, with joint sliders and the readout.

Scene tree: ``/robot/<link>`` is a frame at T_base_link per link (its URDF shapes below it, ``visual`` and
``collision`` groups); when the description has no visual geometry, ``/robot/<link>/joint`` a sphere at each link
origin and ``/robot/<parent>/segment_<k>`` a cylinder per joint-to-joint segment (``/skeleton/<k>`` in the base
frame for a segment a prismatic joint stretches); ``/robot/<tip>/tool`` the tip frame's axes. A redraw sends
only the link poses. The page works without internet: viser serves its client (one HTML file) from the wheel.
"""
from __future__ import annotations

import logging
import threading

import numpy as np

from manip_core.spatial import matrix_to_quat_wxyz

from .geometry import segment_pose

log = logging.getLogger(__name__)

ROBOT_RGB = (230, 120, 30)      # skeleton and shapes without a URDF colour (orange: easy to find in a screenshot)
JOINT_RGB = (60, 60, 70)
COLLISION_RGB = (80, 160, 255)


def is_loopback(host):
    """True for localhost and the loopback addresses (127.0.0.0/8, ::1)."""
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _wxyz(T):
    w = matrix_to_quat_wxyz(T[:3, :3])
    return w if w[0] >= 0 else -w


def _node(name):
    return name.replace("/", "_")


def _set_pose(handle, position, wxyz):
    """handle.position, handle.wxyz = position, wxyz, without viser's per-setter checks (cast_vector and
    np.allclose: 1.1 of the 1.3 ms CPU of a UR5 redraw, measured): the same two messages, queued the way viser 1.1.1's
    setters queue them (requirements.txt pins it); the public setters where that version's internals differ."""
    impl = getattr(handle, "_impl", None)
    queue = getattr(getattr(impl, "api", None), "_queue_scene_message", None)
    if queue is None or _messages is None:
        handle.position, handle.wxyz = position, wxyz
        return
    p = (float(position[0]), float(position[1]), float(position[2]))
    w = (float(wxyz[0]), float(wxyz[1]), float(wxyz[2]), float(wxyz[3]))
    if impl.position.tolist() != list(p):
        impl.position[:] = p
        queue(_messages.SetPositionMessage(impl.name, p))
    if impl.wxyz.tolist() != list(w):
        impl.wxyz[:] = w
        queue(_messages.SetOrientationMessage(impl.name, w))


try:
    from viser import _messages
    if not {"name", "position"} <= set(_messages.SetPositionMessage.__dataclass_fields__):
        _messages = None
except (ImportError, AttributeError):  # another viser: the public setters
    _messages = None


class OfflineViewer:
    """Serve ``scene`` (a RobotScene) on http://host:port; ``update(q)`` redraws the arm at q.

    Offline (``on_target`` None) the sliders move the drawn arm. Live, a slider moved in the page calls
    ``on_target(q_target)`` instead (the arm is drawn where ``update`` says it is, from joint_states), and a Stop
    button calls ``on_stop()``."""

    def __init__(self, scene, host="127.0.0.1", port=8080, camera=None, on_target=None, on_stop=None):
        import viser

        self.scene = scene
        self._on_target, self._on_stop = on_target, on_stop
        self._lock = threading.Lock()
        self.server = viser.ViserServer(host=host, port=port, label=f"manip-view {scene.robot.name}", verbose=False)
        s = self.server
        s.scene.set_up_direction("+z")
        # Lights without shadow maps or an image-based environment: every redraw then costs one plain pass. With
        # them, headless Chromium's software WebGL drew 0.2 frames/s at 1280x800, without them 4-8 (load 10-18).
        s.scene.configure_default_lights(True, cast_shadow=False)
        s.scene.configure_environment_map(None)
        s.scene.add_light_hemisphere("/light/sky", sky_color=(255, 255, 255), ground_color=(140, 140, 150),
                                     intensity=1.6)  # what the environment map lit: the sides away from the lights
        pos, look, fov = camera if camera is not None else scene.default_camera()
        s.initial_camera.position = tuple(float(v) for v in pos)
        s.initial_camera.look_at = tuple(float(v) for v in look)
        s.initial_camera.fov = float(fov)
        s.initial_camera.up = (0.0, 0.0, 1.0)
        self.camera = (np.asarray(pos, float), np.asarray(look, float), float(fov))
        reach = scene.reach_m()
        s.scene.add_grid("/grid", width=2.5 * reach, height=2.5 * reach, cell_size=0.1 if reach > 0.5 else 0.02,
                         plane="xy")

        self.q = scene.initial_q()
        self._frames = {}
        visual = scene.meshes("visual")
        collision = scene.meshes("collision") if scene.shapes("collision") else {}
        for link in scene.links:
            self._frames[link] = s.scene.add_frame(f"/robot/{_node(link)}", show_axes=False)
        self._add_meshes(visual, "visual", None)
        self._collision = self._add_meshes(collision, "collision", COLLISION_RGB)
        for h in self._collision:
            h.visible = False
        # Only the link frames move with q: the skeleton's spheres and the segments that are rigid in their parent
        # link (revolute, continuous and fixed joints) hang below the link frames, drawn once; a redraw sends the
        # link poses (and the few segments of prismatic joints), not geometry.
        self._skeleton = []       # [[k, handle, length m]] segments redrawn in the base frame
        if not visual:  # no visual geometry: draw the kinematic skeleton
            r = scene.skeleton_radius_m
            for link in scene.links:
                s.scene.add_icosphere(f"/robot/{_node(link)}/joint", radius=1.35 * r, color=JOINT_RGB)
            rigid = {k: (parent, T, length) for k, parent, T, length in scene.rigid_segments()}
            for k, (_, _, T, length) in enumerate(scene.skeleton(self.q)):
                if k in rigid:
                    parent, T_local, length_local = rigid[k]
                    self._cylinder(f"/robot/{_node(parent)}/segment_{k}", length_local, T_local)
                else:
                    self._skeleton.append([k, self._cylinder(f"/skeleton/{k}", length, T), length])
        tip_axes = 3.0 * scene.skeleton_radius_m + 0.05
        tip = scene.robot.tip_link
        self._tool_in_tip = tip in self._frames
        self._tool = s.scene.add_frame(f"/robot/{_node(tip)}/tool" if self._tool_in_tip else "/tool",
                                       axes_length=tip_axes, axes_radius=0.08 * tip_axes)
        self._link_axes = [s.scene.add_frame(f"/robot/{_node(link)}/axes", axes_length=0.6 * tip_axes,
                                             axes_radius=0.05 * tip_axes, visible=False) for link in scene.links]

        s.gui.add_markdown(f"**{scene.robot.name}**: {scene.robot.dof} joints, "
                           f"{scene.robot.base_link} -> {scene.robot.tip_link}")
        self.sliders = []
        with s.gui.add_folder("Joints (rad or m)"):
            for i, (name, lo, hi) in enumerate(scene.slider_ranges()):
                sl = s.gui.add_slider(name, min=lo, max=hi, step=0.01, initial_value=float(self.q[i]))
                sl.on_update(self._on_slider)
                self.sliders.append(sl)
            if on_stop is not None:
                stop = s.gui.add_button("Stop (hold here)", color="red")
                stop.on_click(lambda _: on_stop())
            else:
                reset = s.gui.add_button("Reset to zero")
                reset.on_click(lambda _: self.set_q(scene.initial_q()))
        with s.gui.add_folder("Display"):
            frames = s.gui.add_checkbox("Link frames", False)
            frames.on_update(lambda _: self._set_visible(self._link_axes, frames.value))
            if self._collision:
                col = s.gui.add_checkbox("Collision geometry", False)
                col.on_update(lambda _: self._set_visible(self._collision, col.value))
        self.readout_md = s.gui.add_markdown("")
        self.update(self.q)

    # --------------------------------------------------------------------------------------- parts
    def _add_meshes(self, meshes, group, rgb):
        handles = []
        for link, items in meshes.items():
            for k, (v, f, rgba) in enumerate(items):
                color = rgb or (tuple(int(255 * c) for c in rgba[:3]) if rgba else ROBOT_RGB)
                handles.append(self.server.scene.add_mesh_simple(
                    f"/robot/{_node(link)}/{group}_{k}", vertices=v.astype(np.float32), faces=f, color=color,
                    opacity=0.5 if group == "collision" else None))
        return handles

    def _cylinder(self, name, length, T):
        import trimesh

        m = trimesh.creation.cylinder(radius=self.scene.skeleton_radius_m, height=max(length, 1e-6), sections=24)
        return self.server.scene.add_mesh_simple(
            name, vertices=np.asarray(m.vertices, np.float32), faces=np.asarray(m.faces, np.int32),
            color=ROBOT_RGB, position=tuple(T[:3, 3]), wxyz=tuple(_wxyz(T)))

    @staticmethod
    def _set_visible(handles, on):
        for h in handles:
            h.visible = bool(on)

    # ------------------------------------------------------------------------------------- updates
    def _on_slider(self, event):
        q = np.array([float(s.value) for s in self.sliders])
        if self._on_target is None:
            self.update(q)
        elif event.client is not None:  # moved in a page (not set_sliders): a target for the controller
            self._on_target(self.scene.clip(q))

    def set_sliders(self, q):
        """Show q on the sliders without sending it anywhere (live mode: the measured position at start)."""
        with self.server.atomic():
            for s, v in zip(self.sliders, self.scene.clip(q)):
                s.value = float(v)

    def set_q(self, q):
        """Move the sliders (and so the arm) to q, clipped into the limits."""
        q = self.scene.clip(q)
        with self.server.atomic():
            for s, v in zip(self.sliders, q):
                s.value = float(v)
        self.update(q)

    def update(self, q, readout=True):
        """Redraw the arm at q (rad or m, clipped into the slider ranges), and the readout unless ``readout`` is
        False (``show_readout`` later: the live viewer updates the text at a lower rate than the arm)."""
        q = self.scene.clip(q)
        with self._lock, self.server.atomic():
            self.q = q
            poses = self.scene.link_poses(q)
            for link, T in poses.items():
                if link != self.scene.robot.base_link:  # the base frame is the scene's origin
                    _set_pose(self._frames[link], T[:3, 3], _wxyz(T))
            for entry in self._skeleton:  # segments of prismatic joints: their length and pose change with q
                k, handle, old_length = entry
                p, c = self.scene.segments[k]
                T, length = segment_pose(poses[p][:3, 3], poses[c][:3, 3])
                if abs(length - old_length) > 1e-6:
                    handle.remove()
                    entry[1], entry[2] = self._cylinder(f"/skeleton/{k}", length, T), length
                else:
                    handle.position, handle.wxyz = T[:3, 3], _wxyz(T)
            if not self._tool_in_tip:
                T_tip = self.scene.robot.fk(q)
                self._tool.position, self._tool.wxyz = T_tip[:3, 3], _wxyz(T_tip)
            if readout:
                self._show_readout()

    def show_readout(self):
        """The readout (tip pose, manipulability, condition number) of the arm drawn now."""
        with self._lock:
            self._show_readout()

    def _show_readout(self):
        self.readout = self.scene.readout(self.q)
        self.readout_md.content = self.readout.markdown(self.scene.robot.base_link, self.scene.robot.tip_link)

    @property
    def url(self):
        host = self.server.get_host()
        return f"http://{'[' + host + ']' if ':' in host else host}:{self.server.get_port()}"

    def stop(self):
        self.server.stop()
