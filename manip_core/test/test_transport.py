"""The large-data Fast DDS profile: applied only when the user chose nothing else, named for the distro."""
import xml.etree.ElementTree as ET

from manip_core.ros.transport import LARGE_DATA_PROFILE, use_large_data_profile


def test_profile_is_shipped_and_sets_a_16_mib_segment():
    root = ET.parse(LARGE_DATA_PROFILE).getroot()
    sizes = [e.text for e in root.iter() if e.tag.endswith("segment_size")]
    assert sizes == [str(16 * 1024 * 1024)]


def test_applied_by_default_with_the_kilted_name():
    env = {}
    assert use_large_data_profile(env) == str(LARGE_DATA_PROFILE)
    assert env == {"FASTDDS_DEFAULT_PROFILES_FILE": str(LARGE_DATA_PROFILE)}


def test_older_distros_get_the_fastrtps_name():
    env = {"ROS_DISTRO": "humble"}
    use_large_data_profile(env)
    assert env["FASTRTPS_DEFAULT_PROFILES_FILE"] == str(LARGE_DATA_PROFILE)
    assert "FASTDDS_DEFAULT_PROFILES_FILE" not in env


def test_user_choices_are_respected():
    env = {"FASTDDS_DEFAULT_PROFILES_FILE": "/mine.xml"}
    assert use_large_data_profile(env) == "/mine.xml" and env == {"FASTDDS_DEFAULT_PROFILES_FILE": "/mine.xml"}
    env = {"RMW_IMPLEMENTATION": "rmw_cyclonedds_cpp"}
    assert use_large_data_profile(env) is None and "FASTDDS_DEFAULT_PROFILES_FILE" not in env
