"""The simulated scene: robot, table, objects to pick, obstacles (loaded from a YAML file, validated).

No rclpy and no PyBullet here. Every position and orientation in the file is expressed in the robot's base
frame (m, quaternions x y z w); ``robot.base_pose`` only places that frame in the simulator's world, whose
gravity points along -z (so a tilted base_pose tilts gravity as seen from the base frame).

File layout (see ``manip_sim/config/pick_place_scene.yaml``)::

    robot:
      urdf: ur5                 # a path (relative: to this file's folder) or a manip_core bundled name
      base_link: base_link      # optional (default: the URDF root)
      tip_link: tool0           # optional (default: manip_core's choice, the longest chain)
      base_pose: {position: [0, 0, 0], orientation_xyzw: [0, 0, 0, 1]}   # optional, in the world
      initial_positions: {shoulder_pan_joint: 3.14, ...}   # or a list in model joint order; rad / m
    table: {size: [1.4, 1.6, 0.05], center_xy: [0.3, 0.0]}  # box whose top is z = 0 of the base frame
    objects:   [{name, shape, size, position, orientation_xyzw, mass, color, texture}, ...]
    obstacles: [{name, shape, size, position, orientation_xyzw, color, texture}, ...]   # static
    gripper: {max_distance: 0.05}   # suction reach (m): default of the gripper/grasp service
    tasks: [{object: cube, place_position: [x, y, z]}]   # where each object should go (object centre)

Shapes: ``box`` (size = full extents x y z), ``sphere`` (size = [diameter]), ``cylinder`` (size =
[diameter, height], axis along the body's z). Sizes are stored as 3 extents (SceneObject convention:
diameter, diameter, height for spheres and cylinders).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

SHAPES = ("box", "sphere", "cylinder")
KIND_OBJECT, KIND_OBSTACLE, KIND_SUPPORT = 0, 1, 2   # manip_msgs/SceneObject kinds
TEXTURES = ("none", "noise")


class SceneError(ValueError):
    """A scene file is missing a key or holds a malformed value; the message names the key."""


@dataclass(frozen=True)
class BodySpec:
    """A rigid body of the scene. position/orientation: the body centre in the base frame."""

    name: str
    kind: int
    shape: str
    size: tuple            # full extents (m) along the body's x, y, z
    position: tuple
    orientation_xyzw: tuple = (0.0, 0.0, 0.0, 1.0)
    mass: float = 0.0      # kg; 0: static (obstacles, table)
    color: tuple = (0.7, 0.7, 0.7, 1.0)
    texture: str = "noise"  # "noise": a random grey-level pattern (gives stereo matching something to match)
    friction: float = 0.8


@dataclass(frozen=True)
class RobotSpec:
    urdf: str                                   # absolute path of the URDF file
    base_link: str | None = None
    tip_link: str | None = None
    base_position: tuple = (0.0, 0.0, 0.0)      # base frame in the world (m)
    base_orientation_xyzw: tuple = (0.0, 0.0, 0.0, 1.0)
    initial_positions: Any = None               # dict name -> value, a tuple in model order, or None (zeros)


@dataclass(frozen=True)
class TaskSpec:
    object: str
    place_position: tuple


@dataclass(frozen=True)
class Scene:
    robot: RobotSpec | None                     # None: given at start-up (with_robot)
    table: BodySpec | None
    objects: tuple = ()
    obstacles: tuple = ()
    grasp_max_distance: float = 0.05
    tasks: tuple = ()
    source: str = ""

    @property
    def bodies(self):
        """Every body other than the robot: table first, then objects, then obstacles."""
        return ((self.table,) if self.table else ()) + tuple(self.objects) + tuple(self.obstacles)

    def body(self, name):
        for b in self.bodies:
            if b.name == name:
                return b
        raise KeyError(name)

    def initial_joint_positions(self, joint_names):
        """Initial joint values (list, model order) for the robot's joints; missing names are 0."""
        init = self.robot.initial_positions
        if init is None:
            return [0.0] * len(joint_names)
        if isinstance(init, dict):
            unknown = sorted(set(init) - set(joint_names))
            if unknown:
                raise SceneError(f"{self.source}: robot.initial_positions: unknown joint(s) {unknown}; the "
                                 f"robot's joints are {list(joint_names)}")
            return [float(init.get(n, 0.0)) for n in joint_names]
        if len(init) != len(joint_names):
            raise SceneError(f"{self.source}: robot.initial_positions: {len(init)} values for "
                             f"{len(joint_names)} joints ({', '.join(joint_names)})")
        return [float(v) for v in init]


