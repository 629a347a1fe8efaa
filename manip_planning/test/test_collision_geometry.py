"""Collision geometry: exact signed distances (hand-computed and coal), sphere covers, URDF/SRDF/YAML loading,
and the numba checker against an independent oracle (RobotModel.fk per link + coal distances)."""
import math
from pathlib import Path

import numpy as np
import pytest

from manip_planning.planning_scene import PlanningScene, SceneError, pose_matrix
from manip_planning.robot_collision import (CollisionChecker, CollisionModelError, RobotCollisionModel,
                                            parse_collision_shapes, parse_srdf_disabled)
from manip_planning.shapes import Shape, ShapeError, sphere_shape_distance, sphere_sphere_distance

DATA = Path(__file__).resolve().parent / "data" / "mbm"
ROBOTS = DATA / "robots"


def rot(axis, angle):
    T = np.eye(4)
    c, s = math.cos(angle), math.sin(angle)
    i, j = {"x": (1, 2), "y": (2, 0), "z": (0, 1)}[axis]
    T[i, i], T[i, j], T[j, i], T[j, j] = c, -s, s, c
    return T


@pytest.mark.parametrize("shape,point,expected", [
    # box half extents (1, 0.5, 0.25) turned 90 deg about z: world y is the box's x
    (Shape("box", (1, 0.5, 0.25), rot("z", math.pi / 2)), (0, 2, 0), 1.0),
    (Shape("box", (1, 0.5, 0.25), rot("z", math.pi / 2)), (0, 0, 0), -0.25),
    (Shape("box", (1, 0.5, 0.25), rot("z", math.pi / 2)), (-1.5, 2, 0), math.sqrt(2.0)),
    (Shape("box", (1, 0.5, 0.25), pose_matrix((1, 2, 3))), (1.5, 2.2, 3.1), -0.15),
    # cylinder radius 0.5, half height 1 along z
    (Shape("cylinder", (0.5, 1.0)), (2, 0, 0), 1.5),
    (Shape("cylinder", (0.5, 1.0)), (0, 0, 3), 2.0),
    (Shape("cylinder", (0.5, 1.0)), (2, 0, 3), 2.5),
    (Shape("cylinder", (0.5, 1.0)), (0, 0, 0.8), -0.2),
    (Shape("cylinder", (0.5, 1.0), rot("x", math.pi / 2)), (0, 3, 0), 2.0),   # axis along -y after the turn
    # capsule radius 0.5, half length 1
    (Shape("capsule", (0.5, 1.0)), (0, 0, 3), 1.5),
    (Shape("capsule", (0.5, 1.0)), (2, 0, 0.3), 1.5),
    (Shape("capsule", (0.5, 1.0)), (0, 0.1, 0), -0.4),
    (Shape("sphere", (1.0,), pose_matrix((1, 1, 1))), (4, 5, 1), 4.0),
])
def test_signed_distance_hand_computed(shape, point, expected):
    assert shape.signed_distance(np.array([point]))[0] == pytest.approx(expected, abs=1e-12)


def test_sphere_pairs_hand_computed():
    assert sphere_sphere_distance((0, 0, 0), 1.0, (3, 4, 0), 0.5) == pytest.approx(3.5)
    assert sphere_sphere_distance((0, 0, 0), 1.0, (1, 0, 0), 0.5) == pytest.approx(-0.5)
    box = Shape("box", (0.5, 0.5, 0.5))
    assert sphere_shape_distance((2, 0, 0), 0.5, box) == pytest.approx(1.0)
    assert sphere_shape_distance((0.3, 0, 0), 0.1, box) == pytest.approx(-0.3)   # centre 0.2 deep, plus radius


