"""Pick-and-place on arms other than the bundled UR5 (library level, no ROS), and the planner's handling of
the object to pick (allowed near the tool) and of the held object (part of the robot).

Oracles: Pinocchio's forward kinematics of the chosen joint solutions (the tip must be where the task wants
it, its approach axis pointing down), the null-space optimality condition of the redundancy resolution, and
the box of the held object sampled in its volume, placed by Pinocchio's FK, tested against the wall box.
"""
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from manip_core.model import RobotModel
from manip_planning import pick_place_machine as ppm
from manip_planning.collision import Obstacle
from manip_planning.planning import PlannerSettings, PlanRequest, Planner
from manip_planning.posture_ik import null_space_projector, toward_posture
from manip_planning.robot_collision import _kinematics_only
from manip_planning.shapes import Shape

pin = pytest.importorskip("pinocchio")

ROOT = Path(__file__).resolve().parents[2]
MBM_PANDA = ROOT.parent / "shared" / "benchmarks" / "mbm" / "robots" / "panda" / "panda_spherized.urdf"


def _erd(rel):
    from manip_core.reference_robots import example_robot
    try:
        return example_robot(rel)
    except FileNotFoundError as e:
        pytest.skip(str(e))


# name, path (callable), base, tip, approach axis in the tip frame, pick and place positions (m, base frame)
ARMS = {
    "mbm_panda": (lambda: MBM_PANDA, "panda_link0", "panda_grasptarget", (0, 0, 1), (0.5, -0.2, 0.05),
                  (0.45, 0.25, 0.05)),
    "erd_xarm7": (lambda: _erd("xarm_description/urdf/xarm7.urdf"), None, "link_eef", (0, 0, 1),
                  (0.4, -0.2, 0.05), (0.35, 0.25, 0.05)),
    "erd_ur10": (lambda: _erd("ur_description/urdf/ur10_robot.urdf"), "base_link", "ee_link", (1, 0, 0),
                 (0.7, -0.3, 0.05), (0.6, 0.4, 0.05)),
    "erd_kinova": (lambda: _erd("kinova_description/robots/kinova.urdf"), None, "j2s6s200_end_effector", (0, 0, 1),
                   (0.4, -0.25, 0.1), (0.35, 0.3, 0.1)),
}


class PinFK:
    """Pinocchio FK of ``tip`` in ``base`` for joint vectors in a manip_core model's order."""

    def __init__(self, path, model):
        self.pm = pin.buildModelFromUrdf(str(path))
        self.pd = self.pm.createData()
        joints = [self.pm.joints[self.pm.getJointId(j)] for j in model.joint_names]
        self.idx = [j.idx_q for j in joints]
        self.nq = [j.nq for j in joints]       # 2 for a continuous joint: (cos, sin)
        self.base = self.pm.getFrameId(model.base_link)
        self.tip = self.pm.getFrameId(model.tip_link)

    def __call__(self, q, frame=None):
        qq = pin.neutral(self.pm)
        for i, n, x in zip(self.idx, self.nq, q):
            qq[i:i + n] = [x] if n == 1 else [np.cos(x), np.sin(x)]
        pin.framesForwardKinematics(self.pm, self.pd, qq)
        oMb = self.pd.oMf[self.base]
        oMt = self.pd.oMf[self.tip if frame is None else self.pm.getFrameId(frame)]
        return (oMb.inverse() * oMt).homogeneous


def _model(name):
    get, base, tip = ARMS[name][:3]
    path = get()
    if not Path(path).is_file():
        pytest.skip(f"{path} not here")
    # kinematics only: the MBM Panda has a massless link with an inertia that the dynamics parser refuses
    return path, RobotModel.from_urdf(_kinematics_only(str(path)), base, tip)


def _start(model):
    """A start configuration inside the limits that is not a singular stretched pose: 40 % of each range."""
    lo = np.where(np.isfinite(model.joint_lower), model.joint_lower, -np.pi)
    hi = np.where(np.isfinite(model.joint_upper), model.joint_upper, np.pi)
    return lo + 0.4 * (hi - lo)