# ----------------------------------------------------------------------------------------- helpers
class _Ctx:
    def __init__(self, source):
        self.source = source

    def fail(self, key, what):
        raise SceneError(f"{self.source}: {key}: {what}")

    def mapping(self, value, key, allowed=None, required=()):
        if not isinstance(value, dict):
            self.fail(key, f"expected a mapping, got {type(value).__name__} {value!r}")
        for r in required:
            if r not in value:
                self.fail(f"{key}.{r}" if key else r, "missing (required)")
        if allowed is not None:
            extra = sorted(set(value) - set(allowed))
            if extra:
                self.fail(key or "(top level)", f"unknown key(s) {extra}; allowed: {sorted(allowed)}")
        return value

    def number(self, value, key, positive=False, nonneg=False):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            self.fail(key, f"expected a finite number, got {value!r}")
        if positive and value <= 0:
            self.fail(key, f"must be > 0, got {value!r}")
        if nonneg and value < 0:
            self.fail(key, f"must be >= 0, got {value!r}")
        return float(value)

    def vector(self, value, key, n, positive=False):
        if not isinstance(value, (list, tuple)) or len(value) != n:
            self.fail(key, f"expected a list of {n} numbers, got {value!r}")
        return tuple(self.number(v, f"{key}[{i}]", positive=positive) for i, v in enumerate(value))

    def quaternion(self, value, key):
        q = self.vector(value, key, 4)
        norm = math.sqrt(sum(c * c for c in q))
        if abs(norm - 1.0) > 1e-3:
            self.fail(key, f"quaternion (x, y, z, w) must have unit norm, got norm {norm:.6g}")
        return tuple(c / norm for c in q)

    def string(self, value, key):
        if not isinstance(value, str) or not value.strip():
            self.fail(key, f"expected a non-empty string, got {value!r}")
        return value.strip()


def resolve_urdf(value, base_dir):
    """Absolute path of a scene's robot.urdf: an existing path (relative to base_dir), a ``package://``
    URI (manip_core.package_uri: MANIP_PACKAGE_PATH, the ament index, ROS_PACKAGE_PATH, this Python's prefixes),
    or a name bundled with manip_core (e.g. "ur5")."""
    value = str(value)
    if value.startswith(("package://", "file://")):
        from manip_core.package_uri import resolve_uri
        path = resolve_uri(value, base_dir)   # PackageNotFoundError is a FileNotFoundError
        if not Path(path).is_file():
            raise FileNotFoundError(f"no such file: {path}")
        return path
    path = Path(os.path.expanduser(value))
    if not path.is_absolute():
        path = Path(base_dir) / path
    if path.is_file():
        return str(path.resolve())
    if "/" not in value and not value.endswith(".urdf"):
        from manip_core.robots import robot_path   # bundled names (no path separator)
        try:
            return str(robot_path(value))
        except ValueError as exc:
            raise FileNotFoundError(str(exc)) from exc
    raise FileNotFoundError(f"no such file: {path}")


_BODY_KEYS = ("name", "shape", "size", "position", "orientation_xyzw", "mass", "color", "texture", "friction")


