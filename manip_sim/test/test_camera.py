"""manip_sim.camera: the pinhole model, and the stereo pair rendered by the mirror process: the disparity
of a known object equals fx * B / Z from the ground truth."""
from pathlib import Path

import numpy as np
import pytest
import yaml

from manip_sim.camera import RenderProcess, StereoCamera, right_frame_name
from manip_sim.scene import load_scene
from manip_sim.world import World

CONFIG = Path(__file__).resolve().parents[1] / "config"


def _camera(**over):
    p = yaml.safe_load((CONFIG / "stereo_camera.yaml").read_text())["/**"]["ros__parameters"]
    kw = dict(position=tuple(p["camera_position"]), orientation_xyzw=tuple(p["camera_orientation_xyzw"]),
              baseline=p["stereo_baseline"], width=p["image_width"], height=p["image_height"],
              hfov_deg=p["horizontal_fov_deg"], frame_id=p["camera_frame"],
              right_frame_id=right_frame_name(p["camera_frame"]))
    kw.update(over)
    return StereoCamera(**kw)


def test_intrinsics_and_projection():
    c = _camera()
    assert c.fx == pytest.approx(320 / np.tan(np.radians(35)))
    assert (c.cx, c.cy) == (319.5, 239.5)
    K = c.K()
    assert np.allclose(c.P()[:, :3], K) and np.allclose(c.P()[:, 3], 0)
    assert c.P(right=True)[0, 3] == pytest.approx(-c.fx * 0.12)
    assert c.right_frame_id == "stereo_right_optical"
    # Right camera: shifted by the baseline along the left optical x, same orientation.
    assert np.allclose(c.pose(True)[:3, :3], c.pose()[:3, :3])
    assert np.allclose(c.pose(True)[:3, 3] - c.pose()[:3, 3], 0.12 * c.pose()[:3, 0])
    p = np.array([0.45, -0.25, 0.02])
    ul, vl, z = c.project(p)
    ur, vr, zr = c.project(p, right=True)
    assert vl == pytest.approx(vr) and z == pytest.approx(zr)
    assert ul - ur == pytest.approx(c.fx * c.baseline / z)
    assert 0 <= ul < c.width and 0 <= vl < c.height and z > 0
    with pytest.raises(ValueError):
        _camera(hfov_deg=0.0)
    with pytest.raises(ValueError):
        _camera(orientation_xyzw=(0, 0, 0, 2))


def test_right_frame_name():
    assert right_frame_name("stereo_left_optical") == "stereo_right_optical"
    assert right_frame_name("cam_optical") == "cam_optical_right"


@pytest.mark.parametrize("size", [(640, 480), (101, 77)])
def test_rendering_matches_the_published_intrinsics(size):
    """Back-project the depth buffer of the table with K: the table plane comes out at z = 0 (a half-pixel
    error in cx or cy would tilt or lift it by about a millimetre). The camera is rolled by 25 degrees so
    that both cx and cy matter."""
    from manip_sim.camera import SceneMirror
    from manip_sim.transforms import matrix_to_quat, quat_to_matrix
    from manip_sim.world import import_pybullet

    pb = import_pybullet()

    a = np.radians(25.0)
    roll = np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]])
    base = _camera()
    cam = _camera(position=(0.25, -0.9, 0.7), width=size[0], height=size[1],
                  orientation_xyzw=tuple(matrix_to_quat(quat_to_matrix(base.orientation_xyzw) @ roll)))
    mirror = SceneMirror(load_scene(CONFIG / "pick_place_scene.yaml"), cam)
    try:
        for right in (False, True):
            _, _, _, depth, _ = pb.getCameraImage(cam.width, cam.height, cam.view_matrix(np.eye(4), right),
                                                  cam.projection_matrix(), renderer=pb.ER_TINY_RENDERER,
                                                  physicsClientId=mirror.client)
            buf = np.asarray(depth, dtype=float).reshape(cam.height, cam.width)
            Z = cam.far * cam.near / (cam.far - (cam.far - cam.near) * buf)
            T = cam.pose(right)
            v, u = np.mgrid[0:cam.height, 0:cam.width]
            pts = np.stack([(u - cam.cx) * Z / cam.fx, (v - cam.cy) * Z / cam.fy, Z], axis=-1)
            z_base = pts @ T[2, :3] + T[2, 3]
            table = (np.abs(z_base) < 0.005) & (Z < 3.0)
            assert table.sum() > 0.3 * table.size
            assert abs(z_base[table].mean()) < 5e-5, z_base[table].mean()
    finally:
        mirror.close()


def _red_centroid(img):
    rgb = img.astype(float)
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    mask = (r > 50) & (r > 2.5 * g) & (r > 2.5 * b)
    assert mask.sum() > 20, "the red cube is not in the image"
    v, u = np.nonzero(mask)
    return u.mean(), v.mean(), mask.sum()


def test_rendered_pair_disparity_matches_ground_truth():
    scene = load_scene(CONFIG / "pick_place_scene.yaml")
    cam = _camera()
    with World(scene, command_timeout=0.2) as world, RenderProcess(scene, cam, start_timeout=60) as renderer:
        world.step(50)
        for cube_xy in (None, (0.30, -0.42)):            # where the scene puts it, then moved closer
            state = world.render_state()
            if cube_xy is not None:                      # move it in the mirror only (as a pose message)
                pos, orn = state["bodies"]["cube"]
                state["bodies"]["cube"] = ((cube_xy[0], cube_xy[1], pos[2]), orn)
            assert renderer.request(world.time, state)
            assert not renderer.request(world.time, state)   # busy: one pair at a time
            frame = None
            for _ in range(300):
                frame = renderer.poll(0.2)
                if frame is not None:
                    break
            assert frame is not None, renderer.error
            assert frame.stamp == pytest.approx(world.time)
            assert frame.left.shape == frame.right.shape == (cam.height, cam.width, 3)
            assert frame.left.dtype == np.uint8
            centre = np.array(state["bodies"]["cube"][0])   # world = base frame in this scene
            ul, vl, z = cam.project(centre)
            expected = cam.fx * cam.baseline / z
            (u1, v1, n1), (u2, v2, n2) = _red_centroid(frame.left), _red_centroid(frame.right)
            assert abs(u1 - ul) < 3.0 and abs(v1 - vl) < 3.0, (u1, v1, ul, vl)
            assert abs(v1 - v2) < 0.5                       # rectified: same rows
            assert abs((u1 - u2) - expected) < 0.5, (u1 - u2, expected)
            assert abs(n1 - n2) < 0.2 * n1
        assert 40 < expected < 120
