"""Panels fed from several threads at once, as the viewer node does (its cloud and arm threads, the executor's image
callback): the first cloud, image and plot each add an element to the same GUI folder; the Worker that
runs the newest job (newest wins, no queue)."""
import threading

import numpy as np

from manip_view.app import OfflineViewer
from manip_view.browser import free_port
from manip_view.overlays import solve_ik_offline
from manip_view.panels import Panels, Worker
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


def test_worker_runs_only_the_newest_pending_job_and_never_queues():
    """While a job runs, 100 more arrive: only the newest of them runs after it (what the viewer does with a
    joint_states or point-cloud stream that outpaces drawing), the 99 others are counted as dropped."""
    running, release, done, ran = threading.Event(), threading.Event(), threading.Event(), []

    def job(k):
        ran.append(k)
        if k == 0:
            running.set()
            release.wait(60)
        if k == 100:
            done.set()

    w = Worker("test-newest")
    try:
        w.submit(job, 0)
        assert running.wait(60)
        for k in range(1, 101):
            w.submit(job, k)
        release.set()
        assert done.wait(60)
        assert ran == [0, 100] and w.started == 2 and w.dropped == 99
    finally:
        w.close()


def test_tf_frames_follow_the_poses_and_hide_when_gone_or_unticked():
    from manip_core.spatial import matrix_to_quat_wxyz
    robot, urdf = load_robot("ur5")
    viewer = OfflineViewer(RobotScene(robot, urdf), port=free_port())
    try:
        panels = Panels(viewer, solve_ik=lambda T, q: solve_ik_offline(robot, T, q))
        assert not panels.tf_frames_wanted                      # off by default
        T_cam = robot.fk(np.full(robot.dof, 0.3))
        panels.show_tf_frames({"base_link": np.eye(4), "camera": T_cam})
        h = panels._tf_handles["camera"]
        np.testing.assert_allclose(h.position, T_cam[:3, 3], atol=1e-6)
        w = matrix_to_quat_wxyz(T_cam[:3, :3])
        assert min(np.abs(np.asarray(h.wxyz) - w).max(), np.abs(np.asarray(h.wxyz) + w).max()) < 1e-6
        assert h.visible
        panels.show_tf_frames({"base_link": np.eye(4)})          # camera no longer on tf
        assert not panels._tf_handles["camera"].visible and panels._tf_handles["base_link"].visible
        panels._tf_box.value = True
        panels._tf_box.value = False                            # unticked: every frame hidden
        assert not any(x.visible for x in panels._tf_handles.values())
        panels.close()
    finally:
        viewer.stop()
