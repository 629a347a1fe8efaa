"""The fast collision kernels (hierarchical slot / group / sphere checks, last-collision memory, the fixed base
checked once per scene) against an independent oracle: sphere centres from RobotModel.fk of each link, obstacle
distances from coal, sphere pairs with numpy. Random scenes are built around the robot's own spheres at random
configurations, so that about half of the configurations collide and many contacts are close calls."""
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from manip_planning.planning_scene import PlanningScene, pose_matrix
from manip_planning.robot_collision import CollisionChecker, RobotCollisionModel
from manip_planning.shapes import Shape

coal = pytest.importorskip("coal")

ROBOTS = Path(__file__).resolve().parent / "data" / "mbm" / "robots"

# A 3-joint arm with primitive collision geometry (box, cylinder, capsule covers) on every link.
ARM_PRIMS = """<robot name="prims">
  <link name="base"><collision><origin xyz="0 0 0.05"/><geometry><box size="0.3 0.3 0.1"/></geometry></collision></link>
  <link name="l1"><collision><origin xyz="0 0 0.2"/><geometry><cylinder radius="0.06" length="0.3"/></geometry>
    </collision></link>
  <link name="l2"><collision><origin xyz="0.2 0 0" rpy="0 1.5708 0"/><geometry><capsule radius="0.05" length="0.3"/>
    </geometry></collision></link>
  <link name="l3"><collision><origin xyz="0.15 0 0"/><geometry><box size="0.3 0.08 0.06"/></geometry></collision>
    <collision><origin xyz="0.32 0 0"/><geometry><sphere radius="0.04"/></geometry></collision></link>
  <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><origin xyz="0 0 0.1"/><axis xyz="0 0 1"/>
    <limit lower="-3.1" upper="3.1" effort="1" velocity="1"/></joint>
  <joint name="j2" type="revolute"><parent link="l1"/><child link="l2"/><origin xyz="0 0 0.35"/><axis xyz="0 1 0"/>
    <limit lower="-2.5" upper="2.5" effort="1" velocity="1"/></joint>
  <joint name="j3" type="revolute"><parent link="l2"/><child link="l3"/><origin xyz="0.4 0 0"/>
    <axis xyz="0 0.6 0.8"/><limit lower="-2.8" upper="2.8" effort="1" velocity="1"/></joint>
</robot>"""

_MODELS = {}


def model(name):
    if name not in _MODELS:
        if name == "prims":
            rc = RobotCollisionModel.from_urdf(ARM_PRIMS)
            rc.attach(Shape("box", (0.03, 0.03, 0.05), pose_matrix((0.4, 0.0, 0.0))))   # a held object
        else:
            rc = RobotCollisionModel.from_urdf(ROBOTS / f"{name}_spherized.urdf", ROBOTS / f"{name}.srdf")
        _MODELS[name] = rc
    return _MODELS[name]


def world_spheres(rc, q):
    """{group name: (K, 4) spheres in the base frame} from RobotModel.fk (not the kernels)."""
    m = rc.model
    out = {}
    for link, S in rc.link_spheres.items():
        T = m.fk(q, link)
        out[link] = np.column_stack([S[:, :3] @ T[:3, :3].T + T[:3, 3], S[:, 3]])
    if rc.attached is not None:
        S = rc.attached.sphere_cover()
        T = m.fk(q, m.tip_link)
        out[rc.ATTACHED] = np.column_stack([S[:, :3] @ T[:3, :3].T + T[:3, 3], S[:, 3]])
    return out


def _coal_geom(sh):
    d = sh.dims
    if sh.kind == "box":
        return coal.Box(*(2 * np.array(d)))
    if sh.kind == "cylinder":
        return coal.Cylinder(d[0], 2 * d[1])
    if sh.kind == "capsule":
        return coal.Capsule(d[0], 2 * d[1])
    return coal.Sphere(d[0])


def oracle_free(rc, scene, q):
    world = world_spheres(rc, q)
    for sh in scene.shapes:
        geom, Ts = _coal_geom(sh), coal.Transform3s(sh.T[:3, :3], sh.T[:3, 3])
        for g, name in enumerate(rc.group_names):
            if not rc.grp_env[g]:
                continue
            for s in world[name]:
                d = coal.distance(coal.Sphere(s[3]), coal.Transform3s(np.eye(3), s[:3]), geom, Ts,
                                  coal.DistanceRequest(), coal.DistanceResult())
                if d <= 0:
                    return False
    for a, b in rc.pairs:
        A, B = world[rc.group_names[a]], world[rc.group_names[b]]
        D = np.linalg.norm(A[:, None, :3] - B[None, :, :3], axis=2) - A[:, None, 3] - B[None, :, 3]
        if np.any(D <= 0):
            return False
    return True