def test_signed_distance_matches_coal():
    coal = pytest.importorskip("coal")
    rng = np.random.default_rng(3)
    for _ in range(60):
        kind = rng.choice(["box", "cylinder", "capsule", "sphere"])
        T = np.eye(4)
        q = rng.normal(size=4)
        from manip_planning.planning_scene import quat_xyzw_to_matrix
        T[:3, :3] = quat_xyzw_to_matrix(q)
        T[:3, 3] = rng.uniform(-0.3, 0.3, 3)
        if kind == "box":
            d = rng.uniform(0.05, 0.4, 3)
            geom = coal.Box(*(2 * d))
        elif kind == "cylinder":
            d = rng.uniform(0.05, 0.4, 2)
            geom = coal.Cylinder(d[0], 2 * d[1])
        elif kind == "capsule":
            d = rng.uniform(0.05, 0.4, 2)
            geom = coal.Capsule(d[0], 2 * d[1])
        else:
            d = rng.uniform(0.05, 0.4, 1)
            geom = coal.Sphere(d[0])
        shape = Shape(kind, d, T)
        c = rng.uniform(-1.0, 1.0, 3)
        r = rng.uniform(0.01, 0.2)
        mine = sphere_shape_distance(c, r, shape)
        req, res = coal.DistanceRequest(), coal.DistanceResult()
        Tc = coal.Transform3s(np.eye(3), c)
        Ts = coal.Transform3s(T[:3, :3], T[:3, 3])
        ref = coal.distance(coal.Sphere(r), Tc, geom, Ts, req, res)
        if ref > 1e-3:
            assert mine == pytest.approx(ref, abs=1e-6), (kind, d, c, r)
        else:  # penetration: coal's EPA is approximate
            assert mine <= 1e-6
            assert mine == pytest.approx(ref, abs=5e-3), (kind, d, c, r)


@pytest.mark.parametrize("shape", [Shape("box", (0.3, 0.05, 0.12), rot("y", 0.4)), Shape("cylinder", (0.05, 0.3)),
                                   Shape("capsule", (0.04, 0.2), rot("x", 1.0)), Shape("box", (0.4, 0.4, 0.02)),
                                   Shape("cylinder", (0.075, 0.009), rot("x", 0.3)),
                                   Shape("cylinder", (0.04, 0.0175), rot("z", 0.5)),
                                   Shape("cylinder", (0.06, 0.0669), rot("y", 1.2))])
def test_sphere_cover_contains_the_shape(shape):
    rng = np.random.default_rng(0)
    lo, hi = shape.aabb()
    P = rng.uniform(lo, hi, (20000, 3))
    inside = P[shape.signed_distance(P) <= 0]
    assert len(inside) > 500
    S = shape.sphere_cover()
    d = np.linalg.norm(inside[:, None, :] - S[None, :, :3], axis=2) - S[None, :, 3]
    assert np.all(d.min(axis=1) <= 1e-12)
    assert len(S) <= 64
    if shape.kind == "cylinder":   # tight: no sphere reaches past 0.12 r beyond the mantle or 0.7 r past a cap
        r, hh = shape.dims         # (0.35 r for a disc: covered in its plane)
        local = (S[:, :3] - shape.T[:3, 3]) @ shape.T[:3, :3]
        beyond = 0.35 * r if hh < 0.5 * r else 0.12 * r
        assert np.max(np.hypot(local[:, 0], local[:, 1]) + S[:, 3]) <= r + beyond
        assert np.max(np.abs(local[:, 2]) + S[:, 3]) <= hh + (beyond if hh < 0.5 * r else 0.7 * r)


def test_bad_shapes_are_named():
    with pytest.raises(ShapeError, match="shelf"):
        Shape("box", (1, -1, 1), name="shelf")
    with pytest.raises(ShapeError, match="torus"):
        Shape("torus", (1,))


