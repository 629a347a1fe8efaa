"""Tests of manip_core.kinematic_json.parse_kinematic_json (Isaac SDK *.kinematic.json trees)."""
import json
import math
import pathlib

import numpy as np
import pytest

from manip_core.errors import ModelError
from manip_core.kinematic_json import parse_kinematic_json, parse_pose
from manip_core.spatial import matrix_to_quat_wxyz, rpy_to_matrix
from manip_core.urdf import parse_urdf

HERE = pathlib.Path(__file__).parent
DATA = HERE / "data"
ARM3 = HERE.parent / "manip_core" / "robots" / "arm3.kinematic.json"
TOL = 1e-12


def _rx(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])


def _ry(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])


def _rz(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])


def _rot(axis, angle):
    """Rodrigues, written out here so the test does not use the code under test."""
    w = np.asarray(axis, float) / np.linalg.norm(axis)
    K = np.array([[0, -w[2], w[1]], [w[2], 0, -w[0]], [-w[1], w[0], 0]])
    return np.eye(3) + math.sin(angle) * K + (1 - math.cos(angle)) * K @ K


def _T(R=np.eye(3), p=(0, 0, 0)):
    T = np.eye(4)
    T[:3, :3] = R
    T[:3, 3] = p
    return T


def _fk(tree, tip, q):
    """Pose of ``tip`` in the root frame for joint values ``q`` (dict; missing joints at 0)."""
    T = np.eye(4)
    for j in tree.path(tree.root, tip):
        T = T @ j.origin
        v = q.get(j.name, 0.0)
        if j.type in ("revolute", "continuous"):
            T = T @ _T(_rot(j.axis, v))
        elif j.type == "prismatic":
            T = T @ _T(p=v * j.axis)
    return T


# --------------------------------------------------------------------------------------------- arm3 example

ARM3_URDF = """<robot name="arm3">
  <link name="base"/> <link name="camera_link"/> <link name="turret_mount"/> <link name="turret"/>
  <link name="upper_arm"/> <link name="elbow_mount"/> <link name="forearm"/> <link name="tool"/>
  <joint name="camera_link" type="fixed"><parent link="base"/><child link="camera_link"/>
    <origin xyz="0.05 0 0.3" rpy="0 0.5235987755982988 0"/></joint>
  <joint name="turret_mount" type="fixed"><parent link="base"/><child link="turret_mount"/>
    <origin xyz="0 0 0.2"/></joint>
  <joint name="yaw_joint" type="revolute"><parent link="turret_mount"/><child link="turret"/>
    <axis xyz="0 0 1"/><limit lower="-2.96706" upper="2.96706"/></joint>
  <joint name="shoulder_joint" type="revolute"><parent link="turret"/><child link="upper_arm"/>
    <axis xyz="0 1 0"/><limit lower="-1.5708" upper="1.5708"/></joint>
  <joint name="elbow_mount" type="fixed"><parent link="upper_arm"/><child link="elbow_mount"/>
    <origin xyz="0.3 0 0"/></joint>
  <joint name="elbow_joint" type="revolute"><parent link="elbow_mount"/><child link="forearm"/>
    <axis xyz="0 1 0"/><limit lower="-2.61799" upper="2.61799"/></joint>
  <joint name="tool" type="fixed"><parent link="forearm"/><child link="tool"/>
    <origin xyz="0.25 0 0"/></joint>
</robot>"""


def test_arm3_example_structure_and_fk():
    tree = parse_kinematic_json(ARM3)
    assert (tree.name, tree.root, tree.source) == ("arm3", "base", str(ARM3))
    moving = [j for j in tree.joints.values() if j.type != "fixed"]
    assert [(j.name, j.type) for j in moving] == [("yaw_joint", "revolute"), ("shoulder_joint", "revolute"),
                                                  ("elbow_joint", "revolute")]
    np.testing.assert_array_equal([j.axis for j in moving], [[0, 0, 1], [0, 1, 0], [0, 1, 0]])
    assert [(j.lower, j.upper) for j in moving] == [(-2.96706, 2.96706), (-1.5708, 1.5708),
                                                    (-2.61799, 2.61799)]
    assert all(j.velocity_limit == math.inf and j.effort_limit == math.inf for j in moving)
    assert all(link.inertial is None for link in tree.links.values())
    assert tree.longest_chain_tip("base") == "tool"
    assert [c.child for c in tree.child_joints["base"]] == ["camera_link", "turret_mount"]  # a tree, not a chain
    np.testing.assert_allclose(_fk(tree, "tool", {}), _T(p=(0.55, 0, 0.2)), atol=TOL)
    np.testing.assert_allclose(_fk(tree, "tool", {"yaw_joint": math.pi / 2})[:3, 3], [0, 0.55, 0.2], atol=TOL)
    # Positive pitch about y turns the arm's x axis down (-z).
    np.testing.assert_allclose(_fk(tree, "tool", {"shoulder_joint": math.pi / 2})[:3, 3], [0, 0, -0.35],
                               atol=TOL)
    np.testing.assert_allclose(_fk(tree, "tool", {"elbow_joint": -math.pi / 2})[:3, 3], [0.3, 0, 0.45],
                               atol=TOL)
    np.testing.assert_allclose(_fk(tree, "camera_link", {}), _T(_ry(math.radians(30)), (0.05, 0, 0.3)),
                               atol=TOL)