@pytest.mark.parametrize("axis", [(0, 0, 1), (1, 0, 0), (0, -1, 0), (1, 1, 1)])
@pytest.mark.parametrize("yaw", [0.0, 0.7])
def test_approach_axis_points_down(axis, yaw):
    T_obj = np.eye(4)
    T_obj[:3, :3] = [[np.cos(yaw), -np.sin(yaw), 0], [np.sin(yaw), np.cos(yaw), 0], [0, 0, 1]]
    T_obj[:3, 3] = [0.4, -0.1, 0.02]
    T = ppm.tool_down_pose(T_obj, 0.05, axis, yaw_offset=0.3)
    R = T[:3, :3]
    assert np.allclose(R.T @ R, np.eye(3), atol=1e-12) and np.linalg.det(R) == pytest.approx(1.0)
    a = np.asarray(axis, float) / np.linalg.norm(axis)
    assert np.allclose(R @ a, [0, 0, -1], atol=1e-12)                       # the approach axis points down
    b = ppm.approach_frame(axis)[:, 1]                                       # the reference axis follows the yaw
    assert np.allclose(R @ b, [np.cos(yaw + 0.3), np.sin(yaw + 0.3), 0], atol=1e-12)
    assert np.allclose(T[:3, 3], [0.4, -0.1, 0.07])
    with pytest.raises(ValueError, match="approach_axis_tip"):
        ppm.approach_frame((0, 0, 0))


@pytest.mark.parametrize("name", list(ARMS))
def test_task_on_other_arms_reaches_the_poses_pinocchio_says(name):
    """The whole task with recording fakes on a 7-DOF Panda and xArm7, a UR10 (closed form, approach along
    its ee_link's x) and a Kinova: no home given (the arm returns where it started); every solution checked
    before moving puts the tip, by Pinocchio's FK, at the pick/place pose with the approach axis down."""
    path, model = _model(name)
    axis, pick, place = ARMS[name][3:]
    planner = Planner(model, PlannerSettings())
    fk = PinFK(path, model)
    q = [_start(model)]
    trajectories = []

    def solve_ik(T, q_near):
        try:
            return planner.choose_ik(T, q_near), ""
        except Exception as e:  # noqa: BLE001 - PlanningError: unreachable
            return None, str(e)

    def plan(req):
        goal = req.goal_joints if req.goal_joints is not None else solve_ik(req.goal_pose, req.start)[0]
        if goal is None:
            return SimpleNamespace(success=False, error_code=-4, message="no IK", trajectory=None)
        return SimpleNamespace(success=True, error_code=0, message="ok", trajectory=np.array([req.start, goal]))

    def execute(traj):
        trajectories.append(traj)
        q[0] = traj[-1].copy()
        return True, "done"

    cfg = ppm.MachineConfig(home=None, approach_axis_tip=axis)
    m = ppm.PickPlaceMachine(plan=plan, execute=execute, grasp=lambda a, n: (True, "ok", "cube"),
                             current_joints=lambda: q[0].copy(), solve_ik=solve_ik, config=cfg)
    T1, T2 = np.eye(4), np.eye(4)
    T1[:3, 3], T2[:3, 3] = pick, place
    start = q[0].copy()
    out = m.run(ppm.PickPlaceGoal(T1, T2, "cube"))
    assert out.success, out.message
    assert out.phase_names == ["HOME", "ABOVE_PICK", "PICK", "ABOVE_PLACE", "PLACE", "HOME"]
    assert np.allclose(q[0], start) and np.allclose(m.home, start)
    a = np.asarray(axis, float) / np.linalg.norm(axis)
    lift = {"above_pick": cfg.grasp_offset + cfg.approach_height, "pick": cfg.grasp_offset,
            "above_place": cfg.grasp_offset + cfg.release_gap + cfg.approach_height,
            "place": cfg.grasp_offset + cfg.release_gap}
    for key, qk in m.solutions.items():
        T = fk(qk)
        p = np.asarray(pick if "pick" in key else place, float)
        assert np.allclose(T[:3, 3], p + [0, 0, lift[key]], atol=1e-5), (key, T[:3, 3])
        assert np.allclose(T[:3, :3] @ a, [0, 0, -1], atol=1e-5), key
        assert np.all(qk >= model.joint_lower - 1e-9) and np.all(qk <= model.joint_upper + 1e-9)
    # the Cartesian descents end where Pinocchio puts the grasp and release poses too
    grasp_T = fk(trajectories[1][-1])          # no trajectory for the first HOME: the task starts there
    assert np.allclose(grasp_T[:3, 3], np.asarray(pick) + [0, 0, cfg.grasp_offset], atol=1e-5)


