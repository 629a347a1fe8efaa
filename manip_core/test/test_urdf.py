"""Tests of manip_core.urdf.parse_urdf against hand-computed values and Pinocchio (the independent oracle)."""
import math
import pathlib
import sysconfig

import numpy as np
import pytest

from manip_core.errors import ModelError
from manip_core.spatial import rpy_to_matrix
from manip_core.urdf import parse_urdf

DATA = pathlib.Path(__file__).parent / "data"
ROBOTS = pathlib.Path(sysconfig.get_paths()["purelib"]) / "cmeel.prefix/share/example-robot-data/robots"
UR5 = ROBOTS / "ur_description/urdf/ur5_robot.urdf"
PANDA = ROBOTS / "panda_description/urdf/panda.urdf"
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


def _robot(body, name="r"):
    """A URDF string with a 'base' link plus ``body``."""
    return f'<robot name="{name}">\n  <link name="base"/>\n{body}\n</robot>'


def _arm(joint_body, jtype="revolute", link_body=""):
    """base -> 'arm' through joint 'j' of ``jtype`` whose children are ``joint_body``."""
    return _robot(f'  <link name="arm">{link_body}</link>\n'
                  f'  <joint name="j" type="{jtype}">\n    <parent link="base"/>\n    <child link="arm"/>\n'
                  f'    {joint_body}\n  </joint>')


LIMIT = '<limit lower="-1" upper="1" velocity="1" effort="1"/>'


# --------------------------------------------------------------------------------------------- valid files


def test_two_link_file_values():
    tree = parse_urdf(DATA / "two_link.urdf")
    assert tree.name == "two_link"
    assert tree.source == str(DATA / "two_link.urdf")
    assert tree.root == "base"
    assert sorted(tree.links) == ["arm", "base", "finger", "slider", "tip", "wheel"]
    assert list(tree.joints) == ["shoulder", "slide", "spin", "grip", "tip_joint"]

    sh = tree.joints["shoulder"]
    assert (sh.type, sh.parent, sh.child) == ("revolute", "base", "arm")
    np.testing.assert_allclose(sh.origin, np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0.4], [0, 0, 0, 1]]))
    np.testing.assert_allclose(sh.axis, [0, 0, 1])  # "0 0 2" normalised
    assert (sh.lower, sh.upper, sh.velocity_limit, sh.effort_limit) == (-1.5, 2.5, 3.0, 40.0)
    assert sh.mimic is None

    sl = tree.joints["slide"]
    assert sl.type == "prismatic"
    assert (sl.lower, sl.upper) == (0.0, 0.0)  # urdfdom defaults when <limit> has no lower/upper
    assert (sl.velocity_limit, sl.effort_limit) == (0.5, 100.0)
    np.testing.assert_allclose(sl.origin[:3, :3], _rx(math.pi / 2), atol=TOL)
    np.testing.assert_allclose(sl.origin[:3, 3], [0.3, 0, 0])

    sp = tree.joints["spin"]
    assert sp.type == "continuous"
    assert (sp.lower, sp.upper) == (-math.inf, math.inf)
    assert (sp.velocity_limit, sp.effort_limit) == (6.0, 2.0)
    np.testing.assert_array_equal(sp.origin, np.eye(4))
    np.testing.assert_array_equal(sp.axis, [0, 1, 0])

    gr = tree.joints["grip"]
    np.testing.assert_array_equal(gr.axis, [1, 0, 0])  # default axis
    assert (gr.mimic.joint, gr.mimic.multiplier, gr.mimic.offset) == ("shoulder", -0.5, 0.1)

    tip = tree.joints["tip_joint"]
    assert tip.type == "fixed"
    np.testing.assert_allclose(tip.origin[:3, 3], [0.5, 0, 0])

    arm = tree.links["arm"].inertial
    assert arm.mass_kg == 2.0
    np.testing.assert_allclose(arm.com_m, [0.1, 0, 0.05])
    # Rz(90 deg) swaps the x and y principal moments.
    np.testing.assert_allclose(arm.inertia_com_kgm2, np.diag([0.02, 0.01, 0.03]), atol=TOL)
    slider = tree.links["slider"].inertial
    np.testing.assert_array_equal(slider.com_m, [0, 0, 0])
    np.testing.assert_array_equal(slider.inertia_com_kgm2, 0.001 * np.eye(3))
    assert tree.links["tip"].inertial is None  # mass 0 and zero inertia: placeholder
    assert tree.links["wheel"].inertial is None and tree.links["base"].inertial is None