def test_arm3_json_and_equivalent_urdf_agree():
    from_json = parse_kinematic_json(ARM3)
    from_urdf = parse_urdf(ARM3_URDF)
    assert from_json.root == from_urdf.root
    assert set(from_json.links) == set(from_urdf.links)
    assert list(from_json.joints) == list(from_urdf.joints)
    for name, jj in from_json.joints.items():
        ju = from_urdf.joints[name]
        assert (jj.type, jj.parent, jj.child, jj.lower, jj.upper) == (ju.type, ju.parent, ju.child, ju.lower,
                                                                      ju.upper)
        np.testing.assert_allclose(jj.origin, ju.origin, rtol=0, atol=TOL)
        np.testing.assert_allclose(jj.axis, ju.axis, rtol=0, atol=TOL)
    q = {"yaw_joint": 0.4, "shoulder_joint": -0.7, "elbow_joint": 1.1}
    np.testing.assert_allclose(_fk(from_json, "tool", q), _fk(from_urdf, "tool", q), rtol=0, atol=TOL)


# --------------------------------------------------------------------------------------------- format details


def test_isaac_style_file():
    path = DATA / "isaac_style.kinematic.json"
    tree = parse_kinematic_json(path)
    assert tree.name == "isaac_style"  # no "name": the file name up to the first dot
    # The root's constant motor (model frame -> root) hangs from a synthetic parent link.
    assert tree.root == "mount_parent"
    mount = tree.joints["mount"]
    assert (mount.type, mount.parent, mount.child) == ("fixed", "mount_parent", "mount")
    np.testing.assert_allclose(mount.origin, _T(p=(0, 0, 0.1)), atol=TOL)
    yaw = tree.joints["yaw"]
    assert (yaw.type, yaw.lower, yaw.upper) == ("continuous", -math.inf, math.inf)  # no limits
    np.testing.assert_array_equal(yaw.origin, np.eye(4))
    # [0.7071, 0, 0.7071, 0] is normalised: +90 deg about y.
    np.testing.assert_allclose(tree.joints["axis2"].origin, _T(_ry(math.pi / 2), (0, 0.22, 0)), atol=TOL)
    lift = tree.joints["lift"]
    assert (lift.type, lift.lower, lift.upper) == ("revolute", -1.57, 0.0)
    np.testing.assert_array_equal(lift.axis, [0, 1, 0])  # normalised like Isaac's RevoluteMotor
    slide = tree.joints["slide_joint"]  # motor "name", parameters directly in "motor", {"lower","upper"}
    assert (slide.type, slide.parent, slide.child, slide.lower, slide.upper) == ("prismatic", "lift", "slide",
                                                                                0.0, 0.2)
    np.testing.assert_allclose(slide.origin, _T(_rx(math.pi / 2), (0.3, 0, 0)), atol=TOL)
    tool = tree.joints["tool"]  # no motor: identity fixed joint
    assert tool.type == "fixed"
    np.testing.assert_array_equal(tool.origin, np.eye(4))
    np.testing.assert_allclose(tree.joints["sensor"].origin, _T(_rz(math.pi)), atol=TOL)
    # Prismatic travel is along the axis in the frame after the motor's pose.
    T = _fk(tree, "tool", {"slide_joint": 0.1})
    base_to_lift = _T(p=(0, 0, 0.1)) @ _T(_ry(math.pi / 2), (0, 0.22, 0))
    expected = base_to_lift @ _T(_rx(math.pi / 2), (0.3, 0, 0)) @ _T(p=(0.1, 0, 0))
    np.testing.assert_allclose(T, expected, atol=TOL)


