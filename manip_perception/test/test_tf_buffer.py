"""tf_buffer: chains of static and dynamic transforms against products of scipy rotations (the oracle),
fed from real geometry_msgs/TransformStamped messages."""
from types import SimpleNamespace

import numpy as np
import pytest
from geometry_msgs.msg import TransformStamped
from scipy.spatial.transform import Rotation

from manip_perception.tf_buffer import TransformBuffer, TransformError


def _T(rotvec, t):
    T = np.eye(4)
    T[:3, :3] = Rotation.from_rotvec(rotvec).as_matrix()
    T[:3, 3] = t
    return T


def _msg(parent, child, T, sec=0):
    ts = TransformStamped()
    ts.header.frame_id, ts.child_frame_id = parent, child
    ts.header.stamp.sec = sec
    ts.transform.translation.x, ts.transform.translation.y, ts.transform.translation.z = (float(v) for v in T[:3, 3])
    x, y, z, w = Rotation.from_matrix(T[:3, :3]).as_quat()  # scipy: (x, y, z, w)
    ts.transform.rotation.x, ts.transform.rotation.y, ts.transform.rotation.z, ts.transform.rotation.w = x, y, z, w
    return ts


def test_chains_static_and_dynamic():
    rng = np.random.default_rng(0)
    T_base_mount = _T(rng.normal(size=3), rng.normal(size=3))
    T_mount_cam = _T(rng.normal(size=3), rng.normal(size=3))
    T_cam_opt = _T([-np.pi / 2, 0, 0], [0, 0.06, 0])
    T_base_tool = _T(rng.normal(size=3), rng.normal(size=3))
    buf = TransformBuffer()
    n = buf.add_message(SimpleNamespace(transforms=[_msg('base_link', 'mount', T_base_mount),
                                                    _msg('/mount', 'camera', T_mount_cam),
                                                    _msg('camera', 'camera_optical', T_cam_opt)]), static=True)
    assert n == 3
    buf.add_message(SimpleNamespace(transforms=[_msg('base_link', 'tool0', T_base_tool, sec=5)]))
    expected = T_base_mount @ T_mount_cam @ T_cam_opt
    np.testing.assert_allclose(buf.lookup('base_link', 'camera_optical'), expected, atol=1e-12)
    np.testing.assert_allclose(buf.lookup('camera_optical', 'base_link'), np.linalg.inv(expected), atol=1e-12)
    # Through the common ancestor: optical frame in the tool frame.
    np.testing.assert_allclose(buf.lookup('tool0', 'camera_optical'), np.linalg.inv(T_base_tool) @ expected,
                               atol=1e-12)
    np.testing.assert_allclose(buf.lookup('mount', 'mount'), np.eye(4))
    # The latest dynamic transform replaces the previous one, and overrides a static one of the same child.
    T2 = _T([0, 0, 0.3], [1, 2, 3])
    buf.add_message(SimpleNamespace(transforms=[_msg('base_link', 'tool0', T2, sec=6)]))
    np.testing.assert_allclose(buf.lookup('base_link', 'tool0'), T2, atol=1e-12)
    buf.add_message(SimpleNamespace(transforms=[_msg('base_link', 'mount', np.eye(4))]))
    np.testing.assert_allclose(buf.lookup('base_link', 'camera_optical'), T_mount_cam @ T_cam_opt, atol=1e-12)
    assert buf.frames() == {'base_link', 'mount', 'camera', 'camera_optical', 'tool0'}


def test_missing_and_invalid():
    buf = TransformBuffer()
    with pytest.raises(TransformError, match="no transform chain between 'base_link' and 'cam'.*none"):
        buf.lookup('base_link', 'cam')
    buf.set_transform('world', 'base_link', np.eye(4), static=True)
    buf.set_transform('other_root', 'cam', np.eye(4), static=True)
    assert not buf.can_transform('base_link', 'cam')
    with pytest.raises(TransformError, match='known frames: base_link, cam, other_root, world'):
        buf.lookup('base_link', 'cam')
    bad = _msg('world', 'x', np.eye(4))
    bad.transform.rotation.w = 0.0  # zero quaternion: skipped, not stored
    assert buf.add_message(SimpleNamespace(transforms=[bad])) == 0
    with pytest.raises(TransformError, match='two different frame names'):
        buf.set_transform('a', 'a', np.eye(4))
    buf.set_transform('b', 'a', np.eye(4))
    buf.set_transform('a', 'b', np.eye(4), static=True)  # b's parent is a, a's parent is b: a loop
    with pytest.raises(TransformError, match='loop'):
        buf.lookup('a', 'world')


def test_poses_in_holds_every_connected_frame_and_no_other():
    rng = np.random.default_rng(3)
    T_base_mount = _T(rng.normal(size=3), rng.normal(size=3))
    T_mount_cam = _T(rng.normal(size=3), rng.normal(size=3))
    T_base_tool = _T(rng.normal(size=3), rng.normal(size=3))
    buf = TransformBuffer()
    buf.add_message(SimpleNamespace(transforms=[_msg('base_link', 'mount', T_base_mount),
                                                _msg('mount', 'camera', T_mount_cam),
                                                _msg('map', 'odom', _T([0, 0, 1], [1, 2, 3]))]), static=True)
    buf.add_message(SimpleNamespace(transforms=[_msg('base_link', 'tool', T_base_tool)]))
    poses = buf.poses_in('base_link')
    assert set(poses) == {'base_link', 'mount', 'camera', 'tool'}   # map and odom: another tree
    np.testing.assert_allclose(poses['base_link'], np.eye(4))
    np.testing.assert_allclose(poses['camera'], T_base_mount @ T_mount_cam, atol=1e-12)
    np.testing.assert_allclose(poses['tool'], T_base_tool, atol=1e-12)
    # seen from the camera, the base is the inverse chain
    np.testing.assert_allclose(buf.poses_in('camera')['base_link'], np.linalg.inv(T_base_mount @ T_mount_cam),
                               atol=1e-12)
