"""RobotModel beyond the reference robots: textbook values, bundled robots, joint types, bad input."""
import copy

import numpy as np
import pytest

from manip_core import InputError, ModelError, RobotModel
from manip_core.robots import robot_path
from manip_core.spatial import exp6, matrix_to_rpy, rpy_to_matrix

# Modern Robotics (Lynch & Park 2017), Example 4.5: the UR5 in PoE form.
W1, W2, L1, L2, H1, H2 = 0.109, 0.082, 0.425, 0.392, 0.089, 0.095
MR_M = np.array([[-1, 0, 0, L1 + L2], [0, 0, 1, W1 + W2], [0, 1, 0, H1 - H2], [0, 0, 0, 1]], dtype=float)
MR_S = np.array([[0, 0, 1, 0, 0, 0], [0, 1, 0, -H1, 0, 0], [0, 1, 0, -H1, 0, L1], [0, 1, 0, -H1, 0, L1 + L2],
                 [0, 0, -1, -W1, L1 + L2, 0], [0, 1, 0, H2 - H1, 0, L1 + L2]], dtype=float).T


def mr_ur5_urdf():
    """The textbook UR5 as a URDF: joint frames aligned with the base at the points of its screw axes."""
    tool_rpy = " ".join(f"{x:.17g}" for x in matrix_to_rpy(MR_M[:3, :3]))
    joints = [("j1", "0 0 0", "0 0 1"), ("j2", f"0 0 {H1}", "0 1 0"), ("j3", f"{L1} 0 0", "0 1 0"),
              ("j4", f"{L2} 0 0", "0 1 0"), ("j5", f"0 {W1} 0", "0 0 -1"), ("j6", f"0 0 {-H2}", "0 1 0")]
    links = ["base"] + [f"l{i}" for i in range(1, 7)] + ["tool"]
    xml = ['<robot name="mr_ur5">'] + [f'<link name="{n}"/>' for n in links]
    for i, (name, xyz, axis) in enumerate(joints):
        xml.append(f'<joint name="{name}" type="revolute"><parent link="{links[i]}"/><child link="{links[i + 1]}"/>'
                   f'<origin xyz="{xyz}"/><axis xyz="{axis}"/>'
                   f'<limit lower="-6.3" upper="6.3" velocity="3" effort="100"/></joint>')
    xml.append(f'<joint name="tool_joint" type="fixed"><parent link="l6"/><child link="tool"/>'
               f'<origin xyz="0 {W2} 0" rpy="{tool_rpy}"/></joint></robot>')
    return "\n".join(xml)


def test_modern_robotics_example_4_5():
    robot = RobotModel.from_urdf(mr_ur5_urdf())
    np.testing.assert_allclose(robot.screw_axes_space, MR_S, atol=1e-12)
    np.testing.assert_allclose(robot.home, MR_M, atol=1e-12)
    q = np.array([0, -np.pi / 2, 0, 0, np.pi / 2, 0])
    expected = np.array([[0, -1, 0, 0.095], [1, 0, 0, 0.109], [0, 0, 1, 0.988], [0, 0, 0, 1]])
    np.testing.assert_allclose(robot.fk(q), expected, atol=1e-12)
    # PoE product of the textbook's own screw axes, on random q
    rng = np.random.default_rng(0)
    for _ in range(20):
        q = rng.uniform(-np.pi, np.pi, 6)
        T = np.eye(4)
        for i in range(6):
            T = T @ exp6(MR_S[:, i], q[i])
        np.testing.assert_allclose(robot.fk(q), T @ MR_M, atol=1e-12)
    assert len(robot.ik_all(robot.fk(q))) >= 1


@pytest.mark.parametrize("name", ["ur5", "ypp3", "planar2r"])
def test_bundled_robots_have_dynamics_and_closed_form(name):
    robot = RobotModel.load(name)
    q = np.linspace(-0.5, 0.5, robot.dof)
    M = robot.mass_matrix(q)
    assert np.all(np.linalg.eigvalsh(M) > 0)
    assert robot.analytic_ik() is not None
    T = robot.fk(q)
    sols = robot.ik_all(T)
    assert any(np.allclose(s, q, atol=1e-7) for s in sols)


