"""manip_core.ready_pose: the derived ready configuration puts the tool down at the work point (Pinocchio's FK
of the URDF as the oracle), keeps every link above the base plane, and has the best manipulability of the
closed-form solutions (UR5: every tool-down solution at the point, by ik_all)."""
import math
import sysconfig
from pathlib import Path

import numpy as np
import pytest

from manip_core import RobotModel
from manip_core.ready_pose import horizontal_reach, ready_configuration, tool_down_rotation

XARM7 = Path(sysconfig.get_paths()["purelib"]) / \
    "cmeel.prefix/share/example-robot-data/robots/xarm_description/urdf/xarm7.urdf"


@pytest.mark.parametrize("axis", [(0, 0, 1), (1, 0, 0), (0, -1, 0), (0, 0, -1)])
def test_tool_down_rotation_points_the_axis_down(axis):
    for yaw in (0.0, 1.0):
        R = tool_down_rotation(axis, yaw)
        np.testing.assert_allclose(R @ R.T, np.eye(3), atol=1e-12)
        assert abs(np.linalg.det(R) - 1) < 1e-12
        np.testing.assert_allclose(R @ np.asarray(axis, float), [0, 0, -1], atol=1e-12)


def _pin_fk(path, base, tip, names, q):
    pin = pytest.importorskip("pinocchio")
    m = pin.buildModelFromUrdf(str(path))
    d = m.createData()
    qq = pin.neutral(m)
    for n, v in zip(names, q):
        qq[m.joints[m.getJointId(n)].idx_q] = v
    pin.framesForwardKinematics(m, d, qq)
    return np.linalg.inv(d.oMf[m.getFrameId(base)].homogeneous) @ d.oMf[m.getFrameId(tip)].homogeneous


@pytest.mark.parametrize("which", ["ur5", pytest.param("xarm7", marks=pytest.mark.slow)])
def test_ready_configuration_tool_down_at_the_work_point(which):
    if which == "ur5":
        from manip_core.robots import robot_path
        path, base, tip = robot_path("ur5"), "base_link", "tool0"
    else:
        path, base, tip = XARM7, "link_base", "link_eef"
    robot = RobotModel.from_urdf(str(path), base, tip)
    reach = horizontal_reach(robot)
    ready = ready_configuration(robot)
    assert ready.tool_down and ready.candidates > 0
    np.testing.assert_allclose(ready.target_m, [0.5 * reach, 0.0, 0.35 * reach])
    T = _pin_fk(path, base, tip, robot.joint_names, ready.q)
    np.testing.assert_allclose(T[:3, 2], [0, 0, -1], atol=1e-4)
    np.testing.assert_allclose(T[:3, 3], ready.target_m, atol=1e-4)
    assert robot.within_limits(ready.q)
    assert all(robot.fk(ready.q, link)[2, 3] >= 0.0 for link in robot.link_names)
    # deterministic: the simulator and pick_place derive the same configuration
    np.testing.assert_array_equal(ready_configuration(robot).q, ready.q)
    if which == "ur5":
        # no closed-form tool-down solution (any of 8 yaws) above the floor has a better manipulability
        for i in range(8):
            Tt = np.eye(4)
            Tt[:3, :3] = tool_down_rotation((0, 0, 1), 2 * math.pi * i / 8)
            Tt[:3, 3] = ready.target_m
            for q in robot.ik_all(Tt):
                if all(robot.fk(q, link)[2, 3] >= 0.0 for link in robot.link_names):
                    assert robot.manipulability(q) <= ready.manipulability + 1e-9
