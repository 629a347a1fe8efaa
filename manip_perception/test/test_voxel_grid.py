"""voxel_grid: the hashed voxel grid against a numpy reference, and the voxel-grid clustering against
scikit-learn's DBSCAN on the voxel centroids (the clustering it replaces) as the oracle.

Stated tolerance of the equivalence (1 cm voxels, cluster radius 1 voxel, 6 neighbours vs DBSCAN eps 2.5 cm,
min_samples 6): the same clusters (count, and each DBSCAN cluster's points mostly in one voxel cluster),
box centres within 1 cm and box sides within 2 cm.
"""
import cv2
import numpy as np
import pytest

from manip_perception.obstacles import (ObstacleParams, camera_pose_matrix, dbscan_labels, describe_clusters,
                                        detect_obstacles)
from manip_perception.stereo import DisparityMatcher, back_project, disparity_to_depth
from manip_perception.voxel_grid import cluster_boxes, cluster_voxels, voxelize


def _reference_voxels(pts, voxel, T, lo, hi):
    base = pts @ T[:3, :3].T + T[:3, 3]
    base = base[np.all((base >= lo) & (base <= hi), axis=1)]
    idx = np.floor(base / voxel).astype(np.int64)
    keys, inv, counts = np.unique(idx, axis=0, return_inverse=True, return_counts=True)
    inv = inv.reshape(-1)
    sums = np.stack([np.bincount(inv, weights=base[:, k]) for k in range(3)], 1)
    return {tuple(k): (s / c, c) for k, s, c in zip(keys, sums, counts)}, len(base)


def test_voxelize_matches_numpy_reference():
    rng = np.random.default_rng(0)
    pts = rng.uniform(-0.5, 0.5, (20000, 3)).astype(np.float32)
    pts[::97] = np.nan
    T = camera_pose_matrix([0.1, -0.2, 0.3], [0.2, -0.1, 0.3, 0.9])
    lo, hi = np.array([-0.4, -0.6, -0.2]), np.array([0.5, 0.3, 0.7])
    cent, counts, ijk, kept = voxelize(pts, 0.05, 1, transform=T, lower=lo, upper=hi)
    ref, n_ref = _reference_voxels(pts[np.all(np.isfinite(pts), 1)].astype(np.float64), 0.05, T, lo, hi)
    assert kept == n_ref and len(cent) == len(ref)
    for c, n, k in zip(cent, counts, ijk):
        rc, rn = ref[tuple(k)]
        assert n == rn
        np.testing.assert_allclose(c, rc, atol=1e-5)
    # min_points drops sparse voxels; depth limits act on the input z.
    c2, n2, _, _ = voxelize(pts, 0.05, 3, transform=T, lower=lo, upper=hi)
    assert len(c2) == sum(1 for _, n in ref.values() if n >= 3) and n2.min() >= 3
    _, _, _, kept_near = voxelize(pts, 0.05, 1, min_depth=0.0, max_depth=0.25)
    assert kept_near == np.count_nonzero((pts[:, 2] > 0) & (pts[:, 2] <= 0.25))
    # The buffers are reused: a second call gives the same answer, also after a tiny cloud shrank the
    # hash table (the large cloud then overflows it and is hashed again in a larger one).
    again = voxelize(pts, 0.05, 1, transform=T, lower=lo, upper=hi)
    np.testing.assert_array_equal(again[0], cent)
    assert len(voxelize(pts[:10], 0.05)[0]) <= 10
    voxelize(pts[:10], 0.05)
    again = voxelize(pts, 0.05, 1, transform=T, lower=lo, upper=hi)
    np.testing.assert_array_equal(again[0], cent)
    np.testing.assert_array_equal(again[1], counts)


def _box_surface(lo, hi, rng, step=0.004, noise=0.001):
    """Points on the six faces of a box, ``step`` apart, with Gaussian noise: what stereo sees of a solid."""
    out = []
    for axis in range(3):
        u, v = [a for a in range(3) if a != axis]
        gu, gv = np.meshgrid(np.arange(lo[u], hi[u], step), np.arange(lo[v], hi[v], step), indexing='ij')
        for c in (lo[axis], hi[axis]):
            f = np.empty((gu.size, 3))
            f[:, u], f[:, v], f[:, axis] = gu.ravel(), gv.ravel(), c
            out.append(f)
    p = np.vstack(out)
    return p + rng.normal(0, noise, p.shape)