def test_redundant_ik_moves_toward_the_posture_in_the_null_space():
    """Panda (7 DOF): the solution after toward_posture has the same tip pose (Pinocchio), is no farther from
    the preferred posture than the plain LM solution, and is a stationary point of the distance on the
    self-motion manifold (the null-space projection of the posture gradient vanishes, over the joints that
    are not held at a limit)."""
    path, model = _model("mbm_panda")
    fk = PinFK(path, model)
    rng = np.random.default_rng(7)
    posture = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])
    lo, hi = model.joint_lower, model.joint_upper
    gains = []
    for _ in range(8):
        T = model.fk(lo + (hi - lo) * (0.15 + 0.7 * rng.random(model.dof)))
        res = model.ik(T, q_seed=posture)
        assert res.success, res.message
        q, moved = toward_posture(model, res.q, T, posture)
        assert np.allclose(fk(q), T, atol=1e-6)
        assert np.linalg.norm(q - posture) <= np.linalg.norm(res.q - posture) + 1e-12
        free = (q > lo + 1e-6) & (q < hi - 1e-6)          # joints at a limit are held there
        assert np.max(np.abs(null_space_projector(model, q, free) @ (posture - q)[free])) < 1e-4
        gains.append(np.linalg.norm(res.q - posture) - np.linalg.norm(q - posture))
    assert max(gains) > 0.05                     # it does move solutions, not only keep them


# ---------------------------------------------------------------------------- handled objects (UR5)
def _tool_down(p):
    T = np.eye(4)
    T[:3, :3] = np.diag([1.0, -1.0, -1.0])
    T[:3, 3] = p
    return T


def _box_points(half, step=0.01):
    axes = [np.linspace(-h, h, max(2, int(np.ceil(2 * h / step)) + 1)) for h in half]
    return np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3)


def _held_in_wall(fk_tool, Q, held, wall_center, wall_size):
    """Deepest penetration (m, > 0 inside) of the held box's volume points into the wall box over Q."""
    P_local = _box_points(np.asarray(held.dims)) @ held.T[:3, :3].T + held.T[:3, 3]
    deepest = -np.inf
    for q in Q:
        T = fk_tool(q)
        P = P_local @ T[:3, :3].T + T[:3, 3]
        inside = np.min(0.5 * wall_size - np.abs(P - wall_center), axis=1)
        deepest = max(deepest, float(np.max(inside)))
    return deepest


def test_held_object_is_part_of_the_robot(ur5, demo):
    """A tall object (4 x 4 x 20 cm) hangs below tool0 while the arm moves over a wall 25 cm high: with the
    object attached the plan keeps every point of the object out of the wall (Pinocchio FK); without it the
    same request passes the object through the wall (the check can fail)."""
    from manip_planning.collision import densify
    planner = Planner(ur5, PlannerSettings(safety_margin=0.02))
    fk = PinFK(demo.ur5_path(), ur5)
    wall_c, wall_s = np.array([0.5, 0.0, 0.125]), np.array([0.5, 0.04, 0.25])
    wall = [Obstacle(wall_c, wall_s)]
    q0 = planner.choose_ik(_tool_down([0.45, -0.3, 0.35]), demo.HOME)
    q1 = planner.choose_ik(_tool_down([0.45, 0.3, 0.35]), q0)
    held = Shape("box", (0.02, 0.02, 0.10), np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0.13], [0, 0, 0, 1.0]]),
                 "bottle")
    res = planner.plan(PlanRequest(start=q0, goal_joints=q1, avoid_obstacles=True, attached_object=held), wall)
    assert res.success, res.message
    assert "holding an object" in res.message
    Q = densify(res.trajectory.positions, 0.005)
    assert _held_in_wall(fk, Q, held, wall_c, wall_s) < 0.0
    plain = planner.plan(PlanRequest(start=q0, goal_joints=q1, avoid_obstacles=True), wall)
    assert plain.success, plain.message
    assert _held_in_wall(fk, densify(plain.trajectory.positions, 0.005), held, wall_c, wall_s) > 0.0
    # the held object as perceived (an obstacle around it at the start) is not an obstacle
    seen = Obstacle(fk(q0)[:3, 3] + [0, 0, -0.13], [0.05, 0.05, 0.21])
    res2 = planner.plan(PlanRequest(start=q0, goal_joints=q1, avoid_obstacles=True, attached_object=held),
                        wall + [seen])
    assert res2.success and "1 obstacle(s) ignored" in res2.message, res2.message