def test_string_and_path_forms_agree():
    path = DATA / "two_link.urdf"
    from_str = parse_urdf(path.read_text())
    from_path_str = parse_urdf(str(path))
    assert from_str.source == "<string>"
    assert from_path_str.source == str(path)
    for name, j in parse_urdf(path).joints.items():
        np.testing.assert_array_equal(from_str.joints[name].origin, j.origin)
        np.testing.assert_array_equal(from_path_str.joints[name].axis, j.axis)


def test_inertial_rpy_is_rotated_into_link_frame():
    rpy = (0.3, -0.7, 1.1)
    xml = _arm(LIMIT, link_body=f"""
    <inertial>
      <origin xyz="0.01 -0.02 0.03" rpy="{rpy[0]} {rpy[1]} {rpy[2]}"/>
      <mass value="1.5"/>
      <inertia ixx="0.04" ixy="0.001" ixz="-0.002" iyy="0.05" iyz="0.003" izz="0.06"/>
    </inertial>""")
    inertial = parse_urdf(xml).links["arm"].inertial
    I = np.array([[0.04, 0.001, -0.002], [0.001, 0.05, 0.003], [-0.002, 0.003, 0.06]])
    R = _rz(rpy[2]) @ _ry(rpy[1]) @ _rx(rpy[0])  # URDF fixed-axis rpy, built by hand
    np.testing.assert_allclose(inertial.inertia_com_kgm2, R @ I @ R.T, rtol=0, atol=TOL)
    np.testing.assert_allclose(inertial.com_m, [0.01, -0.02, 0.03], rtol=0, atol=0)
    assert inertial.mass_kg == 1.5
    # The rotation is not a no-op, and Pinocchio agrees.
    assert np.abs(inertial.inertia_com_kgm2 - I).max() > 1e-3
    pin = pytest.importorskip("pinocchio")
    model = pin.buildModelFromXML(xml)
    np.testing.assert_allclose(model.inertias[1].inertia, inertial.inertia_com_kgm2, rtol=0, atol=TOL)


# --------------------------------------------------------------------------------------------- real robots


def _fixed_closure(tree, link):
    """{link: T_link_to} for ``link`` and every link reached from it through fixed joints only."""
    out = {link: np.eye(4)}
    stack = [link]
    while stack:
        n = stack.pop()
        for j in tree.child_joints[n]:
            if j.type == "fixed":
                out[j.child] = out[n] @ j.origin
                stack.append(j.child)
    return out


def _merged_inertia(tree, link):
    """(mass, com, inertia about com) of ``link`` and its fixed-joint descendants, in ``link``'s frame."""
    parts = []
    for name, T in _fixed_closure(tree, link).items():
        i = tree.links[name].inertial
        if i is not None:
            R = T[:3, :3]
            parts.append((i.mass_kg, R @ i.com_m + T[:3, 3], R @ i.inertia_com_kgm2 @ R.T))
    mass = sum(m for m, _, _ in parts)
    com = sum(m * c for m, c, _ in parts) / mass
    inertia = sum(I + m * (np.dot(c - com, c - com) * np.eye(3) - np.outer(c - com, c - com))
                  for m, c, I in parts)
    return mass, com, inertia


def _placement_from_moving_parent(tree, joint):
    """Joint origin relative to the nearest moving ancestor joint's frame (Pinocchio's jointPlacements)."""
    T = joint.origin
    j = tree.parent_joint.get(joint.parent)
    while j is not None and j.type == "fixed":
        T = j.origin @ T
        j = tree.parent_joint.get(j.parent)
    return T


def _compare_with_pinocchio(path):
    pin = pytest.importorskip("pinocchio")
    tree = parse_urdf(path)
    model = pin.buildModelFromUrdf(str(path))
    moving = [j for j in tree.joints.values() if j.type != "fixed"]
    assert list(model.names)[1:] == [j.name for j in moving]
    for j in moving:
        i = model.getJointId(j.name)
        idx = model.idx_qs[i]
        assert model.lowerPositionLimit[idx] == j.lower
        assert model.upperPositionLimit[idx] == j.upper
        assert model.velocityLimit[model.idx_vs[i]] == j.velocity_limit
        assert model.effortLimit[model.idx_vs[i]] == j.effort_limit
        np.testing.assert_allclose(model.jointPlacements[i].homogeneous, _placement_from_moving_parent(tree, j),
                                   rtol=0, atol=TOL)
        mass, com, inertia = _merged_inertia(tree, j.child)
        assert abs(model.inertias[i].mass - mass) <= TOL
        np.testing.assert_allclose(model.inertias[i].lever, com, rtol=0, atol=TOL)
        np.testing.assert_allclose(model.inertias[i].inertia, inertia, rtol=0, atol=TOL)
    return tree


