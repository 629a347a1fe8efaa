"""Reader for NVIDIA Isaac SDK ``*.kinematic.json`` kinematic trees.

The format (Isaac SDK 2020, ``packages/math/gems/kinematic_tree/json_loader.hpp``) is::

    {"name": "arm",                                  # optional here (Isaac ignores it)
     "links": [
       {"name": "base"},                            # no "parent": the root
       {"name": "axis1", "parent": "base",
        "motor": {"type": "constant", "properties": {"pose": [qw, qx, qy, qz, x, y, z]}}},
       {"name": "joint1", "parent": "axis1",
        "motor": {"type": "revolute", "properties": {"axis": [0, 0, 1], "limits": [-3.14, 3.14]}}}]}

A link's motor is the transform from its parent's frame to its own frame: a constant pose, or a rotation
about (revolute) or a translation along (prismatic) ``axis``. Each link with a parent becomes one
:class:`~manip_core.tree.Joint` named after the child link (or the motor's optional ``name``):
constant -> fixed, revolute -> revolute (continuous when it has no ``limits``), prismatic -> prismatic,
no motor -> fixed identity. Extensions over Isaac, all optional: a revolute/prismatic motor may carry a
``pose`` (the joint origin; ``axis`` is then in the frame after the pose, as in URDF); ``limits`` may be
``{"lower": .., "upper": ..}``; the motor parameters may sit directly in ``motor`` instead of under
``properties``. A motor on the root link (Isaac allows one: the model frame -> root transform) becomes a
joint from a synthetic parent link ``<root>_parent`` unless it is a constant identity pose.

Poses (Isaac ``json_formatter.hpp``): a 7-list ``[qw, qx, qy, qz, x, y, z]`` (quaternion w first, normalised;
translation in m) or ``{"translation": [x, y, z], "rotation": R}`` (both keys optional) where R is one of
``[qw, qx, qy, qz]``, ``{"axis": [..], "angle_radians"|"angle_degrees": a}``,
``{"roll_*", "pitch_*", "yaw_*"}`` (``_radians`` or ``_degrees``; Isaac's order R = Rx(roll) Ry(pitch) Rz(yaw),
NOT URDF's rpy) or ``{"qw", "qx", "qy", "qz"}``. Limits are in rad (revolute) or m (prismatic). The format
has no inertias, velocity or effort limits: links get ``inertial=None`` and joints infinite velocity/effort.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from .errors import ModelError
from .spatial import axis_angle_to_matrix, quat_wxyz_to_matrix, transform
from .tree import Joint, KinematicTree, Link

MOTOR_TYPES = {"constant": "fixed", "revolute": "revolute", "prismatic": "prismatic"}
ANGLE_UNITS = (("_radians", 1.0), ("_degrees", math.pi / 180.0))


def parse_kinematic_json(path) -> KinematicTree:
    """Parse an Isaac-style ``*.kinematic.json`` file (str or pathlib path), or its JSON text (a str whose first
    non-space character is ``{``), into a KinematicTree.

    Every error is a ModelError naming the file (``<string>`` for text), the link (or ``links[i]``) and the
    reason.
    """
    source = "<string>" if isinstance(path, str) and path.lstrip().startswith("{") else str(path)
    doc = _load(source, path)
    if not isinstance(doc, dict):
        raise ModelError(source, "", "top level must be a JSON object with a 'links' list")
    links_json = doc.get("links")
    if not isinstance(links_json, list) or not links_json:
        raise ModelError(source, "'links'", "missing or not a non-empty list")
    name = doc.get("name", Path(source).name.split(".")[0])
    if not isinstance(name, str):
        raise ModelError(source, "'name'", "must be a string")
    entries = [_entry(source, i, item) for i, item in enumerate(links_json)]
    _check_parents(source, entries)
    links = [Link(e["name"]) for e in entries]
    joints = []
    for e in entries:
        joint = _joint(source, e, links)
        if joint is not None:
            joints.append(joint)
    return KinematicTree.build(name, source, links, joints)


# ----------------------------------------------------------------------------------------------- file


def _read(source, path):
    if isinstance(path, str) and path.lstrip().startswith("{"):  # the JSON text itself
        return path
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ModelError(source, "", f"cannot read file: {e.strerror or e}") from e
    except UnicodeDecodeError as e:
        raise ModelError(source, "", f"not UTF-8 text: {e.reason}") from e


def _load(source, path):
    text = _read(source, path)
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as e:
        raise ModelError(source, f"line {e.lineno} column {e.colno}", f"invalid JSON: {e.msg}") from e
    except ValueError as e:
        raise ModelError(source, "", str(e)) from e
    except RecursionError:
        raise ModelError(source, "", "invalid JSON: nested too deeply") from None


def _reject_constant(name):
    """json accepts NaN/Infinity literals; a robot description must not."""
    raise ValueError(f"invalid JSON: {name} is not a valid number")


def _entry(source, index, item):
    """Validated {"name", "parent", "motor", "el"} of one item of ``links``."""
    if not isinstance(item, dict):
        raise ModelError(source, f"links[{index}]", "must be a JSON object")
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise ModelError(source, f"links[{index}]", "missing or empty 'name' (a string)")
    el = f"link '{name}'"
    parent = item.get("parent")
    if parent is not None and (not isinstance(parent, str) or not parent):
        raise ModelError(source, el, "'parent' must be a non-empty string")
    motor = item.get("motor")
    if motor is not None and not isinstance(motor, dict):
        raise ModelError(source, el, "'motor' must be a JSON object")
    return {"name": name, "parent": parent, "motor": motor, "el": el}


def _check_parents(source, entries):
    """Every ``parent`` names a link of the file (the tree structure itself is KinematicTree.build's job)."""
    names = {e["name"] for e in entries}
    for e in entries:
        if e["parent"] is not None and e["parent"] not in names:
            raise ModelError(source, e["el"], f"parent '{e['parent']}' not found among the links")


# ----------------------------------------------------------------------------------------------- motors


def _joint(source, entry, links):
    """The Joint into this link (None for a root without a motor or with an identity constant motor).

    For a root with any other motor a synthetic parent link is appended to ``links``.
    """
    motor = entry["motor"]
    parent = entry["parent"]
    if motor is None:
        return None if parent is None else Joint(entry["name"], "fixed", parent, entry["name"])
    el = f"{entry['el']} motor"
    mtype = motor.get("type")
    if mtype not in MOTOR_TYPES:
        raise ModelError(source, el, f"unknown motor type {json.dumps(mtype)} "
                                     f"(supported: {', '.join(MOTOR_TYPES)})")
    props = _properties(source, el, motor)
    jname = motor.get("name", entry["name"])
    if not isinstance(jname, str) or not jname:
        raise ModelError(source, el, "'name' must be a non-empty string")
    joint = Joint(jname, MOTOR_TYPES[mtype], parent or "", entry["name"])
    if mtype == "constant":
        if "pose" not in props:
            raise ModelError(source, el, "constant motor needs a 'pose'")
        joint.origin = parse_pose(source, f"{el} pose", props["pose"])
    else:
        _moving_motor(source, el, mtype, props, joint)
    if parent is None:
        if joint.type == "fixed" and np.array_equal(joint.origin, np.eye(4)):
            return None
        joint.parent = _synthetic_parent(entry["name"], links)
    return joint


def _properties(source, el, motor):
    """Motor parameters: Isaac's ``motor.properties`` merged over parameters given directly in ``motor``."""
    props = {k: v for k, v in motor.items() if k not in ("type", "name", "properties")}
    nested = motor.get("properties", {})
    if not isinstance(nested, dict):
        raise ModelError(source, el, "'properties' must be a JSON object")
    both = sorted(nested.keys() & props.keys())
    if both:
        raise ModelError(source, el, f"'{both[0]}' given both in 'motor' and in 'motor.properties'")
    props.update(nested)
    return props


def _moving_motor(source, el, mtype, props, joint):
    """Fill origin, axis and limits of a revolute/prismatic motor."""
    if "pose" in props:
        joint.origin = parse_pose(source, f"{el} pose", props["pose"])
    if "axis" not in props:
        raise ModelError(source, el, f"{mtype} motor needs an 'axis'")
    axis = _vector(source, f"{el} axis", props["axis"], 3)
    n = float(np.linalg.norm(axis))
    if n < 1e-9:
        raise ModelError(source, f"{el} axis", "has zero length")
    if mtype == "prismatic" and abs(n - 1.0) > 1e-6:
        raise ModelError(source, f"{el} axis", f"prismatic axis must be a unit vector (length {n:.9g}): Isaac "
                                               "scales the travel by its length")
    joint.axis = axis / n
    limits = props.get("limits")
    if limits is None:
        if mtype == "revolute":
            joint.type = "continuous"
        return
    joint.lower, joint.upper = _limits(source, f"{el} limits", limits)


def _limits(source, el, value):
    """(lower, upper) from ``[lower, upper]`` or ``{"lower": .., "upper": ..}``."""
    if isinstance(value, dict):
        missing = [k for k in ("lower", "upper") if k not in value]
        if missing:
            raise ModelError(source, el, f"missing {', '.join(repr(k) for k in missing)}")
        value = [value["lower"], value["upper"]]
    lower, upper = _vector(source, el, value, 2)
    return float(lower), float(upper)


def _synthetic_parent(root, links):
    """Append a frame link for the root's motor to start from; its name is ``<root>_parent`` (made unique)."""
    names = {link.name for link in links}
    name = f"{root}_parent"
    while name in names:
        name += "_"
    links.append(Link(name))
    return name


# ----------------------------------------------------------------------------------------------- poses


def parse_pose(source, el, value):
    """(4, 4) transform of an Isaac pose: ``[qw, qx, qy, qz, x, y, z]`` or {"translation", "rotation"}."""
    if isinstance(value, list):
        if len(value) != 7:
            raise ModelError(source, el, f"a pose list must have 7 numbers [qw, qx, qy, qz, x, y, z], "
                                         f"got {len(value)}")
        v = _vector(source, el, value, 7)
        return transform(_quaternion(source, el, v[:4]), v[4:])
    if not isinstance(value, dict):
        raise ModelError(source, el, "must be a 7-number list or an object with 'translation'/'rotation'")
    unknown = set(value) - {"translation", "rotation"}
    if unknown:
        raise ModelError(source, el, f"unknown key(s) {sorted(unknown)} (expected 'translation', 'rotation')")
    p = _vector(source, f"{el} translation", value["translation"], 3) if "translation" in value else None
    R = _rotation(source, f"{el} rotation", value["rotation"]) if "rotation" in value else None
    return transform(R, p)


def _rotation(source, el, value):
    """(3, 3) rotation from one (and only one) of Isaac's SO3 forms."""
    if isinstance(value, list):
        if len(value) != 4:
            raise ModelError(source, el, f"a rotation list must be a quaternion [qw, qx, qy, qz], "
                                         f"got {len(value)} numbers")
        return _quaternion(source, el, _vector(source, el, value, 4))
    if not isinstance(value, dict):
        raise ModelError(source, el, "must be a quaternion list or an object")
    forms = {
        "axis-angle": {"axis", "angle_radians", "angle_degrees"},
        "roll-pitch-yaw": {f"{a}{u}" for a in ("roll", "pitch", "yaw") for u, _ in ANGLE_UNITS},
        "quaternion": {"qw", "qx", "qy", "qz"},
    }
    unknown = set(value) - set().union(*forms.values())
    if unknown:
        raise ModelError(source, el, f"unknown key(s) {sorted(unknown)}")
    used = [f for f, keys in forms.items() if keys & set(value)]
    if len(used) != 1:
        raise ModelError(source, el, "give exactly one of: {'axis', 'angle_radians'|'angle_degrees'}, "
                                     "{'roll_*', 'pitch_*', 'yaw_*'}, {'qw', 'qx', 'qy', 'qz'}"
                                     + (f" (got {' and '.join(used)})" if used else " (got none)"))
    if used[0] == "axis-angle":
        return _axis_angle(source, el, value)
    if used[0] == "roll-pitch-yaw":
        r, p, y = (_angle(source, el, value, a, required=False) for a in ("roll", "pitch", "yaw"))
        return (axis_angle_to_matrix([1, 0, 0], r) @ axis_angle_to_matrix([0, 1, 0], p)
                @ axis_angle_to_matrix([0, 0, 1], y))
    missing = forms["quaternion"] - set(value)
    if missing:
        raise ModelError(source, el, f"quaternion needs 'qw', 'qx', 'qy' and 'qz' (missing {sorted(missing)})")
    q = [_number(source, f"{el} {k}", value[k]) for k in ("qw", "qx", "qy", "qz")]
    return _quaternion(source, el, np.array(q))


def _axis_angle(source, el, value):
    if "axis" not in value:
        raise ModelError(source, el, "both 'axis' and 'angle_radians'/'angle_degrees' must be set")
    axis = _vector(source, f"{el} axis", value["axis"], 3)
    angle = _angle(source, el, value, "angle", required=True)
    if np.linalg.norm(axis) < 1e-12:
        if angle == 0.0:
            return np.eye(3)
        raise ModelError(source, f"{el} axis", "has zero length")
    return axis_angle_to_matrix(axis, angle)


def _angle(source, el, value, prefix, required):
    """Angle in rad from ``<prefix>_radians`` or ``<prefix>_degrees`` (not both); 0 when optional and absent."""
    given = [(prefix + suffix, scale) for suffix, scale in ANGLE_UNITS if prefix + suffix in value]
    if len(given) > 1:
        raise ModelError(source, el, f"set '{prefix}_radians' or '{prefix}_degrees', not both")
    if not given:
        if required:
            raise ModelError(source, el, f"both 'axis' and '{prefix}_radians'/'{prefix}_degrees' must be set")
        return 0.0
    key, scale = given[0]
    return _number(source, f"{el} {key}", value[key]) * scale


def _quaternion(source, el, q):
    """Rotation of a (w, x, y, z) quaternion, normalised (Isaac files hold 0.7071-style values)."""
    if np.linalg.norm(q) < 1e-9:
        raise ModelError(source, el, f"quaternion {q.tolist()} has zero norm")
    return quat_wxyz_to_matrix(q)


# ----------------------------------------------------------------------------------------------- numbers


def _number(source, el, value):
    """A finite float; bools and strings are rejected."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ModelError(source, el, f"expected a number, got {json.dumps(value)}")
    if not math.isfinite(value):
        raise ModelError(source, el, f"NaN or infinite value {value}")
    return float(value)


def _vector(source, el, value, n):
    """A list of exactly ``n`` finite numbers as a (n,) array."""
    if not isinstance(value, list) or len(value) != n:
        raise ModelError(source, el, f"expected a list of {n} numbers, got {json.dumps(value)}")
    return np.array([_number(source, el, v) for v in value])
