"""Scene file loading and validation (manip_sim.scene), and that the demo scene suits the UR5."""
import copy
from pathlib import Path

import numpy as np
import pytest
import yaml

from manip_sim.scene import KIND_OBJECT, KIND_OBSTACLE, KIND_SUPPORT, SceneError, load_scene, parse_scene

CONFIG = Path(__file__).resolve().parents[1] / "config"
SCENE = CONFIG / "pick_place_scene.yaml"
UR5 = Path(__file__).resolve().parents[2] / "manip_core" / "manip_core" / "robots" / "ur5.urdf"


def _raw():
    return yaml.safe_load(SCENE.read_text())


def test_demo_scene_loads():
    s = load_scene(SCENE)
    assert Path(s.robot.urdf).name == "ur5.urdf" and Path(s.robot.urdf).is_file()
    assert s.robot.base_link == "base_link" and s.robot.tip_link == "tool0"
    assert s.table.kind == KIND_SUPPORT and s.table.position[2] == pytest.approx(-s.table.size[2] / 2)
    cube = s.body("cube")
    assert cube.kind == KIND_OBJECT and cube.size == (0.04, 0.04, 0.04) and cube.mass > 0
    assert cube.position == (0.45, -0.25, 0.02)
    pillar = s.body("pillar")
    assert pillar.kind == KIND_OBSTACLE and pillar.mass == 0 and pillar.size == (0.1, 0.1, 0.3)
    assert [b.name for b in s.bodies] == ["table", "cube", "pillar"]
    assert s.tasks[0].object == "cube" and s.grasp_max_distance == 0.05
    names = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
             "wrist_3_joint"]
    assert len(s.initial_joint_positions(names)) == 6


def test_pick_and_place_reachable_from_above():
    """tool0 pointing straight down reaches the cube's top, the place position and 15 cm above both."""
    from manip_core import RobotModel

    s = load_scene(SCENE)
    m = RobotModel.from_urdf(s.robot.urdf, s.robot.base_link, s.robot.tip_link)
    cube = s.body("cube")
    top = cube.size[2] / 2
    targets = [np.array(cube.position), np.array(s.tasks[0].place_position)]
    for centre in targets:
        for lift in (0.0, 0.15):
            T = np.eye(4)
            T[:3, :3] = np.diag([1.0, -1.0, -1.0])
            T[:3, 3] = centre + [0, 0, top + lift]
            sols = m.ik_all(T)
            assert sols, f"no IK from above for {T[:3, 3]}"
            assert np.allclose(m.fk(sols[0]), T, atol=1e-6)
    # The obstacle stands between pick and place.
    pillar = s.body("pillar")
    assert targets[0][1] < pillar.position[1] < targets[1][1]
    # The initial pose has the tool above the table and above the obstacle.
    q0 = s.initial_joint_positions(m.joint_names)
    assert m.fk(np.array(q0))[2, 3] > pillar.position[2] + pillar.size[2] / 2


def test_relative_and_bundled_urdf_paths(tmp_path):
    raw = _raw()
    raw["robot"]["urdf"] = str(Path("..") / UR5.parent.name / UR5.name)   # ../robots/ur5.urdf
    sub = tmp_path / "cfg"
    sub.mkdir()
    (tmp_path / "robots").mkdir()
    (tmp_path / "robots" / "ur5.urdf").write_text(UR5.read_text())
    (sub / "scene.yaml").write_text(yaml.safe_dump(raw))
    s = load_scene(sub / "scene.yaml")
    assert Path(s.robot.urdf) == (tmp_path / "robots" / "ur5.urdf").resolve()
    raw["robot"]["urdf"] = "ur5"
    assert Path(parse_scene(raw, tmp_path).robot.urdf).name == "ur5.urdf"


def test_sphere_and_cylinder_sizes():
    raw = _raw()
    raw["objects"] = [
        {"name": "ball", "shape": "sphere", "size": [0.05], "position": [0.4, 0.0, 0.025]},
        {"name": "can", "shape": "cylinder", "size": [0.06, 0.1], "position": [0.4, 0.1, 0.05]},
    ]
    raw["tasks"] = []
    s = parse_scene(raw, SCENE.parent)
    assert s.body("ball").size == (0.05, 0.05, 0.05)
    assert s.body("can").size == (0.06, 0.06, 0.1)