def test_ur5_matches_pinocchio():
    tree = _compare_with_pinocchio(UR5)
    assert tree.name == "ur5" and tree.root == "world"
    assert len(tree.joints) == 10
    moving = [j for j in tree.joints.values() if j.type != "fixed"]
    assert [j.name for j in moving] == ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint",
                                        "wrist_1_joint", "wrist_2_joint", "wrist_3_joint"]
    assert all(j.type == "revolute" for j in moving)
    z, y = [0, 0, 1], [0, 1, 0]
    for j, axis in zip(moving, [z, y, y, y, z, y]):
        np.testing.assert_array_equal(j.axis, axis)
    assert moving[0].lower == -6.28318530718 and moving[0].upper == 6.28318530718
    assert moving[2].lower == -3.14159265359 and moving[2].upper == 3.14159265359
    assert [j.effort_limit for j in moving] == [150.0, 150.0, 150.0, 28.0, 28.0, 28.0]
    assert [j.velocity_limit for j in moving] == [3.15, 3.15, 3.15, 3.2, 3.2, 3.2]
    # shoulder_lift origin: xyz 0 0.13585 0, rpy 0 pi/2 0.
    np.testing.assert_allclose(tree.joints["shoulder_lift_joint"].origin[:3, :3], _ry(1.57079632679), atol=TOL)
    np.testing.assert_allclose(tree.joints["shoulder_lift_joint"].origin[:3, 3], [0, 0.13585, 0])
    upper = tree.links["upper_arm_link"].inertial
    assert upper.mass_kg == 8.393
    np.testing.assert_array_equal(upper.com_m, [0, 0, 0.28])
    assert tree.links["ee_link"].inertial is None  # the mass-0 placeholder of the file


def test_panda_matches_pinocchio():
    tree = _compare_with_pinocchio(PANDA)
    assert tree.name == "panda" and tree.root == "panda_link0"
    assert len(tree.joints) == 12
    moving = [j for j in tree.joints.values() if j.type != "fixed"]
    assert [j.type for j in moving] == ["revolute"] * 7 + ["prismatic"] * 2
    for j in moving[:7]:
        np.testing.assert_array_equal(j.axis, [0, 0, 1])
    np.testing.assert_array_equal(moving[7].axis, [0, 1, 0])
    np.testing.assert_array_equal(moving[8].axis, [0, -1, 0])
    j4 = tree.joints["panda_joint4"]
    assert (j4.lower, j4.upper, j4.velocity_limit, j4.effort_limit) == (-3.0718, -0.0698, 2.175, 87.0)
    f2 = tree.joints["panda_finger_joint2"]
    assert (f2.lower, f2.upper) == (0.0, 0.04)
    assert (f2.mimic.joint, f2.mimic.multiplier, f2.mimic.offset) == ("panda_finger_joint1", 1.0, 0.0)
    assert tree.links["panda_link8"].inertial is None and tree.links["panda_hand_tcp"].inertial is None
    np.testing.assert_allclose(tree.joints["panda_hand_joint"].origin[:3, :3], rpy_to_matrix([0, 0, -math.pi / 4]))


# --------------------------------------------------------------------------------------------- errors


