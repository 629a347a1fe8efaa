"""Obstacle-aware planning on the UR5 in the demo scene, checked independently of the planner's geometry."""
import numpy as np
import pytest

from manip_planning.avoidance import plan_avoiding
from manip_planning.collision import ArmSpheres, Obstacle, Scene
from manip_planning.joint_path import PlanningError
from manip_planning.planning import COLLISION, PLANNING_FAILED, Planner, PlannerSettings, PlanRequest
from manip_planning.potential_field import FieldOptions, potential_field_path

MARGIN = 0.03
RADIUS = 0.06


@pytest.fixture(scope="module")
def scene_demo(ur5, demo):
    ik = ur5.analytic_ik()
    q_a = ik.solve(demo.tool_down(demo.PICK + [0, 0, 0.13]), near=demo.HOME)[0][0]
    q_b = ik.solve(demo.tool_down(demo.PLACE + [0, 0, 0.13]), near=q_a)[0][0]
    scene = Scene([Obstacle(demo.PILLAR_CENTER, demo.PILLAR_SIZE)], floor_height=0.0)
    return q_a, q_b, scene


# -------------------------------------------------------------------------------------------- tests
def test_sphere_jacobians_match_finite_differences(ur5):
    arm = ArmSpheres(ur5, RADIUS, tool_length=0.05)
    rng = np.random.default_rng(0)
    for _ in range(3):
        q = rng.uniform(-3, 3, 6)
        C, J = arm.centers_and_jacobians(q)
        assert np.allclose(C, arm.centers(q))
        Jn = np.zeros_like(J)
        for i in range(6):
            dq = np.zeros(6)
            dq[i] = 1e-6
            Jn[:, :, i] = (arm.centers(q + dq) - arm.centers(q - dq)) / 2e-6
        assert np.max(np.abs(J - Jn)) < 1e-8


def test_spheres_cover_the_capsules(ur5):
    arm = ArmSpheres(ur5, RADIUS)
    assert arm.radius > RADIUS
    assert [p for p in arm.points] == ["base_link", "shoulder_link", "forearm_link", "wrist_1_link",
                                       "wrist_2_link", "wrist_3_link"]
    q = np.array([0.3, -1.9, -1.5, -1.0, 0.4, 0.4])
    # a point on a capsule surface is inside some sphere
    P = [ur5.fk(q, n)[:3, 3] for n in arm.points[1:]]
    C = arm.centers(q)
    rng = np.random.default_rng(1)
    for a, b in zip(P[:-1], P[1:]):
        for u in rng.uniform(0, 1, 20):
            axis = (b - a) / np.linalg.norm(b - a)
            perp = np.cross(axis, rng.normal(size=3))
            x = a + u * (b - a) + RADIUS * perp / np.linalg.norm(perp)
            assert np.min(np.linalg.norm(C - x, axis=1)) <= arm.radius + 1e-12


def test_box_signed_distance():
    sc = Scene([Obstacle([0, 0, 0], [0.2, 0.4, 0.6])])
    d, n = sc.distances(np.array([[0.3, 0, 0], [0.2, 0.3, 0], [0.05, 0, 0], [0, 0, 0.31]]))
    assert np.allclose(d, [0.2, np.hypot(0.1, 0.1), -0.05, 0.01])
    assert np.allclose(n[0], [1, 0, 0]) and np.allclose(n[1], [np.sqrt(0.5), np.sqrt(0.5), 0])
    assert np.allclose(n[2], [1, 0, 0]) and np.allclose(n[3], [0, 0, 1])
    ds, _ = Scene([Obstacle([1, 0, 0], radius=0.1)]).distances(np.array([[1, 0, 0.5]]))
    assert ds[0] == pytest.approx(0.4)


def test_straight_joint_path_of_the_demo_collides(ur5, scene_demo, demo):
    """Precondition that makes the next tests meaningful."""
    q_a, q_b, _ = scene_demo
    straight = demo.interpolate(np.array([q_a, q_b]))
    assert demo.arm_box_clearance(ur5, straight, demo.PILLAR_CENTER, demo.PILLAR_SIZE) < 0.0
    # and both ends are clear of the pillar
    assert demo.arm_box_clearance(ur5, [q_a, q_b], demo.PILLAR_CENTER, demo.PILLAR_SIZE) > MARGIN


