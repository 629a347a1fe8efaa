"""Singularity map: the planar 2R's closed-form minimum singular value at every node, refinement that covers
every cell the threshold crosses, and the UR5's continuation nodes against the closed-form IK at each node."""
import numpy as np
import pytest

from manip_core import InputError, RobotModel
from manip_core.analysis.singularity_map import singularity_map

L1, L2 = 0.5, 0.4


def sigma_min_2r(r):
    """Closed form: cos q2 = (r^2 - l1^2 - l2^2) / (2 l1 l2); sigma_min^2 = (F - sqrt(F^2 - 4 det^2)) / 2 with
    F = |J|_F^2 = l1^2 + 2 l2^2 + 2 l1 l2 cos q2, det = l1 l2 sin q2 (both elbow branches give the same)."""
    c = np.clip((r ** 2 - L1 ** 2 - L2 ** 2) / (2 * L1 * L2), -1, 1)
    F = L1 ** 2 + 2 * L2 ** 2 + 2 * L1 * L2 * c
    det2 = (L1 * L2) ** 2 * (1 - c ** 2)
    return np.sqrt(np.maximum((F - np.sqrt(np.maximum(F ** 2 - 4 * det2, 0))) / 2, 0))


def test_planar2r_map_matches_closed_form_and_refines_where_the_threshold_crosses():
    robot = RobotModel.load("planar2r")
    m = singularity_map(robot, cells=12, levels=3, threshold=0.1, band=0.0, u_range=(-1, 1), v_range=(-1, 1))
    M = m.node_values.shape[0]
    assert M == 12 * 8 + 1 and m.part == "position"
    I, J = np.nonzero(m.node_computed)
    P = m.node_points(I, J)
    r = np.linalg.norm(P[:, :2], axis=1)
    v = m.node_values[I, J]
    inside = (r > L1 - L2 + 1e-6) & (r < L1 + L2 - 1e-6)
    outside = (r < L1 - L2 - 1e-6) | (r > L1 + L2 + 1e-6)
    assert np.all(np.isfinite(v[inside])) and np.all(np.isnan(v[outside]))
    np.testing.assert_allclose(v[inside], sigma_min_2r(r[inside]), atol=1e-7)
    # refinement: fewer nodes than the full fine grid, and every finest cell whose exact corner values straddle
    # the threshold was refined down to the last level
    assert m.points_evaluated < 0.5 * M * M
    assert [s["level"] for s in m.steps] == [0, 1, 2, 3] and all(s["cells_refined"] > 0 for s in m.steps[1:])
    assert all(s["time_s"] >= 0 for s in m.steps)
    gi, gj = np.meshgrid(np.arange(M), np.arange(M), indexing="ij")
    rr = np.linalg.norm(m.node_points(gi, gj)[..., :2], axis=-1)
    exact = np.where((rr >= L1 - L2) & (rr <= L1 + L2), sigma_min_2r(rr), np.nan)
    c = np.stack([exact[:-1, :-1], exact[1:, :-1], exact[:-1, 1:], exact[1:, 1:]])
    straddle = np.all(np.isfinite(c), axis=0) & (np.min(c, axis=0) < 0.1) & (np.max(c, axis=0) > 0.1)
    assert straddle.sum() > 50
    assert np.all(m.cell_level[straddle] == 3)


def test_ur5_continuation_equals_closed_form_at_every_node():
    robot = RobotModel.load("ur5")
    kw = dict(cells=5, levels=2, u_range=(-0.8, 0.8), v_range=(-0.5, 0.9), threshold=0.05)
    a = singularity_map(robot, continuation=True, **kw)
    b = singularity_map(robot, **kw)         # default: the closed form (numba batch) at every node
    assert a.part == "full" and "continuation" in a.ik and "continuation" not in b.ik
    assert np.array_equal(a.node_computed, b.node_computed) and a.points_evaluated > 36
    va, vb = a.node_values[a.node_computed], b.node_values[b.node_computed]
    assert np.array_equal(np.isnan(va), np.isnan(vb))
    np.testing.assert_allclose(va[~np.isnan(va)], vb[~np.isnan(vb)], atol=1e-6)
    # spot check: a node's value is the best min singular value over all closed-form solutions there
    i, j = np.argwhere(a.node_computed & np.isfinite(a.node_values))[3]
    T = np.eye(4)
    T[:3, :3] = robot.home[:3, :3]
    T[:3, 3] = a.node_points(i, j)
    best = max(robot.min_singular_value(q) for q in robot.ik_all(T))
    assert a.node_values[i, j] == pytest.approx(best, abs=1e-9)


def test_bad_input():
    robot = RobotModel.load("ypp3")
    with pytest.raises(InputError, match="plane"):
        singularity_map(robot, plane="ab")
    with pytest.raises(InputError, match="part"):
        singularity_map(robot, part="pos")
    with pytest.raises(InputError, match="levels"):
        singularity_map(robot, levels=-1)