def test_moveit_yaml_scene(tmp_path):
    # cylinder [height 0.4, radius 0.1], object pose 1 m up x, primitive turned 90 deg about x (axis along -y)
    s = 0.5 * math.sqrt(2.0)
    data = {"world": {"collision_objects": [
        {"id": "can", "pose": {"position": [1, 0, 0], "orientation": [0, 0, 0, 1]},
         "primitives": [{"type": "cylinder", "dimensions": [0.4, 0.1]}],
         "primitive_poses": [{"position": [0, 0, 0.5], "orientation": [s, 0, 0, s]}]},
        {"id": "shelf", "primitives": [{"type": "box", "dimensions": [0.2, 0.4, 0.6]},
                                       {"type": "sphere", "dimensions": [0.05]}],
         "primitive_poses": [{"position": [0, 2, 0], "orientation": [0, 0, 0, 1]},
                             {"position": [0, 0, 2], "orientation": [0, 0, 0, 1]}]}]}}
    sc = PlanningScene.from_moveit_yaml(data)
    assert len(sc) == 3
    # the can: centre (1, 0, 0.5), axis along y with half height 0.2, radius 0.1
    assert sc.shapes[0].signed_distance([[1, 0.5, 0.5]])[0] == pytest.approx(0.3)
    assert sc.shapes[0].signed_distance([[1, 0, 0.8]])[0] == pytest.approx(0.2)
    assert sc.shapes[1].dims == (0.1, 0.2, 0.3)
    assert sc.signed_distance([[0, 0, 2.5]])[0] == pytest.approx(0.45)
    f = tmp_path / "scene.yaml"
    f.write_text("world:\n  collision_objects:\n    - id: x\n      primitives: [{type: torus, dimensions: [1]}]\n"
                 "      primitive_poses: [{position: [0, 0, 0], orientation: [0, 0, 0, 1]}]\n")
    with pytest.raises(SceneError, match=r"scene\.yaml.*torus"):
        PlanningScene.from_moveit_yaml(f)
    with pytest.raises(SceneError, match="nope.yaml"):
        PlanningScene.from_moveit_yaml(tmp_path / "nope.yaml")


def test_mbm_scene_file_loads():
    sc = PlanningScene.from_moveit_yaml(DATA / "problems/panda/cage_panda/scene0001.yaml")
    assert len(sc) >= 5 and all(s.kind in ("box", "cylinder", "sphere") for s in sc.shapes)


def test_point_cloud_voxels():
    pts = np.array([[0.01, 0.01, 0.01], [0.015, 0.012, 0.001], [0.5, 0.5, 0.5], [np.nan, 0, 0]])
    sc = PlanningScene.from_point_cloud(pts, voxel_size_m=0.02)
    assert len(sc) == 2
    assert np.allclose(sorted(tuple(s.center) for s in sc.shapes)[0], (0.01, 0.01, 0.01))
    assert len(PlanningScene.from_point_cloud(pts, 0.02, min_points=2)) == 1


URDF_PRIMS = """<robot name="r">
  <link name="base"><collision><geometry><box size="0.2 0.2 0.1"/></geometry></collision></link>
  <link name="l1"><collision><origin xyz="0 0 0.25" rpy="0 0 0"/><geometry><cylinder radius="0.05" length="0.5"/>
  </geometry></collision></link>
  <link name="l2"><collision><origin xyz="0.2 0 0" rpy="0 1.5707963267948966 0"/><geometry>
  <capsule radius="0.04" length="0.4"/></geometry></collision>
  <collision><origin xyz="0.4 0 0"/><geometry><sphere radius="0.06"/></geometry></collision></link>
  <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><origin xyz="0 0 0.05"/>
    <axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="1" velocity="1"/></joint>
  <joint name="j2" type="revolute"><parent link="l1"/><child link="l2"/><origin xyz="0 0 0.5"/>
    <axis xyz="0 1 0"/><limit lower="-3" upper="3" effort="1" velocity="1"/></joint>
</robot>"""