ERROR_CASES = {
    "malformed xml": ('<robot name="r"><link name="a"></robot>', "line 1", "malformed XML"),
    "empty document": ("<", "line 1", "malformed XML"),
    "root not robot": ('<sdf version="1.6"/>', "<sdf>", "root element must be <robot>"),
    "robot without name": ('<robot><link name="a"/></robot>', "<robot>", "missing attribute 'name'"),
    "xacro element": ('<robot name="r" xmlns:xacro="http://www.ros.org/wiki/xacro">'
                      '<xacro:property name="l" value="1"/><link name="a"/></robot>',
                      "<xacro:property>", "xacro macros found: expand with `xacro file.urdf.xacro > file.urdf`"),
    "xacro prefix undeclared": ('<robot name="r"><xacro:include filename="x.xacro"/></robot>', "line 1",
                                "xacro macros found"),
    "xacro expression": (_arm('<origin xyz="0 0 ${l}"/>' + LIMIT), "<origin> attribute 'xyz'",
                         "xacro macros found"),
    "non-numeric xyz": (_arm('<origin xyz="0 abc 0"/>' + LIMIT), "joint 'j' <origin> attribute 'xyz'",
                        "not a number: '0 abc 0'"),
    "xyz wrong count": (_arm('<origin xyz="0 0"/>' + LIMIT), "joint 'j' <origin> attribute 'xyz'",
                        "expected 3 numbers"),
    "rpy wrong count": (_arm('<origin rpy="0 0 0 0"/>' + LIMIT), "joint 'j' <origin> attribute 'rpy'",
                        "expected 3 numbers"),
    "nan limit": (_arm('<limit lower="nan" upper="1" velocity="1" effort="1"/>'),
                  "joint 'j' <limit> attribute 'lower'", "NaN or infinite"),
    "inf axis": (_arm('<axis xyz="0 inf 0"/>' + LIMIT), "joint 'j' <axis> attribute 'xyz'", "NaN or infinite"),
    "non-numeric velocity": (_arm('<limit lower="0" upper="1" velocity="fast" effort="1"/>'),
                             "joint 'j' <limit> attribute 'velocity'", "not a number"),
    "inf mass": (_arm(LIMIT, link_body='<inertial><mass value="inf"/>'
                                       '<inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/></inertial>'),
                 "link 'arm' <inertial> <mass> attribute 'value'", "NaN or infinite"),
    "negative mass": (_arm(LIMIT, link_body='<inertial><mass value="-1"/>'
                                            '<inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/></inertial>'),
                      "link 'arm' <inertial>", "negative mass -1.0 kg"),
    "inertial without mass": (_arm(LIMIT, link_body='<inertial>'
                                                    '<inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/>'
                                                    '</inertial>'),
                              "link 'arm' <inertial>", "missing <mass> element"),
    "inertia missing ixz": (_arm(LIMIT, link_body='<inertial><mass value="1"/>'
                                                  '<inertia ixx="1" ixy="0" iyy="1" iyz="0" izz="1"/></inertial>'),
                            "link 'arm' <inertial> <inertia> attribute 'ixz'", "missing attribute"),
    "revolute without limit": (_arm('<axis xyz="0 0 1"/>'), "joint 'j'",
                               "revolute joint needs <limit> (URDF spec)"),
    "prismatic without limit": (_arm('<axis xyz="0 0 1"/>', jtype="prismatic"), "joint 'j'",
                                "prismatic joint needs <limit> (URDF spec)"),
    "planar joint": (_arm(LIMIT, jtype="planar"), "joint 'j'", "unknown or unsupported joint type 'planar'"),
    "floating joint": (_arm("", jtype="floating"), "joint 'j'", "unknown or unsupported joint type 'floating'"),
    "joint without type": (_robot('<link name="a"/><joint name="j"><parent link="base"/><child link="a"/>'
                                  '</joint>'), "joint 'j'", "missing attribute 'type'"),
    "joint without parent": (_robot('<link name="a"/><joint name="j" type="fixed"><child link="a"/></joint>'),
                             "joint 'j'", "missing <parent> element"),
    "child without link attribute": (_robot('<link name="a"/><joint name="j" type="fixed"><parent link="base"/>'
                                            '<child/></joint>'), "joint 'j' <child>", "missing attribute 'link'"),
    "undefined child link": (_robot('<joint name="j" type="fixed"><parent link="base"/><child link="ghost"/>'
                                    '</joint>'), "joint 'j'", "child link 'ghost' is not defined"),
    "link without name": (_robot("<link/>"), "<link>", "missing attribute 'name'"),
    "mimic without joint": (_arm(LIMIT + '<mimic multiplier="2"/>'), "joint 'j' <mimic>",
                            "missing attribute 'joint'"),
    "lower above upper": (_arm('<limit lower="1" upper="-1" velocity="1" effort="1"/>'), "joint 'j'",
                          "lower limit 1.0 is above upper limit -1.0"),
}


@pytest.mark.parametrize("xml, element, reason", ERROR_CASES.values(), ids=list(ERROR_CASES))
def test_error_cases_name_source_element_and_reason(xml, element, reason):
    with pytest.raises(ModelError) as info:
        parse_urdf(xml)
    msg = str(info.value)
    assert msg.startswith("<string>: "), msg
    assert element in msg, msg
    assert reason in msg, msg


