"""The obstacle chain on the simulator's own rendered scenes (manip_sim: its scene files, its textures, its
camera model and renderer), checked against the scene's ground truth (the bodies' poses and sizes).

* Block matching and the demo's 4 cm cube (pick_place_scene.yaml, the simulator's camera): the cube shows
  at most about 26 voxels of 1 cm (its top and the side facing the camera, above the plane margin), block
  matching yields 23; min_cluster_points 30 (the former default) dropped it (SGBM passed only through the
  voxels its smear adds at the cube's edges: 47).
* Shelf levels (shelf_scene.yaml with a box put on the shelf board, a camera that sees the board from above):
  with max_support_planes 2 the board is found as a second support level at its true height, the box on
  it is an obstacle of its own, and so is the board's surface; with 1 the box and the board are one cluster.
"""
import dataclasses
import importlib
import math
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from manip_perception.obstacles import ObstacleParams, detect_obstacles
from manip_perception.stereo import DisparityMatcher, SgbmParams, back_project, disparity_range, disparity_to_depth

PLANE_MARGIN = ObstacleParams().plane_margin
REPO = Path(__file__).resolve().parents[2]


def _sim(module):
    """manip_sim.<module>, from the venv or the source tree (conftest.py cannot be imported under
    --import-mode=importlib)."""
    try:
        return importlib.import_module(f'manip_sim.{module}')
    except ImportError:
        for pkg in ('manip_sim', 'manip_core'):
            if str(REPO / pkg) not in sys.path:
                sys.path.insert(0, str(REPO / pkg))
        return importlib.import_module(f'manip_sim.{module}')


def _render(scene, position, orientation_xyzw):
    """(left, right, camera) of the simulator's stereo camera at the pose, rendered as sim_bridge does."""
    cam_mod = _sim('camera')
    cam = cam_mod.StereoCamera(position=tuple(position), orientation_xyzw=tuple(orientation_xyzw), baseline=0.12)
    mirror = cam_mod.SceneMirror(scene, cam)
    try:
        left, right = mirror.render()
    finally:
        mirror.close()
    return left, right, cam


def _scene(name):
    scene_mod = _sim('scene')
    return scene_mod.load_scene(REPO / 'manip_sim' / 'config' / name)


def _points(left, right, cam, matcher, texture_threshold):
    block = 9 if matcher == 'bm' else 5
    lo, num = disparity_range(cam.fx, cam.baseline, 0.45, 3.0, 0, block)
    m = DisparityMatcher(SgbmParams(matcher=matcher, block_size=block, min_disparity=lo, num_disparities=num,
                                    texture_threshold=texture_threshold))
    g = [cv2.cvtColor(x, cv2.COLOR_RGB2GRAY) for x in (left, right)]
    return back_project(disparity_to_depth(m.compute(*g), cam.fx, cam.baseline), cam.fx, cam.fy, cam.cx, cam.cy,
                        max_depth=3.0, min_depth=0.45)


def _expected_centre(body, floor):
    """Centre of what a camera above sees of an axis-aligned body standing on a support at z = floor: its
    footprint, from floor + plane_margin up to its top."""
    c = np.array(body.position, float)
    top = c[2] + body.size[2] / 2
    c[2] = (max(floor + PLANE_MARGIN, c[2] - body.size[2] / 2) + top) / 2
    return c


def _inside(point, body, grow):
    half = np.asarray(body.size) / 2 + grow
    return bool(np.all(np.abs(np.asarray(point) - np.asarray(body.position)) <= half))


def _nearest(obstacles, point):
    return min(obstacles, key=lambda o: np.linalg.norm(o.center - point))


def demo_view():
    """(scene, left, right, camera): the simulator's demo scene through its own camera (stereo_camera.yaml)."""
    import yaml
    p = yaml.safe_load((REPO / 'manip_sim/config/stereo_camera.yaml').read_text())['/**']['ros__parameters']
    scene = _scene('pick_place_scene.yaml')
    return (scene, *_render(scene, p['camera_position'], p['camera_orientation_xyzw']))


def shelf_view():
    """(scene, left, right, camera): the shelf scene with a 8 x 6 x 10 cm box on the board (top at z = 0.49),
    seen by the simulator's camera from (0.45, -0.75, 1.0), looking along +y and 45 degrees down."""
    scene = _scene('shelf_scene.yaml')
    pillar = scene.body('pillar')
    box = dataclasses.replace(pillar, name='box_on_shelf', size=(0.08, 0.06, 0.10), position=(0.40, 0.28, 0.54))
    scene = dataclasses.replace(scene, obstacles=tuple(scene.obstacles) + (box,))
    a = -math.radians(90 + 45) / 2
    return (scene, *_render(scene, (0.45, -0.75, 1.0), (math.sin(a), 0.0, 0.0, math.cos(a))))