def test_allowed_object_is_not_an_obstacle(ur5, demo):
    """The object to pick, as perceived (a box at the pick), is dropped from the request's obstacles when it is
    allowed; an obstacle elsewhere stays (its clearance is still reported)."""
    planner = Planner(ur5, PlannerSettings())
    cube = Obstacle(demo.PICK, [0.04, 0.04, 0.04])
    far = Obstacle([-0.3, 0.5, 0.1], [0.1, 0.1, 0.2])
    q0 = demo.HOME
    q1 = planner.choose_ik(_tool_down(demo.PICK + [0, 0, 0.03]), q0)      # the grasp pose: touching the cube
    blocked = planner.plan(PlanRequest(start=q0, goal_joints=q1, avoid_obstacles=True), [cube, far])
    assert blocked.min_obstacle_distance < 0.02
    res = planner.plan(PlanRequest(start=q0, goal_joints=q1, avoid_obstacles=True, allowed_objects=(cube,)),
                       [cube, far])
    assert res.success and "1 obstacle(s) ignored" in res.message, res.message
    assert 0.1 < res.min_obstacle_distance < np.inf        # the far box is still an obstacle


def test_object_is_announced_allowed_and_attached(ur5, demo):
    """With the perceived cube among the obstacles, the machine announces it (to pick, then held in the tip
    frame at the grasp pose, then none), names it as the allowed object on the way to the pick and away from
    the place, and attaches it to every request while it is held."""
    from manip_planning.test.test_pick_place_machine import Fakes
    cube = Obstacle(demo.PICK + [0.003, -0.002, 0.0], [0.045, 0.045, 0.042])   # as perceived: a little off
    pillar = Obstacle(demo.PILLAR_CENTER, demo.PILLAR_SIZE)
    f = Fakes(ur5, demo.HOME)
    requests, told = [], []

    def plan(req):
        requests.append((req.path_type, req.attached_object, tuple(req.allowed_objects)))
        return f.plan(req)

    planner = Planner(ur5, PlannerSettings())
    m = ppm.PickPlaceMachine(plan=plan, execute=f.execute, grasp=f.grasp, current_joints=f.current,
                             solve_ik=lambda T, q: (planner.choose_ik(T, q), ""),
                             config=ppm.MachineConfig(home=demo.HOME), obstacles=lambda: [pillar, cube],
                             announce=lambda state, obj: told.append((state, obj)))
    T1, T2 = np.eye(4), np.eye(4)
    T1[:3, 3], T2[:3, 3] = demo.PICK, demo.PLACE
    assert m.run(ppm.PickPlaceGoal(T1, T2, "cube")).success
    assert m.object_box is cube
    states = [s for s, _ in told]
    assert states[:3] == ["pick", "held", "none"] and set(states[3:]) <= {"none"}
    held = told[1][1]
    # tool0 points down 3 cm above the pick: the cube's centre is 3 cm along tool z, offset by the perception
    # error (x, y of the base = x, -y of the tool)
    assert np.allclose(held.T[:3, 3], [0.003, 0.002, 0.03], atol=1e-9)
    assert np.allclose(2 * np.array(held.dims), cube.size)
    # request by request (none for the first HOME: the task starts there): ABOVE_PICK, down, lift, ABOVE_PLACE,
    # down, retreat, HOME
    attached = [a is not None for _, a, _ in requests]
    allowed = [len(al) for _, _, al in requests]
    assert attached == [False, False, True, True, True, False, False]
    assert allowed == [1, 1, 0, 0, 0, 1, 1]
    assert requests[0][2][0] is cube
    assert np.allclose(requests[6][2][0].center, cube.center + (demo.PLACE - demo.PICK))
