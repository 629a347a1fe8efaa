"""manip_core.tool_frame: a tool frame fixed to a link of a description that lacks one (the MBM UR5's gripper).
Oracle: Pinocchio's forward kinematics of the original description, times the offset."""
import numpy as np
import pytest

from manip_core import RobotModel
from manip_core.robots import robot_path
from manip_core.tool_frame import with_tool_frame


def test_tool_frame_is_the_parent_frame_times_the_offset(tmp_path):
    pin = pytest.importorskip("pinocchio")
    ur5 = robot_path("ur5")
    xyz, rpy = (0.01, -0.02, 0.15), (0.0, 0.2, 0.3)
    derived = tmp_path / "ur5_tcp.urdf"
    derived.write_text(with_tool_frame(ur5, "tool0", xyz, rpy))
    model = RobotModel.from_urdf(str(derived), "base_link", "tcp")
    assert model.tip_link == "tcp" and model.dof == 6
    pm = pin.buildModelFromUrdf(str(ur5))
    pd = pm.createData()
    offset = pin.SE3(pin.rpy.rpyToMatrix(*rpy), np.array(xyz))
    rng = np.random.default_rng(3)
    for _ in range(5):
        q = rng.uniform(-np.pi, np.pi, 6)
        pin.framesForwardKinematics(pm, pd, q)
        expected = (pd.oMf[pm.getFrameId("base_link")].inverse() * pd.oMf[pm.getFrameId("tool0")] * offset)
        np.testing.assert_allclose(model.fk(q), expected.homogeneous, atol=1e-9)


def test_relative_meshes_made_absolute_and_errors(tmp_path):
    (tmp_path / "arm" / "meshes").mkdir(parents=True)
    urdf = tmp_path / "arm" / "a.urdf"
    (tmp_path / "arm" / "meshes" / "c.stl").write_text("solid c\nendsolid c\n")
    urdf.write_text('<robot name="a"><link name="b"><visual><geometry><mesh filename="meshes/b.stl"/></geometry>'
                    '</visual><collision><geometry><mesh filename="package://p/b.stl"/></geometry></collision>'
                    '<visual><geometry><mesh filename="package://meshes/c.stl"/></geometry></visual></link></robot>')
    text = with_tool_frame(urdf, "b", (0, 0, 0.1), name="tip")
    assert f'filename="{tmp_path / "arm" / "meshes" / "b.stl"}"' in text and 'filename="package://p/b.stl"' in text
    # a package:// URI that only resolves next to the original file (the MBM UR5's package://meshes/...)
    assert f'filename="{tmp_path / "arm" / "meshes" / "c.stl"}"' in text
    assert '<joint name="b-tip_fixed_joint" type="fixed">' in text
    with pytest.raises(ValueError, match=r"no link 'flange' to attach the tool frame to"):
        with_tool_frame(urdf, "flange", (0, 0, 0.1))
    with pytest.raises(ValueError, match=r"already has a link 'b'"):
        with_tool_frame(urdf, "b", (0, 0, 0.1), name="b")
    with pytest.raises(ValueError, match=r"3 finite numbers"):
        with_tool_frame(urdf, "b", (0, float("nan"), 0.1))