def test_kinematic_json_fk_of_every_link():
    robot = RobotModel.load("arm3")
    assert robot.dof == 3
    q = np.array([0.3, -0.4, 0.8])
    for link in robot.link_names:
        T = robot.fk(q, link=link)
        np.testing.assert_allclose(T[:3, :3] @ T[:3, :3].T, np.eye(3), atol=1e-12)
    np.testing.assert_allclose(robot.fk(np.zeros(3))[:3, 3], [0.55, 0.0, 0.2], atol=1e-12)
    with pytest.raises(ModelError, match="inertial"):
        robot.inverse_dynamics(q, q, q)


PRISMATIC_URDF = """<robot name="gantry">
  <link name="base"/>
  <link name="carriage"><inertial><mass value="2.0"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="arm"><inertial><origin xyz="0.2 0 0"/><mass value="1.0"/><inertia ixx="0.001" iyy="0.02" izz="0.02" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="slide" type="prismatic"><parent link="base"/><child link="carriage"/><axis xyz="1 0 0"/>
    <limit lower="-0.5" upper="0.5" velocity="1" effort="200"/></joint>
  <joint name="spin" type="continuous"><parent link="carriage"/><child link="arm"/><origin xyz="0 0 0.1"/><axis xyz="0 0 1"/></joint>
</robot>"""


