"""Make the tests see the real manip_control package.

pytest's importlib import mode imports this file as ``manip_control.test.conftest`` and, to do so, first
imports the folder ``manip_control/`` (the ament package root, no __init__.py) as a namespace package named
``manip_control``, which shadows the Python package ``manip_control/manip_control``. Replace it by the real
one before any test module imports from it (the root conftest does the same for manip_core).
"""
import importlib
import sys

_mod = sys.modules.get("manip_control")
if _mod is not None and getattr(_mod, "__file__", None) is None:
    del sys.modules["manip_control"]
    _real = importlib.import_module("manip_control")
    for _name in ("test",):
        if hasattr(_mod, _name):
            setattr(_real, _name, getattr(_mod, _name))

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

BUNDLED_UR5 = Path(__file__).resolve().parents[2] / "manip_core" / "manip_core" / "robots" / "ur5.urdf"


def ur5_path():
    """The bundled UR5 (manip_core/robots/ur5.urdf), else example-robot-data's."""
    try:
        from manip_core.robots import robot_path
        p = robot_path("ur5")
        if Path(p).is_file():
            return Path(p)
    except (ImportError, ValueError):
        pass
    if BUNDLED_UR5.is_file():
        return BUNDLED_UR5
    from manip_core.reference_robots import UR5_REL, example_robot
    return example_robot(UR5_REL)


@pytest.fixture(scope="session")
def ur5():
    from manip_core.model import RobotModel
    return RobotModel.from_urdf(str(ur5_path()), "base_link", "tool0")



@pytest.fixture(scope="session")
def ros_rig():
    """The module ros_rig.py of this folder (controller subprocess + simulated robot over DDS); skips the
    test when rclpy or the manip_msgs interfaces are missing."""
    pytest.importorskip("rclpy")
    pytest.importorskip("manip_msgs.action")
    import importlib.util
    name = "manip_control_test_ros_rig"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("ros_rig.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]
