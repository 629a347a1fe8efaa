"""Straight tip lines: on the line within 1e-6 m at every sample, no joint jumps, clear refusals."""
import numpy as np
import pytest

from manip_core.spatial import axis_angle_to_matrix, log3
from manip_planning.cartesian_path import CartesianPath, cartesian_line_trajectory, interpolate_pose
from manip_planning.joint_path import PlanningError

LIMITS = dict(velocity_limits=np.full(6, 3.15), acceleration_limits=np.full(6, 4.0))


def _start(ur5, demo, p, near=None):
    sols = ur5.analytic_ik().solve(demo.tool_down(p), near=demo.HOME if near is None else near)[0]
    return sols[0]


def _off_line(points, a, b):
    """Distance (m) of each point from the segment a-b (independent of the planner's maths)."""
    d = b - a
    u = np.clip(((points - a) @ d) / (d @ d), 0.0, 1.0)
    return np.linalg.norm(points - (a + u[:, None] * d), axis=1)


@pytest.mark.parametrize("rotate", [False, True])
def test_tip_stays_on_the_line(ur5, demo, rotate):
    q0 = _start(ur5, demo, [0.45, -0.25, 0.15])
    T0 = ur5.fk(q0)
    T1 = demo.tool_down([0.30, 0.20, 0.35])
    if rotate:  # turn the tool 60 degrees about a tilted axis on the way
        T1[:3, :3] = axis_angle_to_matrix([0.3, 0.2, 1.0], 1.0) @ T1[:3, :3]
    traj, path = cartesian_line_trajectory(ur5, q0, T1, "quintic", sample_period=0.01, **LIMITS)
    tips = np.array([ur5.fk(q) for q in traj.positions])
    assert np.max(_off_line(tips[:, :3, 3], T0[:3, 3], T1[:3, 3])) < 1e-6
    assert np.allclose(tips[-1][:3, 3], T1[:3, 3], atol=1e-6)
    # orientation: the decoupled interpolation at the position's path parameter
    for T in tips[:: max(1, len(tips) // 25)]:
        s = np.dot(T[:3, 3] - T0[:3, 3], T1[:3, 3] - T0[:3, 3]) / np.sum((T1[:3, 3] - T0[:3, 3]) ** 2)
        R = interpolate_pose(T0, T1, s)[:3, :3]
        assert np.linalg.norm(log3(R.T @ T[:3, :3])) < 1e-5
    # no jumps, float64, limits
    assert np.max(np.abs(np.diff(traj.positions, axis=0))) < 0.1
    assert traj.positions.dtype == np.float64 and traj.velocities.dtype == np.float64
    assert np.all(np.abs(traj.velocities) <= 3.15 + 1e-6)
    # velocities consistent with the positions
    qd_fd = np.gradient(traj.positions, traj.times, axis=0)
    assert np.max(np.abs(qd_fd[2:-2] - traj.velocities[2:-2])) < 0.05 * np.max(np.abs(traj.velocities)) + 1e-3


def test_vertical_descent_of_the_demo(ur5, demo):
    q0 = _start(ur5, demo, demo.PICK + [0, 0, 0.13])
    T1 = demo.tool_down(demo.PICK + [0, 0, 0.03])
    traj, path = cartesian_line_trajectory(ur5, q0, T1, "cubic", sample_period=0.02, **LIMITS)
    xy = np.array([ur5.fk(q)[:2, 3] for q in traj.positions])
    assert np.max(np.abs(xy - demo.PICK[:2])) < 1e-6
    assert np.allclose(ur5.fk(traj.positions[-1]), T1, atol=1e-6)


def test_line_over_the_base_is_refused(ur5, demo):
    """Through the shoulder singularity (the wrist over the base axis): refused with a place and a reason."""
    q0 = _start(ur5, demo, [0.3, 0.0, 0.4])
    with pytest.raises(PlanningError) as e:
        CartesianPath(ur5, q0, demo.tool_down([-0.3, 0.0, 0.4]))
    assert e.value.code == PlanningError.NO_IK_SOLUTION
    assert "s = " in e.value.message and "singular" in e.value.message


def test_line_out_of_reach_is_refused(ur5, demo):
    q0 = _start(ur5, demo, [0.4, 0.2, 0.3])
    with pytest.raises(PlanningError) as e:
        CartesianPath(ur5, q0, demo.tool_down([1.2, 0.2, 0.3]))
    assert e.value.code == PlanningError.NO_IK_SOLUTION
    assert "reachable workspace" in e.value.message


def test_branch_switch_at_a_joint_limit_is_refused(ur5, demo):
    """Turning the tool past wrist_3's limit would need a 2 pi jump of that joint: refused, not returned."""
    q0 = _start(ur5, demo, [0.4, -0.1, 0.3])
    q0[5] = 6.2                                    # near the +2 pi limit, same pose
    T0 = ur5.fk(q0)
    T1 = T0.copy()
    T1[:3, :3] = T0[:3, :3] @ axis_angle_to_matrix([0, 0, 1], 0.5)   # +0.5 rad about the tool axis
    with pytest.raises(PlanningError) as e:
        CartesianPath(ur5, q0, T1)
    assert e.value.code in (PlanningError.NO_IK_SOLUTION, PlanningError.PLANNING_FAILED)
    assert "s = " in e.value.message


def test_random_lines_never_jump(ur5, demo):
    """Either a refusal or a path on the line with small joint steps, never a jumping path."""
    rng = np.random.default_rng(11)
    ok = refused = 0
    for _ in range(16):
        a = np.array([rng.uniform(0.2, 0.6), rng.uniform(-0.5, 0.5), rng.uniform(0.05, 0.5)])
        b = np.array([rng.uniform(-0.6, 0.9), rng.uniform(-0.8, 0.8), rng.uniform(0.05, 0.8)])
        q0 = _start(ur5, demo, a)
        T1 = demo.tool_down(b)
        T1[:3, :3] = axis_angle_to_matrix(rng.normal(size=3), rng.uniform(0, 1.5)) @ T1[:3, :3]
        try:
            path = CartesianPath(ur5, q0, T1)
        except PlanningError as e:
            assert e.message and e.code in (PlanningError.NO_IK_SOLUTION, PlanningError.PLANNING_FAILED)
            refused += 1
            continue
        ok += 1
        assert np.max(np.abs(np.diff(path.q_grid, axis=0))) <= 0.1 + 1e-12
        tips = np.array([ur5.fk(q)[:3, 3] for q in path.q_grid])
        assert np.max(_off_line(tips, a, b)) < 1e-6
    assert ok >= 3 and refused >= 1


def test_goal_joints_in_another_branch_is_reported(ur5, demo):
    """PATH_CARTESIAN to goal joints whose pose the line reaches in another branch: planning.Planner refuses."""
    from manip_planning.planning import PATH_CARTESIAN, PLANNING_FAILED, Planner, PlanRequest

    sols = ur5.analytic_ik().solve(demo.tool_down([0.4, 0.1, 0.3]), near=demo.HOME)[0]
    q_start = _start(ur5, demo, [0.4, -0.1, 0.3], near=sols[0])
    res = Planner(ur5).plan(PlanRequest(start=q_start, goal_joints=sols[-1], path_type=PATH_CARTESIAN))
    assert not res.success and res.error_code == PLANNING_FAILED and "branch" in res.message