def test_prismatic_and_continuous_joints_against_closed_form():
    robot = RobotModel.from_urdf(PRISMATIC_URDF)
    assert robot.joint_types == ["prismatic", "continuous"]
    assert robot.joint_lower[1] == -np.inf and robot.joint_upper[1] == np.inf
    x, th, xd, thd = 0.2, 0.7, 0.3, -1.1
    # Lagrangian of a cart (m1) carrying a rotor (m2 at r from the axis, Izz2 about its com): z axis rotation
    m1, m2, r, izz = 2.0, 1.0, 0.2, 0.02
    M = np.array([[m1 + m2, -m2 * r * np.sin(th)], [-m2 * r * np.sin(th), izz + m2 * r * r]])
    np.testing.assert_allclose(robot.mass_matrix([x, th]), M, atol=1e-12)
    c = np.array([-m2 * r * np.cos(th) * thd ** 2, 0.0])
    np.testing.assert_allclose(robot.coriolis_torques([x, th], [xd, thd]), c, atol=1e-12)
    np.testing.assert_allclose(robot.gravity_torques([x, th]), [0.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(robot.fk([x, th])[:3, 3], [x, 0, 0.1], atol=1e-12)
    r_ik = robot.ik(np.array([0.3, 0.0, 0.1]))  # position-only (2 joints)
    assert r_ik.success and abs(r_ik.q[0] - 0.3) < 1e-6


def test_mimic_joint_on_the_chain_is_not_a_dof():
    xml = PRISMATIC_URDF.replace('<joint name="spin" type="continuous">',
                                 '<joint name="spin" type="continuous"><mimic joint="slide" multiplier="2" offset="0.1"/>')
    robot = RobotModel.from_urdf(xml)
    assert robot.joint_names == ["slide"]
    T = robot.fk([0.25])
    np.testing.assert_allclose(T[:3, :3], rpy_to_matrix([0, 0, 2 * 0.25 + 0.1]), atol=1e-12)
    # the Jacobian carries the coupling: d(yaw)/d(slide) = 2
    assert robot.jacobian_space([0.25])[2, 0] == pytest.approx(2.0)


def test_base_and_tip_selection_and_errors():
    robot = RobotModel.load("ur5")
    sub = RobotModel.from_urdf(robot_path("ur5"), base_link="shoulder_link", tip_link="forearm_link")
    assert sub.dof == 2
    q = np.array([0.1, -0.5, 0.7, 0.2, 0.3, 0.4])
    # the sub-chain's pose equals the relative pose of its links in the full chain
    T_rel = np.linalg.inv(robot.fk(q, "shoulder_link")) @ robot.fk(q, "forearm_link")
    np.testing.assert_allclose(sub.fk(q[1:3]), T_rel, atol=1e-12)
    with pytest.raises(ModelError, match="not below base link"):
        RobotModel.from_urdf(robot_path("ur5"), base_link="forearm_link", tip_link="shoulder_link")
    with pytest.raises(ModelError, match="tip link 'nope'"):
        RobotModel.from_urdf(robot_path("ur5"), tip_link="nope")
    with pytest.raises(ModelError, match="no moving joint"):
        RobotModel.from_urdf(robot_path("ur5"), base_link="wrist_3_link", tip_link="tool0")


def test_bad_numeric_input_raises_clear_errors():
    robot = RobotModel.load("ur5")
    with pytest.raises(InputError, match=r"shape \(6,\).*shoulder_pan_joint"):
        robot.fk([0.0, 1.0])
    with pytest.raises(InputError, match="NaN"):
        robot.fk([np.nan] * 6)
    with pytest.raises(InputError, match="NaN"):
        robot.inverse_dynamics([0.0] * 6, [np.inf] * 6, [0.0] * 6)
    with pytest.raises(InputError, match="NaN"):
        robot.inverse_dynamics([0.0] * 6, [0.0] * 6, [0.0] * 6, gravity=(0, 0, np.nan))
    with pytest.raises(InputError, match="f_tip"):
        robot.inverse_dynamics([0.0] * 6, [0.0] * 6, [0.0] * 6, f_tip=[1.0, 2.0])
    with pytest.raises(InputError, match=r"\(N, 6\)"):
        robot.fk_batch(np.zeros((4, 5)))
    Q = np.zeros((5, 6))
    Q[3, 2] = np.nan
    with pytest.raises(InputError, match=r"1 of 5 configurations failed: rows \[3\]"):
        robot.fk_batch(Q)
    with pytest.raises(InputError, match="link 'nope'"):
        robot.fk(np.zeros(6), link="nope")


def test_descriptions_with_bad_physics_are_rejected():
    base = PRISMATIC_URDF
    with pytest.raises(ModelError, match=r"<string>.*link 'carriage'.*mass"):
        RobotModel.from_urdf(base.replace('<mass value="2.0"/>', '<mass value="-2.0"/>'))
    bad_inertia = base.replace('ixx="0.01" iyy="0.01" izz="0.01"', 'ixx="0.01" iyy="-0.5" izz="0.01"')
    with pytest.raises(ModelError, match=r"link 'carriage'.*not positive"):
        RobotModel.from_urdf(bad_inertia)
    with pytest.raises(ModelError, match="NaN"):
        RobotModel.from_urdf(base.replace('<origin xyz="0 0 0.1"/>', '<origin xyz="0 0 nan"/>'))
    with pytest.raises(ModelError, match="unknown or unsupported joint type 'ball'"):
        RobotModel.from_urdf(base.replace('type="continuous"', 'type="ball"'))
    cyclic = base.replace("</robot>", '<joint name="loop" type="fixed"><parent link="arm"/><child link="base"/></joint></robot>')
    with pytest.raises(ModelError, match="cycle"):
        RobotModel.from_urdf(cyclic)
    two_roots = base.replace("</robot>", '<link name="stray"/></robot>')
    with pytest.raises(ModelError, match="several root links"):
        RobotModel.from_urdf(two_roots)
    with pytest.raises(ModelError, match="line"):
        RobotModel.from_urdf("<robot name='x'><link name='a'></robot>")


def test_model_is_read_only_and_independent_of_its_tree():
    robot = RobotModel.load("ur5")
    with pytest.raises(ValueError):
        robot.home[0, 0] = 5.0
    tree = copy.deepcopy(robot.tree)
    tree.joints[robot.joint_names[0]].upper = 0.1
    assert robot.joint_upper[0] > 6.0