def test_urdf_collision_primitives_and_origins():
    spheres = parse_collision_shapes(URDF_PRIMS)
    assert set(spheres) == {"base", "l1", "l2"}
    # the sphere of l2 sits 0.4 m along x of the link frame, radius 0.06
    assert any(np.allclose(s, [0.4, 0, 0, 0.06]) for s in spheres["l2"])
    # the cylinder's cover spans z in [0, 0.5] of l1
    zs = spheres["l1"][:, 2]
    assert zs.min() > 0 and zs.max() < 0.5
    rc = RobotCollisionModel.from_urdf(URDF_PRIMS)
    ch = CollisionChecker(rc, PlanningScene([Shape("sphere", (0.05,), pose_matrix((0.4, 0, 0.55)))]))
    # at q = 0 the l2 sphere is at (0.4, 0, 0.55): hit; turning j1 by 90 deg moves it away
    assert not ch.is_free([0.0, 0.0])
    assert ch.is_free([math.pi / 2, 0.0])
    q = np.array([math.pi / 2, 0.0])
    d_env, _ = ch.distances(q)
    probe = np.array([0.4, 0.0, 0.55])
    ref = min(float(np.min(np.linalg.norm(S[:, :3] @ T[:3, :3].T + T[:3, 3] - probe, axis=1) - S[:, 3] - 0.05))
              for S, T in ((spheres[ln], rc.model.fk(q, ln)) for ln in ("l1", "l2")))
    assert d_env == pytest.approx(ref, abs=1e-12)
    # the exact distance to l2's capsule is 0.4 - 0.04 - 0.05; its cover is conservative (a little closer)
    assert 0.31 - 0.03 < d_env <= 0.31


def test_urdf_without_collision_warns_and_falls_back(caplog):
    bare = URDF_PRIMS.replace("<collision>", "<visual>").replace("</collision>", "</visual>")
    with caplog.at_level("WARNING"):
        rc = RobotCollisionModel.from_urdf(bare, fallback_radius_m=0.05)
    assert "no <collision> elements" in caplog.text
    assert rc.n_spheres > 0
    assert "l1" in rc.group_names
    with pytest.raises(CollisionModelError, match="mesh file"):
        parse_collision_shapes(URDF_PRIMS.replace('<sphere radius="0.06"/>', '<mesh filename="gone.stl"/>'))


def test_mesh_cover_is_conservative_and_cached(tmp_path, monkeypatch):
    trimesh = pytest.importorskip("trimesh")
    monkeypatch.setenv("MANIP_CACHE_DIR", str(tmp_path / "cache"))
    m = trimesh.creation.box(extents=(0.3, 0.1, 0.05))
    f = tmp_path / "part.stl"
    m.export(f)
    from manip_planning.robot_collision import mesh_sphere_cover
    S = mesh_sphere_cover(f, cell_m=0.05)
    assert len(list((tmp_path / "cache" / "sphere_covers").glob("*.npy"))) == 1
    P = trimesh.sample.sample_surface(m, 5000, seed=1)[0]
    d = np.linalg.norm(P[:, None, :] - S[None, :, :3], axis=2) - S[None, :, 3]
    assert np.all(d.min(axis=1) <= 0)
    assert np.array_equal(mesh_sphere_cover(f, cell_m=0.05), S)


def test_srdf_pairs_and_adjacency():
    dis = parse_srdf_disabled(ROBOTS / "panda.srdf")
    assert frozenset(("panda_link0", "panda_link1")) in dis
    rc = RobotCollisionModel.from_urdf(ROBOTS / "panda_spherized.urdf", ROBOTS / "panda.srdf")
    names = rc.group_names
    pairs = {frozenset((names[a], names[b])) for a, b in rc.pairs}
    assert not pairs & dis
    # links joined by a joint are never checked, links far apart on the chain are
    assert frozenset(("panda_link3", "panda_link4")) not in pairs
    assert frozenset(("panda_link1", "panda_hand")) in pairs or frozenset(("panda_link1", "panda_hand")) in dis
    assert len(pairs) > 0
    with pytest.raises(CollisionModelError, match="missing.srdf"):
        parse_srdf_disabled("/nonexistent/missing.srdf")


def _oracle_free(rc, q, scene):
    """Independent check: sphere centres from RobotModel.fk of each link, distances from coal."""
    coal = pytest.importorskip("coal")
    m = rc.model
    world = {}
    for link, S in rc.link_spheres.items():
        T = m.fk(q, link)
        world[link] = np.column_stack([S[:, :3] @ T[:3, :3].T + T[:3, 3], S[:, 3]])
    env_links = [ln for ln in world if rc.grp_env[rc.group_names.index(ln)]]
    for sh in scene.shapes:
        geom = {"box": lambda d: coal.Box(*(2 * np.array(d))), "cylinder": lambda d: coal.Cylinder(d[0], 2 * d[1]),
                "sphere": lambda d: coal.Sphere(d[0])}[sh.kind](sh.dims)
        Ts = coal.Transform3s(sh.T[:3, :3], sh.T[:3, 3])
        for ln in env_links:
            for s in world[ln]:
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


