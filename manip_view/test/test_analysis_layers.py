"""The page's analysis layers (reach shell, singularity map) and link frames, without a browser: the points drawn
are the analysis' own points, colours rise with the measure, the shell's outer radius matches FK samples of the
arm (an independent computation), the link frames sit where Pinocchio puts the links; a click while a computation
runs is ignored."""
import threading

import numpy as np
import pinocchio as pin
import pytest

from manip_core.analysis.singularity_map import singularity_map
from manip_core.analysis.workspace import estimate_workspace
from manip_core.robots import robot_path
from manip_core.spatial import quat_wxyz_to_matrix
from manip_view import analysis_layers as AL
from manip_view.analysis_panel import AnalysisPanel, compute_reach_shell
from manip_view.app import OfflineViewer
from manip_view.browser import free_port
from manip_view.scene import RobotScene, load_robot


def _assert_rising(values, colors):
    """Red never falls and blue never rises as the value grows (the ramp's monotone channels)."""
    order = np.argsort(values, kind="stable")
    c = colors[order].astype(int)
    assert np.all(np.diff(c[:, 0]) >= 0) and np.all(np.diff(c[:, 2]) <= 0)


def test_colormap_is_monotone_clipped_and_grey_for_nan():
    v = np.random.default_rng(3).uniform(-2.0, 5.0, 500)
    c = AL.colormap(v, 0.0, 3.0)
    assert c.dtype == np.uint8 and c.shape == (500, 3)
    _assert_rising(v, c)
    assert tuple(AL.colormap([0.0], 0.0, 3.0)[0]) == (40, 40, 220)      # vmin: blue anchor
    assert tuple(AL.colormap([3.0], 0.0, 3.0)[0]) == (230, 40, 30)      # vmax: red anchor
    assert tuple(AL.colormap([-1.0], 0.0, 3.0)[0]) == (40, 40, 220)     # clipped
    assert tuple(AL.colormap([np.nan, 1.0])[0]) == AL.NAN_RGB
    lo, hi = AL.colormap([1.0, 2.0])                                    # default range: min .. max
    assert tuple(lo) == (40, 40, 220) and tuple(hi) == (230, 40, 30)


def test_reach_shell_points_are_the_estimates_boundary_and_reach_as_far_as_fk():
    robot, _ = load_robot("ur5")
    est = estimate_workspace(robot, samples=200_000, seed=0)
    pts, cols, text = AL.reach_shell(est)
    ref_pts, dex = est.to_points("boundary")
    assert pts.dtype == np.float32 and cols.dtype == np.uint8 and len(pts) == len(cols) == len(dex) > 100
    np.testing.assert_allclose(pts, ref_pts, atol=1e-6)
    _assert_rising(dex, cols)
    assert f"{est.volume_m3:.4f} +- {est.volume_uncertainty_m3:.4f} m^3" in text and "200000 samples" in text
    # Independent: the tip origins of random joint vectors (robot.fk, checked against Pinocchio in test_scene)
    # reach as far from the base as the shell's outermost voxel centre, within a voxel diagonal.
    rng = np.random.default_rng(11)
    lo = np.where(np.isfinite(robot.joint_lower), robot.joint_lower, -np.pi)
    hi = np.where(np.isfinite(robot.joint_upper), robot.joint_upper, np.pi)
    tips = np.array([robot.fk(q)[:3, 3] for q in rng.uniform(lo, hi, (20_000, robot.dof))])
    r_fk, r_shell = np.linalg.norm(tips, axis=1).max(), np.linalg.norm(pts, axis=1).max()
    assert abs(r_fk - r_shell) < 2.0 * np.sqrt(3) * est.voxel_m, (r_fk, r_shell, est.voxel_m)


