"""The obstacle chain on the simulator's own rendered scenes (manip_sim: its scene files, its textures, its
camera model and renderer), checked against the scene's ground truth (the bodies' poses and sizes). The
simulator draws the robot too: it is removed by the self-filter at the scene's joint values, as the node does,
and by a workspace crop to the work area in front of it (x >= 0.2 m): its plain grey housings give stereo
smear along the viewing rays, beyond the self-filter's padding (clusters up to 20 cm from its axis).

* Block matching and the 4 cm cube (the node's real-camera defaults: block matching, no texture check).
  The cube's faces carry a checker texture of two squares per face (about 9 px each at 1 m): in a 9 px block
  that repeats, so block matching's uniqueness check rejects most of the cube (on the shelf view 101 points
  above the plane margin, SGBM 290; of its 26 voxels of 1 cm 18 hold the 2 points voxel_min_points asks
  for, and 13 form its cluster). The cube then shows 23 voxels from the demo camera (0.9 m away) and 13 from
  the shelf camera (1.04 m); min_cluster_points 20 lost it on the shelf view, 30 on both (SGBM passed only
  through the voxels its smear adds at the cube's edges: 45-47). The node's default for block matching is now
  12: the largest cluster on the regression bags that is no object is 10 voxels (obstacles.MIN_CLUSTER_POINTS).
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

from manip_perception.obstacles import MIN_CLUSTER_POINTS, ObstacleParams, detect_obstacles
from manip_perception.stereo import DisparityMatcher, SgbmParams, back_project, disparity_range, disparity_to_depth

PLANE_MARGIN = ObstacleParams().plane_margin
#: The work area in front of the robot (base frame, m): every body of both scenes, not the robot's base.
WORK_AREA = {'workspace_min': (0.2, -1.0, -0.1), 'workspace_max': (1.0, 1.0, 1.2)}
#: The node's defaults for block matching (min_cluster_points 0: by the matcher).
BM_DEFAULTS = dict(WORK_AREA, min_cluster_points=MIN_CLUSTER_POINTS['bm'])
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


def robot_at_rest(scene):
    """robot_body.PosedBody of the scene's robot at its initial joint values (the self-filter's input), from
    the URDF the simulator draws."""
    from manip_core import RobotModel
    from manip_perception.robot_body import RobotBody
    r = scene.robot
    model = RobotModel.load(r.urdf, r.base_link, r.tip_link)
    body = RobotBody.from_description(model, r.urdf, 0.08)
    return body.at(scene.initial_joint_positions(model.joint_names))


def phantoms(obstacles, scene):
    """The obstacles whose centre is inside no body of the scene (grown by 2 cm), the table excepted."""
    bodies = [b for b in scene.bodies if b is not scene.table]
    return [o for o in obstacles if not any(_inside(o.center, b, 0.02) for b in bodies)]


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
    params = ObstacleParams(camera_position=tuple(cam.position), camera_orientation_xyzw=tuple(cam.orientation_xyzw),
                            **BM_DEFAULTS)
    robot = robot_at_rest(scene)
    det = detect_obstacles(pts, params, robot=robot)
    truth = [scene.body('cube'), scene.body('pillar')]
    assert len(det.obstacles) == 2, [(o.center, o.num_points) for o in det.obstacles]
    for body in truth:
        o = _nearest(det.obstacles, _expected_centre(body, 0.0))
        err = np.linalg.norm(o.center - _expected_centre(body, 0.0))
        assert err < 0.015, f"{body.name}: centre {o.center} is {err:.3f} m off"
    cube = _nearest(det.obstacles, _expected_centre(truth[0], 0.0))
    assert params.min_cluster_points <= cube.num_points < 30, cube.num_points
    former = detect_obstacles(pts, dataclasses.replace(params, min_cluster_points=30), robot=robot)
    assert len(former.obstacles) == 1 and _inside(former.obstacles[0].center, truth[1], 0.02)


def test_block_matching_keeps_the_cube_on_the_shelf_view():
    """The same defaults on the shelf view (camera 1.0 m up, 45 degrees down, the cube 1.04 m deep): the cube
    within 1.5 cm of its visible centre, the pillar and the box on the board too, no phantom. Block matching
    gives the cube 13 voxels here: min_cluster_points 20 (the former default) lost it."""
    scene, left, right, cam = shelf_view()
    pts = _points(left, right, cam, 'bm', 0.0)
    params = ObstacleParams(camera_position=tuple(cam.position), camera_orientation_xyzw=tuple(cam.orientation_xyzw),
                            max_support_planes=2, **BM_DEFAULTS)
    robot = robot_at_rest(scene)
    det = detect_obstacles(pts, params, robot=robot)
    described = [(o.center.round(3).tolist(), o.num_points) for o in det.obstacles]
    board_top = scene.body('shelf_board').position[2] + scene.body('shelf_board').size[2] / 2
    for name, floor in (('cube', 0.0), ('pillar', 0.0), ('box_on_shelf', board_top)):
        want = _expected_centre(scene.body(name), floor)
        assert np.linalg.norm(_nearest(det.obstacles, want).center - want) < 0.015, (name, want, described)
    assert not phantoms(det.obstacles, scene), described
    cube = _nearest(det.obstacles, _expected_centre(scene.body('cube'), 0.0))
    assert params.min_cluster_points <= cube.num_points < 20, cube.num_points
    former = detect_obstacles(pts, dataclasses.replace(params, min_cluster_points=20), robot=robot)
    want = _expected_centre(scene.body('cube'), 0.0)
    assert all(np.linalg.norm(o.center - want) > 0.03 for o in former.obstacles)


@pytest.fixture(scope='module')
def shelf():
    """shelf_view() through SGBM with the simulator's texture check, as the simulated graph runs it."""
    scene, left, right, cam = shelf_view()
    params = ObstacleParams(camera_position=tuple(cam.position), camera_orientation_xyzw=tuple(cam.orientation_xyzw),
                            **WORK_AREA)
    return scene, params, _points(left, right, cam, 'sgbm', 1.5)


def test_shelf_level_on_rendered_stereo(shelf):
    scene, params, pts = shelf
    robot = robot_at_rest(scene)
    board = scene.body('shelf_board')
    board_top = board.position[2] + board.size[2] / 2
    det = detect_obstacles(pts, dataclasses.replace(params, max_support_planes=2), robot=robot)
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

    one = detect_obstacles(pts, params, robot=robot)  # max_support_planes 1: the box is part of the board's cluster
    assert one.counts['support_planes'] == 1
    merged = _nearest(one.obstacles, on_board.center)
    assert merged.size[0] > board.size[0] - 0.02 and merged.size[1] > board.size[1] - 0.04, merged.size
