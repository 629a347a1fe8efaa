"""The whole pick-and-place task in manip_sim's shelf scene (config/shelf_scene.yaml: a pillar between pick
and place, the place under a shelf board) with the library planner (the bundled UR5's collision cylinders,
covered by spheres), the cube attached while carried. Oracle, along every trajectory sampled at most 0.01 rad
apart: PyBullet, the simulator's engine, with the URDF's own cylinders and exact boxes, finds no arm link and
no carried cube within 5 mm of any obstacle.
"""
from pathlib import Path

import numpy as np
import pytest

from manip_core.model import RobotModel
from manip_planning import pick_place_machine as ppm
from manip_planning.collision import Obstacle, densify
from manip_planning.planning import Planner, PlannerSettings, collision_model_for

scene_mod = pytest.importorskip("manip_sim.scene")
p = pytest.importorskip("pybullet")

ROOT = Path(__file__).resolve().parents[2]
SHELF = ROOT / "manip_sim" / "config" / "shelf_scene.yaml"


class BulletOracle:
    """PyBullet (DIRECT) with the robot, the obstacles and the carried cube; contacts of the robot's links and
    the cube with the obstacles at a configuration."""

    def __init__(self, urdf, scene, model):
        self.c = p.connect(p.DIRECT)
        self.robot = p.loadURDF(str(urdf), useFixedBase=True, physicsClientId=self.c)
        names = [p.getJointInfo(self.robot, i, physicsClientId=self.c)[1].decode()
                 for i in range(p.getNumJoints(self.robot, physicsClientId=self.c))]
        self.joints = [names.index(j) for j in model.joint_names]
        self.obstacles = {}
        for o in scene.obstacles:
            shape = p.createCollisionShape(p.GEOM_BOX, halfExtents=[0.5 * s for s in o.size], physicsClientId=self.c)
            self.obstacles[o.name] = p.createMultiBody(0, shape, basePosition=o.position,
                                                       baseOrientation=o.orientation_xyzw, physicsClientId=self.c)
        cube = scene.objects[0]
        shape = p.createCollisionShape(p.GEOM_BOX, halfExtents=[0.5 * s for s in cube.size], physicsClientId=self.c)
        self.cube = p.createMultiBody(0, shape, basePosition=[0, 0, -5], physicsClientId=self.c)

    def contacts(self, q, cube_pose=None, within=0.0):
        for j, x in zip(self.joints, q):
            p.resetJointState(self.robot, j, float(x), physicsClientId=self.c)
        if cube_pose is not None:
            from manip_core.spatial import matrix_to_quat_wxyz
            w, x, y, z = matrix_to_quat_wxyz(cube_pose[:3, :3])
            p.resetBasePositionAndOrientation(self.cube, cube_pose[:3, 3].tolist(), [x, y, z, w],
                                              physicsClientId=self.c)
        p.performCollisionDetection(physicsClientId=self.c)
        hits = []
        for name, body in self.obstacles.items():
            if p.getClosestPoints(self.robot, body, within, physicsClientId=self.c):
                hits.append(("arm", name))
            if cube_pose is not None and p.getClosestPoints(self.cube, body, within, physicsClientId=self.c):
                hits.append(("cube", name))
        return hits

    def close(self):
        p.disconnect(physicsClientId=self.c)


def test_task_in_the_shelf_scene_is_collision_free():
    scene = scene_mod.load_scene(str(SHELF))
    urdf = scene.robot.urdf
    model = RobotModel.from_urdf(urdf, scene.robot.base_link, scene.robot.tip_link)
    settings = PlannerSettings()
    planner = Planner(model, settings, collision_model_for(model, urdf, settings))
    cube = scene.objects[0]
    obstacles = [Obstacle(o.position, o.size) for o in scene.obstacles] + [Obstacle(cube.position, cube.size)]
    home = np.array(scene.initial_joint_positions(model.joint_names), dtype=float)
    q = [home.copy()]
    log = []          # (trajectory positions, holding)

    def plan(req):
        return planner.plan(req, obstacles)

    def execute(traj):
        log.append((traj.positions, bool(machine.holding)))
        q[0] = traj.positions[-1].copy()
        return True, "ok"

    def solve_ik(T, q_near):
        try:
            return planner.choose_ik(T, q_near), ""
        except Exception as e:  # noqa: BLE001 - PlanningError
            return None, str(e)

    machine = ppm.PickPlaceMachine(plan=plan, execute=execute, grasp=lambda a, n: (True, "ok", "cube"),
                                   current_joints=lambda: q[0].copy(), solve_ik=solve_ik,
                                   config=ppm.MachineConfig(home=home), obstacles=lambda: obstacles)
    T_pick, T_place = np.eye(4), np.eye(4)
    T_pick[:3, 3], T_place[:3, 3] = cube.position, scene.tasks[0].place_position
    out = machine.run(ppm.PickPlaceGoal(T_pick, T_place, "cube"))
    assert out.success, out.message
    assert np.allclose(machine.object_box.center, cube.position)          # the cube was recognised
    oracle = BulletOracle(urdf, scene, model)
    try:
        # the cube rides with tool0 as measured at the grasp (the planner's attached box)
        T_cube_tool = machine._attached.T
        carried = 0
        for Q, holding in log:
            for qk in densify(np.asarray(Q), 0.01):
                cube_pose = model.fk(qk) @ T_cube_tool if holding else None
                assert oracle.contacts(qk, cube_pose, within=0.005) == [], (holding, qk)
                carried += holding
        assert carried > 50              # the carried cube was checked along the carry
        # the oracle sees contacts: the tool inside the pillar, the cube in the shelf board
        pillar, board = (next(o for o in scene.obstacles if o.name == n) for n in ("pillar", "shelf_board"))
        T_in = np.eye(4)
        T_in[:3, 3] = pillar.position
        q_in = planner.choose_ik(ppm.tool_down_pose(T_in, 0.0), home)
        T_board = np.eye(4)
        T_board[:3, 3] = board.position
        assert {("arm", "pillar"), ("cube", "shelf_board")} <= set(oracle.contacts(q_in, T_board))
    finally:
        oracle.close()
