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