@pytest.mark.parametrize("robot,problem", [("panda", "bookshelf_thin_panda/scene0001.yaml"),
                                           ("ur5", "cage_ur5/scene0002.yaml")])
def test_checker_matches_independent_oracle(robot, problem):
    rc = RobotCollisionModel.from_urdf(ROBOTS / f"{robot}_spherized.urdf", ROBOTS / f"{robot}.srdf")
    sc = PlanningScene.from_moveit_yaml(DATA / "problems" / robot / problem)
    ch = CollisionChecker(rc, sc)
    rng = np.random.default_rng(7)
    Q = rng.uniform(rc.model.joint_lower, rc.model.joint_upper, (60, rc.model.dof))
    mine = ch.are_free(Q)
    ref = np.array([_oracle_free(rc, q, sc) for q in Q])
    assert np.array_equal(mine, ref)
    assert 0 < mine.sum() < len(Q)   # both outcomes exercised


def test_attached_object_moves_with_the_tip():
    rc = RobotCollisionModel.from_urdf(URDF_PRIMS)
    q = np.array([0.0, 0.0])
    T_tip = rc.model.fk(q)
    probe = Shape("sphere", (0.02,), pose_matrix(T_tip[:3, 3] + T_tip[:3, :3] @ np.array([0.0, 0.0, 0.3])))
    ch = CollisionChecker(rc, PlanningScene([probe]))
    assert ch.is_free(q)
    rc.attach(Shape("box", (0.05, 0.05, 0.2), pose_matrix((0, 0, 0.2))))
    ch = CollisionChecker(rc, PlanningScene([probe]))
    assert not ch.is_free(q)
    rc.attach(None)
    assert CollisionChecker(rc, PlanningScene([probe])).is_free(q)


def test_scene_from_manip_msgs():
    from geometry_msgs.msg import Point, Pose, Quaternion, Vector3
    from manip_msgs.msg import Obstacle as ObstacleMsg, ObstacleArray, SceneObject, SceneObjectArray
    arr = ObstacleArray()
    arr.obstacles.append(ObstacleMsg(id=3, center=Point(x=1.0, y=0.0, z=0.5), size=Vector3(x=0.2, y=0.4, z=0.6),
                                     radius=0.4, num_points=10))
    arr.obstacles.append(ObstacleMsg(id=4, center=Point(x=0.0, y=2.0, z=0.0), radius=0.1, num_points=3))
    sc = PlanningScene.from_obstacle_array(arr)
    assert [s.kind for s in sc.shapes] == ["box", "sphere"]
    assert sc.signed_distance([[1.0, 0.0, 1.0]])[0] == pytest.approx(0.2)
    assert sc.signed_distance([[0.0, 2.5, 0.0]])[0] == pytest.approx(0.4)
    s = 0.5 * math.sqrt(2.0)
    objs = SceneObjectArray()
    objs.objects.append(SceneObject(name="shelf", kind=SceneObject.KIND_OBSTACLE,
                                    pose=Pose(position=Point(x=0.5, y=0.0, z=0.2),
                                              orientation=Quaternion(x=0.0, y=0.0, z=s, w=s)),
                                    size=Vector3(x=0.4, y=0.1, z=0.2)))
    objs.objects.append(SceneObject(name="cube", kind=SceneObject.KIND_OBJECT, attached=True,
                                    pose=Pose(orientation=Quaternion(w=1.0)), size=Vector3(x=0.05, y=0.05, z=0.05)))
    sc = PlanningScene.from_scene_objects(objs)
    assert len(sc) == 1
    # turned 90 deg about z: the 0.4 m side runs along y
    assert sc.shapes[0].signed_distance([[0.5, 0.5, 0.2]])[0] == pytest.approx(0.3)
    assert sc.shapes[0].signed_distance([[0.8, 0.0, 0.2]])[0] == pytest.approx(0.25)
