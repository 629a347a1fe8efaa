"""The viser glue of everything the page shows besides the arm (manip_view.app draws the arm and its sliders).

Scene tree: ``/plan/tool_path`` (green line of the tip), ``/plan/ghost_<k>`` (grey stick arms at waypoints),
``/planned_path`` (the planner's published tip path, other clients' plans), ``/obstacles/<k>`` (magenta boxes),
``/cloud`` (the point cloud in the base frame), ``/goal`` (the 6-DOF goal gizmo) and ``/ik/<k>`` (a cyan stick
arm per IK branch of the goal). GUI: the goal's IK branches, Plan / Execute (with a confirmation) / pick-and-place
form when the callbacks are given, the plan's time scaling and the tracking error as plots, the left image, and
the Analysis folder (reach shell and singularity map: manip_view.analysis_panel).

The callbacks (``solve_ik(T, q_seed) -> IKBranches``, ``plan(q_goal, avoid_obstacles) -> (PlanView | None, text)``,
``execute() -> text``, ``pick_place(dict) -> text``) are plain functions: offline they are manip_core calls, live
the viewer node's service and action clients. They run on a worker thread of their own, never on viser's.
"""
from __future__ import annotations

import logging
import threading

import numpy as np

from manip_core.spatial import matrix_to_rpy

from .analysis_panel import AnalysisPanel
from .app import _node, _set_pose, _wxyz
from .overlays import stick_segments

log = logging.getLogger(__name__)

PLAN_RGB = (40, 200, 60)
GHOST_RGB = (150, 150, 160)
IK_RGB = (0, 190, 230)
OBSTACLE_RGB = (220, 40, 220)
MARKER_PATH_RGB = (40, 120, 60)
PLOT_COLOURS = ["#e6194b", "#3cb44b", "#4363d8", "#f58231", "#911eb4", "#46f0f0", "#f032e6", "#9a6324"]


class Worker:
    """One background thread running the newest submitted job (older pending ones are dropped: no queue grows)."""

    def __init__(self, name):
        self._job, self._cv, self._stop = None, threading.Condition(), False
        self.started = 0    # jobs run so far
        self.dropped = 0    # jobs replaced by a newer one before they ran
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn, *args):
        with self._cv:
            if self._job is not None:
                self.dropped += 1
            self._job = (fn, args)
            self._cv.notify()

    def _run(self):
        while True:
            with self._cv:
                while self._job is None and not self._stop:
                    self._cv.wait()
                if self._stop:
                    return
                fn, args = self._job
                self._job = None
                self.started += 1
            try:
                fn(*args)
            except Exception:  # noqa: BLE001 - a failed job is logged; the page stays up
                log.exception("viewer job %s failed", getattr(fn, "__name__", fn))

    def close(self):
        with self._cv:
            self._stop = True
            self._cv.notify()


def _wxyz_to_matrix(wxyz, position):
    from manip_core.spatial import quat_wxyz_to_matrix

    T = np.eye(4)
    T[:3, :3] = quat_wxyz_to_matrix(np.asarray(wxyz, dtype=np.float64))
    T[:3, 3] = np.asarray(position, dtype=np.float64)
    return T


