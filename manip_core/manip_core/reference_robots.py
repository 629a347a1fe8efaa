"""Paths of reference robot descriptions from the optional ``example-robot-data`` package (PyPI, data only).

Used by tests and benchmarks; the library itself never needs it.
"""
import sys
from pathlib import Path

_REL = Path("cmeel.prefix/share/example-robot-data/robots")
UR5_REL = "ur_description/urdf/ur5_robot.urdf"
PANDA_REL = "panda_description/urdf/panda.urdf"


def example_robot_data_dir():
    """Folder ``.../example-robot-data/robots``, or None when the package is not installed."""
    for entry in sys.path:
        d = Path(entry) / _REL
        if d.is_dir():
            return d
    return None


def example_robot(rel):
    """Path of one description inside example-robot-data, e.g. example_robot(UR5_REL); FileNotFoundError if
    the package is missing."""
    d = example_robot_data_dir()
    if d is None or not (d / rel).is_file():
        raise FileNotFoundError(f"example-robot-data is not installed (pip install example-robot-data): {rel}")
    return d / rel
