"""plan_trajectory's default with obstacles is RRT-Connect: a shelf over the place target that the lift-over
heuristic cannot pass, clearance checked with the independent capsule oracle of conftest.py."""
import numpy as np
import pytest

from manip_planning.collision import Obstacle
from manip_planning.planning import HEURISTICS, PlanRequest, Planner, PlannerSettings


def shelf_scene(demo):
    """The pillar, and a shelf board 55 cm above the place target (with two side walls): the tool reaches the
    target under the board, so lifting over the pillar and coming down from above does not work."""
    p = demo.PLACE
    return [Obstacle(demo.PILLAR_CENTER, demo.PILLAR_SIZE),
            Obstacle(p + [0.0, 0.0, 0.55], [0.30, 0.30, 0.02]),
            Obstacle(p + [0.0, 0.17, 0.27], [0.30, 0.02, 0.54]),
            Obstacle(p + [0.17, 0.0, 0.27], [0.02, 0.30, 0.54])]


def test_default_planner_threads_the_shelf(ur5, demo):
    q_a = ur5.analytic_ik().solve(demo.tool_down(demo.PICK + [0, 0, 0.13]), near=demo.HOME)[0][0]
    q_b = ur5.analytic_ik().solve(demo.tool_down(demo.PLACE + [0, 0, 0.13]), near=q_a)[0][0]
    obstacles = shelf_scene(demo)
    planner = Planner(ur5, PlannerSettings(planning_time_limit=5.0))
    planner.warm_up()   # what the planner node runs in the background at start-up
    res = planner.plan(PlanRequest(start=q_a, goal_joints=q_b, avoid_obstacles=True), obstacles)
    assert res.success, res.message
    assert res.method == "rrt_connect"
    Q = demo.interpolate(res.trajectory.positions)
    assert np.allclose(Q[0], q_a) and np.allclose(Q[-1], q_b, atol=1e-9)
    for o in obstacles:
        assert demo.arm_box_clearance(ur5, Q, o.center, o.size) >= 0.03 - 1e-3
    # the same seed gives the same trajectory
    again = planner.plan(PlanRequest(start=q_a, goal_joints=q_b, avoid_obstacles=True), obstacles)
    assert np.array_equal(again.trajectory.positions, res.trajectory.positions)
    # the heuristics stay available by name; they cannot solve the shelf
    h = Planner(ur5, PlannerSettings(path_planner=HEURISTICS))
    assert not h.plan(PlanRequest(start=q_a, goal_joints=q_b, avoid_obstacles=True), obstacles).success
    r2 = h.plan(PlanRequest(start=q_a, goal_joints=q_b, avoid_obstacles=True), [obstacles[0]])
    assert r2.success and r2.method in ("straight", "lift_over", "potential_field")


def test_unknown_path_planner_is_rejected(ur5):
    with pytest.raises(ValueError, match="path_planner"):
        Planner(ur5, PlannerSettings(path_planner="prm"))


def test_sampled_path_is_one_motion_through_its_corners(ur5, demo):
    """A quintic request whose path comes from RRT-Connect (corners) is one motion, not a rest-to-rest s(t) per
    straight segment (which stopped at every corner: a Kinova took 112 s of task time): TOPP-RA along the checked
    spline through the waypoints. Oracles: the joint velocity and acceleration limits (scaled) on every sample, at
    rest only at both ends, the capsule clearance oracle, and a duration below what any rest-to-rest quintic needs
    for the same joint travel (1.875 * travel / velocity limit per joint)."""
    q_a = ur5.analytic_ik().solve(demo.tool_down(demo.PICK + [0, 0, 0.13]), near=demo.HOME)[0][0]
    q_b = ur5.analytic_ik().solve(demo.tool_down(demo.PLACE + [0, 0, 0.13]), near=q_a)[0][0]
    obstacles = shelf_scene(demo)
    planner = Planner(ur5, PlannerSettings(planning_time_limit=5.0))
    vs, as_ = 0.5, 0.5
    res = planner.plan(PlanRequest(start=q_a, goal_joints=q_b, avoid_obstacles=True, profile="quintic",
                                   velocity_scaling=vs, acceleration_scaling=as_), obstacles)
    assert res.success, res.message
    assert res.method == "rrt_connect" and res.details["waypoints"] >= 3, res.details
    tr = res.trajectory
    assert tr.profile == "toppra", res.message
    v, a = planner.velocity_limits * vs, planner.acceleration_limits * as_
    assert np.all(np.abs(tr.velocities) <= v * (1 + 1e-6)) and np.all(np.abs(tr.accelerations) <= a * (1 + 1e-6))
    assert np.allclose(tr.positions[0], q_a) and np.allclose(tr.positions[-1], q_b, atol=1e-9)
    assert np.allclose(tr.velocities[[0, -1]], 0.0)
    speed = np.max(np.abs(tr.velocities) / v, axis=1)       # fraction of the velocity limit of the fastest joint
    inner = speed[int(0.1 * len(speed)):int(0.9 * len(speed))]
    assert inner.min() > 0.01, inner.min()                  # no stop between the ends
    Q = demo.interpolate(tr.positions)
    for o in obstacles:
        assert demo.arm_box_clearance(ur5, Q, o.center, o.size) >= 0.03 - 1e-3
    # a given duration keeps the rest-to-rest segments (TOPP-RA gives the shortest motion only): at rest at each
    # corner of the same (seeded) polyline, which gives the corners
    slow = planner.plan(PlanRequest(start=q_a, goal_joints=q_b, avoid_obstacles=True, profile="quintic",
                                    velocity_scaling=vs, acceleration_scaling=as_, duration=3.0 * tr.duration),
                        obstacles)
    assert slow.success and slow.trajectory.profile == "quintic", slow.message
    st = slow.trajectory
    rest = [k for k in range(1, len(st.times) - 1) if np.max(np.abs(st.velocities[k])) == 0.0]
    corners = np.array([q_a] + [st.positions[k] for k in rest] + [q_b])
    assert len(corners) == res.details["waypoints"], (len(corners), res.details)
    # the shortest rest-to-rest quintic per segment (closed form: peak velocity 1.875 D/T, peak acceleration
    # 10/sqrt(3) D/T^2 for a travel D in time T), summed: what the stop-at-every-corner scaling needed at least
    D = np.abs(np.diff(corners, axis=0))
    per_segment = np.sum(np.max(np.maximum(1.875 * D / v, np.sqrt(10.0 / np.sqrt(3.0) * D / a)), axis=1))
    assert tr.duration < per_segment, (tr.duration, per_segment)
