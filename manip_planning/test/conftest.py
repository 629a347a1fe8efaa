"""Make the tests see the real manip_planning package, and share the UR5 and the demo scene.

pytest's importlib import mode imports this file as ``manip_planning.test.conftest`` and, to do so, first
imports the folder ``manip_planning/`` (the ament package root, no __init__.py) as a namespace package named
``manip_planning``, which shadows the Python package ``manip_planning/manip_planning``. Replace it by the real
one before any test module imports from it (the root conftest does the same for manip_core).
"""
import importlib
import sys
from pathlib import Path

_mod = sys.modules.get("manip_planning")
if _mod is not None and getattr(_mod, "__file__", None) is None:
    del sys.modules["manip_planning"]
    _pkg_root = str(Path(__file__).resolve().parents[1])
    if _pkg_root not in sys.path:
        sys.path.insert(0, _pkg_root)
    _real = importlib.import_module("manip_planning")
    for _name in ("test",):
        if hasattr(_mod, _name):
            setattr(_real, _name, getattr(_mod, _name))

import numpy as np  # noqa: E402
import pytest  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BUNDLED_UR5 = ROOT / "manip_core" / "manip_core" / "robots" / "ur5.urdf"

# The demo scene (manip_sim/config/pick_place_scene.yaml): table top z = 0, cube at the pick, a pillar
# 10 x 10 x 30 cm between pick and place.
PICK = np.array([0.45, -0.25, 0.02])
PLACE = np.array([0.45, 0.25, 0.02])
PILLAR_CENTER = np.array([0.45, 0.0, 0.15])
PILLAR_SIZE = np.array([0.10, 0.10, 0.30])
# Initial posture of the scene (elbow up, tool down above the work area) = the default home of pick_place.
HOME = np.array([np.pi, -np.pi / 2, np.pi / 2, -np.pi / 2, -np.pi / 2, 0.0])


def ur5_path():
    """The bundled UR5 (manip_core/robots/ur5.urdf), else example-robot-data's."""
    if BUNDLED_UR5.is_file():
        return BUNDLED_UR5
    from manip_core.reference_robots import UR5_REL, example_robot
    return example_robot(UR5_REL)


@pytest.fixture(scope="session")
def ur5():
    from manip_core.model import RobotModel
    return RobotModel.from_urdf(str(ur5_path()), "base_link", "tool0")


def tool_down(p):
    """Tool pose pointing straight down at position p."""
    T = np.eye(4)
    T[:3, :3] = np.diag([1.0, -1.0, -1.0])
    T[:3, 3] = p
    return T


CHAIN = ["shoulder_link", "forearm_link", "wrist_1_link", "wrist_2_link", "wrist_3_link", "tool0"]


def box_distance(points, center, size):
    """Euclidean distance (m) of points to a solid axis-aligned box (0 inside): clamp to the box."""
    lo, hi = center - size / 2, center + size / 2
    return np.linalg.norm(points - np.clip(points, lo, hi), axis=1)


def arm_box_clearance(model, Q, center, size, radius=0.06, step=0.005):
    """Independent oracle: smallest distance between the box and capsules of ``radius`` around the segments
    joining consecutive link origins of the UR5 chain (sampled every 5 mm), over configurations Q (m)."""
    best = np.inf
    for q in Q:
        P = [model.fk(q, link)[:3, 3] for link in CHAIN]
        for a, b in zip(P[:-1], P[1:]):
            n = max(2, int(np.ceil(np.linalg.norm(b - a) / step)) + 1)
            pts = a + np.linspace(0, 1, n)[:, None] * (b - a)
            best = min(best, float(np.min(box_distance(pts, center, size))) - radius)
    return best


def urdf_box_clearance(urdf, Q, center, size):
    """Independent oracle for a robot with collision geometry: the smallest exact distance (m) between a solid
    axis-aligned box and the URDF's <collision> primitives, placed by Pinocchio's forward kinematics (its own URDF
    parser) and measured by coal, over configurations Q (Pinocchio's joint order: the URDF's)."""
    import coal
    import pinocchio as pin
    model = pin.buildModelFromUrdf(str(urdf))
    geom = pin.buildGeomFromUrdf(model, str(urdf), pin.GeometryType.COLLISION)
    assert geom.ngeoms > 0, f"{urdf} has no collision geometry"
    data, gdata = model.createData(), geom.createData()
    box = coal.Box(*np.asarray(size, dtype=float))
    T_box = coal.Transform3s(np.eye(3), np.asarray(center, dtype=float))
    best = np.inf
    for q in Q:
        pin.updateGeometryPlacements(model, data, geom, gdata, np.asarray(q, dtype=float))
        for k, obj in enumerate(geom.geometryObjects):
            M = gdata.oMg[k]
            d = coal.distance(obj.geometry, coal.Transform3s(M.rotation, M.translation), box, T_box,
                              coal.DistanceRequest(), coal.DistanceResult())
            best = min(best, float(d))
    return best


def interpolate(Q, max_step=0.01):
    """Configurations Q with straight joint segments subdivided to at most max_step rad per joint."""
    Q = np.asarray(Q, dtype=float)
    out = [Q[0]]
    for a, b in zip(Q[:-1], Q[1:]):
        n = max(1, int(np.ceil(np.max(np.abs(b - a)) / max_step)))
        out.extend(a + (b - a) * k / n for k in range(1, n + 1))
    return np.array(out)


@pytest.fixture(scope="session")
def demo():
    """Constants and helpers of the demo scene for the tests."""
    from types import SimpleNamespace
    return SimpleNamespace(PICK=PICK, PLACE=PLACE, PILLAR_CENTER=PILLAR_CENTER, PILLAR_SIZE=PILLAR_SIZE, HOME=HOME,
                           tool_down=tool_down, ur5_path=ur5_path, CHAIN=CHAIN, arm_box_clearance=arm_box_clearance,
                           urdf_box_clearance=urdf_box_clearance, interpolate=interpolate)