def test_error_gives_the_line_of_the_element():
    xml = '<robot name="r">\n  <link name="base"/>\n  <link name="arm"/>\n' \
          '  <joint name="j" type="revolute">\n    <parent link="base"/>\n    <child link="arm"/>\n' \
          '    <origin xyz="0 1"/>\n  </joint>\n</robot>'
    with pytest.raises(ModelError, match=r"<origin> attribute 'xyz' \(line 7\)"):
        parse_urdf(xml)
    with pytest.raises(ModelError, match=r"^<string>: joint 'j' \(line 4\): revolute joint needs <limit>"):
        parse_urdf(xml.replace('    <origin xyz="0 1"/>\n', ""))
    with pytest.raises(ModelError, match=r"^<string>: line 4: malformed XML: Opening and ending tag mismatch: "
                                         r"link line 3"):
        parse_urdf('<robot name="r">\n  <link name="base"/>\n  <link name="arm">\n</robot>')


def test_file_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad_arm.urdf"
    bad.write_text(_arm('<origin xyz="0 abc 0"/>' + LIMIT))
    with pytest.raises(ModelError, match=r"bad_arm\.urdf: joint 'j' <origin> attribute 'xyz' \(line 7\)"):
        parse_urdf(bad)
    broken = tmp_path / "broken.urdf"
    broken.write_text('<robot name="r">\n<link name="a">\n')
    with pytest.raises(ModelError, match=r"broken\.urdf: line \d+: malformed XML"):
        parse_urdf(str(broken))
    with pytest.raises(ModelError, match=r"missing\.urdf: cannot read file"):
        parse_urdf(tmp_path / "missing.urdf")


def test_xacro_file_and_xacro_content_are_rejected():
    xacro = DATA / "macro_arm.urdf.xacro"
    with pytest.raises(ModelError, match=r"macro_arm\.urdf\.xacro: xacro macros found: expand with "
                                         r"`xacro file\.urdf\.xacro > file\.urdf` first"):
        parse_urdf(xacro)
    with pytest.raises(ModelError, match=r"^<string>: <xacro:property> \(line 3\): xacro macros found"):
        parse_urdf(xacro.read_text())


def test_default_namespace_is_ignored():
    xml = '<robot name="r" xmlns="http://example.org/urdf"><link name="base"/><link name="a"/>' \
          '<joint name="j" type="fixed"><parent link="base"/><child link="a"/><origin xyz="1 2 3"/></joint></robot>'
    tree = parse_urdf(xml)
    np.testing.assert_array_equal(tree.joints["j"].origin[:3, 3], [1, 2, 3])


def test_xacro_namespace_declaration_alone_is_accepted():
    xml = '<robot name="r" xmlns:xacro="http://wiki.ros.org/xacro"><link name="base"/></robot>'
    tree = parse_urdf(xml)
    assert tree.root == "base" and tree.joints == {}


MBM_PANDA = pathlib.Path(__file__).resolve().parents[2].parent / "shared/benchmarks/mbm/robots/panda/panda_spherized.urdf"


def test_massless_link_with_inertia_is_one_warning_and_matches_pinocchio(caplog):
    """MotionBenchMaker's Panda as published: panda_link8 has mass 0 and inertia 0.1 I. Pinocchio and PyBullet
    load it; so does manip_core, keeping the rotational inertia as Pinocchio does, with one warning."""
    if not MBM_PANDA.is_file():
        pytest.skip(f"{MBM_PANDA} not present")
    pin = pytest.importorskip("pinocchio")
    with caplog.at_level("WARNING", logger="manip_core.urdf"):
        tree = _compare_with_pinocchio(MBM_PANDA)
    warnings = [r.getMessage() for r in caplog.records if r.name == "manip_core.urdf"]
    assert len(warnings) == 1 and "'panda_link8'" in warnings[0] and "mass 0 kg" in warnings[0], warnings
    assert tree.links["panda_link8"].inertial.mass_kg == 0.0
    # the dynamics of the 7-joint chain equal Pinocchio's (mass matrix, gravity); the fingers are fixed joints
    from manip_core import RobotModel
    robot = RobotModel.from_urdf(str(MBM_PANDA), "panda_link0", "panda_hand")
    model = pin.buildModelFromUrdf(str(MBM_PANDA))
    assert model.nq == robot.dof == 7
    data = model.createData()
    rng = np.random.default_rng(3)
    for _ in range(3):
        q = rng.uniform(robot.joint_lower, robot.joint_upper)
        np.testing.assert_allclose(robot.mass_matrix(q), pin.crba(model, data, q), rtol=0, atol=1e-9)
        np.testing.assert_allclose(robot.gravity_torques(q), pin.computeGeneralizedGravity(model, data, q),
                                   rtol=0, atol=1e-9)
