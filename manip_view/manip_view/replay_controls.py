"""The viser glue of ``manip-view --bag``: a time slider, Play/Pause and a rate over a manip_view.replay.Run; each
time shown draws the arm, the plan's tip path, the obstacles, the cloud and the left image of that moment."""
from __future__ import annotations

import threading
import time

import numpy as np


class ReplayControls:
    def __init__(self, viewer, panels, run, step_s=0.05):
        self.viewer, self.panels, self.run = viewer, panels, run
        self.names = viewer.scene.robot.joint_names
        missing = [n for n in self.names if n not in run.joint_names]
        s = viewer.server
        with s.gui.add_folder("Replay"):
            s.gui.add_markdown(f"{run.duration_s:.2f} s recorded, {len(run.t_joints)} joint states"
                               + (f"; **the bag lacks joints {missing}**" if missing else ""))
            self.time = s.gui.add_slider("time (s)", min=0.0, max=max(run.duration_s, step_s), step=step_s,
                                         initial_value=0.0)
            self.play = s.gui.add_button("Play")
            self.rate = s.gui.add_number("rate (x real time)", 1.0, min=0.05, max=20.0, step=0.05)
            self.status = s.gui.add_markdown("")
        self.time.on_update(lambda _: self.show(float(self.time.value)))
        self.play.on_click(lambda _: self._toggle())
        self._playing = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="manip-view-replay", daemon=True)
        self._thread.start()
        self.show(0.0)

    def show(self, t_s):
        snap = self.run.at(t_s, self.names)
        if snap.q is not None:
            self.viewer.set_q(snap.q)
        if snap.tool_path_m is not None:
            self.panels.show_tool_path(snap.tool_path_m)
        if snap.obstacles is not None:
            self.panels.show_obstacles(snap.obstacles)
        if snap.cloud is not None:
            c = self.run.cloud_in(self.viewer.scene.robot.base_link, snap.cloud)
            if c is not None:
                self.panels.show_cloud(*c, received=None)
        if snap.image is not None:
            self.panels.show_image(snap.image)
        q = "no joint state yet" if snap.q is None else "q " + ", ".join(f"{v:+.3f}" for v in snap.q)
        self.status.content = f"t = {t_s:.2f} s: {q}"

    def _toggle(self):
        if self._playing.is_set():
            self._playing.clear()
            self.play.label = "Play"
        else:
            if float(self.time.value) >= self.run.duration_s:
                self.time.value = 0.0
            self._playing.set()
            self.play.label = "Pause"

    def _loop(self):
        period = 1 / 20
        while not self._stop.is_set():
            if not self._playing.wait(0.2):
                continue
            t = float(self.time.value) + period * float(self.rate.value)
            if t >= self.run.duration_s:
                t = self.run.duration_s
                self._playing.clear()
                self.play.label = "Play"
            self.time.value = float(np.round(t, 6))  # on_update draws it
            time.sleep(period)

    def close(self):
        self._stop.set()
