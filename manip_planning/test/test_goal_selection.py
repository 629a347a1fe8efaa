"""Goal selection and clearance on the planner's own collision model (issue 18, issue 6 model agreement).

Oracles: the collision spheres that H-planspeed's RobotCollisionModel.spheres_world puts in the world at q
(the spheres the sampling planner checks), the box distance computed by clamping (conftest.box_distance), and
finite differences for the sphere-centre Jacobians.
"""
from pathlib import Path

import numpy as np
import pytest

from manip_planning.collision import Obstacle
from manip_planning.joint_path import PlanningError
from manip_planning.planning import COLLISION, PlannerSettings, Planner, PlanRequest, collision_model_for
from manip_planning.robot_spheres import RobotSpheres

from .conftest import HOME, box_distance, tool_down

ROOT = Path(__file__).resolve().parents[2]
MBM_PANDA = ROOT.parent / "shared/benchmarks/mbm/robots/panda/panda_spherized.urdf"


@pytest.fixture(scope="module")
def panda():
    if not MBM_PANDA.is_file():
        pytest.skip(f"{MBM_PANDA} not present")
    from manip_core.model import RobotModel
    model = RobotModel.from_urdf(str(MBM_PANDA), "panda_link0", "panda_grasptarget")
    return Planner(model, PlannerSettings(), collision_model_for(model, str(MBM_PANDA)))


def _oracle_clearance(planner, q, center, size):
    """Clearance (m) of the planner's obstacle-checked collision spheres (spheres_world) to a box."""
    robot = planner.collision_model
    S = robot.spheres_world(q)
    env = np.repeat(robot.grp_env.astype(bool), np.diff(robot.grp_start))
    S = S[env]
    return float(np.min(box_distance(S[:, :3], np.asarray(center), np.asarray(size)) - S[:, 3]))


def test_robot_spheres_are_the_planners_spheres(panda):
    """RobotSpheres' centres and radii are the spheres the sampling planner checks, and its Jacobians the
    derivatives of the centres (finite differences)."""
    rng = np.random.default_rng(3)
    m = panda.model
    arm = panda.arm
    robot = panda.collision_model
    env = np.repeat(robot.grp_env.astype(bool), np.diff(robot.grp_start))
    for _ in range(3):
        q = rng.uniform(m.joint_lower, m.joint_upper)
        S = robot.spheres_world(q)[env]
        C, J = arm.centers_and_jacobians(q)
        assert len(C) == len(S) > 20
        assert np.allclose(np.sort(S[:, 3]), np.sort(arm.radius))
        # the same multiset of spheres (order may differ): match each centre to its nearest
        d = np.linalg.norm(C[:, None, :] - S[None, :, :3], axis=2)
        assert np.max(np.min(d, axis=1)) < 1e-9
        for i in range(m.dof):
            dq = q.copy()
            dq[i] += 1e-6
            assert np.allclose((arm.centers(dq) - C) / 1e-6, J[:, :, i], atol=1e-5)


def test_pose_goal_next_to_a_pillar_is_chosen_clear_of_it(panda):
    """The demo's layout for the Panda: the IK solution nearest the ready pose puts the elbow into the pillar;
    the planner chooses another one that keeps its margin (measured on the planner's own spheres), reaches
    the pose, and says which it took."""
    m = panda.model
    center, size = np.array([0.449, 0.0, 0.15]), np.array([0.1, 0.1, 0.3])
    pillar = Obstacle(center, size)
    q0 = np.array([-1.879, -1.348, 0.92, -1.927, 1.082, 1.074, -0.081])       # the demo's ready pose
    T = tool_down([0.449, -0.249, 0.15])
    T[:3, :3] = m.fk(q0)[:3, :3]                                            # the tool down as at the start
    nearest = panda.choose_ik(T, q0)
    assert _oracle_clearance(panda, nearest, center, size) < panda.s.safety_margin   # what went wrong before
    res = panda.plan(PlanRequest(start=q0, goal_pose=T, avoid_obstacles=True), [pillar])
    assert res.success, res.message
    q1 = res.trajectory.positions[-1]
    assert np.allclose(m.fk(q1), T, atol=1e-5)
    assert _oracle_clearance(panda, q1, center, size) >= panda.s.safety_margin
    assert "goal: IK solution" in res.message and res.details["goal"].startswith("IK solution")
    worst = min(_oracle_clearance(panda, q, center, size) for q in res.trajectory.positions[::3])
    assert worst >= panda.s.safety_margin - 0.005


def test_goal_that_no_solution_keeps_clear_fails_naming_the_obstacle(ur5):
    """A pose whose every IK solution puts the tool inside a box: COLLISION, naming the box and a link, and no
    trajectory (before: a path that pressed on it)."""
    planner = Planner(ur5, PlannerSettings())
    T = tool_down([0.45, -0.25, 0.30])
    box = Obstacle([0.45, -0.25, 0.30], [0.12, 0.12, 0.12])
    res = planner.plan(PlanRequest(start=HOME, goal_pose=T, avoid_obstacles=True), [box])
    assert not res.success and res.error_code == COLLISION and res.trajectory is None
    assert "obstacle #0 (box 0.120 x 0.120 x 0.120 m at [0.45, -0.25, 0.3] m)" in res.message, res.message
    assert "closest link" in res.message and "safety margin 0.030 m" in res.message
    with pytest.raises(PlanningError):
        planner.choose_ik(T, HOME, planner._scene([box]), 0.04)


def test_start_inside_the_margin_keeps_its_clearance(ur5):
    """A start 1.5 cm from a box (inside the 3 cm margin): the sampling planner still plans (the box is grown
    less) and the path never comes closer to it than the start, less 5 mm (the planner's own spheres)."""
    planner = Planner(ur5, PlannerSettings())
    q0 = planner.choose_ik(tool_down([0.45, -0.25, 0.25]), HOME)
    q1 = planner.choose_ik(tool_down([0.45, 0.25, 0.25]), q0)
    arm = planner.arm
    x0 = float(np.max(arm.centers(q0)[:, 0] + arm.radius))                      # the arm's front at the start
    box = Obstacle([x0 + 0.015 + 0.05, -0.25, 0.25], [0.1, 0.1, 0.1])
    c0 = float(arm.clearances(q0, planner._scene([box]))[0][0])
    assert 0.0 < c0 < planner.s.safety_margin
    res = planner.plan(PlanRequest(start=q0, goal_joints=q1, avoid_obstacles=True), [box])
    assert res.success, res.message
    assert res.method == "rrt_connect"
    assert res.min_obstacle_distance >= c0 / np.sqrt(3.0) - 0.007
