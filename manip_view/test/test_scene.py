"""manip_view library: link poses, readout and skeleton against Pinocchio; URDF shapes and camera closed forms."""
import math

import numpy as np
import pinocchio as pin
import pytest

from manip_core.errors import ModelError
from manip_core.reference_robots import example_robot
from manip_core.robots import robot_path
from manip_view.camera import project
from manip_view.geometry import parse_link_shapes, segment_pose, shape_mesh
from manip_view.scene import RobotScene, load_robot

BUNDLED = ["ur5", "ypp3", "planar2r", "arm3"]
UR5_REL = "ur_description/urdf/ur5_robot.urdf"


def pin_frames(urdf_path, q):
    """{frame name: 4x4} from Pinocchio (the independent oracle) at q."""
    model = pin.buildModelFromUrdf(str(urdf_path))
    data = model.createData()
    pin.framesForwardKinematics(model, data, np.asarray(q))
    return model, data, {model.frames[i].name: data.oMf[i].homogeneous for i in range(len(model.frames))}


@pytest.mark.parametrize("rel", [None, UR5_REL])
def test_link_poses_and_readout_match_pinocchio(rel):
    path = robot_path("ur5") if rel is None else example_robot(rel)
    robot, urdf = load_robot(str(path))
    scene = RobotScene(robot, urdf)
    rng = np.random.default_rng(7)
    for _ in range(4):
        q = rng.uniform(-2.5, 2.5, robot.dof)
        model, data, frames = pin_frames(path, q)
        poses = scene.link_poses(q)
        T_base_inv = np.linalg.inv(frames[robot.base_link])
        for link, T in poses.items():
            np.testing.assert_allclose(T, T_base_inv @ frames[link], atol=1e-9, err_msg=link)
        r = scene.readout(q)
        T_tip = T_base_inv @ frames[robot.tip_link]
        np.testing.assert_allclose(r.position_m, T_tip[:3, 3], atol=1e-9)
        np.testing.assert_allclose(pin.Quaternion(r.quat_wxyz[0], *r.quat_wxyz[1:]).matrix(), T_tip[:3, :3],
                                   atol=1e-9)
        fid = model.getFrameId(robot.tip_link)
        J = pin.computeFrameJacobian(model, data, np.asarray(q), fid, pin.LOCAL)  # [v; omega] in the tip frame
        s = np.linalg.svd(J, compute_uv=False)
        assert r.manipulability == pytest.approx(np.prod(s), rel=1e-7)
        assert r.condition_number == pytest.approx(s[0] / s[-1], rel=1e-7)
        text = r.markdown(robot.base_link, robot.tip_link)
        assert f"x {T_tip[0, 3]:+.4f} y {T_tip[1, 3]:+.4f} z {T_tip[2, 3]:+.4f}" in text


def test_singular_pose_reads_singular():
    robot, urdf = load_robot("ur5")
    r = RobotScene(robot, urdf).readout(np.zeros(6))  # UR5 at zero: wrist and shoulder singular
    assert r.manipulability < 1e-12
    assert "condition number: singular" in r.markdown("b", "t")


@pytest.mark.parametrize("name", BUNDLED)
def test_skeleton_joins_every_link_origin(name):
    robot, urdf = load_robot(name)
    scene = RobotScene(robot, urdf)
    if name == "ur5":   # the bundled UR5 carries cylinders, the same as visual and collision shapes
        vis, col = scene.shapes("visual"), scene.shapes("collision")
        assert len(vis) == 7 and {k: [(s.kind, s.size) for s in v] for k, v in vis.items()} == \
            {k: [(s.kind, s.size) for s in v] for k, v in col.items()}
    else:               # the other bundled descriptions carry no geometry
        assert scene.shapes("visual") == {}
    assert len(scene.segments) == len(scene.links) - 1  # a tree over the drawn links
    q = scene.clip(np.random.default_rng(1).uniform(-1, 1, robot.dof))
    poses = scene.link_poses(q)
    for parent, child, T, length in scene.skeleton(q):
        a, b = poses[parent][:3, 3], poses[child][:3, 3]
        assert length == pytest.approx(np.linalg.norm(b - a), abs=1e-12)
        np.testing.assert_allclose(T[:3, 3] - 0.5 * length * T[:3, 2], a, atol=1e-12)
        np.testing.assert_allclose(T[:3, 3] + 0.5 * length * T[:3, 2], b, atol=1e-12)
        np.testing.assert_allclose(T[:3, :3].T @ T[:3, :3], np.eye(3), atol=1e-12)
        assert np.linalg.det(T[:3, :3]) == pytest.approx(1.0)
    assert 0.005 <= scene.skeleton_radius_m <= 0.06


