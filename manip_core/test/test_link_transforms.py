"""link_transforms (robot_state_publisher semantics) against Pinocchio's frame placements."""
import numpy as np
import pinocchio as pin
import pytest
from scipy.spatial.transform import Rotation

from manip_core.errors import InputError
from manip_core.link_transforms import LinkTransforms, to_translation_quat_xyzw
from manip_core.reference_robots import example_robot

PANDA_REL = "panda_description/urdf/panda.urdf"
UR5_REL = "ur_description/urdf/ur5_robot.urdf"


def chain_pose(transforms, root, link):
    """Pose of ``link`` in ``root`` composed from T_parent_child transforms (dict child -> (parent, T))."""
    T = np.eye(4)
    while link != root:
        parent, T_pc = transforms[link]
        T = T_pc @ T
        link = parent
    return T


@pytest.mark.parametrize("rel", [UR5_REL, PANDA_REL])
def test_every_link_frame_matches_pinocchio(rel):
    path = str(example_robot(rel))
    lt = LinkTransforms.from_urdf(path)
    model = pin.buildModelFromUrdf(path)
    data = model.createData()
    rng = np.random.default_rng(3)
    for _ in range(5):
        q = pin.randomConfiguration(model, np.maximum(model.lowerPositionLimit, -3.0),
                                    np.minimum(model.upperPositionLimit, 3.0))
        for j in lt.tree.joints.values():  # Pinocchio reads <mimic> joints as independent: make them follow
            if j.mimic is not None and model.existJointName(j.name):
                q[model.joints[model.getJointId(j.name)].idx_q] = (
                    j.mimic.multiplier * q[model.joints[model.getJointId(j.mimic.joint)].idx_q] + j.mimic.offset)
        pin.framesForwardKinematics(model, data, q)
        names = [model.names[i] for i in range(1, model.njoints)]
        values = [q[model.joints[i].idx_q] for i in range(1, model.njoints)]
        order = rng.permutation(len(names))  # joint_states in any order, with an extra joint
        moving, missing = lt.moving_transforms([names[i] for i in order] + ["not_in_urdf"],
                                               [values[i] for i in order] + [0.0])
        assert missing == []
        tf = {t.child: (t.parent, t.matrix) for t in lt.static_transforms() + moving}
        root = lt.tree.root
        n_links = 0
        for f in model.frames:
            if f.type != pin.FrameType.BODY or f.name == root:
                continue
            np.testing.assert_allclose(chain_pose(tf, root, f.name), data.oMf[model.getFrameId(f.name)].homogeneous,
                                       atol=1e-9, err_msg=f.name)
            n_links += 1
        assert n_links == len(lt.tree.links) - 1


def test_fixed_joints_are_static_and_missing_joints_are_not_published():
    lt = LinkTransforms.from_urdf(str(example_robot(UR5_REL)))
    fixed = {t.joint for t in lt.static_transforms()}
    assert {j for j, v in lt.tree.joints.items() if v.type == "fixed"} == fixed and fixed
    moving, missing = lt.moving_transforms(["shoulder_pan_joint"], [0.3])
    assert [t.joint for t in moving] == ["shoulder_pan_joint"]
    assert len(missing) == 5 and "elbow_joint" in missing
    with pytest.raises(InputError, match="2 joint names for 1 positions"):
        lt.moving_transforms(["a", "b"], [0.0])
    with pytest.raises(InputError, match="shoulder_pan_joint is nan"):
        lt.moving_transforms(["shoulder_pan_joint"], [float("nan")])


MIMIC_URDF = """<robot name="g">
  <link name="base"/><link name="slider"/><link name="finger"/><link name="tip"/>
  <joint name="slide" type="prismatic"><parent link="base"/><child link="slider"/>
    <origin xyz="0.1 0 0.2" rpy="0 0 0.5"/><axis xyz="0 1 1"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
  <joint name="finger_joint" type="revolute"><parent link="slider"/><child link="finger"/>
    <origin xyz="0 0 0.05"/><axis xyz="1 0 0"/><limit lower="-3" upper="3" effort="1" velocity="1"/>
    <mimic joint="slide" multiplier="-2.0" offset="0.1"/></joint>
  <joint name="tip_joint" type="fixed"><parent link="finger"/><child link="tip"/><origin xyz="0 0 0.1"/></joint>
</robot>"""


def test_prismatic_and_mimic_joints():
    lt = LinkTransforms.from_urdf(MIMIC_URDF)
    assert lt.moving_joint_names == ["slide"]
    moving, missing = lt.moving_transforms(["slide"], [0.2])
    assert missing == []
    tf = {t.joint: t.matrix for t in moving}
    axis = np.array([0, 1, 1]) / np.sqrt(2)
    R0 = Rotation.from_euler("z", 0.5).as_matrix()
    np.testing.assert_allclose(tf["slide"][:3, 3], [0.1, 0, 0.2] + R0 @ (0.2 * axis), atol=1e-12)
    np.testing.assert_allclose(tf["finger_joint"][:3, :3], Rotation.from_rotvec([-2 * 0.2 + 0.1, 0, 0]).as_matrix(),
                               atol=1e-12)


def test_quaternion_order_is_xyzw():
    R = Rotation.from_euler("xyz", [0.3, -1.2, 2.9])
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = R.as_matrix(), [1, 2, 3]
    p, q = to_translation_quat_xyzw(T)
    assert p == (1.0, 2.0, 3.0)
    expected = R.as_quat()  # scipy: (x, y, z, w)
    expected = expected if expected[3] >= 0 else -expected
    np.testing.assert_allclose(q, expected, atol=1e-12)