def _body(ctx, raw, key, kind):
    allowed = _BODY_KEYS if kind == KIND_OBJECT else tuple(k for k in _BODY_KEYS if k != "mass")
    ctx.mapping(raw, key, allowed, required=("name", "shape", "size", "position"))
    name = ctx.string(raw["name"], f"{key}.name")
    shape = raw["shape"]
    if shape not in SHAPES:
        ctx.fail(f"{key}.shape", f"expected one of {list(SHAPES)}, got {shape!r}")
    n = {"box": 3, "sphere": 1, "cylinder": 2}[shape]
    what = {"box": "[x, y, z] extents", "sphere": "[diameter]", "cylinder": "[diameter, height]"}[shape]
    size = raw["size"]
    if not isinstance(size, (list, tuple)) or len(size) != n:
        ctx.fail(f"{key}.size", f"a {shape} needs {what} (m), got {size!r}")
    size = ctx.vector(size, f"{key}.size", n, positive=True)
    if shape == "sphere":
        size = (size[0],) * 3
    elif shape == "cylinder":
        size = (size[0], size[0], size[1])
    position = ctx.vector(raw["position"], f"{key}.position", 3)
    orientation = ctx.quaternion(raw.get("orientation_xyzw", [0, 0, 0, 1]), f"{key}.orientation_xyzw")
    mass = 0.0
    if kind == KIND_OBJECT:
        mass = ctx.number(raw.get("mass", 0.1), f"{key}.mass", positive=True)
    color = ctx.vector(raw.get("color", [0.7, 0.7, 0.7, 1.0]), f"{key}.color", 4)
    if not all(0.0 <= c <= 1.0 for c in color):
        ctx.fail(f"{key}.color", f"RGBA components must be in [0, 1], got {list(color)}")
    texture = raw.get("texture", "noise")
    if texture not in TEXTURES:
        ctx.fail(f"{key}.texture", f"expected one of {list(TEXTURES)}, got {texture!r}")
    friction = ctx.number(raw.get("friction", 0.8), f"{key}.friction", nonneg=True)
    return BodySpec(name, kind, shape, size, position, orientation, mass, color, texture, friction)


def parse_scene(data, base_dir=".", source="<scene>"):
    """Validate a scene given as a dict (the YAML document); raise SceneError naming the bad key."""
    ctx = _Ctx(source)
    if data is None:
        ctx.fail("(top level)", "the file is empty")
    ctx.mapping(data, "", ("robot", "table", "objects", "obstacles", "gripper", "tasks", "name"))
    robot = _robot(ctx, data["robot"], base_dir) if data.get("robot") is not None else None
    return _rest(ctx, data, robot, source)


def _robot(ctx, raw, base_dir):
    raw = ctx.mapping(raw, "robot",
                      ("urdf", "base_link", "tip_link", "base_pose", "initial_positions"), required=("urdf",))
    urdf_value = ctx.string(raw["urdf"], "robot.urdf")
    try:
        urdf = resolve_urdf(urdf_value, base_dir)
    except FileNotFoundError as exc:
        ctx.fail("robot.urdf", f"{urdf_value!r}: {exc}")
    base_link = ctx.string(raw["base_link"], "robot.base_link") if raw.get("base_link") is not None else None
    tip_link = ctx.string(raw["tip_link"], "robot.tip_link") if raw.get("tip_link") is not None else None
    pose = ctx.mapping(raw.get("base_pose", {}) or {}, "robot.base_pose", ("position", "orientation_xyzw"))
    base_position = ctx.vector(pose.get("position", [0, 0, 0]), "robot.base_pose.position", 3)
    base_orientation = ctx.quaternion(pose.get("orientation_xyzw", [0, 0, 0, 1]),
                                      "robot.base_pose.orientation_xyzw")
    init = raw.get("initial_positions")
    if isinstance(init, dict):
        for k, v in init.items():
            ctx.number(v, f"robot.initial_positions.{k}")
        init = {str(k): float(v) for k, v in init.items()}
    elif isinstance(init, (list, tuple)):
        init = tuple(ctx.number(v, f"robot.initial_positions[{i}]") for i, v in enumerate(init))
    elif init is not None:
        ctx.fail("robot.initial_positions", f"expected a mapping joint -> value or a list, got {init!r}")
    return RobotSpec(urdf, base_link, tip_link, base_position, base_orientation, init)


