"""test_faults' obstacle message against the simulator (fast; the regression test of its monitor failure).

test_faults runs no perception, and its goals once planned without obstacles: the UR5's joint-space approach
above the cube grazed the scene's pillar, and the contact spun wrist_3 to 6 rad/s (1.98x its velocity limit,
with its commanded effort near 0), which the limit monitor flagged. The test now publishes the scene's obstacles
(``_scene_obstacles``) and plans with avoid_obstacles. Checked here against independent oracles: the message's
box is PyBullet's pillar (its axis-aligned bounding box), and at the configuration where the arm touched the
pillar in that run (PyBullet's closest points: 0 mm) the planner's own collision model, fed the message through
the node's conversion, sees the arm inside its safety margin, so an obstacle-avoiding plan cannot pass there.
"""
import numpy as np
import pytest

from test_faults import SCENE, UR5, _scene_obstacles

pytest.importorskip("pybullet")

# joint_states of the failing run (sim t = 46.444 s, rad, model order): wrist_3_link touched the pillar
Q_CONTACT = np.array([2.819, -1.445, 1.776, -1.900, -1.567, -1.008])


@pytest.fixture(scope="module")
def world():
    from manip_sim.scene import load_scene
    from manip_sim.world import World
    with World(load_scene(SCENE), command_timeout=0.2) as w:
        yield w


def _pillar_gap_m(w, q):
    """PyBullet's smallest distance (m) between the arm and the pillar at q (inf beyond 5 cm)."""
    pb = w._pb
    w.set_joint_positions(q)
    pb.performCollisionDetection(physicsClientId=w.client)
    pts = pb.getClosestPoints(w.robot, w.bodies["pillar"], 0.05, physicsClientId=w.client)
    return min((p[8] for p in pts), default=np.inf)


def test_obstacle_message_is_the_simulated_pillar(world):
    msg = _scene_obstacles()
    assert msg.header.frame_id == UR5.base_link and len(msg.obstacles) == 1
    o = msg.obstacles[0]
    lo, hi = (np.array(v) for v in world._pb.getAABB(world.bodies["pillar"], physicsClientId=world.client))
    center = np.array([o.center.x, o.center.y, o.center.z])
    size = np.array([o.size.x, o.size.y, o.size.z])
    # the scene's base is at the world origin, so the base frame is PyBullet's world frame
    np.testing.assert_allclose(center, (lo + hi) / 2, atol=1e-6)
    np.testing.assert_allclose(size, hi - lo, atol=5e-3)   # up to a collision margin of PyBullet's
    assert o.radius >= np.linalg.norm(size) / 2 - 1e-12


def test_planner_sees_the_contact_of_the_failing_run(world):
    from manip_planning.collision import Scene
    from manip_planning.planner_node import obstacles_from_msg
    from manip_planning.planning import Planner, PlannerSettings
    assert _pillar_gap_m(world, Q_CONTACT) < 1e-3          # the oracle: the arm touches the pillar there
    q_start = np.asarray(world.scene.initial_joint_positions(world.joint_names), dtype=float)
    assert _pillar_gap_m(world, q_start) == np.inf           # and is clear of it at the scene's start
    settings = PlannerSettings()
    planner = Planner(UR5, settings)
    scene = Scene(obstacles_from_msg(_scene_obstacles()))
    clearance, _floor = planner.arm.clearance(Q_CONTACT, scene)
    assert clearance < settings.safety_margin, clearance