class Panels:
    """Plans, obstacles, cloud, image, tracking plot, goal gizmo and commands of one viewer (manip_view.app)."""

    def __init__(self, viewer, solve_ik, plan=None, execute=None, pick_place=None, max_cloud_points=50_000):
        self.viewer = viewer
        self.scene = viewer.scene
        self.server = s = viewer.server
        self._solve_ik, self._plan, self._execute, self._pick_place = solve_ik, plan, execute, pick_place
        self.max_cloud_points = int(max_cloud_points)
        self._worker = Worker("manip-view-jobs")
        self._ik_worker = Worker("manip-view-ik")
        self._lock = threading.Lock()
        self.branches = None
        self.plan_view = None
        self._ik_handles, self._ghost_handles, self._obstacle_handles = [], [], []
        self._plan_line = self._marker_line = self._cloud = None
        self.cloud_count = 0
        self.cloud_md = None
        reach = self.scene.reach_m()
        self._line_m = max(0.004, 0.012 * reach)

        # Goal gizmo (hidden until asked for) at the tool, its IK branches listed below.
        T = self.scene.robot.fk(viewer.q)
        self.goal = s.scene.add_transform_controls("/goal", scale=0.35 * max(reach, 0.1), position=T[:3, 3],
                                                   wxyz=_wxyz(T), visible=False)
        self.goal.on_update(lambda _: self._goal_moved())
        with s.gui.add_folder("Goal (drag the gizmo)"):
            self.show_goal = s.gui.add_button("Show the goal gizmo at the tool")
            self.show_goal.on_click(lambda _: self._toggle_goal())
            self.goal_md = s.gui.add_markdown("")
            self.branch = s.gui.add_dropdown("IK branch", ["-"], initial_value="-")
            if plan is None:
                go = s.gui.add_button("Move the arm to the branch")
                go.on_click(lambda _: self._go_to_branch())
            else:
                self.avoid = s.gui.add_checkbox("Avoid obstacles", True)
                plan_b = s.gui.add_button("Plan to the branch", color="green")
                plan_b.on_click(lambda _: self._worker.submit(self._do_plan))
            if execute is not None:
                self.execute_button = s.gui.add_button("Execute the plan", color="orange", disabled=True)
                self.execute_button.on_click(lambda e: self._confirm_execute(e.client))
            self.plan_md = s.gui.add_markdown("")
        if pick_place is not None:
            with s.gui.add_folder("Pick and place", expand_by_default=False):
                self.pp_pick = s.gui.add_vector3("pick xyz (m)", (0.0, 0.0, 0.0), step=0.005)
                self.pp_place = s.gui.add_vector3("place xyz (m)", (0.0, 0.0, 0.0), step=0.005)
                self.pp_object = s.gui.add_text("object (empty: nearest)", "")
                self.pp_height = s.gui.add_number("approach height (m)", 0.10, min=0.0, step=0.01)
                self.pp_avoid = s.gui.add_checkbox("avoid obstacles ", True)
                run = s.gui.add_button("Run pick and place", color="orange")
                run.on_click(lambda _: self._worker.submit(self._do_pick_place))
                self.pp_md = s.gui.add_markdown("")
        self.analysis = AnalysisPanel(s, self.scene.robot, point_size_m=max(0.004, 0.015 * reach))
        with s.gui.add_folder("tf", expand_by_default=False):
            self._tf_box = s.gui.add_checkbox("Frames on /tf, /tf_static", False,
                                              hint="every frame that tf connects to the base, with its name")
            self._tf_box.on_update(lambda _: self._tf_box.value or self._hide_tf_frames())
        self._tf_handles = {}
        self._plots = s.gui.add_folder("Plots and camera")
        # The cloud (its worker), the image and the tracking plot (the executor) and the plan (the jobs' worker) add
        # their first element to this folder from different threads: viser's folder context admits one at a time.
        self._gui_lock = threading.Lock()
        self.scaling_plot = self.tracking_plot = None
        self.image = None

    # ----------------------------------------------------------------------------------------- goal / IK
    def _toggle_goal(self):
        """Show the gizmo at the tool (and solve its IK), or hide it and the branches."""
        on = not self.goal.visible
        self.goal.visible = on
        self.show_goal.label = "Hide the goal gizmo" if on else "Show the goal gizmo at the tool"
        if on:
            self.set_goal(self.scene.robot.fk(self.viewer.q))
        else:
            for h in self._ik_handles:
                h.visible = False

    def set_goal(self, T):
        with self.server.atomic():
            self.goal.position, self.goal.wxyz = T[:3, 3], _wxyz(T)
        self._goal_moved()

    def goal_matrix(self):
        return _wxyz_to_matrix(self.goal.wxyz, self.goal.position)

    def _goal_moved(self):
        if self.goal.visible:
            self._ik_worker.submit(self._do_ik, self.goal_matrix(), np.array(self.viewer.q))

    def _do_ik(self, T, q_seed):
        br = self._solve_ik(T, q_seed)
        with self._lock:
            self.branches = br
        with self.server.atomic():
            for h in self._ik_handles:
                h.remove()
            self._ik_handles = [self.server.scene.add_line_segments(
                f"/ik/{k}", stick_segments(self.scene, q).astype(np.float32), IK_RGB, thickness=0.6 * self._line_m)
                for k, q in enumerate(br.solutions)]
            options = [str(k) for k in range(len(br.solutions))] or ["-"]
            self.branch.options = options
            self.branch.value = options[0]
            p, rpy = T[:3, 3], np.degrees(matrix_to_rpy(T[:3, :3]))
            self.goal_md.content = (f"goal m: x {p[0]:+.4f} y {p[1]:+.4f} z {p[2]:+.4f}\n\n"
                                    f"goal rpy deg: {rpy[0]:+.2f} {rpy[1]:+.2f} {rpy[2]:+.2f}\n\n"
                                    + br.markdown(self.scene.robot.joint_names))

    def chosen_branch(self):
        with self._lock:
            br = self.branches
        if br is None or not br.solutions:
            return None
        k = int(self.branch.value) if self.branch.value.isdigit() else 0
        return br.solutions[min(k, len(br.solutions) - 1)]

    def _go_to_branch(self):
        q = self.chosen_branch()
        if q is not None:
            self.viewer.set_q(q)

    # ------------------------------------------------------------------------------------ plan / execute
    def _do_plan(self):
        q = self.chosen_branch()
        if q is None:
            self.plan_md.content = "**Plan**: no IK branch for the goal"
            return
        self.plan_md.content = "**Plan**: planning..."
        view, text = self._plan(q, bool(self.avoid.value))
        self.plan_md.content = f"**Plan**: {text}"
        if view is not None:
            self.show_plan(view)
        if self._execute is not None:
            self.execute_button.disabled = view is None

    def _confirm_execute(self, client):
        if client is None:
            return
        with client.gui.add_modal("Execute the plan?") as modal:
            client.gui.add_markdown(f"The arm will move along the plan shown ({self.plan_view.summary()})."
                                    if self.plan_view is not None else "No plan.")
            yes = client.gui.add_button("Yes, execute", color="orange")
            no = client.gui.add_button("Cancel")

            def go(_):
                modal.close()
                self._worker.submit(self._do_execute)

            yes.on_click(go)
            no.on_click(lambda _: modal.close())

    def _do_execute(self):
        self.plan_md.content = "**Execute**: running..."
        self.plan_md.content = f"**Execute**: {self._execute()}"

    def _do_pick_place(self):
        self.pp_md.content = "running..."
        goal = {"pick_xyz_m": tuple(self.pp_pick.value), "place_xyz_m": tuple(self.pp_place.value),
                "object_name": self.pp_object.value, "approach_height_m": float(self.pp_height.value),
                "avoid_obstacles": bool(self.pp_avoid.value)}
        self.pp_md.content = self._pick_place(goal)

    # ------------------------------------------------------------------------------------------- drawing
    def show_plan(self, view):
        """The tool path (a line), grey stick arms at the ghost waypoints, the joint positions over time."""
        self.plan_view = view
        s = self.server
        with s.atomic():
            for h in self._ghost_handles:
                h.remove()
            if self._plan_line is not None:
                self._plan_line.remove()
            p = view.tool_path_m.astype(np.float32)
            segs = np.stack([p[:-1], p[1:]], axis=1) if len(p) > 1 else np.stack([p, p], axis=1)
            self._plan_line = s.scene.add_line_segments("/plan/tool_path", segs, PLAN_RGB, thickness=self._line_m)
            self._ghost_handles = [s.scene.add_line_segments(f"/plan/ghost_{k}", segs_k.astype(np.float32),
                                                             GHOST_RGB, thickness=0.6 * self._line_m)
                                   for k, (_, segs_k) in enumerate(view.ghosts)]
        data = (view.times_s - view.times_s[0],) + tuple(view.positions.T)
        self.scaling_plot = self._plot(self.scaling_plot, data, "plan: joint positions (rad or m) vs time (s)")

    def show_tool_path(self, points_m):
        """A tip path published by the planner for another client (its planned_path markers), base frame."""
        p = np.asarray(points_m, dtype=np.float32).reshape(-1, 3)
        with self.server.atomic():
            if self._marker_line is not None:
                self._marker_line.remove()
                self._marker_line = None
            if len(p) >= 2:
                self._marker_line = self.server.scene.add_line_segments(
                    "/planned_path", np.stack([p[:-1], p[1:]], axis=1), MARKER_PATH_RGB, thickness=self._line_m)

    @property
    def tf_frames_wanted(self):
        return bool(self._tf_box.value)

    def show_tf_frames(self, poses):
        """An axes frame and its name at every tf frame; poses: {frame name: (4, 4) pose in the base frame (m)}.
        Frames that are no longer in poses are hidden."""
        with self._lock:
            for name, T in poses.items():
                h = self._tf_handles.get(name)
                if h is None:
                    path = f"/tf_frames/{_node(name)}"
                    h = self.server.scene.add_frame(path, axes_length=0.06, axes_radius=0.003)
                    self.server.scene.add_label(f"{path}/name", name)
                    self._tf_handles[name] = h
                _set_pose(h, np.asarray(T[:3, 3], dtype=float), _wxyz(np.asarray(T, dtype=float)))
                h.visible = True
            for name, h in self._tf_handles.items():
                if name not in poses:
                    h.visible = False

    def _hide_tf_frames(self):
        with self._lock:
            for h in self._tf_handles.values():
                h.visible = False

    def show_obstacles(self, boxes):
        """boxes: [(centre (3,) m, size (3,) m)] axis-aligned in the base frame; replaces the previous ones."""
        s = self.server
        with s.atomic():
            if len(boxes) != len(self._obstacle_handles):
                for h in self._obstacle_handles:
                    h.remove()
                self._obstacle_handles = [s.scene.add_box(f"/obstacles/{k}", OBSTACLE_RGB, (1.0, 1.0, 1.0),
                                                          opacity=0.6) for k in range(len(boxes))]
            for h, (c, size) in zip(self._obstacle_handles, boxes):
                h.position = tuple(float(v) for v in c)
                h.dimensions = tuple(max(float(v), 1e-4) for v in size)

    def show_cloud(self, points_m, colors=None, received=None, pose=None):
        """Points (N, 3) (already decimated), colours (N, 3) uint8 or None (grey); ``pose``: T_base_points (4x4,
        the page applies it; None: the points are in the base frame); ``received``: how many the message held (the
        panel's cloud line, which changes with every cloud drawn). Sent as float16 points and uint8 colours."""
        pts = np.asarray(points_m, dtype=np.float32).reshape(-1, 3)
        cols = (np.full((len(pts), 3), 160, np.uint8) if colors is None
                else np.asarray(colors, dtype=np.uint8).reshape(-1, 3))
        T = np.eye(4) if pose is None else np.asarray(pose, dtype=np.float64)
        position, wxyz = T[:3, 3], _wxyz(T)
        self.cloud_count += 1
        if self.cloud_md is None:
            with self._gui_lock, self._plots:
                self.cloud_md = self.server.gui.add_markdown("")
        size = max(0.002, 0.004 * self.scene.reach_m())
        with self.server.atomic():
            if self._cloud is None or len(self._cloud.points) != len(pts):
                if self._cloud is not None:
                    self._cloud.remove()
                self._cloud = self.server.scene.add_point_cloud("/cloud", pts, cols, point_size=size,
                                                                point_shading="flat", precision="float16",
                                                                position=position, wxyz=wxyz)
            else:
                self._cloud.points, self._cloud.colors = pts, cols
                self._cloud.position, self._cloud.wxyz = position, wxyz
        self.cloud_md.content = (f"point cloud #{self.cloud_count}: {len(pts)} points drawn"
                                 + (f" of {received}" if received is not None else ""))

    def show_image(self, rgb):
        """The left camera image (H, W, 3) uint8 in the panel (JPEG)."""
        if self.image is None:
            with self._gui_lock, self._plots:
                self.image = self.server.gui.add_image(rgb, format="jpeg", jpeg_quality=80)
        else:
            self.image.image = rgb

    def show_tracking(self, times_s, errors):
        """Commanded minus actual joint positions (N, dof) rad or m over times_s (N,)."""
        data = (np.asarray(times_s, float),) + tuple(np.asarray(errors, float).T)
        self.tracking_plot = self._plot(self.tracking_plot, data, "tracking error (rad or m) vs time (s)")

    def _plot(self, handle, data, title):
        import viser.uplot as up

        if handle is not None and len(handle.data) == len(data):
            handle.data = data
            return handle
        if handle is not None:
            handle.remove()
        names = self.scene.robot.joint_names
        series = (up.Series(label="t (s)"),) + tuple(
            up.Series(label=n, stroke=PLOT_COLOURS[k % len(PLOT_COLOURS)], width=1.5) for k, n in enumerate(names))
        with self._gui_lock, self._plots:
            return self.server.gui.add_uplot(data, series, title=title, aspect=1.6,
                                             scales={"x": up.Scale(time=False, auto=True)})

    def close(self):
        self._worker.close()
        self._ik_worker.close()

