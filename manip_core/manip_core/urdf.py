"""URDF reader: a ``<robot>`` document to a :class:`~manip_core.tree.KinematicTree`.

Only the kinematics and inertias are read (``<link>/<inertial>``, ``<joint>``); geometry, materials,
``<gazebo>``, ``<transmission>`` and other elements are ignored. Units are URDF's: metres, radians, kg,
kg*m^2. Structural checks (unknown links, cycles, several roots, joint types, limit order, positive-definite
inertia) are left to :meth:`KinematicTree.build`; this module reports what only the XML can tell: line numbers,
missing or malformed attributes, xacro input.
"""
from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np
from lxml import etree

from .errors import ModelError
from .spatial import rpy_to_matrix, transform
from .tree import Inertial, Joint, KinematicTree, Link, Mimic

_log = logging.getLogger("manip_core.urdf")
STRING_SOURCE = "<string>"
XACRO_HINT = "xacro macros found: expand with `xacro file.urdf.xacro > file.urdf` first"
LIMITED_TYPES = ("revolute", "prismatic")
INERTIA_KEYS = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")


def parse_urdf(path_or_xml) -> KinematicTree:
    """Parse a URDF file (str or pathlib path) or a URDF XML string (first non-space char ``<``).

    Raises ModelError naming the source (file path or ``<string>``), the element (with its line) and the
    reason.
    """
    source, data = _read_input(path_or_xml)
    root = _parse_xml(source, data)
    _reject_xacro(source, root)
    _strip_namespaces(root)
    if root.tag != "robot":
        raise ModelError(source, _where(root, f"<{root.tag}>"), "root element must be <robot>")
    name = root.get("name")
    if not name:
        raise ModelError(source, _where(root, "<robot>"), "missing attribute 'name'")
    links = [_parse_link(source, el) for el in _children(root, "link")]
    _warn_massless(source, links)
    joints = [_parse_joint(source, el) for el in _children(root, "joint")]
    return KinematicTree.build(name, source, links, joints)


# ----------------------------------------------------------------------------------------------- input


def _read_input(path_or_xml):
    """(source name, XML bytes) for a path or an XML string."""
    if isinstance(path_or_xml, str) and path_or_xml.lstrip().startswith("<"):
        return STRING_SOURCE, path_or_xml.encode("utf-8")
    if isinstance(path_or_xml, bytes) and path_or_xml.lstrip().startswith(b"<"):
        return STRING_SOURCE, path_or_xml
    path = Path(path_or_xml)
    source = str(path)
    if path.name.endswith(".xacro"):
        raise ModelError(source, "", XACRO_HINT)
    try:
        return source, path.read_bytes()
    except OSError as e:
        raise ModelError(source, "", f"cannot read file: {e.strerror or e}") from e


def _parse_xml(source, data):
    """Root element of the document; malformed XML becomes a ModelError with the lxml message and line."""
    parser = etree.XMLParser(remove_comments=True, remove_pis=True, resolve_entities=False, no_network=True)
    try:
        return etree.fromstring(data, parser)
    except etree.XMLSyntaxError as e:
        if "xacro" in (e.msg or ""):
            raise ModelError(source, f"line {e.lineno}", XACRO_HINT) from e
        raise ModelError(source, f"line {e.lineno}", f"malformed XML: {e.msg}") from e


def _reject_xacro(source, root):
    """xacro elements (``<xacro:macro>``...) or ``${...}`` expressions mean the file was not expanded.

    A mere ``xmlns:xacro`` declaration on ``<robot>`` (left by xacro in expanded files) is fine.
    """
    for el in root.iter():
        if not isinstance(el.tag, str):
            continue
        if el.prefix == "xacro" or "xacro" in (etree.QName(el).namespace or ""):
            raise ModelError(source, _where(el, f"<{el.prefix}:{etree.QName(el).localname}>"), XACRO_HINT)
        for key, value in el.attrib.items():
            if "${" in value:
                raise ModelError(source, _where(el, f"<{el.tag}> attribute '{key}'"), XACRO_HINT)


def _strip_namespaces(root):
    """Use local tag names, so ``<robot xmlns="...">`` reads like ``<robot>`` (urdfdom ignores namespaces)."""
    for el in root.iter():
        if isinstance(el.tag, str) and el.tag.startswith("{"):
            el.tag = etree.QName(el).localname


def _children(el, tag):
    """Direct child elements with this tag (not the ``<joint>`` inside ``<transmission>``)."""
    return [c for c in el if c.tag == tag]


def _where(el, what):
    """Element description with its source line, e.g. ``joint 'elbow' <limit> (line 12)``."""
    return f"{what} (line {el.sourceline})" if el.sourceline else what


# ----------------------------------------------------------------------------------------------- numbers


def _floats(source, el, what, attr, count, default=None):
    """``count`` finite floats from the space-separated attribute ``attr`` of ``el``.

    ``default`` (a sequence) is returned when the attribute is absent; without a default it is required.
    ``what`` names the element in messages, e.g. ``joint 'elbow' <origin>``.
    """
    text = el.get(attr)
    where = _where(el, f"{what} attribute '{attr}'")
    if text is None:
        if default is None:
            raise ModelError(source, where, "missing attribute")
        return np.array(default, dtype=float)
    parts = text.split()
    if len(parts) != count:
        raise ModelError(source, where, f"expected {count} number{'s' * (count > 1)}, got '{text}'")
    try:
        values = np.array([float(p) for p in parts])
    except ValueError:
        raise ModelError(source, where, f"not a number: '{text}'") from None
    if not np.all(np.isfinite(values)):
        raise ModelError(source, where, f"NaN or infinite value: '{text}'")
    return values