def test_identity_root_motor_adds_no_link(tmp_path):
    path = tmp_path / "kinova_like.kinematic.json"
    path.write_text(json.dumps({"name": "k", "links": [
        {"name": "base", "motor": {"type": "constant", "properties": {"pose": [1, 0, 0, 0, 0, 0, 0]}}},
        {"name": "j1", "parent": "base", "motor": {"type": "revolute", "properties": {"axis": [0, 0, 1]}}}]}))
    tree = parse_kinematic_json(path)
    assert tree.root == "base" and sorted(tree.links) == ["base", "j1"]


def test_root_motor_name_collision_gets_a_unique_link(tmp_path):
    path = tmp_path / "t.kinematic.json"
    path.write_text(json.dumps({"links": [
        {"name": "a", "motor": {"type": "revolute", "axis": [0, 0, 1]}},
        {"name": "a_parent", "parent": "a"}]}))
    tree = parse_kinematic_json(path)
    assert tree.root == "a_parent_"
    assert tree.joints["a"].type == "continuous" and tree.joints["a"].parent == "a_parent_"


R_TEST = _rz(0.9) @ _ry(-0.4) @ _rx(1.3)
Q_TEST = matrix_to_quat_wxyz(R_TEST)
AXIS_TEST = np.array([0.3, -0.5, 0.8]) / np.linalg.norm([0.3, -0.5, 0.8])
ANGLE_TEST = 2.1


def test_pose_forms_give_the_same_transform():
    p = [0.1, -0.2, 0.3]
    expected = _T(R_TEST, p)
    forms = [
        list(Q_TEST) + p,
        [2.5 * v for v in Q_TEST] + p,  # not normalised
        {"translation": p, "rotation": list(Q_TEST)},
        {"translation": p, "rotation": dict(zip(("qw", "qx", "qy", "qz"), Q_TEST))},
    ]
    for form in forms:
        np.testing.assert_allclose(parse_pose("f", "pose", form), expected, rtol=0, atol=TOL)
    aa = _T(_rot(AXIS_TEST, ANGLE_TEST), p)
    for rot in ({"axis": list(AXIS_TEST), "angle_radians": ANGLE_TEST},
                {"axis": list(3 * AXIS_TEST), "angle_degrees": math.degrees(ANGLE_TEST)}):
        np.testing.assert_allclose(parse_pose("f", "pose", {"translation": p, "rotation": rot}), aa,
                                   rtol=0, atol=TOL)
    q = matrix_to_quat_wxyz(aa[:3, :3])
    np.testing.assert_allclose(parse_pose("f", "pose", list(q) + p), aa, rtol=0, atol=TOL)
    np.testing.assert_array_equal(parse_pose("f", "pose", {}), np.eye(4))
    np.testing.assert_allclose(parse_pose("f", "pose", {"translation": p}), _T(p=p), rtol=0, atol=0)


def test_isaac_roll_pitch_yaw_order():
    """Isaac's SO3::FromEulerAnglesRPY is Rx(roll) Ry(pitch) Rz(yaw), not URDF's Rz Ry Rx."""
    r, p, y = 0.3, -0.6, 1.2
    rad = parse_pose("f", "pose", {"rotation": {"roll_radians": r, "pitch_radians": p, "yaw_radians": y}})
    deg = parse_pose("f", "pose", {"rotation": {"roll_degrees": math.degrees(r), "pitch_degrees": math.degrees(p),
                                                "yaw_degrees": math.degrees(y)}})
    np.testing.assert_allclose(rad[:3, :3], _rx(r) @ _ry(p) @ _rz(y), rtol=0, atol=TOL)
    np.testing.assert_allclose(deg, rad, rtol=0, atol=TOL)
    assert np.abs(rad[:3, :3] - rpy_to_matrix([r, p, y])).max() > 0.1
    only_yaw = parse_pose("f", "pose", {"rotation": {"yaw_degrees": 90}})  # missing angles are 0
    np.testing.assert_allclose(only_yaw[:3, :3], _rz(math.pi / 2), atol=TOL)


# --------------------------------------------------------------------------------------------- errors


def _doc(*links, **top):
    return {"links": list(links), **top}


BASE = {"name": "base"}


def _rev(name, parent="base", **props):
    return {"name": name, "parent": parent, "motor": {"type": "revolute", "properties": props}}


def _const(name, pose, parent="base"):
    return {"name": name, "parent": parent, "motor": {"type": "constant", "properties": {"pose": pose}}}