def test_singularity_nodes_are_the_maps_reachable_nodes_on_its_plane():
    robot, _ = load_robot("ur5")
    m = singularity_map(robot, plane="xz", cells=8, levels=2)
    pts, cols, text = AL.singularity_nodes(m)
    reach = m.node_computed & np.isfinite(m.node_values)
    assert len(pts) == int(reach.sum()) == m.summary()["reachable_points"] > 10
    I, J = np.nonzero(reach)
    vals = m.node_values[I, J]
    np.testing.assert_allclose(pts, m.node_points(I, J), atol=1e-6)
    np.testing.assert_allclose(pts[:, 1], m.origin[1], atol=1e-6)  # the xz plane through the base origin
    _assert_rising(vals, cols)
    assert tuple(cols[np.argmax(vals)]) == (230, 40, 30)
    assert f"{int(reach.sum())} reachable of {m.points_evaluated}" in text


@pytest.fixture
def viewer():
    robot, urdf = load_robot("ur5")
    v = OfflineViewer(RobotScene(robot, urdf), port=free_port())
    yield v
    v.stop()


def test_panel_draws_the_shell_and_ignores_a_click_while_computing(viewer):
    panel = AnalysisPanel(viewer.server, viewer.scene.robot, point_size_m=0.01)
    release, entered = threading.Event(), threading.Event()
    pts = np.array([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]], np.float32)

    def slow(robot):
        entered.set()
        assert release.wait(60)
        return pts, AL.colormap([0.0, 1.0]), "done"

    assert panel.start("reach_shell", slow)
    assert entered.wait(60)
    assert not panel.start("reach_shell", slow) and panel.ignored == 1  # second click while running
    release.set()
    panel.threads["reach_shell"].join(60)
    np.testing.assert_allclose(panel.layers["reach_shell"].points, pts)
    assert panel.status["reach_shell"].content.startswith("done")
    # The real computation through the panel: the estimate's boundary points are what the page holds.
    assert panel.start("reach_shell", compute_reach_shell)
    panel.threads["reach_shell"].join(120)
    ref, _ = estimate_workspace(viewer.scene.robot, samples=200_000, seed=0).to_points("boundary")
    np.testing.assert_allclose(panel.layers["reach_shell"].points, ref, atol=1e-6)
    assert "m^3" in panel.status["reach_shell"].content


def test_link_frames_in_the_page_sit_at_pinocchio_link_poses(viewer):
    """The "Link frames" axes hang below /robot/<link>, whose pose the redraw sets from the model's FK; the
    reference is Pinocchio's frame placement of the same URDF (relative to the base link)."""
    robot = viewer.scene.robot
    model = pin.buildModelFromUrdf(str(robot_path("ur5")))
    data = model.createData()
    q = np.random.default_rng(5).uniform(-2.0, 2.0, robot.dof)
    viewer.update(q)
    pin.framesForwardKinematics(model, data, q)
    T_base_inv = np.linalg.inv(data.oMf[model.getFrameId(robot.base_link)].homogeneous)
    assert len(viewer._link_axes) == len(viewer.scene.links)
    for link in viewer.scene.links[1:]:
        T_ref = T_base_inv @ data.oMf[model.getFrameId(link)].homogeneous
        h = viewer._frames[link]
        np.testing.assert_allclose(h.position, T_ref[:3, 3], atol=1e-6, err_msg=link)
        np.testing.assert_allclose(quat_wxyz_to_matrix(np.asarray(h.wxyz, float)), T_ref[:3, :3], atol=1e-6,
                                   err_msg=link)
        np.testing.assert_allclose(robot.fk(q, link=link), T_ref, atol=1e-9, err_msg=link)


