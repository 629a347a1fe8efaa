"""Pinhole projection of the viewer's camera (three.js PerspectiveCamera conventions; no viser).

The camera sits at ``position`` and looks at ``look_at`` with ``up`` (world, m) as its up direction; ``fov_y_rad`` is
the vertical field of view; the image is ``width_px`` x ``height_px`` with (0, 0) at the top-left corner, u to the
right and v down. Used to check where the robot appears in a screenshot of the page.
"""
from __future__ import annotations

import numpy as np

__all__ = ["look_at_rotation", "project"]


def look_at_rotation(position, look_at, up=(0.0, 0.0, 1.0)):
    """R_world_camera (3x3): columns x right, y up, z backwards (the camera looks along -z, as in OpenGL)."""
    position, look_at, up = (np.asarray(v, dtype=np.float64) for v in (position, look_at, up))
    z = position - look_at
    z /= np.linalg.norm(z)
    x = np.cross(up, z)
    n = np.linalg.norm(x)
    if n < 1e-12:
        raise ValueError("camera up direction is parallel to its viewing direction")
    x /= n
    return np.column_stack([x, np.cross(z, x), z])


def project(points_m, position, look_at, fov_y_rad, width_px, height_px, up=(0.0, 0.0, 1.0)):
    """(N, 2) pixel coordinates (u right, v down) of world points (N, 3); NaN for points behind the camera."""
    P = np.atleast_2d(np.asarray(points_m, dtype=np.float64))
    R = look_at_rotation(position, look_at, up)
    pc = (P - np.asarray(position, dtype=np.float64)) @ R  # camera coordinates
    depth = -pc[:, 2]
    f = 0.5 * height_px / np.tan(0.5 * fov_y_rad)  # focal length in pixels (square pixels)
    with np.errstate(divide="ignore", invalid="ignore"):
        u = 0.5 * width_px + f * pc[:, 0] / depth
        v = 0.5 * height_px - f * pc[:, 1] / depth
    uv = np.column_stack([u, v])
    uv[depth <= 0] = np.nan
    return uv
