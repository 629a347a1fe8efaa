"""The demo's summary numbers: distances to boxes, clearance of link segments, tracking RMS, plots."""
import numpy as np

from manip_sim.demo_report import Recording, arm_clearance, plot_tool_path, plot_tracking, point_box_distance, \
    tracking_rms


def test_point_box_distance():
    c, s = np.array([1.0, 0.0, 0.5]), np.array([0.2, 0.4, 1.0])
    P = np.array([[1.0, 0.0, 0.5], [1.3, 0.0, 0.5], [1.0, 0.0, 1.5], [1.4, 0.5, 0.5]])
    np.testing.assert_allclose(point_box_distance(P, c, s), [0.0, 0.2, 0.5, np.hypot(0.3, 0.3)], atol=1e-12)


def test_arm_clearance_finds_the_closest_segment_and_time():
    box = (np.array([0.5, 0.0, 0.2]), np.array([0.1, 0.1, 0.4]))
    far = np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 0.5], [0.2, 0.0, 0.5]])
    near = np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 0.5], [0.4, 0.0, 0.5]])  # ends 5 cm short of, 10 cm above the box
    d, k = arm_clearance(np.array([far, near, far]), [box])
    assert k == 1
    assert abs(d - np.hypot(0.05, 0.1)) < 1e-9


def test_tracking_rms_uses_tracking_samples_only():
    rec = Recording(joint_names=["a", "b"], t_state=[0, 1, 2, 3],
                    desired=[[0, 0], [1, 1], [1, 1], [5, 5]], actual=[[0, 0], [1, 0.9], [1.1, 1], [0, 0]],
                    tracking=[True, True, True, False])
    rms, mx = tracking_rms(rec)
    np.testing.assert_allclose(rms, np.sqrt((0 + 0.01 + 0.01) / 3))
    np.testing.assert_allclose(mx, 0.1)


def test_plots_are_written(tmp_path):
    t = np.linspace(0, 1, 50)
    rec = Recording(joint_names=["j1", "j2"], t_state=list(t), desired=np.c_[t, -t].tolist(),
                    actual=np.c_[t + 0.01, -t].tolist(), tracking=[True] * 50)
    plot_tracking(rec, tmp_path / "tracking.png")
    path = np.c_[np.full(50, 0.45), np.linspace(-0.25, 0.25, 50), 0.3 + 0.1 * np.sin(np.pi * t)]
    box = (np.array([0.45, 0.0, 0.15]), np.array([0.1, 0.1, 0.3]))
    plot_tool_path(path, [box], path[0], path[-1], path[-1], tmp_path / "path.png")
    for name in ("tracking.png", "path.png"):
        data = (tmp_path / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
