"""Workspace-level checks: package manifests, the manip_msgs interfaces, CDR round trip."""

import math
from pathlib import Path

import pytest
from catkin_pkg.package import parse_package

ROOT = Path(__file__).resolve().parents[1]

BUILD_TYPES = {
    'manip_msgs': 'ament_cmake',
    'manip_core': 'ament_python',
    'manip_planning': 'ament_python',
    'manip_control': 'ament_python',
    'manip_perception': 'ament_python',
    'manip_sim': 'ament_python',
    'manip_design': 'ament_python',
    'manip_view': 'ament_python',
}

# Field name -> rosidl type string, in declaration order.
ROBOT_MODEL_FIELDS = {
    'header': 'std_msgs/Header',
    'name': 'string',
    'base_link': 'string',
    'tip_link': 'string',
    'joint_names': 'sequence<string>',
    'joint_types': 'sequence<string>',
    'lower_limits': 'sequence<double>',
    'upper_limits': 'sequence<double>',
    'velocity_limits': 'sequence<double>',
    'effort_limits': 'sequence<double>',
    'screw_axes_space': 'sequence<double>',
    'home_pose': 'geometry_msgs/Pose',
    'link_masses': 'sequence<double>',
}


def test_every_package_is_known():
    found = {p.parent.name for p in ROOT.glob('*/package.xml')}
    assert found == set(BUILD_TYPES)


@pytest.mark.parametrize('name', sorted(BUILD_TYPES))
def test_package_xml(name):
    pkg = parse_package(str(ROOT / name / 'package.xml'))  # validates strictly
    assert pkg.name == name
    assert pkg.package_format == 3
    assert pkg.get_build_type() == BUILD_TYPES[name]
    assert [(m.name, m.email) for m in pkg.maintainers] == [
        ('manip maintainers', 'maintainers@manip-robotics.org')]
    assert pkg.licenses == ['Apache-2.0']
    buildtools = {d.name for d in pkg.buildtool_depends}
    if BUILD_TYPES[name] == 'ament_python':
        assert buildtools == {'ament_python'}
        # a package with ROS nodes runs on rclpy; manip_design is a library + CLI without nodes
        uses_rclpy = any('rclpy' in f.read_text() for f in (ROOT / name / name).rglob('*.py'))
        assert ('rclpy' in {d.name for d in pkg.exec_depends}) == uses_rclpy
        assert (ROOT / name / 'resource' / name).is_file()
        assert (ROOT / name / 'setup.cfg').read_text().count(f'$base/lib/{name}') == 2
    else:
        assert buildtools == {'ament_cmake', 'rosidl_default_generators'}
        assert 'rosidl_default_runtime' in {d.name for d in pkg.exec_depends}
        assert [g.name for g in pkg.member_of_groups] == ['rosidl_interface_packages']


def test_robot_model_fields():
    from manip_msgs.msg import RobotModel

    assert RobotModel.get_fields_and_field_types() == ROBOT_MODEL_FIELDS
    assert list(RobotModel.get_fields_and_field_types()) == list(ROBOT_MODEL_FIELDS)


def test_get_robot_model_service():
    from manip_msgs.msg import RobotModel
    from manip_msgs.srv import GetRobotModel

    assert GetRobotModel.Request.get_fields_and_field_types() == {}
    assert GetRobotModel.Response.get_fields_and_field_types() == {
        'model': 'manip_msgs/RobotModel', 'success': 'boolean', 'message': 'string'}
    assert isinstance(GetRobotModel.Response().model, RobotModel)


def _sample_model():
    from manip_msgs.msg import RobotModel

    dof = 6
    msg = RobotModel()
    msg.header.stamp.sec = 1_700_000_000
    msg.header.stamp.nanosec = 123_456_789
    msg.header.frame_id = 'base_link'
    msg.name = 'ur5'
    msg.base_link = 'base_link'
    msg.tip_link = 'tool0'
    msg.joint_names = [f'joint_{i}' for i in range(dof)]
    msg.joint_types = ['revolute', 'revolute', 'continuous', 'revolute', 'revolute', 'prismatic']
    msg.lower_limits = [-2 * math.pi + 0.1 * i for i in range(dof)]
    msg.upper_limits = [2 * math.pi - 0.1 * i for i in range(dof)]
    msg.velocity_limits = [3.15, 3.15, 3.15, 3.2, 3.2, 0.25]
    msg.effort_limits = [150.0, 150.0, 150.0, 28.0, 28.0, 100.0]
    msg.screw_axes_space = [0.001 * k - 0.017 for k in range(6 * dof)]
    msg.home_pose.position.x = 0.817
    msg.home_pose.position.y = 0.191
    msg.home_pose.position.z = -0.005
    msg.home_pose.orientation.x = 0.0
    msg.home_pose.orientation.y = math.sqrt(0.5)
    msg.home_pose.orientation.z = math.sqrt(0.5)
    msg.home_pose.orientation.w = 0.0
    msg.link_masses = [3.7, 8.393, 2.275, 1.219, 1.219, 0.1879]
    return msg


def test_robot_model_cdr_round_trip():
    from manip_msgs.msg import RobotModel
    from rclpy.serialization import deserialize_message, serialize_message

    msg = _sample_model()
    raw = serialize_message(msg)
    assert isinstance(raw, bytes) and len(raw) > 8 * 6 * 6
    back = deserialize_message(raw, RobotModel)
    assert back == msg
    for field in ROBOT_MODEL_FIELDS:
        a, b = getattr(back, field), getattr(msg, field)
        if ROBOT_MODEL_FIELDS[field].startswith('sequence<'):
            assert list(a) == list(b), field
        else:
            assert a == b, field
    assert len(back.screw_axes_space) == 6 * len(back.joint_names)
    assert back.header.stamp.nanosec == 123_456_789
    assert back.home_pose.orientation.y == math.sqrt(0.5)
