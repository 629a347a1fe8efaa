"""The page's "Analysis" folder: buttons that compute the reach shell (manip_core.analysis.workspace) and a
singularity map (manip_core.analysis.singularity_map) of the viewer's robot and draw them as point clouds
(manip_view.analysis_layers colours them), ``/analysis/reach_shell`` and ``/analysis/singularity_map`` in the base
frame, each with a status line and a checkbox that hides it.

Each computation runs on a thread of its own (the page stays responsive); a click while that computation runs is
ignored (counted in ``ignored``).
"""
from __future__ import annotations

import logging
import threading
import time

import numpy as np

from . import analysis_layers

log = logging.getLogger(__name__)

REACH_SAMPLES = 200_000
SINGULARITY_ARGS = dict(plane=None, cells=8, levels=2)  # None: the arm's own plane if planar, else xz


def compute_reach_shell(robot):
    from manip_core.analysis.workspace import estimate_workspace

    return analysis_layers.reach_shell(estimate_workspace(robot, samples=REACH_SAMPLES, seed=0))


def compute_singularity_map(robot):
    from manip_core.analysis.singularity_map import singularity_map

    return analysis_layers.singularity_nodes(singularity_map(robot, **SINGULARITY_ARGS))


class AnalysisPanel:
    """Two buttons and their layers on a viser server for ``robot`` (a manip_core RobotModel)."""

    def __init__(self, server, robot, point_size_m):
        self.server, self.robot, self.point_size_m = server, robot, float(point_size_m)
        self._lock = threading.Lock()
        self._busy = set()
        self.ignored = 0
        self.layers = {}     # name -> point cloud handle
        self.status = {}     # name -> markdown handle
        self.threads = {}    # name -> the thread of the last computation started
        jobs = {"reach_shell": ("Reach shell", compute_reach_shell),
                "singularity_map": ("Singularity map", compute_singularity_map)}
        self.buttons = {}
        with server.gui.add_folder("Analysis", expand_by_default=False):
            for name, (label, fn) in jobs.items():
                self.buttons[name] = b = server.gui.add_button(f"Compute the {label.lower()}")
                b.on_click(lambda _, n=name, f=fn: self.start(n, f))
                self.status[name] = server.gui.add_markdown("")
                show = server.gui.add_checkbox(f"Show the {label.lower()}", True)
                show.on_update(lambda e, n=name: self._show(n, e.target.value))

    def start(self, name, fn):
        """Run fn(robot) -> (points, colours, text) on a new thread and draw the result; False (and nothing
        started) while the previous computation of ``name`` runs."""
        with self._lock:
            if name in self._busy:
                self.ignored += 1
                log.info("viewer: %s already computing; click ignored", name)
                return False
            self._busy.add(name)
        self.status[name].content = "computing..."
        t = threading.Thread(target=self._run, args=(name, fn), name=f"manip-view-{name}", daemon=True)
        self.threads[name] = t
        t.start()
        return True

    def _run(self, name, fn):
        t0 = time.perf_counter()
        try:
            pts, cols, text = fn(self.robot)
            self.draw(name, pts, cols)
            self.status[name].content = f"{text} (page: {time.perf_counter() - t0:.2f} s wall)"
            log.info("viewer: %s", text)
        except Exception as e:  # noqa: BLE001 - the page says what failed and stays up
            log.exception("viewer: %s failed", name)
            self.status[name].content = f"**{name} failed**: {type(e).__name__}: {e}"
        finally:
            with self._lock:
                self._busy.discard(name)

    def draw(self, name, points_m, colors):
        old = self.layers.get(name)
        with self.server.atomic():
            if old is not None:
                old.remove()
            self.layers[name] = self.server.scene.add_point_cloud(
                f"/analysis/{name}", np.asarray(points_m, np.float32), np.asarray(colors, np.uint8),
                point_size=self.point_size_m, point_shading="flat", precision="float32")

    def _show(self, name, on):
        h = self.layers.get(name)
        if h is not None:
            h.visible = bool(on)
