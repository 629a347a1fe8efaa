"""manip_core.package_uri: package:// through MANIP_PACKAGE_PATH, the ament index, ROS_PACKAGE_PATH and this
Python's prefixes (example-robot-data's wheel); bounded mesh reads."""
import sysconfig
from pathlib import Path

import pytest

from manip_core.package_uri import (PackageNotFoundError, package_share_dir, read_mesh_bytes, resolve_uri)

ERD_SHARE = Path(sysconfig.get_paths()["purelib"]) / "cmeel.prefix/share/example-robot-data"


def _pkg(root, name):
    d = root / name
    d.mkdir(parents=True)
    (d / "package.xml").write_text(f"<package><name>{name}</name></package>")
    (d / "urdf").mkdir()
    (d / "urdf" / "r.urdf").write_text("<robot name='r'/>")
    return d


def test_search_order_and_errors(tmp_path):
    env = {}
    # this Python's prefixes: example-robot-data's share folder (cmeel.prefix of site-packages)
    assert Path(package_share_dir("example-robot-data", env)) == ERD_SHARE
    assert Path(resolve_uri("package://example-robot-data/robots/ur_description/urdf/ur10_robot.urdf", env=env)
                ).is_file()
    # ROS_PACKAGE_PATH: nested folders holding a package.xml
    ros1 = tmp_path / "ros1"
    d1 = _pkg(ros1 / "src" / "deep", "arm_description")
    assert package_share_dir("arm_description", {"ROS_PACKAGE_PATH": str(ros1)}) == str(d1)
    # ament index of AMENT_PREFIX_PATH before ROS_PACKAGE_PATH
    prefix = tmp_path / "prefix"
    (prefix / "share/ament_index/resource_index/packages").mkdir(parents=True)
    (prefix / "share/ament_index/resource_index/packages/arm_description").write_text("")
    env = {"ROS_PACKAGE_PATH": str(ros1), "AMENT_PREFIX_PATH": str(prefix)}
    assert package_share_dir("arm_description", env) == str(prefix / "share/arm_description")
    # MANIP_PACKAGE_PATH first of all
    mine = _pkg(tmp_path / "mine", "arm_description")
    env["MANIP_PACKAGE_PATH"] = str(tmp_path / "mine")
    assert package_share_dir("arm_description", env) == str(mine)
    assert resolve_uri("package://arm_description/urdf/r.urdf", env=env) == str(mine / "urdf/r.urdf")
    # relative and file:// names
    assert resolve_uri("meshes/a.stl", tmp_path) == str(tmp_path / "meshes/a.stl")
    assert resolve_uri("file:///abs/a.stl") == "/abs/a.stl"
    with pytest.raises(PackageNotFoundError, match="package 'nope' not found in MANIP_PACKAGE_PATH=.*ROS_PACKAGE_PATH="):
        resolve_uri("package://nope/a.stl", env=env)
    with pytest.raises(FileNotFoundError):   # PackageNotFoundError is one
        resolve_uri("package://nope/a.stl", env=env)


def test_mesh_reads_are_bounded(tmp_path):
    f = tmp_path / "m.stl"
    f.write_bytes(b"x" * 100)
    assert read_mesh_bytes(f) == b"x" * 100
    with pytest.raises(ValueError, match=r"m.stl: 100 bytes, more than the maximum of 99 bytes for a mesh"):
        read_mesh_bytes(f, max_bytes=99)
    with pytest.raises(ValueError, match="/dev/zero: not a regular file"):
        read_mesh_bytes("/dev/zero")
    with pytest.raises(ValueError, match="cannot read the mesh: No such file"):
        read_mesh_bytes(tmp_path / "none.stl")
