"""A robot description as a kinematic tree of links and joints: what every parser produces.

Frames follow URDF: a joint's ``origin`` is the pose of the joint frame (equal to the child link frame at
q = 0) in the parent link frame; the motion is a rotation about (revolute, continuous) or a translation along
(prismatic) ``axis``, a unit vector in the joint frame. Lengths in metres, angles in radians, masses in kg.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from .errors import ModelError, name_some

JOINT_TYPES = ("revolute", "continuous", "prismatic", "fixed")


@dataclass
class Inertial:
    """Rigid-body inertia of one link.

    mass_kg: mass; com_m: (3,) centre of mass in the link frame; inertia_com_kgm2: (3, 3) rotational inertia
    about the centre of mass, expressed in the link frame's axes (any inertial-frame rotation already applied).
    """

    mass_kg: float
    com_m: np.ndarray
    inertia_com_kgm2: np.ndarray


@dataclass
class Mimic:
    """q_joint = multiplier * q_master + offset (URDF <mimic>)."""

    joint: str
    multiplier: float = 1.0
    offset: float = 0.0


@dataclass
class Link:
    name: str
    inertial: Optional[Inertial] = None


@dataclass
class Joint:
    """One joint. origin: (4, 4) parent link frame -> joint frame at q = 0; axis: (3,) unit, joint frame.

    lower/upper in rad (revolute) or m (prismatic), +-inf when unbounded (continuous);
    velocity_limit in rad/s or m/s and effort_limit in N*m or N, inf when not given.
    """

    name: str
    type: str
    parent: str
    child: str
    origin: np.ndarray = field(default_factory=lambda: np.eye(4))
    axis: np.ndarray = field(default_factory=lambda: np.array([1.0, 0.0, 0.0]))
    lower: float = -math.inf
    upper: float = math.inf
    velocity_limit: float = math.inf
    effort_limit: float = math.inf
    mimic: Optional[Mimic] = None


@dataclass
class KinematicTree:
    """Links and joints of a description, validated as a tree with a single root.

    source: file path or ``<string>``, used in error messages.
    """

    name: str
    source: str
    links: dict
    joints: dict
    root: str = ""
    child_joints: dict = field(default_factory=dict)
    parent_joint: dict = field(default_factory=dict)

    @classmethod
    def build(cls, name, source, links, joints):
        """Validate links/joints (lists) as a tree and index them. Raises ModelError naming the element."""
        src = str(source)
        link_map = {}
        for link in links:
            if link.name in link_map:
                raise ModelError(src, f"link '{link.name}'", "defined twice")
            _check_inertial(src, link)
            link_map[link.name] = link
        if not link_map:
            raise ModelError(src, "", "no links")
        joint_map = {}
        parent_joint = {}
        child_joints = {n: [] for n in link_map}
        for j in joints:
            el = f"joint '{j.name}'"
            if j.name in joint_map:
                raise ModelError(src, el, "defined twice")
            if j.type not in JOINT_TYPES:
                raise ModelError(src, el, f"unknown or unsupported joint type '{j.type}' "
                                          f"(supported: {', '.join(JOINT_TYPES)})")
            for role, ln in (("parent", j.parent), ("child", j.child)):
                if ln not in link_map:
                    raise ModelError(src, el, f"{role} link '{ln}' is not defined")
            if j.child in parent_joint:
                raise ModelError(src, el, f"link '{j.child}' already has parent joint "
                                          f"'{parent_joint[j.child].name}' (a link has one parent)")
            _check_joint_numbers(src, j)
            joint_map[j.name] = j
            parent_joint[j.child] = j
            child_joints[j.parent].append(j)
        roots = [n for n in link_map if n not in parent_joint]
        if not roots:
            raise ModelError(src, "", "the joints form a cycle: every link has a parent")
        if len(roots) > 1:
            raise ModelError(src, "", f"several root links ({name_some(roots)}): a robot has exactly one link "
                                      f"without a parent")
        tree = cls(name, src, link_map, joint_map, roots[0], child_joints, parent_joint)
        seen = set(tree.subtree_links(roots[0]))
        if len(seen) != len(link_map):
            stray = sorted(set(link_map) - seen)
            raise ModelError(src, f"link '{stray[0]}'", "is part of a cycle of joints (not reachable from the "
                                                        f"root '{roots[0]}')")
        for j in joint_map.values():
            if j.mimic is not None:
                if j.mimic.joint not in joint_map:
                    raise ModelError(src, f"joint '{j.name}'", f"mimics unknown joint '{j.mimic.joint}'")
                if j.type == "fixed" or joint_map[j.mimic.joint].type == "fixed":
                    raise ModelError(src, f"joint '{j.name}'", "mimic between a fixed joint and another joint")
        return tree

    def subtree_links(self, link):
        """Links of the subtree rooted at ``link``, parents before children (depth first)."""
        out, stack = [], [link]
        while stack:
            n = stack.pop()
            out.append(n)
            stack.extend(j.child for j in reversed(self.child_joints[n]))
        return out

    def path(self, base, tip):
        """Joints from ``base`` down to ``tip`` (base must be an ancestor of tip), base side first."""
        for role, ln in (("base link", base), ("tip link", tip)):
            if ln not in self.links:
                raise ModelError(self.source, f"{role} '{ln}'", f"not a link of this robot "
                                                                 f"(links: {name_some(self.links)})")
        joints = []
        n = tip
        while n != base:
            j = self.parent_joint.get(n)
            if j is None:
                raise ModelError(self.source, f"tip link '{tip}'", f"is not below base link '{base}'")
            joints.append(j)
            n = j.parent
        return joints[::-1]

    def longest_chain_tip(self, base):
        """The leaf below ``base`` with the most moving joints on its path (ties: most joints, then first)."""
        best, best_key = base, (-1, -1)
        for n in self.subtree_links(base):
            if self.child_joints[n]:
                continue
            path = self.path(base, n)
            key = (sum(j.type != "fixed" for j in path), len(path))
            if key > best_key:
                best, best_key = n, key
        return best


def _finite(src, el, what, values):
    arr = np.asarray(values, dtype=float)
    if not np.all(np.isfinite(arr)):
        raise ModelError(src, el, f"{what} holds NaN or infinite values: {arr.tolist()}")


def _check_joint_numbers(src, j):
    el = f"joint '{j.name}'"
    _finite(src, el, "origin", j.origin)
    if j.type != "fixed":
        _finite(src, el, "axis", j.axis)
        n = float(np.linalg.norm(j.axis))
        if n < 1e-9:
            raise ModelError(src, el, "axis has zero length")
        j.axis = np.asarray(j.axis, dtype=float) / n
    for what in ("lower", "upper", "velocity_limit", "effort_limit"):
        v = getattr(j, what)
        if math.isnan(v):
            raise ModelError(src, el, f"{what} is NaN")
    if j.type == "continuous":
        j.lower, j.upper = -math.inf, math.inf
    if j.lower > j.upper:
        raise ModelError(src, el, f"lower limit {j.lower} is above upper limit {j.upper}")
    if j.velocity_limit < 0 or j.effort_limit < 0:
        raise ModelError(src, el, "velocity and effort limits must not be negative")
    if j.mimic is not None:
        _finite(src, el, "mimic multiplier/offset", [j.mimic.multiplier, j.mimic.offset])


def _check_inertial(src, link):
    i = link.inertial
    if i is None:
        return
    el = f"link '{link.name}' <inertial>"
    _finite(src, el, "mass", [i.mass_kg])
    _finite(src, el, "centre of mass", i.com_m)
    _finite(src, el, "inertia", i.inertia_com_kgm2)
    if i.mass_kg < 0:
        raise ModelError(src, el, f"mass must not be negative, got {i.mass_kg} kg")
    inertia = np.asarray(i.inertia_com_kgm2, dtype=float)
    if inertia.shape != (3, 3) or not np.allclose(inertia, inertia.T, rtol=0, atol=1e-12):
        raise ModelError(src, el, "inertia must be a symmetric 3x3 matrix")
    eig = np.linalg.eigvalsh(inertia)
    # Point masses and thin rods (zero principal moments, or -1e-22 from rounding) are physical limits that
    # real descriptions use; a clearly negative principal moment is not.
    if eig[0] < -1e-9 * max(1.0, abs(eig[-1])):
        raise ModelError(src, el, f"inertia is not positive (semi-)definite: principal moments "
                                  f"{eig.tolist()} kg*m^2")