@pytest.fixture(scope='module')
def demo_points():
    scene, left, right, cam = demo_view()
    return scene, cam, _points(left, right, cam, 'bm', 0.0)


def test_block_matching_keeps_the_demo_cube(demo_points):
    """The node's real-camera defaults (block matching, no texture check) on the simulator's demo scene: the
    cube and the pillar, each within 1.5 cm of its visible centre, nothing else; with the former
    min_cluster_points of 30 the cube is lost (the cause of the simulated graph's missing cube)."""
    scene, cam, pts = demo_points
    params = ObstacleParams(camera_position=tuple(cam.position), camera_orientation_xyzw=tuple(cam.orientation_xyzw))
    det = detect_obstacles(pts, params)
    truth = [scene.body('cube'), scene.body('pillar')]
    assert len(det.obstacles) == 2, [(o.center, o.num_points) for o in det.obstacles]
    for body in truth:
        o = _nearest(det.obstacles, _expected_centre(body, 0.0))
        err = np.linalg.norm(o.center - _expected_centre(body, 0.0))
        assert err < 0.015, f"{body.name}: centre {o.center} is {err:.3f} m off"
    cube = _nearest(det.obstacles, _expected_centre(truth[0], 0.0))
    assert params.min_cluster_points <= cube.num_points < 30, cube.num_points
    former = detect_obstacles(pts, dataclasses.replace(params, min_cluster_points=30))
    assert len(former.obstacles) == 1 and _inside(former.obstacles[0].center, truth[1], 0.02)


@pytest.fixture(scope='module')
def shelf():
    """shelf_view() through SGBM with the simulator's texture check, as the simulated graph runs it."""
    scene, left, right, cam = shelf_view()
    params = ObstacleParams(camera_position=tuple(cam.position), camera_orientation_xyzw=tuple(cam.orientation_xyzw))
    return scene, params, _points(left, right, cam, 'sgbm', 1.5)


def test_shelf_level_on_rendered_stereo(shelf):
    scene, params, pts = shelf
    board = scene.body('shelf_board')
    board_top = board.position[2] + board.size[2] / 2
    det = detect_obstacles(pts, dataclasses.replace(params, max_support_planes=2))
    assert det.counts['support_planes'] == 2
    assert abs(det.plane.height_at(0.45, 0.0)) < 0.005
    assert abs(det.more_planes[0].height_at(*board.position[:2]) - board_top) < 0.01
    described = [(o.center.round(3).tolist(), o.size.round(3).tolist()) for o in det.obstacles]
    # Each body whose footprint is fully seen: within 1.5 cm of its visible centre (the box on the board
    # from the board's top up); the box's height within 2 cm.
    for name, floor in (('cube', 0.0), ('pillar', 0.0), ('box_on_shelf', board_top)):
        want = _expected_centre(scene.body(name), floor)
        o = _nearest(det.obstacles, want)
        assert np.linalg.norm(o.center - want) < 0.015, (name, want, described)
    on_board = _nearest(det.obstacles, _expected_centre(scene.body('box_on_shelf'), board_top))
    assert abs(on_board.size[2] - (0.10 - PLANE_MARGIN)) < 0.02, described
    # The board's top surface is an obstacle of its own (the arm must not pass through the shelf).
    level = max(det.obstacles, key=lambda o: o.size[0] * o.size[1])
    np.testing.assert_allclose(level.center, [*board.position[:2], board_top], atol=0.02)
    assert np.all(level.size[:2] > np.asarray(board.size[:2]) - 0.04), described
    # The posts (partly hidden by the pillar and the board): found, in pieces; nothing that is no body.
    for name in ('shelf_post_left', 'shelf_post_right'):
        assert any(_inside(o.center, scene.body(name), 0.0) for o in det.obstacles), (name, described)
    bodies = [b for b in scene.bodies if b is not scene.table]
    for o in det.obstacles:
        assert any(_inside(o.center, b, 0.02) for b in bodies), f"phantom at {o.center}: {described}"

    one = detect_obstacles(pts, params)  # max_support_planes 1: the box is part of the board's cluster
    assert one.counts['support_planes'] == 1
    merged = _nearest(one.obstacles, on_board.center)
    assert merged.size[0] > board.size[0] - 0.02 and merged.size[1] > board.size[1] - 0.04, merged.size
