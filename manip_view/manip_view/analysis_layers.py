"""Analysis results as what the page draws (no viser, no ROS): point clouds coloured by a measure.

``reach_shell(estimate)``: the boundary voxels of a manip_core.analysis.workspace.WorkspaceEstimate, coloured by
their dexterity index (0..1); ``singularity_nodes(smap)``: the reachable evaluated nodes of a
manip_core.analysis.singularity_map.SingularityMap, coloured by their minimum singular value (0 .. the map's
largest). Each returns (points (n, 3) float32 m in the base frame, colours (n, 3) uint8, a one-line status text).
``colormap`` maps values to colours with numpy only.
"""
from __future__ import annotations

import numpy as np

__all__ = ["colormap", "reach_shell", "singularity_nodes", "marker_points", "NAN_RGB", "MARKER_LAYERS"]

# Anchors of a blue -> cyan -> green -> yellow -> red ramp at t = 0, 1/4, 1/2, 3/4, 1: red never falls and blue
# never rises along it, so a larger value is never drawn bluer or less red than a smaller one.
_ANCHORS = np.array([[40, 40, 220], [40, 180, 220], [40, 200, 60], [230, 210, 30], [230, 40, 30]], np.float64)
NAN_RGB = (128, 128, 128)  # a NaN value (out of reach, unknown)


def colormap(values, vmin=None, vmax=None):
    """(n, 3) uint8 colours of ``values`` (n,) on the ramp above: vmin (default the smallest finite value) is blue,
    vmax (default the largest) red, values outside are clipped, NaN is grey (NAN_RGB)."""
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    finite = np.isfinite(v)
    lo = float(np.min(v[finite])) if vmin is None and finite.any() else float(vmin or 0.0)
    hi = float(np.max(v[finite])) if vmax is None and finite.any() else float(1.0 if vmax is None else vmax)
    span = hi - lo if hi > lo else 1.0
    t = np.clip((np.where(finite, v, lo) - lo) / span, 0.0, 1.0) * (len(_ANCHORS) - 1)
    k = np.minimum(t.astype(np.int64), len(_ANCHORS) - 2)
    f = (t - k)[:, None]
    rgb = (1.0 - f) * _ANCHORS[k] + f * _ANCHORS[k + 1]
    out = np.rint(rgb).astype(np.uint8)
    out[~finite] = NAN_RGB
    return out


def reach_shell(estimate):
    """Boundary voxel centres of a WorkspaceEstimate (base frame, m) coloured by dexterity index (0 blue, 1 red),
    and the status line (volume m^3 +- uncertainty, samples, time s)."""
    pts, dex = estimate.to_points("boundary")
    text = (f"reach shell: {estimate.volume_m3:.4f} +- {estimate.volume_uncertainty_m3:.4f} m^3"
            if estimate.dimension == 3 else
            f"reach shell: {estimate.measure:.4f} +- {estimate.uncertainty:.4f} m^{estimate.dimension} "
            f"(a {estimate.dimension}-D workspace)")
    text += (f", {len(pts)} boundary voxels of {estimate.voxel_m * 1000:.1f} mm, {estimate.samples} samples, "
             f"{estimate.time_s:.2f} s; colour: dexterity 0 (blue) .. 1 (red)")
    return np.asarray(pts, np.float32).reshape(-1, 3), colormap(dex, 0.0, 1.0), text


def singularity_nodes(smap):
    """Reachable evaluated nodes of a SingularityMap (base frame, m) coloured by their best minimum singular value
    (0 blue .. the map's largest red), and the status line (nodes, threshold, range, time s)."""
    I, J = np.nonzero(smap.node_computed & np.isfinite(smap.node_values))
    vals = smap.node_values[I, J]
    pts = smap.node_points(I, J)
    vmax = float(vals.max()) if len(vals) else 1.0
    text = (f"singularity map ({smap.part}, IK {smap.ik}): {len(vals)} reachable of {smap.points_evaluated} "
            f"evaluated nodes, min singular value {float(vals.min()) if len(vals) else float('nan'):.4f} .. "
            f"{vmax:.4f} (threshold {smap.threshold:.4f}, {int(np.sum(vals < smap.threshold))} below), "
            f"{smap.time_s:.2f} s; colour: 0 (blue) .. {vmax:.4f} (red)")
    return np.asarray(pts, np.float32).reshape(-1, 3), colormap(vals, 0.0, vmax), text


# The namespaces of manip_core's analysis_markers node (manip_core.ros.analysis_markers) -> the page's layers
MARKER_LAYERS = {"workspace": "reach_shell", "singularity_map": "singularity_map"}


def marker_points(marker):
    """(points (n, 3) float64 m in the marker's header frame, colours (n, 3) uint8) of a visualization_msgs/Marker
    whose points are the data (CUBE_LIST, SPHERE_LIST, POINTS, LINE_STRIP): the marker's pose applied to its points; its
    per-point colours (r, g, b in 0..1), else its one colour for every point."""
    from manip_core.spatial import quat_wxyz_to_matrix
    P = np.array([(p.x, p.y, p.z) for p in marker.points], dtype=np.float64).reshape(-1, 3)
    o, t = marker.pose.orientation, marker.pose.position
    q = np.array([o.w, o.x, o.y, o.z], dtype=np.float64)
    R = quat_wxyz_to_matrix(q / np.linalg.norm(q)) if np.linalg.norm(q) > 0 else np.eye(3)  # all-zero: identity
    P = P @ R.T + np.array([t.x, t.y, t.z])
    if len(marker.colors) == len(P):
        C = np.array([(c.r, c.g, c.b) for c in marker.colors], dtype=np.float64).reshape(-1, 3)
    else:
        C = np.tile([marker.color.r, marker.color.g, marker.color.b], (len(P), 1))
    C = np.where(np.isfinite(C), C, 0.5)  # a NaN colour: grey
    return P, np.clip(np.round(C * 255.0), 0, 255).astype(np.uint8)
