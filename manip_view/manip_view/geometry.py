"""Shapes to draw for each link of a robot description (no viser, no ROS).

From a URDF: the ``<visual>`` and ``<collision>`` primitives (box, cylinder, sphere, capsule) and meshes (STL, OBJ,
DAE files read with trimesh; ``package://`` and relative paths resolved as the planner's collision model does), each
with its origin in the link frame. A description without geometry (every bundled robot, Isaac kinematic.json) gets
a *skeleton*: one capsule per joint-to-joint segment of the tree, recomputed from the link frames at each pose.

Units: metres; poses are 4x4 homogeneous matrices T_link_shape.
"""
from __future__ import annotations

import logging
import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from manip_core.errors import ModelError
from manip_core.spatial import rpy_to_matrix, transform

log = logging.getLogger(__name__)

__all__ = ["Shape", "parse_link_shapes", "shape_mesh", "skeleton_radius_m", "segment_pose"]


@dataclass
class Shape:
    """One primitive of a link: kind in box/cylinder/sphere/capsule/mesh.

    size: box (x, y, z) full edge lengths m; cylinder/capsule (radius m, length m) along the shape's z axis (URDF
    convention; the capsule's length is that of its cylinder part); sphere (radius m,); mesh: the scale (3,).
    origin: T_link_shape (4x4). rgba: URDF material colour in 0..1 when given. path: the mesh file."""

    link: str
    kind: str
    size: tuple
    origin: np.ndarray = field(default_factory=lambda: np.eye(4))
    rgba: tuple | None = None
    path: Path | None = None


def _floats(src, what, text, n):
    try:
        vals = [float(x) for x in (text or "").split()]
    except ValueError:
        vals = []
    if len(vals) != n or not all(math.isfinite(v) for v in vals):
        raise ModelError(src, what, f"expected {n} finite numbers, got {text!r}")
    return vals


def _origin(src, el, what):
    o = el.find("origin")
    if o is None:
        return np.eye(4)
    xyz = _floats(src, what, o.get("xyz", "0 0 0"), 3)
    rpy = _floats(src, what, o.get("rpy", "0 0 0"), 3)
    return transform(R=rpy_to_matrix(np.array(rpy)), p=np.array(xyz))


def _materials(root):
    out = {}
    for m in root.iter("material"):
        c = m.find("color")
        if m.get("name") and c is not None and c.get("rgba"):
            try:
                out[m.get("name")] = tuple(float(v) for v in c.get("rgba").split()[:4])
            except ValueError:
                pass
    return out


def parse_link_shapes(urdf_path_or_xml, which="visual"):
    """{link: [Shape]} from a URDF's ``<visual>`` (which="visual") or ``<collision>`` elements.

    Meshes whose file cannot be found are left out with a warning (a description from the ROS graph often names
    ``package://`` files of a package that is not installed here); a malformed element raises ModelError."""
    from manip_planning.robot_collision import _resolve_mesh  # the planner's package:// resolution

    if which not in ("visual", "collision"):
        raise ValueError(f"which must be 'visual' or 'collision', not {which!r}")
    text = str(urdf_path_or_xml)
    src, urdf_dir = "<string>", None
    if not text.lstrip().startswith("<"):
        src, urdf_dir = text, Path(text).resolve().parent
        try:
            text = Path(text).read_text()
        except OSError as e:
            raise ModelError(src, "", f"cannot read: {e.strerror}") from None
    try:
        root = ET.fromstring(text.encode())
    except ET.ParseError as e:
        raise ModelError(src, "", f"not valid XML: {e}") from None
    materials = _materials(root)
    out = {}
    for link in root.iter("link"):
        name = link.get("name")
        shapes = []
        for k, el in enumerate(link.findall(which)):
            what = f"link '{name}' {which} #{k}"
            T = _origin(src, el, what)
            rgba = None
            mat = el.find("material")
            if mat is not None:
                c = mat.find("color")
                rgba = (tuple(_floats(src, what, c.get("rgba"), 4)) if c is not None
                        else materials.get(mat.get("name")))
            g = el.find("geometry")
            if g is None or len(g) == 0:
                raise ModelError(src, what, "no <geometry>")
            geo = g[0]
            tag = geo.tag
            if tag == "box":
                size = tuple(_floats(src, what, geo.get("size"), 3))
            elif tag == "sphere":
                size = tuple(_floats(src, what, geo.get("radius"), 1))
            elif tag in ("cylinder", "capsule"):
                size = (_floats(src, what, geo.get("radius"), 1)[0], _floats(src, what, geo.get("length"), 1)[0])
            elif tag == "mesh":
                fn = geo.get("filename", "")
                path = _resolve_mesh(fn, urdf_dir)
                if path is None:
                    log.warning("%s: %s: mesh %r not found; not drawn", src, what, fn)
                    continue
                shapes.append(Shape(name, "mesh", tuple(_floats(src, what, geo.get("scale", "1 1 1"), 3)), T,
                                    rgba, path))
                continue
            else:
                raise ModelError(src, what, f"unsupported geometry <{tag}>")
            if any(v <= 0 for v in size):
                raise ModelError(src, what, f"<{tag}> dimensions must be positive, got {size}")
            shapes.append(Shape(name, tag, size, T, rgba))
        if shapes:
            out[name] = shapes
    return out


def shape_mesh(shape, sections=24):
    """(vertices (V, 3) m, faces (F, 3) int) of a Shape in its link frame (its origin applied)."""
    import trimesh

    if shape.kind == "box":
        m = trimesh.creation.box(extents=shape.size)
    elif shape.kind == "sphere":
        m = trimesh.creation.icosphere(subdivisions=2, radius=shape.size[0])
    elif shape.kind == "cylinder":
        m = trimesh.creation.cylinder(radius=shape.size[0], height=shape.size[1], sections=sections)
    elif shape.kind == "capsule":
        m = trimesh.creation.capsule(height=shape.size[1], radius=shape.size[0], count=[sections, sections])
    elif shape.kind == "mesh":
        m = trimesh.load(str(shape.path), force="mesh")
        m.apply_scale(shape.size)
    else:
        raise ValueError(f"unknown shape kind {shape.kind!r}")
    v = np.asarray(m.vertices, dtype=np.float64) @ shape.origin[:3, :3].T + shape.origin[:3, 3]
    return v, np.asarray(m.faces, dtype=np.int32)


def skeleton_radius_m(segment_lengths_m):
    """Capsule radius for a skeleton: 6 % of the mean joint-to-joint distance, within 5 mm .. 60 mm."""
    lengths = [x for x in segment_lengths_m if x > 1e-9]
    mean = float(np.mean(lengths)) if lengths else 0.1
    return float(np.clip(0.06 * mean, 0.005, 0.06))


def segment_pose(p0, p1):
    """(T (4x4), length m): a frame at the midpoint of p0 -> p1 whose z axis points from p0 to p1."""
    p0, p1 = np.asarray(p0, dtype=np.float64), np.asarray(p1, dtype=np.float64)
    d = p1 - p0
    length = float(np.linalg.norm(d))
    T = np.eye(4)
    T[:3, 3] = 0.5 * (p0 + p1)
    if length < 1e-12:
        return T, 0.0
    z = d / length
    a = np.array([1.0, 0.0, 0.0]) if abs(z[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    x = np.cross(a, z)
    x /= np.linalg.norm(x)
    T[:3, :3] = np.column_stack([x, np.cross(z, x), z])
    return T, length