@pytest.mark.parametrize("method", ["potential_field", "lift_over"])
def test_demo_plan_keeps_the_margin(ur5, scene_demo, demo, method):
    """Above pick -> above place around the pillar: every link capsule stays >= the safety margin from it
    along the final time-scaled trajectory (and between its samples), and above the table."""
    q_a, q_b, _ = scene_demo
    settings = PlannerSettings(safety_margin=MARGIN, link_radius=RADIUS, avoidance_methods=("straight", method),
                               path_planner="heuristics")   # the default with obstacles is rrt_connect
    planner = Planner(ur5, settings)
    res = planner.plan(PlanRequest(start=q_a, goal_joints=q_b, avoid_obstacles=True, velocity_scaling=0.5),
                       [Obstacle(demo.PILLAR_CENTER, demo.PILLAR_SIZE)])
    assert res.success, res.message
    assert res.method == method
    traj = res.trajectory
    assert np.allclose(traj.positions[0], q_a) and np.allclose(traj.positions[-1], q_b)
    Q = demo.interpolate(traj.positions, 0.01)
    clearance = demo.arm_box_clearance(ur5, Q, demo.PILLAR_CENTER, demo.PILLAR_SIZE)
    assert clearance >= MARGIN - 1e-9, clearance
    assert res.min_obstacle_distance >= MARGIN
    # the planner's report is conservative (its spheres cover the capsules)
    assert res.min_obstacle_distance <= clearance + 1e-9
    lowest = min(ur5.fk(q, link)[2, 3] for q in Q[::5] for link in demo.CHAIN[1:])
    assert lowest > RADIUS
    assert np.all(np.abs(traj.velocities) <= 0.5 * ur5.velocity_limits + 1e-9)
    assert traj.positions.dtype == np.float64


def test_potential_field_reports_a_local_minimum(ur5, demo):
    """A tall narrow wall: the plain descent (no random escapes) gets stuck and says so."""
    arm = ArmSpheres(ur5, RADIUS)
    scene = Scene([Obstacle([0.45, 0.0, 0.22], [0.08, 0.1, 0.44])], floor_height=0.0)
    ik = ur5.analytic_ik()
    q_a = [q for q, lab in ik.solve_labeled(demo.tool_down([0.45, -0.25, 0.14]), near=demo.HOME)[0]
           if lab.startswith("shoulder-right") and "elbow-up" in lab][0]
    q_b = ik.solve(demo.tool_down([0.45, 0.25, 0.14]), near=q_a)[0][0]
    with pytest.raises(PlanningError) as e:
        potential_field_path(arm, scene, q_a, q_b, ur5.joint_lower, ur5.joint_upper,
                             FieldOptions(max_escapes=0, max_iterations=600))
    assert e.value.code == PLANNING_FAILED and ("local minimum" in e.value.message
                                                or "did not reach" in e.value.message)


def test_enclosed_goal_fails_with_a_reason(ur5, scene_demo):
    """A wall 1.5 m tall from near the base to beyond reach between pick and place: no method finds a way
    (the only one is the long way round behind the robot), and the failure says what was tried."""
    q_a, q_b, _ = scene_demo
    wall = Obstacle([0.6, 0.0, 0.75], [0.9, 0.06, 1.5])
    arm = ArmSpheres(ur5, RADIUS)
    scene = Scene([wall], floor_height=0.0)
    with pytest.raises(PlanningError) as e:
        plan_avoiding(ur5, arm, scene, q_a, q_b, safety_margin=MARGIN,
                      field_options=FieldOptions(max_escapes=1, max_iterations=400))
    assert e.value.code in (PLANNING_FAILED, COLLISION)
    assert "straight" in e.value.message and "potential_field" in e.value.message


def test_an_obstacle_touching_the_start_does_not_relax_the_others(ur5, scene_demo, demo):
    """A held object (or the arm itself, as unfiltered perception reports it) overlaps the arm at the start:
    the path may not go deeper into it than the start is, and the pillar keeps the full margin."""
    q_a, q_b, _ = scene_demo
    tip = ur5.fk(q_a)[:3, 3]
    held = Obstacle(tip - [0, 0, 0.03], [0.04, 0.04, 0.04])         # the cube under the tool
    pillar = Obstacle(demo.PILLAR_CENTER, demo.PILLAR_SIZE)
    planner = Planner(ur5, PlannerSettings(safety_margin=MARGIN, link_radius=RADIUS))
    start_clear = planner.arm.obstacle_clearances(q_a, Scene([held]))[0]
    assert start_clear < 0.0
    res = planner.plan(PlanRequest(start=q_a, goal_joints=q_b, avoid_obstacles=True), [held, pillar])
    assert res.success, res.message
    assert "already closer than the margin" in res.message
    Q = demo.interpolate(res.trajectory.positions)
    assert demo.arm_box_clearance(ur5, Q, demo.PILLAR_CENTER, demo.PILLAR_SIZE) >= MARGIN
    worst_held = min(planner.arm.obstacle_clearances(q, Scene([held]))[0] for q in Q)
    assert worst_held >= start_clear - 1e-6