def _rest(ctx, data, robot, source):
    table = None
    if data.get("table") is not None:
        t = ctx.mapping(data["table"], "table", ("size", "center_xy", "color", "texture", "friction"),
                        required=("size",))
        size = ctx.vector(t["size"], "table.size", 3, positive=True)
        cx, cy = ctx.vector(t.get("center_xy", [0.0, 0.0]), "table.center_xy", 2)
        if abs(cx) > size[0] / 2 or abs(cy) > size[1] / 2:
            ctx.fail("table.center_xy", f"the robot (at the origin) must stand on the table: centre ({cx}, {cy})"
                                        f" is farther than half the size {list(size[:2])} from it")
        t = dict(t, name="table", shape="box", position=[cx, cy, -size[2] / 2])
        t.pop("center_xy", None)
        table = _body(ctx, t, "table", KIND_SUPPORT)

    bodies = {}
    lists = {}
    for section, kind in (("objects", KIND_OBJECT), ("obstacles", KIND_OBSTACLE)):
        items = data.get(section) or []
        if not isinstance(items, list):
            ctx.fail(section, f"expected a list, got {items!r}")
        out = []
        for i, item in enumerate(items):
            b = _body(ctx, item, f"{section}[{i}]", kind)
            if b.name in bodies or b.name == "table":
                ctx.fail(f"{section}[{i}].name", f"duplicate name {b.name!r}")
            bodies[b.name] = b
            out.append(b)
        lists[section] = tuple(out)

    g = ctx.mapping(data.get("gripper") or {}, "gripper", ("max_distance",))
    max_distance = ctx.number(g.get("max_distance", 0.05), "gripper.max_distance", positive=True)

    tasks = []
    items = data.get("tasks") or []
    if not isinstance(items, list):
        ctx.fail("tasks", f"expected a list, got {items!r}")
    for i, item in enumerate(items):
        ctx.mapping(item, f"tasks[{i}]", ("object", "place_position"), required=("object", "place_position"))
        name = ctx.string(item["object"], f"tasks[{i}].object")
        if name not in bodies or bodies[name].kind != KIND_OBJECT:
            ctx.fail(f"tasks[{i}].object", f"{name!r} is not one of the objects "
                                           f"{[b.name for b in lists['objects']]}")
        tasks.append(TaskSpec(name, ctx.vector(item["place_position"], f"tasks[{i}].place_position", 3)))

    return Scene(robot, table, lists["objects"], lists["obstacles"], max_distance, tuple(tasks), source)


def _same_file_or_content(a, b):
    """The same URDF: one file, or two files with the same bytes (a colcon install holds the bundled robots both
    in the Python package and in the package's share folder; the launch file names the latter)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return Path(a).read_bytes() == Path(b).read_bytes()
    except OSError:
        return False


def with_robot(scene, urdf=None, base_link=None, tip_link=None):
    """The scene with the robot given at start-up (the launch's robot argument: sim_bridge's ``urdf_path``,
    ``base_link``, ``tip_link``; empty/None: the scene's own). A scene that names another URDF file, base or tip
    link than the one given is an error (one source of truth for the robot); a scene without a robot takes it."""
    ctx = _Ctx(scene.source)
    spec = scene.robot
    if urdf:
        try:
            path = resolve_urdf(urdf, ".")
        except FileNotFoundError as exc:
            ctx.fail("urdf_path", f"{urdf!r}: {exc}")
        if spec is not None and not _same_file_or_content(spec.urdf, path):
            ctx.fail("robot.urdf", f"names {spec.urdf}, but the robot given at start-up (launch argument robot, "
                                   f"parameter urdf_path) is {path}: pass the scene's robot (robot:={spec.urdf}) or "
                                   f"remove robot.urdf from the scene")
        spec = spec if spec is not None else RobotSpec(path)
    if spec is None:
        ctx.fail("robot", "missing: the scene names no robot and none was given at start-up (urdf_path)")
    changes = {}
    for key, value in (("base_link", base_link), ("tip_link", tip_link)):
        if not value:
            continue
        mine = getattr(spec, key)
        if mine is not None and mine != value:
            ctx.fail(f"robot.{key}", f"is {mine!r}, but {value!r} was given at start-up (launch argument {key})")
        changes[key] = value
    return replace(scene, robot=replace(spec, **changes)) if changes or spec is not scene.robot else scene


def load_scene(path):
    """Read and validate a scene YAML file (relative paths inside resolve against its folder)."""
    path = Path(path).expanduser()
    try:
        text = path.read_text()
    except OSError as exc:
        raise SceneError(f"{path}: cannot read the scene file: {exc}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SceneError(f"{path}: not valid YAML: {exc}") from exc
    return parse_scene(data, path.resolve().parent, str(path))


def default_scene_path():
    """The pick-and-place scene installed with manip_sim (share/manip_sim/config) or in the source tree."""
    here = Path(__file__).resolve().parent.parent / "config" / "pick_place_scene.yaml"
    if here.is_file():
        return str(here)
    try:
        from ament_index_python.packages import get_package_share_directory
        return str(Path(get_package_share_directory("manip_sim")) / "config" / "pick_place_scene.yaml")
    except Exception:  # noqa: BLE001
        return str(here)