def test_page_buttons_compute_and_show_the_reach_shell_and_the_singularity_map(chromium):
    """Through the page (headless Chromium) of ``manip-view ur5``: open the Analysis folder, click both buttons;
    the page's status lines carry the estimate's volume and the map's node counts, computed here independently
    with the same arguments (both are deterministic)."""
    import json
    import subprocess
    import sys
    import time

    from manip_view.analysis_panel import REACH_SAMPLES, SINGULARITY_ARGS
    from manip_view.browser import Browser

    robot, _ = load_robot("ur5")
    est = estimate_workspace(robot, samples=REACH_SAMPLES, seed=0)
    m = singularity_map(robot, **SINGULARITY_ARGS)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "manip_view.cli", "ur5", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line, deadline = "", time.monotonic() + 120
        while "at http" not in line and time.monotonic() < deadline and proc.poll() is None:
            line = proc.stdout.readline()
        url = line.split(" at ")[-1].strip()
        with Browser(chromium, 1280, 800) as b:
            b.open(url)
            b.wait_for("document.body.innerText.includes('Analysis')", 90, "the Analysis folder")
            assert b.evaluate("(() => { const w = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT); "
                              "let n; while ((n = w.nextNode())) { if (n.textContent.trim() == 'Analysis') { "
                              "n.parentElement.click(); return 1; } } return 0; })()"), "no 'Analysis' folder"
            for label in ("Compute the reach shell", "Compute the singularity map"):
                b.wait_for(f"Array.from(document.querySelectorAll('button')).some(e => e.innerText.includes("
                           f"{json.dumps(label)}))", 30, label)
                b.evaluate("Array.from(document.querySelectorAll('button')).find(e => e.innerText.includes("
                           f"{json.dumps(label)})).click() || 1")
            volume = f"{est.volume_m3:.4f} +- {est.volume_uncertainty_m3:.4f} m^3"
            b.wait_for(f"document.body.innerText.includes({json.dumps(volume)})", 120, volume)
            reach = int((m.node_computed & np.isfinite(m.node_values)).sum())
            nodes = f"{reach} reachable of {m.points_evaluated} evaluated nodes"
            b.wait_for(f"document.body.innerText.includes({json.dumps(nodes)})", 120, nodes)
            assert not b.console, b.console
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.mark.parametrize("name", ["ur5", "ypp3", "planar2r", "arm3"])
def test_both_layers_on_every_bundled_robot_lie_within_the_fk_reach(name):
    """The panel's own computations (its arguments) on each bundled robot: the shell and the map's nodes lie no
    farther from the base than the farthest FK tip sample (plus a voxel diagonal / a finest cell), the map's nodes
    on its plane; for the planar 2R that plane holds its FK tips (the arm's own plane, not a fixed xz)."""
    from manip_view.analysis_panel import SINGULARITY_ARGS, compute_reach_shell, compute_singularity_map

    robot, _ = load_robot(name)
    rng = np.random.default_rng(2)
    lo = np.where(np.isfinite(robot.joint_lower), robot.joint_lower, -np.pi)
    hi = np.where(np.isfinite(robot.joint_upper), robot.joint_upper, np.pi)
    tips = np.array([robot.fk(q)[:3, 3] for q in rng.uniform(lo, hi, (5000, robot.dof))])
    r_fk = np.linalg.norm(tips, axis=1).max()
    shell, cols, _ = compute_reach_shell(robot)
    assert len(shell) == len(cols) > 50
    est = estimate_workspace(robot, samples=200_000, seed=0)
    assert np.linalg.norm(shell, axis=1).max() <= r_fk + np.sqrt(3) * est.voxel_m
    nodes, cols, _ = compute_singularity_map(robot)
    m = singularity_map(robot, **SINGULARITY_ARGS)
    normal = np.cross(m.axis_u, m.axis_v)
    assert len(nodes) == len(cols) > 50
    np.testing.assert_allclose((nodes - m.origin) @ normal, 0.0, atol=1e-6)
    cell = (m.u_range[1] - m.u_range[0]) / (m.cells << m.levels)
    assert np.linalg.norm(nodes, axis=1).max() <= r_fk + 2 * cell
    if name == "planar2r":
        np.testing.assert_allclose((tips - m.origin) @ normal, 0.0, atol=1e-9)
