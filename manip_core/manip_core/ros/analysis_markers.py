"""visualization_msgs/MarkerArray of the analyses for RViz: workspace voxels and singularity-map nodes as
CUBE_LIST markers coloured by their value (viridis), in the robot's base frame."""
from __future__ import annotations

import numpy as np
from builtin_interfaces.msg import Duration
from geometry_msgs.msg import Point
from std_msgs.msg import ColorRGBA
from visualization_msgs.msg import Marker, MarkerArray


def _cube_list(points, values, size_m, frame_id, ns, marker_id, vmin=None, vmax=None, alpha=0.8):
    from matplotlib import colormaps
    m = Marker()
    m.header.frame_id = frame_id
    m.ns, m.id, m.type, m.action = ns, marker_id, Marker.CUBE_LIST, Marker.ADD
    m.pose.orientation.w = 1.0
    m.scale.x = m.scale.y = m.scale.z = float(size_m)
    m.lifetime = Duration()
    v = np.asarray(values, dtype=float)
    fin = np.isfinite(v)
    lo = float(np.min(v[fin])) if vmin is None and fin.any() else (vmin or 0.0)
    hi = float(np.max(v[fin])) if vmax is None and fin.any() else (vmax if vmax is not None else 1.0)
    rgba = colormaps["viridis"]((np.where(fin, v, lo) - lo) / max(hi - lo, 1e-300))
    m.points = [Point(x=float(p[0]), y=float(p[1]), z=float(p[2])) for p in points]
    m.colors = [ColorRGBA(r=float(c[0]), g=float(c[1]), b=float(c[2]), a=float(alpha)) for c in rgba]
    return m


def workspace_markers(est, frame_id, ns="workspace", max_points=50000):
    """Boundary voxels of a WorkspaceEstimate (colour: dexterity index 0..1), at most max_points."""
    pts, dex = est.to_points("boundary")
    if len(pts) > max_points:
        keep = np.random.default_rng(0).choice(len(pts), max_points, replace=False)
        pts, dex = pts[keep], dex[keep]
    return MarkerArray(markers=[_cube_list(pts, dex, est.voxel_m, frame_id, ns, 0, 0.0, 1.0)])


def singularity_map_markers(m, frame_id, ns="singularity_map"):
    """Reachable evaluated nodes of a SingularityMap (colour: min singular value), one marker per level's
    node spacing so refined regions show finer cubes."""
    M = m.node_values.shape[0]
    I, J = np.nonzero(m.node_computed & np.isfinite(m.node_values))
    v = m.node_values[I, J]
    lo, hi = float(np.min(v)), float(np.max(v))
    step = (m.u_range[1] - m.u_range[0]) / (M - 1)
    out = MarkerArray()
    # the coarsest level whose grid contains the node
    S = 1 << m.levels
    lvl = np.full(len(I), m.levels)
    for level in range(m.levels, -1, -1):
        s = S >> level
        lvl[(I % s == 0) & (J % s == 0)] = level
    for level in range(m.levels + 1):
        sel = lvl == level
        if sel.any():
            out.markers.append(_cube_list(m.node_points(I[sel], J[sel]), v[sel], step * (S >> level) * 0.5,
                                          frame_id, ns, level, lo, hi, alpha=1.0))
    return out