def _match_clusters(pts, labels_a, labels_b):
    """Each cluster of a: the b label holding most of its points and that share."""
    out = {}
    for la in set(labels_a[labels_a >= 0]):
        lb = labels_b[labels_a == la]
        lb = lb[lb >= 0]
        if lb.size == 0:
            out[la] = (-1, 0.0)
            continue
        vals, cnt = np.unique(lb, return_counts=True)
        out[la] = (vals[np.argmax(cnt)], cnt.max() / np.count_nonzero(labels_a == la))
    return out


def test_clusters_match_dbscan_on_synthetic_boxes():
    rng = np.random.default_rng(5)
    parts = []
    for lo, hi in (([0, 0, 0], [0.1, 0.2, 0.3]), ([0.3, 0, 0], [0.45, 0.1, 0.1]), ([0, 0.5, 0], [0.05, 0.55, 0.4])):
        parts.append(_box_surface(np.array(lo), np.array(hi), rng))
    parts.append(rng.uniform([-1, -1, -1], [1, 1, 1], (200, 3)))  # sparse noise
    cent, _, ijk, _ = voxelize(np.vstack(parts), 0.01, 2)
    labels, core = cluster_voxels(ijk, 6, 1)
    ref = dbscan_labels(cent, 0.025, 6)
    assert labels.max() + 1 == ref.max() + 1 == 3
    for la, (lb, share) in _match_clusters(cent, ref, labels).items():
        assert lb >= 0 and share > 0.98
    ours = describe_clusters(cent, labels, 30, 0.02, core=core)
    theirs = describe_clusters(cent, ref, 30, 0.02)
    assert len(ours) == len(theirs) == 3
    for a, b in zip(ours, theirs):
        assert np.linalg.norm(a.center - b.center) < 0.01 and np.all(np.abs(a.size - b.size) < 0.02)
    lo, hi, n, r = cluster_boxes(cent, labels)
    assert n.sum() == np.count_nonzero(labels >= 0)
    assert np.all(lo <= hi)


def test_clusters_match_dbscan_on_a_rendered_scene(scene):
    """The whole obstacle chain on the rendered table scene: voxel-grid clusters against DBSCAN (eps 2.5 cm,
    min_samples 6, the former pipeline) run on the same filtered voxels."""
    cam = scene.camera
    g = [cv2.cvtColor(x, cv2.COLOR_RGB2GRAY) for x in (scene.left, scene.right)]
    disp = DisparityMatcher().compute(*g)
    pts = back_project(disparity_to_depth(disp, cam.fx, cam.baseline), cam.fx, cam.fy, cam.cx, cam.cy,
                       max_depth=3.0)
    params = ObstacleParams(camera_position=tuple(cam.position), camera_orientation_xyzw=tuple(cam.orientation_xyzw))
    det = detect_obstacles(pts, params)
    theirs = describe_clusters(det.points, dbscan_labels(det.points, 0.025, 6), params.min_cluster_points,
                               params.min_cluster_extent)
    assert len(det.obstacles) == len(theirs) == len(scene.objects)
    for a, b in zip(det.obstacles, theirs):
        assert np.linalg.norm(a.center - b.center) < 0.01, (a.center, b.center)
        assert np.all(np.abs(a.size - b.size) < 0.02), (a.size, b.size)


def test_bad_inputs():
    with pytest.raises(ValueError, match='voxel_size'):
        voxelize(np.zeros((3, 3)), 0.0)
    with pytest.raises(ValueError, match='min_neighbors'):
        cluster_voxels(np.zeros((3, 3), int), 0)
    labels, core = cluster_voxels(np.zeros((0, 3), int))
    assert labels.shape == (0,) and core.shape == (0,)
    # A lone voxel is noise; a 3x3x3 block is one cluster of core voxels.
    block = np.stack(np.meshgrid(*[np.arange(3)] * 3, indexing='ij'), -1).reshape(-1, 3)
    labels, core = cluster_voxels(np.vstack([block, [[10, 10, 10]]]), 6, 1)
    assert set(labels[:27]) == {0} and labels[27] == -1 and core[:27].all() and not core[27]


def test_empty_cloud_first_in_a_thread():
    """An empty cloud as the first call of a thread (a black image) gives no voxels, not an error (the
    per-thread buffers are allocated on first use)."""
    import threading
    out = {}

    def run():
        out['r'] = voxelize(np.zeros((0, 3), np.float32), 0.01)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    cent, counts, ijk, kept = out['r']
    assert cent.shape == (0, 3) and counts.shape == (0,) and ijk.shape == (0, 3) and kept == 0