def random_scene(rc, rng, n):
    """n primitives, each placed next to a sphere of the robot at a random configuration (close calls), kept
    when the robot misses it at most of a few probe configurations (else every configuration collides)."""
    lo, hi = rc.model.joint_lower, rc.model.joint_upper
    probes = rng.uniform(lo, hi, (16, rc.model.dof))
    base = CollisionChecker(rc, PlanningScene()).are_free(probes).mean()
    shapes = []
    for _ in range(50 * n):
        if len(shapes) == n:
            break
        S = rc.spheres_world(rng.uniform(lo, hi))
        s = S[rng.integers(len(S))]
        kind = ["box", "cylinder", "sphere", "capsule"][rng.integers(4)]
        dims = {"box": rng.uniform(0.02, 0.25, 3), "cylinder": rng.uniform(0.02, 0.2, 2),
                "sphere": rng.uniform(0.02, 0.15, 1), "capsule": rng.uniform(0.02, 0.15, 2)}[kind]
        u = rng.normal(size=4)
        u /= np.linalg.norm(u)
        direction = rng.normal(size=3)
        direction /= np.linalg.norm(direction)
        centre = s[:3] + direction * (s[3] + rng.uniform(0.0, 0.3))
        shape = Shape(kind, dims, pose_matrix(centre, u))
        if CollisionChecker(rc, PlanningScene([shape])).are_free(probes).mean() >= 0.6 * base:
            shapes.append(shape)
    return PlanningScene(shapes)


@settings(max_examples=12, deadline=None, derandomize=True)
@given(robot=st.sampled_from(["panda", "ur5", "prims"]), seed=st.integers(0, 2**31 - 1),
       n_obstacles=st.integers(0, 8))
def test_configurations_match_the_oracle(robot, seed, n_obstacles):
    rc = model(robot)
    rng = np.random.default_rng(seed)
    scene = random_scene(rc, rng, n_obstacles)
    ch = CollisionChecker(rc, scene)
    Q = rng.uniform(rc.model.joint_lower, rc.model.joint_upper, (25, rc.model.dof))
    ref = np.array([oracle_free(rc, scene, q) for q in Q])
    assert np.array_equal(ch.are_free(Q), ref)
    # one at a time, in another order: the memory of the last collision changes the order of the tests only
    perm = rng.permutation(len(Q))
    assert np.array_equal([ch.is_free(Q[i]) for i in perm], ref[perm])


@settings(max_examples=6, deadline=None, derandomize=True)
@given(robot=st.sampled_from(["panda", "ur5", "prims"]), seed=st.integers(0, 2**31 - 1))
def test_edges_match_the_oracle_at_their_samples(robot, seed):
    rc = model(robot)
    rng = np.random.default_rng(seed)
    scene = random_scene(rc, rng, 6)
    ch = CollisionChecker(rc, scene)
    lo, hi = rc.model.joint_lower, rc.model.joint_upper
    for _ in range(4):
        a = rng.uniform(lo, hi)
        b = np.clip(a + rng.normal(scale=0.4, size=len(a)), lo, hi)
        res = 0.1
        n = max(1, math.ceil(np.linalg.norm(b - a) / res - 1e-12))
        ref = all(oracle_free(rc, scene, a + (i / n) * (b - a)) for i in range(1, n + 1))
        assert ch.segment_free(a, b, res) == ref
        assert ch.segments_free(a[None], b[None], res)[0] == ref


def test_base_in_an_obstacle_makes_every_configuration_collide():
    rc = model("prims")
    inside_base = PlanningScene([Shape("sphere", (0.02,), pose_matrix((0.0, 0.0, 0.05)))])
    ch = CollisionChecker(rc, inside_base)
    q = np.zeros(rc.model.dof)
    assert not oracle_free(rc, inside_base, q)
    assert not ch.is_free(q) and not ch.are_free(np.zeros((3, rc.model.dof))).any()
    no_fixed = RobotCollisionModel.from_urdf(ARM_PRIMS, check_fixed_links=False)
    assert CollisionChecker(no_fixed, inside_base).is_free(q)


def test_held_object_is_not_checked_against_the_tip_nor_the_body_one_joint_up():
    """The attached object is part of the tip's body (l3): like a link, it is adjacent to the body one joint up
    (l2) and is checked against the others only."""
    rc = model("prims")
    names = rc.group_names
    partners = {names[h] if names[g] == rc.ATTACHED else names[g] for g, h in rc.pairs
                if rc.ATTACHED in (names[g], names[h])}
    assert partners == {"base", "l1"}
