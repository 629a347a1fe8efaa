"""support_plane: RANSAC support-plane detection on synthetic clouds with a known plane, and its
plausibility checks (gravity, camera side and distance, area) with their messages."""
import math

import numpy as np
import pytest

from manip_perception.support_plane import PlaneParams, detect_support_plane

VOXEL = 0.01
CAMERA = np.array([0.0, -1.0, 1.0])


def _grid(lo, hi, step=VOXEL):
    a = np.arange(lo[0], hi[0], step)
    b = np.arange(lo[1], hi[1], step)
    return np.stack(np.meshgrid(a, b, indexing='ij'), -1).reshape(-1, 2)


def _tilted_table(rng, tilt_deg=4.0, height=0.3, noise=0.002):
    """Points of the plane n . p = height * n_z through (0, 0, height), normal tilted about y."""
    n = np.array([math.sin(math.radians(tilt_deg)), 0, math.cos(math.radians(tilt_deg))])
    xy = _grid((-0.6, -0.6), (0.6, 0.6))
    z = height - (n[0] * xy[:, 0]) / n[2] + rng.normal(0, noise, len(xy))
    return n, np.column_stack([xy, z])


def _box(lo, hi):
    """Surface voxels of a box (top and four sides)."""
    top = np.column_stack([_grid(lo[:2], hi[:2]), np.full(len(_grid(lo[:2], hi[:2])), hi[2])])
    sides = []
    for z in np.arange(lo[2], hi[2], VOXEL):
        for x in np.arange(lo[0], hi[0], VOXEL):
            sides += [[x, lo[1], z], [x, hi[1], z]]
        for y in np.arange(lo[1], hi[1], VOXEL):
            sides += [[lo[0], y, z], [hi[0], y, z]]
    return np.vstack([top, np.array(sides)])


def test_tilted_plane_found_anywhere():
    rng = np.random.default_rng(7)
    n, table = _tilted_table(rng)
    box = _box(np.array([0.1, 0.1, 0.3]), np.array([0.3, 0.25, 0.45]))
    junk = rng.uniform([-0.6, -0.6, 0.0], [0.6, 0.6, 0.9], (500, 3))
    det = detect_support_plane(np.vstack([table, box, junk]), CAMERA, VOXEL)
    assert det.status == 'found', det.message
    p = det.plane
    assert math.degrees(math.acos(min(1.0, p.normal @ n))) < 0.3
    assert abs(p.height_at(0, 0) - 0.3) < 0.002
    assert abs(p.inliers - len(table)) < 0.02 * len(table)
    assert det.message.startswith('support plane: normal')
    # The box is above the plane by more than a margin, the table is not.
    assert np.all(p.signed_distance(box[box[:, 2] > 0.33]) > 0.015)
    assert np.mean(np.abs(p.signed_distance(table)) < 0.01) > 0.99


def test_height_hint_picks_the_plane_in_its_band():
    """A box top larger than the visible table: without a hint the larger plane wins; with a hint (height
    and band) the table is found."""
    rng = np.random.default_rng(3)
    _, table = _tilted_table(rng, tilt_deg=0.0, height=0.0)
    table = table[np.abs(table[:, 0]) < 0.3]  # 0.6 x 1.2 m visible
    top = np.column_stack([_grid((1.0, -0.6), (2.0, 0.6)), np.full(len(_grid((1.0, -0.6), (2.0, 0.6))), 0.4)])
    pts = np.vstack([table, top])
    assert abs(detect_support_plane(pts, CAMERA, VOXEL).plane.height_at(0, 0) - 0.4) < 0.003
    hinted = detect_support_plane(pts, CAMERA, VOXEL, PlaneParams(height_hint=0.0, search_band=0.05))
    assert abs(hinted.plane.height_at(0, 0)) < 0.003