ERROR_CASES = {
    "top level list": ([BASE], "", "top level must be a JSON object"),
    "no links": ({"name": "x"}, "'links'", "missing or not a non-empty list"),
    "empty links": (_doc(), "'links'", "missing or not a non-empty list"),
    "name not string": (_doc(BASE, name=3), "'name'", "must be a string"),
    "link not object": (_doc(BASE, "a"), "links[1]", "must be a JSON object"),
    "link without name": (_doc(BASE, {"parent": "base"}), "links[1]", "missing or empty 'name'"),
    "parent not string": (_doc(BASE, {"name": "a", "parent": 5}), "link 'a'", "'parent' must be a non-empty"),
    "parent not found": (_doc(BASE, {"name": "a", "parent": "zz"}), "link 'a'", "parent 'zz' not found"),
    "duplicate link": (_doc(BASE, {"name": "a", "parent": "base"}, {"name": "a", "parent": "base"}),
                       "link 'a'", "defined twice"),
    "duplicate motor name": (_doc(BASE, {"name": "a", "parent": "base", "motor": {"type": "revolute", "name": "m",
                                                                                  "axis": [0, 0, 1]}},
                                  {"name": "b", "parent": "base", "motor": {"type": "revolute", "name": "m",
                                                                            "axis": [0, 0, 1]}}),
                             "joint 'm'", "defined twice"),
    "two roots": (_doc(BASE, {"name": "other"}), "", "several root links"),
    "cycle": (_doc(BASE, {"name": "a", "parent": "b"}, {"name": "b", "parent": "a"}), "link 'a'",
              "cycle"),
    "motor not object": (_doc(BASE, {"name": "a", "parent": "base", "motor": "revolute"}), "link 'a'",
                         "'motor' must be a JSON object"),
    "unknown motor type": (_doc(BASE, {"name": "a", "parent": "base", "motor": {"type": "ball"}}),
                           "link 'a' motor", 'unknown motor type "ball" (supported: constant, revolute, prismatic)'),
    "missing motor type": (_doc(BASE, {"name": "a", "parent": "base", "motor": {"axis": [0, 0, 1]}}),
                           "link 'a' motor", "unknown motor type null"),
    "properties not object": (_doc(BASE, {"name": "a", "parent": "base",
                                          "motor": {"type": "revolute", "properties": [1]}}),
                              "link 'a' motor", "'properties' must be a JSON object"),
    "parameter twice": (_doc(BASE, {"name": "a", "parent": "base",
                                    "motor": {"type": "revolute", "axis": [1, 0, 0],
                                              "properties": {"axis": [0, 1, 0]}}}),
                        "link 'a' motor", "'axis' given both"),
    "constant without pose": (_doc(BASE, {"name": "a", "parent": "base", "motor": {"type": "constant"}}),
                              "link 'a' motor", "constant motor needs a 'pose'"),
    "pose 6 numbers": (_doc(BASE, _const("a", [1, 0, 0, 0, 0, 0])), "link 'a' motor pose",
                       "7 numbers [qw, qx, qy, qz, x, y, z], got 6"),
    "pose string": (_doc(BASE, _const("a", "identity")), "link 'a' motor pose", "must be a 7-number list"),
    "pose text number": (_doc(BASE, _const("a", [1, 0, 0, 0, 0, "0.1", 0])), "link 'a' motor pose",
                         'expected a number, got "0.1"'),
    "pose bool": (_doc(BASE, _const("a", [True, 0, 0, 0, 0, 0, 0])), "link 'a' motor pose",
                  "expected a number, got true"),
    "zero quaternion": (_doc(BASE, _const("a", [0, 0, 0, 0, 1, 2, 3])), "link 'a' motor pose",
                        "quaternion [0.0, 0.0, 0.0, 0.0] has zero norm"),
    "zero quaternion object": (_doc(BASE, _const("a", {"rotation": {"qw": 0, "qx": 0, "qy": 0, "qz": 0}})),
                               "link 'a' motor pose rotation", "has zero norm"),
    "unknown pose key": (_doc(BASE, _const("a", {"position": [0, 0, 1]})), "link 'a' motor pose",
                         "unknown key(s) ['position']"),
    "translation 2 numbers": (_doc(BASE, _const("a", {"translation": [0, 1]})),
                              "link 'a' motor pose translation", "expected a list of 3 numbers"),
    "rotation 3 numbers": (_doc(BASE, _const("a", {"rotation": [1, 0, 0]})), "link 'a' motor pose rotation",
                           "quaternion [qw, qx, qy, qz], got 3"),
    "two rotation forms": (_doc(BASE, _const("a", {"rotation": {"axis": [0, 0, 1], "angle_degrees": 9,
                                                                "yaw_degrees": 9}})),
                           "link 'a' motor pose rotation", "give exactly one of"),
    "no rotation form": (_doc(BASE, _const("a", {"rotation": {}})), "link 'a' motor pose rotation",
                         "(got none)"),
    "axis without angle": (_doc(BASE, _const("a", {"rotation": {"axis": [0, 0, 1]}})),
                           "link 'a' motor pose rotation", "must be set"),
    "angle without axis": (_doc(BASE, _const("a", {"rotation": {"angle_degrees": 10}})),
                           "link 'a' motor pose rotation", "must be set"),
    "radians and degrees": (_doc(BASE, _const("a", {"rotation": {"axis": [0, 0, 1], "angle_degrees": 9,
                                                                 "angle_radians": 0.1}})),
                            "link 'a' motor pose rotation", "not both"),
    "zero rotation axis": (_doc(BASE, _const("a", {"rotation": {"axis": [0, 0, 0], "angle_degrees": 9}})),
                           "link 'a' motor pose rotation axis", "has zero length"),
    "partial quaternion": (_doc(BASE, _const("a", {"rotation": {"qw": 1, "qx": 0}})),
                           "link 'a' motor pose rotation", "missing ['qy', 'qz']"),
    "revolute without axis": (_doc(BASE, _rev("a")), "link 'a' motor", "revolute motor needs an 'axis'"),
    "zero axis": (_doc(BASE, _rev("a", axis=[0, 0, 0])), "link 'a' motor axis", "has zero length"),
    "axis 2 numbers": (_doc(BASE, _rev("a", axis=[0, 1])), "link 'a' motor axis", "list of 3 numbers"),
    "non-unit prismatic axis": (_doc(BASE, {"name": "a", "parent": "base",
                                            "motor": {"type": "prismatic", "axis": [0, 0, 2]}}),
                                "link 'a' motor axis", "prismatic axis must be a unit vector"),
    "limits 3 numbers": (_doc(BASE, _rev("a", axis=[0, 0, 1], limits=[0, 1, 2])), "link 'a' motor limits",
                         "list of 2 numbers"),
    "limits object missing upper": (_doc(BASE, _rev("a", axis=[0, 0, 1], limits={"lower": 0})),
                                    "link 'a' motor limits", "missing 'upper'"),
    "limits reversed": (_doc(BASE, _rev("a", axis=[0, 0, 1], limits=[1, -1])), "joint 'a'",
                        "lower limit 1.0 is above upper limit -1.0"),
    "motor name empty": (_doc(BASE, {"name": "a", "parent": "base", "motor": {"type": "constant", "name": "",
                                                                              "pose": [1, 0, 0, 0, 0, 0, 0]}}),
                         "link 'a' motor", "'name' must be a non-empty string"),
}