@pytest.mark.parametrize("name", BUNDLED)
def test_rigid_segments_ride_on_their_parent_link(name):
    """The segments drawn once under their parent link's frame land where skeleton(q) puts them at any q, and a
    segment is rigid exactly when its child hangs on a joint that is not prismatic."""
    robot, urdf = load_robot(name)
    scene = RobotScene(robot, urdf)
    rigid = scene.rigid_segments()
    tree = robot.tree
    for k, (_, child) in enumerate(scene.segments):
        j = tree.parent_joint[child]
        joint = tree.joints[j] if isinstance(j, str) else j
        assert (k in [r[0] for r in rigid]) == (joint.type != "prismatic"), (name, child, joint.type)
    rng = np.random.default_rng(7)
    for _ in range(3):
        q = scene.clip(rng.uniform(-2, 2, robot.dof))
        poses, skel = scene.link_poses(q), scene.skeleton(q)
        for k, parent, T_local, length in rigid:
            T = poses[parent] @ T_local  # a cylinder: its centre and axis matter, not its spin about the axis
            np.testing.assert_allclose(T[:3, 3], skel[k][2][:3, 3], atol=1e-9)
            if length > 1e-9:  # a zero-length segment (coincident origins) has no axis
                np.testing.assert_allclose(T[:3, 2], skel[k][2][:3, 2], atol=1e-9)
            assert length == pytest.approx(skel[k][3], abs=1e-9)


URDF = """<robot name="shapes">
  <material name="blue"><color rgba="0 0 1 1"/></material>
  <link name="base"><visual><origin xyz="0 0 0.1" rpy="0 1.5707963267948966 0"/>
      <geometry><cylinder radius="0.05" length="0.2"/></geometry><material name="blue"/></visual>
    <collision><geometry><box size="0.1 0.2 0.3"/></geometry></collision></link>
  <link name="arm"><visual><geometry><sphere radius="0.03"/></geometry></visual>
    <visual><geometry><mesh filename="package://nowhere/arm.stl"/></geometry></visual></link>
  <joint name="j" type="continuous"><parent link="base"/><child link="arm"/><origin xyz="0 0 0.3"/>
    <axis xyz="0 0 1"/></joint>
</robot>"""


def test_urdf_shapes_and_their_meshes(tmp_path):
    f = tmp_path / "shapes.urdf"
    f.write_text(URDF)
    vis = parse_link_shapes(str(f), "visual")
    assert [s.kind for s in vis["base"]] == ["cylinder"] and [s.kind for s in vis["arm"]] == ["sphere"]  # mesh: absent
    assert vis["base"][0].rgba == (0.0, 0.0, 1.0, 1.0)
    v, faces = shape_mesh(vis["base"][0])
    # Cylinder along z turned by pitch 90 deg: its axis is base x, centred at z = 0.1.
    assert np.abs(v[:, 0]).max() == pytest.approx(0.1)
    np.testing.assert_array_less(np.hypot(v[:, 1], v[:, 2] - 0.1), 0.05 + 1e-9)
    col = parse_link_shapes(str(f), "collision")
    v, _ = shape_mesh(col["base"][0])
    np.testing.assert_allclose(v.max(axis=0) - v.min(axis=0), [0.1, 0.2, 0.3])
    robot, urdf = load_robot(str(f))
    scene = RobotScene(robot, urdf)
    assert scene.slider_ranges() == [("j", -math.pi, math.pi)]  # continuous: +-pi
    assert set(scene.meshes("visual")) == {"base", "arm"}