def test_no_plane_at_all():
    """Two free-floating boxes and scattered points: nothing planar enough and large enough."""
    rng = np.random.default_rng(1)
    pts = np.vstack([_box(np.array([0.0, 0.0, 0.2]), np.array([0.1, 0.1, 0.3])),
                     _box(np.array([0.4, 0.0, 0.5]), np.array([0.5, 0.08, 0.6])),
                     rng.uniform([-1, -1, 0], [1, 1, 1], (300, 3))])
    det = detect_support_plane(pts, CAMERA, VOXEL)
    assert det.plane is None and det.status == 'rejected'
    assert det.message.startswith('no support plane') or 'inliers <' in det.message, det.message
    empty = detect_support_plane(np.zeros((0, 3)), CAMERA, VOXEL)
    assert empty.plane is None and empty.status == 'none' and 'fewer than' in empty.message


def test_implausible_planes_are_rejected_with_a_reason():
    rng = np.random.default_rng(2)
    # A wall (vertical plane x = 1): fails the gravity check.
    yz = _grid((-0.6, 0.0), (0.6, 1.2))
    wall = np.column_stack([np.full(len(yz), 1.0), yz])
    det = detect_support_plane(wall, CAMERA, VOXEL)
    assert det.plane is None and det.status == 'rejected'
    assert 'tilted more than plane_max_tilt_deg' in det.message, det.message
    # A ceiling above the camera: seen from below.
    _, ceiling = _tilted_table(rng, tilt_deg=0.0, height=1.5)
    det = detect_support_plane(ceiling, CAMERA, VOXEL)
    assert det.plane is None and 'camera not above it' in det.message, det.message
    # A floor 7 m below: beyond plane_max_camera_height (5 m).
    _, deep = _tilted_table(rng, tilt_deg=0.0, height=-6.0)
    det = detect_support_plane(deep, CAMERA, VOXEL)
    assert det.plane is None and 'plane_max_camera_height' in det.message, det.message
    # A small shelf of 0.2 x 0.2 m: 400 inliers < 0.05 m^2 / (1 cm)^2 = 500.
    shelf = np.column_stack([_grid((0, 0), (0.2, 0.2)), np.full(400, 0.2)])
    det = detect_support_plane(shelf, CAMERA, VOXEL)
    assert det.plane is None and '500' in det.message, det.message
    assert detect_support_plane(shelf, CAMERA, VOXEL, PlaneParams(min_area=0.03)).status == 'found'
    # A 20 degree slope passes with a larger tilt limit only.
    n, slope = _tilted_table(rng, tilt_deg=20.0, height=0.0)
    assert detect_support_plane(slope, CAMERA, VOXEL).plane is None
    det = detect_support_plane(slope, CAMERA, VOXEL, PlaneParams(max_tilt_deg=25.0))
    assert det.status == 'found' and abs(det.plane.tilt_deg - 20.0) < 0.3


def test_params_validated():
    with pytest.raises(ValueError, match='plane_max_tilt_deg'):
        PlaneParams(max_tilt_deg=95).validate()
    with pytest.raises(ValueError, match='plane_max_camera_height'):
        PlaneParams(min_camera_height=1.0, max_camera_height=0.5).validate()


def test_tops_of_separate_objects_are_not_a_support_plane():
    """Three boxes standing apart with no floor in view: their tops (0.04 m^2 each, at one height) hold more
    inliers together than plane_min_area needs, but no connected piece does: rejected (removing everything
    below such a plane would remove the objects). The same tops touching each other form one surface."""
    tops = [_box((x, 0.0, 0.0), (x + 0.2, 0.2, 0.2)) for x in (-0.6, 0.0, 0.6)]
    det = detect_support_plane(np.vstack(tops), CAMERA, VOXEL, PlaneParams(min_area=0.05))
    assert det.status == 'rejected' and det.plane is None, det.message
    assert 'connected piece' in det.message, det.message
    touching = [_box((x, 0.0, 0.0), (x + 0.2, 0.2, 0.2)) for x in (0.0, 0.2, 0.4)]
    det = detect_support_plane(np.vstack(touching), CAMERA, VOXEL, PlaneParams(min_area=0.05))
    assert det.status == "found" and abs(det.plane.height_at(0.3, 0.1) - 0.2) < 0.005, det.message
