"""Robot descriptions shipped with manip_core, by name.

BUNDLED maps a short name to a file in this folder: "ur5" (Universal Robots UR5 from its published DH
parameters), "ypp3" (3-DOF yaw-pitch-pitch pick-and-place arm), "planar2r" (planar 2R arm in the x-y plane),
"arm3" (an Isaac-style kinematic.json description).
"""
from __future__ import annotations

from pathlib import Path

BUNDLED = {
    "ur5": "ur5.urdf",
    "ypp3": "ypp3.urdf",
    "planar2r": "planar2r.urdf",
    "arm3": "arm3.kinematic.json",
}

ROBOTS_DIR = Path(__file__).resolve().parent


def robot_path(name_or_path) -> Path:
    """Path of a bundled description ("ur5", "ypp3", "planar2r", "arm3") or of an existing file.

    Raises ValueError (listing the bundled names) when it is neither.
    """
    key = str(name_or_path)
    if key in BUNDLED:
        return ROBOTS_DIR / BUNDLED[key]
    path = Path(key).expanduser()
    if path.is_file():
        return path
    names = ", ".join(sorted(BUNDLED))
    raise ValueError(f"unknown robot {key!r}: not a bundled name ({names}) and no such file")