def _float(source, el, what, attr, default=None):
    """One finite float attribute (see :func:`_floats`)."""
    dflt = None if default is None else [default]
    return float(_floats(source, el, what, attr, 1, dflt)[0])


def _origin(source, el, what):
    """(4, 4) transform of an optional ``<origin xyz rpy>`` child of ``el``: identity when absent."""
    o = el.find("origin")
    if o is None:
        return np.eye(4)
    where = f"{what} <origin>"
    xyz = _floats(source, o, where, "xyz", 3, [0.0, 0.0, 0.0])
    rpy = _floats(source, o, where, "rpy", 3, [0.0, 0.0, 0.0])
    return transform(rpy_to_matrix(rpy), xyz)


def _required_child(source, el, tag, what):
    c = el.find(tag)
    if c is None:
        raise ModelError(source, _where(el, what), f"missing <{tag}> element")
    return c


def _name(source, el, kind):
    name = el.get("name")
    if not name:
        raise ModelError(source, _where(el, f"<{kind}>"), "missing attribute 'name'")
    return name


# ----------------------------------------------------------------------------------------------- links


def _warn_massless(source, links):
    """Mass 0 with a non-zero inertia: Pinocchio and PyBullet load it (e.g. MotionBenchMaker's panda_link8), so it
    is kept as a massless body with a rotational inertia, as Pinocchio does, with one warning per description."""
    names = [link.name for link in links if link.inertial is not None and link.inertial.mass_kg == 0.0]
    if names:
        shown = ", ".join(f"'{n}'" for n in names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
        _log.warning(f"{source}: link{'s' * (len(names) > 1)} {shown} <inertial>: mass 0 kg with a non-zero "
                     f"inertia: kept as a massless rotational inertia (as Pinocchio does)")


def _parse_link(source, el):
    name = _name(source, el, "link")
    inertial_el = el.find("inertial")
    inertial = None if inertial_el is None else _parse_inertial(source, inertial_el, f"link '{name}' <inertial>")
    return Link(name, inertial)


def _parse_inertial(source, el, what):
    """Inertial in the link frame, or None for the zero placeholder (mass 0 and inertia 0, e.g. ``ee_link``).

    URDF gives the inertia about the centre of mass in the ``<origin>`` frame; it is rotated into the link
    axes as R I R^T with R = rpy_to_matrix(rpy), and the centre of mass is the origin's xyz.
    """
    T = _origin(source, el, what)
    mass = _float(source, _required_child(source, el, "mass", what), f"{what} <mass>", "value")
    inertia_el = _required_child(source, el, "inertia", what)
    ixx, ixy, ixz, iyy, iyz, izz = (_float(source, inertia_el, f"{what} <inertia>", k) for k in INERTIA_KEYS)
    inertia = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    zero_inertia = not np.any(inertia)
    if mass == 0.0 and zero_inertia:
        return None
    if mass < 0.0:
        raise ModelError(source, _where(el, what), f"negative mass {mass} kg")
    R = T[:3, :3]
    return Inertial(mass, T[:3, 3].copy(), R @ inertia @ R.T)


# ----------------------------------------------------------------------------------------------- joints


def _parse_joint(source, el):
    name = _name(source, el, "joint")
    what = f"joint '{name}'"
    jtype = el.get("type")
    if not jtype:
        raise ModelError(source, _where(el, what), "missing attribute 'type'")
    parent = _link_ref(source, el, "parent", what)
    child = _link_ref(source, el, "child", what)
    joint = Joint(name, jtype, parent, child, origin=_origin(source, el, what))
    if jtype == "fixed":
        return joint
    axis_el = el.find("axis")
    if axis_el is not None:
        joint.axis = _floats(source, axis_el, f"{what} <axis>", "xyz", 3, [1.0, 0.0, 0.0])
    _apply_limit(source, el, what, joint)
    mimic_el = el.find("mimic")
    if mimic_el is not None:
        joint.mimic = _parse_mimic(source, mimic_el, f"{what} <mimic>")
    return joint


def _link_ref(source, el, tag, what):
    """Name in ``<parent link="...">`` / ``<child link="...">``."""
    ref = _required_child(source, el, tag, what)
    link = ref.get("link")
    if not link:
        raise ModelError(source, _where(ref, f"{what} <{tag}>"), "missing attribute 'link'")
    return link


def _apply_limit(source, el, what, joint):
    """Fill lower/upper (rad or m) and velocity/effort limits from ``<limit>``.

    As in urdfdom, a missing lower/upper is 0 (the joint cannot move) but the ``<limit>`` element itself is
    required for revolute and prismatic joints. Missing velocity/effort are +inf (not known). Continuous
    joints keep +-inf position limits.
    """
    lim = el.find("limit")
    if lim is None:
        if joint.type in LIMITED_TYPES:
            raise ModelError(source, _where(el, what), f"{joint.type} joint needs <limit> (URDF spec)")
        return
    where = f"{what} <limit>"
    if joint.type in LIMITED_TYPES:
        joint.lower = _float(source, lim, where, "lower", 0.0)
        joint.upper = _float(source, lim, where, "upper", 0.0)
    joint.velocity_limit = _float(source, lim, where, "velocity", math.inf)
    joint.effort_limit = _float(source, lim, where, "effort", math.inf)


def _parse_mimic(source, el, what):
    master = el.get("joint")
    if not master:
        raise ModelError(source, _where(el, what), "missing attribute 'joint'")
    return Mimic(master, _float(source, el, what, "multiplier", 1.0), _float(source, el, what, "offset", 0.0))