def test_visual_meshes_that_cannot_be_read_fall_back_to_collision_meshes():
    robot, urdf = load_robot(str(example_robot(UR5_REL)))  # COLLADA visuals (no pycollada), STL collisions
    meshes = RobotScene(robot, urdf).meshes("visual")
    assert {"shoulder_link", "forearm_link", "wrist_3_link"} <= set(meshes)
    v, f, _ = meshes["forearm_link"][0]
    assert len(f) > 100 and 0.3 < np.ptp(v, axis=0).max() < 0.5  # the forearm mesh (0.39 m between joints)


@pytest.mark.parametrize("bad, what", [
    ('<robot name="r"><link name="a"><visual><geometry><box size="1 2"/></geometry></visual></link></robot>',
     "expected 3 finite numbers"),
    ('<robot name="r"><link name="a"><visual><geometry><cone/></geometry></visual></link></robot>',
     "unsupported geometry <cone>"),
    ('<robot name="r"><link name="a"><visual><geometry><sphere radius="-1"/></geometry></visual></link></robot>',
     "must be positive"),
    ('<robot name="r"><link name="a"><visual></visual></link></robot>', "no <geometry>"),
])
def test_malformed_geometry_names_the_element(bad, what):
    with pytest.raises(ModelError, match=what) as e:
        parse_link_shapes(bad)
    assert "link 'a' visual #0" in str(e.value)


def test_projection_closed_forms():
    pos, look, fov, w, h = np.array([2.0, -1.0, 1.5]), np.array([0.1, 0.2, 0.3]), math.radians(50), 1000, 600
    assert project(look, pos, look, fov, w, h)[0] == pytest.approx([500, 300])
    d = np.linalg.norm(look - pos)
    fwd = (look - pos) / d
    right = np.cross(fwd, [0, 0, 1])
    right /= np.linalg.norm(right)
    up = np.cross(right, fwd)
    top = look + d * math.tan(fov / 2) * up  # on the top edge of the image
    assert project(top, pos, look, fov, w, h)[0] == pytest.approx([500, 0], abs=1e-9)
    x = look + 0.2 * right  # f = (h / 2) / tan(fov / 2) pixels per unit of x / depth
    assert project(x, pos, look, fov, w, h)[0] == pytest.approx([500 + 300 / math.tan(fov / 2) * 0.2 / d, 300])
    assert np.isnan(project(pos - fwd, pos, look, fov, w, h)).all()  # behind the camera


@pytest.mark.parametrize("name", BUNDLED)
def test_default_camera_sees_every_link_at_any_pose(name):
    robot, urdf = load_robot(name)
    scene = RobotScene(robot, urdf)
    pos, look, fov = scene.default_camera()
    rng = np.random.default_rng(2)
    lo, hi = zip(*[(a, b) for _, a, b in scene.slider_ranges()])
    for _ in range(20):
        q = rng.uniform(lo, hi)
        pts = np.array([T[:3, 3] for T in scene.link_poses(q).values()])
        uv = project(pts, pos, look, fov, 1280, 800)
        assert np.all((uv[:, 0] > 0) & (uv[:, 0] < 1280) & (uv[:, 1] > 0) & (uv[:, 1] < 800)), (q, uv)


def test_segment_pose_of_a_vertical_segment():
    T, length = segment_pose([0, 0, 0], [0, 0, -2])
    assert length == 2 and T[:3, 2] == pytest.approx([0, 0, -1]) and T[:3, 3] == pytest.approx([0, 0, -1])