@pytest.mark.parametrize("doc, element, reason", ERROR_CASES.values(), ids=list(ERROR_CASES))
def test_error_cases_name_file_element_and_reason(tmp_path, doc, element, reason):
    path = tmp_path / "bad.kinematic.json"
    path.write_text(json.dumps(doc, indent=2))
    with pytest.raises(ModelError) as info:
        parse_kinematic_json(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: "), msg
    assert element in msg, msg
    assert reason in msg, msg


def test_invalid_json_gives_line_and_column(tmp_path):
    path = tmp_path / "broken.kinematic.json"
    path.write_text('{\n  "links": [\n    {"name": "base",}\n  ]\n}\n')
    with pytest.raises(ModelError, match=r"broken\.kinematic\.json: line 3 column 21: invalid JSON: "):
        parse_kinematic_json(path)


def test_nan_literal_is_rejected(tmp_path):
    path = tmp_path / "nan.kinematic.json"
    path.write_text('{"links": [{"name": "base"}, {"name": "a", "parent": "base", '
                    '"motor": {"type": "revolute", "axis": [NaN, 0, 1]}}]}')
    with pytest.raises(ModelError, match=r"nan\.kinematic\.json: invalid JSON: NaN is not a valid number"):
        parse_kinematic_json(path)


def test_overflowing_number_is_rejected(tmp_path):
    path = tmp_path / "huge.kinematic.json"
    path.write_text('{"links": [{"name": "base"}, {"name": "a", "parent": "base", '
                    '"motor": {"type": "constant", "properties": {"pose": [1, 0, 0, 0, 1e400, 0, 0]}}}]}')
    with pytest.raises(ModelError, match=r"huge\.kinematic\.json: link 'a' motor pose: NaN or infinite value inf"):
        parse_kinematic_json(path)


def test_missing_file(tmp_path):
    with pytest.raises(ModelError, match=r"nothing\.kinematic\.json: cannot read file"):
        parse_kinematic_json(tmp_path / "nothing.kinematic.json")
