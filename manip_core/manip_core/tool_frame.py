"""A tool frame (tool-centre point) added to a robot description that has none where the tool acts.

Some descriptions end at the flange (``tool0``) with a gripper hanging below it but no frame between its fingers
(the MotionBenchMaker UR5 with its Robotiq 85). ``with_tool_frame`` returns the description's text with one more
link, massless and without geometry, fixed to a parent link at an offset in that link's frame; that link is then
the tip link of every node (``tip_link:=tcp`` with ``robot:=`` the written file), so the simulator, the model, the
planner, pick_place and perception all use the same tool point. The new text lives in another folder than the
original, so relative mesh file names are made absolute (``package://`` URIs stay as they are, except one that
only resolves next to the original file).
"""
from __future__ import annotations

import math
import os
import xml.etree.ElementTree as ET
from pathlib import Path

__all__ = ["with_tool_frame"]


def _portable(filename, urdf_dir):
    """The mesh file name as it resolves from another folder: a relative path made absolute; a ``package://`` URI
    that the search path (manip_core.package_uri) does not resolve but that names a file next to the original
    description (``package://meshes/...`` of the MBM UR5, which its own folder holds) made absolute too."""
    if filename.startswith("package://"):
        from .package_uri import resolve_uri
        try:
            if Path(resolve_uri(filename)).is_file():
                return filename
        except FileNotFoundError:
            pass
        local = urdf_dir / filename[len("package://"):]
        return str(local.resolve()) if local.is_file() else filename
    if "://" in filename or os.path.isabs(filename):
        return filename
    return str((urdf_dir / filename).resolve())


def with_tool_frame(urdf_path, parent_link, xyz_m, rpy_rad=(0.0, 0.0, 0.0), name="tcp"):
    """URDF text of ``urdf_path`` with link ``name`` fixed to ``parent_link`` at ``xyz_m`` (m) and ``rpy_rad``
    (rad, roll-pitch-yaw as URDF ``<origin>``), both in ``parent_link``'s frame. Raises ValueError naming the
    problem: unknown parent link, a link or joint already called ``name``, a non-finite offset."""
    path = Path(urdf_path)
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as exc:
        raise ValueError(f"{path}: cannot read the robot description: {exc}") from None
    xyz = [float(v) for v in xyz_m]
    rpy = [float(v) for v in rpy_rad]
    if len(xyz) != 3 or len(rpy) != 3 or not all(math.isfinite(v) for v in xyz + rpy):
        raise ValueError(f"tool frame offset must be 3 finite numbers (m) and 3 (rad), got xyz {xyz_m}, "
                         f"rpy {rpy_rad}")
    links = {el.get("name") for el in root.findall("link")}
    if parent_link not in links:
        raise ValueError(f"{path}: no link {parent_link!r} to attach the tool frame to")
    joint_name = f"{parent_link}-{name}_fixed_joint"
    if name in links or joint_name in {el.get("name") for el in root.findall("joint")}:
        raise ValueError(f"{path}: already has a link {name!r} (or joint {joint_name!r}): choose another tool "
                         f"frame name")
    for el in root.iter():
        filename = el.get("filename")
        if filename:
            el.set("filename", _portable(filename, path.parent))
    ET.SubElement(root, "link", name=name)
    joint = ET.SubElement(root, "joint", name=joint_name, type="fixed")
    ET.SubElement(joint, "origin", xyz=" ".join(repr(v) for v in xyz), rpy=" ".join(repr(v) for v in rpy))
    ET.SubElement(joint, "parent", link=parent_link)
    ET.SubElement(joint, "child", link=name)
    return (f"<?xml version=\"1.0\"?>\n<!-- {path} with a tool frame '{name}' fixed to '{parent_link}' at xyz "
            f"{xyz} m, rpy {rpy} rad (manip_core.tool_frame) -->\n" + ET.tostring(root, encoding="unicode") + "\n")