def _set(doc, path, value):
    keys = path.split(".")
    node = doc
    for k in keys[:-1]:
        node = node[int(k)] if isinstance(node, list) else node[k]
    last = keys[-1]
    if value is KeyError:
        del node[last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value


@pytest.mark.parametrize("path, value, key", [
    ("robot.urdf", KeyError, "robot.urdf"),
    ("robot.urdf", "no_such_robot_file.urdf", "robot.urdf"),
    ("robot.base_pose.position", [0, 0], "robot.base_pose.position"),
    ("robot.base_pose.orientation_xyzw", [0, 0, 0, 2], "robot.base_pose.orientation_xyzw"),
    ("robot.initial_positions", "up", "robot.initial_positions"),
    ("robot.initial_positions.elbow_joint", "x", "robot.initial_positions.elbow_joint"),
    ("table.size", [1.0, -1.0, 0.05], "table.size[1]"),
    ("table.center_xy", [5.0, 0.0], "table.center_xy"),
    ("objects.0.size", [0.04, 0.04], "objects[0].size"),
    ("objects.0.shape", "cone", "objects[0].shape"),
    ("objects.0.position", [0.45, "a", 0.02], "objects[0].position[1]"),
    ("objects.0.mass", 0, "objects[0].mass"),
    ("objects.0.color", [2, 0, 0, 1], "objects[0].color"),
    ("objects.0.name", KeyError, "objects[0].name"),
    ("objects.0.colour", [1, 0, 0, 1], "objects[0]"),
    ("obstacles.0.mass", 1.0, "obstacles[0]"),
    ("obstacles.0.name", "cube", "obstacles[0].name"),
    ("obstacles", {"a": 1}, "obstacles"),
    ("gripper.max_distance", -1, "gripper.max_distance"),
    ("tasks.0.object", "pillar", "tasks[0].object"),
    ("tasks.0.place_position", [1, 2], "tasks[0].place_position"),
    ("extra_key", 1, "(top level)"),
])
def test_malformed_scene_names_the_key(path, value, key):
    doc = copy.deepcopy(_raw())
    _set(doc, path, value)
    with pytest.raises(SceneError) as err:
        parse_scene(doc, SCENE.parent, "scene.yaml")
    msg = str(err.value)
    assert msg.startswith(f"scene.yaml: {key}"), msg


def test_initial_positions_checked_against_joints():
    s = parse_scene(dict(_raw(), robot=dict(_raw()["robot"], initial_positions={"elbw": 1.0})), SCENE.parent)
    with pytest.raises(SceneError, match="robot.initial_positions: unknown joint"):
        s.initial_joint_positions(["elbow_joint"])
    s = parse_scene(dict(_raw(), robot=dict(_raw()["robot"], initial_positions=[0.0, 1.0])), SCENE.parent)
    with pytest.raises(SceneError, match="2 values for 3 joints"):
        s.initial_joint_positions(["a", "b", "c"])


def test_unreadable_and_invalid_yaml(tmp_path):
    with pytest.raises(SceneError, match="cannot read"):
        load_scene(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("robot: [unclosed\n")
    with pytest.raises(SceneError, match="not valid YAML"):
        load_scene(bad)
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    with pytest.raises(SceneError, match="empty"):
        load_scene(empty)


def test_robot_given_at_start_up_is_the_one_source_of_truth(tmp_path):
    """with_robot: a scene without a robot takes the one given at start-up; a scene naming another URDF, base
    or tip link than the one given is an error naming the key; no robot at all is an error."""
    from manip_sim.scene import with_robot
    from manip_core.robots import robot_path
    doc = copy.deepcopy(_raw())
    del doc["robot"]
    bare = parse_scene(doc, SCENE.parent)
    assert bare.robot is None
    with pytest.raises(SceneError, match="robot: missing"):
        with_robot(bare)
    s = with_robot(bare, "ur5", "base_link", "tool0")
    assert s.robot.urdf == str(robot_path("ur5")) and (s.robot.base_link, s.robot.tip_link) == ("base_link", "tool0")
    full = parse_scene(_raw(), SCENE.parent)   # names ur5, base_link, tool0
    assert with_robot(full, str(robot_path("ur5")), "base_link", "").robot == full.robot
    # a colcon install holds the bundled URDF twice (Python package, share folder): the same bytes are the same robot
    twin = tmp_path / "share" / "ur5.urdf"
    twin.parent.mkdir()
    twin.write_bytes(Path(robot_path("ur5")).read_bytes())
    assert with_robot(full, str(twin), "base_link", "").robot == full.robot
    twin.write_text(twin.read_text().replace('name="ur5"', 'name="ur5_edited"', 1))
    with pytest.raises(SceneError, match="robot.urdf: names"):
        with_robot(full, str(twin))
    with pytest.raises(SceneError, match="robot.urdf: names .*ur5.urdf.*ypp3.urdf"):
        with_robot(full, "ypp3")
    with pytest.raises(SceneError, match="robot.tip_link: is 'tool0', but 'wrist_3_link'"):
        with_robot(full, None, None, "wrist_3_link")
    with pytest.raises(SceneError, match="urdf_path: 'package://no_such_package/r.urdf': package 'no_such_package' "
                                         "not found"):
        with_robot(bare, "package://no_such_package/r.urdf")
