"""Resolve the file names that robot descriptions use: ``package://PKG/rel``, ``file://``, relative, absolute.

A ``package://PKG/...`` URI names a file below the share folder of ROS package PKG. The share folder is
searched, first match wins, in:

1. ``MANIP_PACKAGE_PATH`` (``:``-separated folders, this project's search path): ``DIR/PKG`` (a folder),
   or ``DIR`` itself when its ``package.xml`` names PKG;
2. the ament index of ``AMENT_PREFIX_PATH`` (what ``ros2`` uses): ``<prefix>/share/PKG``;
3. ``ROS_PACKAGE_PATH`` (ROS 1 style): ``DIR/PKG``, ``DIR`` itself, or any folder below DIR (at most 3
   levels) whose ``package.xml`` names PKG;
4. the Python installation's prefixes that hold an ament index (``sys.prefix``, and the ``cmeel.prefix``
   of site-packages where PyPI wheels such as ``example-robot-data`` and ``pin`` install their share
   folders): ``<prefix>/share/PKG``.

No rclpy import here. :class:`PackageNotFoundError` (a FileNotFoundError) says what was searched.
"""
from __future__ import annotations

import os
import sys
import sysconfig
import xml.etree.ElementTree as ET
from pathlib import Path

PACKAGE_PATH_ENV = "MANIP_PACKAGE_PATH"
_INDEX = Path("share") / "ament_index" / "resource_index" / "packages"


class PackageNotFoundError(FileNotFoundError):
    """A ``package://`` URI names a package that no search-path entry holds."""


def _split(value):
    return [p for p in (value or "").split(os.pathsep) if p]


def _package_xml_name(folder):
    try:
        name = ET.parse(Path(folder) / "package.xml").getroot().findtext("name")
    except (OSError, ET.ParseError):
        return None
    return name.strip() if name else None


def python_prefixes():
    """Prefixes of this Python installation that hold an ament index (sys.prefix, site-packages/cmeel.prefix)."""
    out = []
    cands = [Path(sys.prefix)]
    for key in ("purelib", "platlib"):
        try:
            cands.append(Path(sysconfig.get_paths()[key]) / "cmeel.prefix")
        except KeyError:
            pass
    for c in cands:
        if (c / _INDEX).is_dir() and str(c) not in out:
            out.append(str(c))
    return out


def _ros_package_path_lookup(pkg, root, depth=3):
    root = Path(root)
    if not root.is_dir():
        return None
    if (root / pkg).is_dir():
        return root / pkg
    if _package_xml_name(root) == pkg:
        return root
    frontier = [root]
    for _ in range(depth):
        nxt = []
        for d in frontier:
            try:
                children = sorted(c for c in d.iterdir() if c.is_dir() and not c.name.startswith("."))
            except OSError:
                continue
            for c in children:
                if _package_xml_name(c) == pkg:
                    return c
                nxt.append(c)
        frontier = nxt
    return None


def package_share_dir(pkg, env=None):
    """Share folder of ROS package ``pkg`` (str); PackageNotFoundError naming every place searched."""
    env = os.environ if env is None else env
    for d in _split(env.get(PACKAGE_PATH_ENV)):
        if (Path(d) / pkg).is_dir():
            return str(Path(d) / pkg)
        if _package_xml_name(d) == pkg:
            return str(Path(d))
    ament = _split(env.get("AMENT_PREFIX_PATH"))
    for prefix in ament:
        if (Path(prefix) / _INDEX / pkg).is_file():
            return str(Path(prefix) / "share" / pkg)
    ros1 = _split(env.get("ROS_PACKAGE_PATH"))
    for d in ros1:
        found = _ros_package_path_lookup(pkg, d)
        if found is not None:
            return str(found)
    py = python_prefixes()
    for prefix in py:
        if (Path(prefix) / _INDEX / pkg).is_file() or (Path(prefix) / "share" / pkg).is_dir():
            return str(Path(prefix) / "share" / pkg)
    raise PackageNotFoundError(
        f"package '{pkg}' not found in {PACKAGE_PATH_ENV}={os.pathsep.join(_split(env.get(PACKAGE_PATH_ENV))) or '(unset)'}"
        f", the ament index of AMENT_PREFIX_PATH={os.pathsep.join(ament) or '(unset)'}, "
        f"ROS_PACKAGE_PATH={os.pathsep.join(ros1) or '(unset)'} or this Python's prefixes {py}; "
        f"add the folder holding it to {PACKAGE_PATH_ENV}")


def resolve_uri(name, base_dir=".", env=None):
    """Absolute path (str) of a description's file name: ``package://PKG/rel``, ``file:///abs``, a path
    relative to ``base_dir`` (the description's folder), or absolute. Existence is not checked for paths;
    a package that cannot be found raises PackageNotFoundError."""
    name = str(name)
    if name.startswith("package://"):
        pkg, _, rel = name[len("package://"):].partition("/")
        if not pkg:
            raise PackageNotFoundError(f"{name!r}: no package name after package://")
        return str(Path(package_share_dir(pkg, env)) / rel)
    if name.startswith("file://"):
        name = name[len("file://"):]
    path = Path(os.path.expanduser(name))
    if not path.is_absolute():
        path = Path(base_dir) / path
    return str(path.resolve())


MAX_MESH_BYTES = 64 * 1024 * 1024
"""Largest mesh file read for a robot description (64 MiB; an arm's meshes are usually well below 10 MB)."""


def read_mesh_bytes(path, max_bytes=MAX_MESH_BYTES):
    """Bytes of a mesh file named by a robot description: a regular file of at most ``max_bytes``. Raises
    ValueError with one line (not a regular file, too large, unreadable): a description that arrived over the
    ROS graph must not make a node read a device file or gigabytes."""
    import stat
    try:
        st = os.stat(path)
    except OSError as e:
        raise ValueError(f"{path}: cannot read the mesh: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{path}: not a regular file")
    if st.st_size > max_bytes:
        raise ValueError(f"{path}: {st.st_size} bytes, more than the maximum of {max_bytes} bytes for a mesh")
    try:
        with open(path, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as e:
        raise ValueError(f"{path}: cannot read the mesh: {e.strerror or e}") from None
    if len(data) > max_bytes:
        raise ValueError(f"{path}: more than the maximum of {max_bytes} bytes for a mesh")
    return data
