"""Panels fed from several threads at once, as the viewer node does (the cloud worker, the executor's image and
tracking callbacks): the first cloud, image and plot each add an element to the same GUI folder."""
import threading

import numpy as np

from manip_view.app import OfflineViewer
from manip_view.browser import free_port
from manip_view.overlays import solve_ik_offline
from manip_view.panels import Panels
from manip_view.scene import RobotScene, load_robot


def test_first_cloud_image_and_plot_from_three_threads_at_once():
    robot, urdf = load_robot("ur5")
    viewer = OfflineViewer(RobotScene(robot, urdf), port=free_port())
    try:
        for _ in range(3):
            panels = Panels(viewer, solve_ik=lambda T, q: solve_ik_offline(robot, T, q))
            start, errors = threading.Barrier(3), []
            jobs = [lambda: panels.show_cloud(np.zeros((100, 3), np.float32)),
                    lambda: panels.show_image(np.zeros((48, 64, 3), np.uint8)),
                    lambda: panels.show_tracking(np.linspace(-1, 0, 10), np.zeros((10, 6)))]

            def run(job):
                start.wait()
                try:
                    job()
                except Exception as e:  # noqa: BLE001 - collected and asserted below
                    errors.append(e)

            threads = [threading.Thread(target=run, args=(j,)) for j in jobs]
            for t in threads:
                t.start()
            for t in threads:
                t.join(30)
            assert not errors, errors
            assert panels.cloud_md is not None and panels.image is not None and panels.tracking_plot is not None
            panels.close()
    finally:
        viewer.stop()
