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


def test_path_through_a_wrist_singularity_is_reported_or_refused(ur5):
    """The UR5's wrist is singular where wrist_2 = 0 (wrist_1 and wrist_3 axes aligned: a zero singular value
    of the body Jacobian). A joint line from wrist_2 = -pi/2 to +pi/2 crosses it: "warn" plans it and says so,
    "refuse" fails with PLANNING_FAILED; a path that keeps wrist_2 away from 0 is not flagged."""
    from manip_planning.planning import PLANNING_FAILED
    q0 = HOME.copy()
    q1 = HOME.copy()
    q1[4] = np.pi / 2
    warn = Planner(ur5, PlannerSettings(singularity_threshold=0.01)).plan(PlanRequest(start=q0, goal_joints=q1))
    assert warn.success and "singularity" in warn.message, warn.message
    assert warn.details["singularity"]["below"] and warn.details["singularity"]["min_singular_value"] < 0.01
    refuse = Planner(ur5, PlannerSettings(singularity_threshold=0.01, singularity_action="refuse"))
    res = refuse.plan(PlanRequest(start=q0, goal_joints=q1))
    assert not res.success and res.error_code == PLANNING_FAILED and "singular" in res.message, res.message
    q2 = HOME.copy()
    q2[4] = -1.0
    ok = refuse.plan(PlanRequest(start=q0, goal_joints=q2))
    assert ok.success and not ok.details["singularity"]["below"], ok.message
    with pytest.raises(ValueError, match="singularity_action"):
        Planner(ur5, PlannerSettings(singularity_action="ignore"))


MBM_UR5 = ROOT.parent / "shared/benchmarks/mbm/robots/ur5/ur5_spherized.urdf"


def test_self_contact_of_the_model_at_the_start_is_not_checked():
    """A collision model whose spheres overlap between two links at the start (a conservative mesh cover, no
    SRDF): the real arm is there, so that pair is not checked for this plan (the message names it), while
    other pairs still are. Oracle: the overlap computed from spheres_world."""
    if not MBM_UR5.is_file():
        pytest.skip(f"{MBM_UR5} not present")
    from manip_core.model import RobotModel
    from manip_planning.robot_collision import RobotCollisionModel
    from manip_planning.self_contact import touching_pairs
    model = RobotModel.from_urdf(str(MBM_UR5), "base_link", "tool0")
    base = collision_model_for(model, str(MBM_UR5))
    q0 = np.array([0.0, -1.2, 1.2, -1.5, -1.5, 0.0])
    q1 = q0 + 0.3
    spheres = dict(base.link_spheres)
    # a sphere on wrist_3 that reaches into the forearm at q0 (an over-conservative cover)
    T_w3, T_fa = model.fk(q0, "wrist_3_link"), model.fk(q0, "forearm_link")
    p_fa = T_fa[:3, 3] + T_fa[:3, :3] @ spheres["forearm_link"][-1, :3]
    p_local = np.linalg.inv(T_w3) @ np.append(0.5 * (T_w3[:3, 3] + p_fa), 1.0)
    r = 0.5 * np.linalg.norm(T_w3[:3, 3] - p_fa) + 0.01
    spheres["wrist_3_link"] = np.vstack([spheres["wrist_3_link"], np.append(p_local[:3], r)])
    robot = RobotCollisionModel(model, spheres, base.disabled, base.check_fixed_links, "test")
    S = robot.spheres_world(q0)
    names = np.repeat(robot.group_names, np.diff(robot.grp_start))
    A, B = S[names == "wrist_3_link"], S[names == "forearm_link"]
    overlap = np.min(np.linalg.norm(A[:, None, :3] - B[None, :, :3], axis=2) - A[:, None, 3] - B[None, :, 3])
    assert overlap < 0
    assert frozenset(("wrist_3_link", "forearm_link")) in touching_pairs(robot, [q0])
    planner = Planner(model, PlannerSettings(), robot)
    res = planner.plan(PlanRequest(start=q0, goal_joints=q1, avoid_obstacles=True),
                       [Obstacle([-0.6, -0.6, 0.2], [0.1, 0.1, 0.1])])
    assert res.success, res.message
    assert "forearm_link-wrist_3_link" in res.message, res.message
