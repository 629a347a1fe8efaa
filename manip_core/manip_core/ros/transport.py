"""DDS transport settings for nodes that publish camera-sized messages.

With Fast DDS's default shared-memory segment (512 KiB) best-effort 640x480 images rarely reach another process
(measured here: 7 of 120); fastdds_large_data.xml (16 MiB segment) delivers them all. Fast DDS reads the file
named by FASTDDS_DEFAULT_PROFILES_FILE (Fast DDS 3, Kilted) or FASTRTPS_DEFAULT_PROFILES_FILE (Fast DDS 2,
Humble/Jazzy) when a process creates its first participant, so this must run before rclpy.init().
"""
import os
from pathlib import Path

LARGE_DATA_PROFILE = Path(__file__).with_name("fastdds_large_data.xml")
_VARS = ("FASTDDS_DEFAULT_PROFILES_FILE", "FASTRTPS_DEFAULT_PROFILES_FILE")


def use_large_data_profile(environ=os.environ):
    """Point Fast DDS at the large-segment profile unless the user chose a profile or another middleware.

    Returns the profile path in use, or None when left alone.
    """
    rmw = environ.get("RMW_IMPLEMENTATION", "")
    if rmw and "fastrtps" not in rmw:
        return None
    if any(environ.get(v) for v in _VARS):
        return environ.get(_VARS[0]) or environ.get(_VARS[1])
    # Fast DDS 2 (Humble, Iron, Jazzy) reads only the FASTRTPS_ name; Fast DDS 3 (Kilted) warns that it is
    # deprecated, so name one or the other.
    old = environ.get("ROS_DISTRO", "") in ("humble", "iron", "jazzy")
    environ[_VARS[1] if old else _VARS[0]] = str(LARGE_DATA_PROFILE)
    return str(LARGE_DATA_PROFILE)
