"""Compile a KinematicTree, a base link and a tip link into the packed arrays of the numba kernels.

The actuated joints (dof) are the moving, non-mimic joints on the path base -> tip. Every moving joint below
the base whose value follows from them (mimic joints of actuated joints, on or off the path) is a physical
joint with q_phys = A q + b; every other moving joint below the base is locked at 0 (or at its mimic value)
and welded like a fixed joint. Links welded together form one body whose inertia is the sum of theirs.
"""
from dataclasses import dataclass

import numpy as np

from ._layout import (AXIS_GENERAL, BODY_STRIDE, JOINT_PRISMATIC, JOINT_REVOLUTE, MI_HEADER, MI_STRIDE, O_AX,
                      O_H, O_M, O_P, O_R)
from .errors import ModelError
from .spatial import axis_angle_to_matrix, skew, transform


@dataclass
class Compiled:
    mf: np.ndarray
    mi: np.ndarray
    dof_joints: list          # tree Joint objects of the actuated joints, base side first
    link_frames: dict         # link name -> (body index or -1, (4, 4) offset in that body's frame)
    body_joint_names: list    # name of the physical joint of each body
    total_mass_kg: float      # moving mass (welded to physical bodies)
    has_inertia: bool         # every physical body carries mass


def _motion(joint, value):
    """Transform of the joint motion at ``value`` (rad or m) in the joint frame."""
    if joint.type == "prismatic":
        return transform(p=joint.axis * value)
    return transform(R=axis_angle_to_matrix(joint.axis, value))


def _mimic_rows(tree, moving, dof_index):
    """For each moving joint: (row (dof,), offset) with q_joint = row . q + offset."""
    dof = len(dof_index)
    rows = {}
    visiting = set()

    def resolve(name):
        if name in rows:
            return rows[name]
        if name in visiting:
            raise ModelError(tree.source, f"joint '{name}'", "mimic joints form a cycle")
        visiting.add(name)
        j = tree.joints[name]
        row = np.zeros(dof)
        if name in dof_index:
            row[dof_index[name]] = 1.0
            out = (row, 0.0)
        elif j.mimic is not None:
            mrow, moff = resolve(j.mimic.joint)
            out = (j.mimic.multiplier * mrow, j.mimic.multiplier * moff + j.mimic.offset)
        else:
            out = (row, 0.0)
        visiting.discard(name)
        rows[name] = out
        return out

    for name in moving:
        resolve(name)
    return rows


def _add_inertial(acc, inertial, T):
    """Add a link's inertia (at offset T in the body frame) to acc = [m, h(3), Ibar(9)] of the body."""
    R, p = T[:3, :3], T[:3, 3]
    m = inertial.mass_kg
    c = R @ inertial.com_m + p
    Ic = R @ inertial.inertia_com_kgm2 @ R.T
    acc[0] += m
    acc[1:4] += m * c
    acc[4:13] += (Ic - m * skew(c) @ skew(c)).ravel()


def _axis_kind(axis):
    for k in range(3):
        e = np.zeros(3)
        e[k] = 1.0
        if np.array_equal(axis, e):
            return k
    return AXIS_GENERAL


def compile_tree(tree, base_link=None, tip_link=None):
    base = base_link or tree.root
    if base not in tree.links:
        raise ModelError(tree.source, f"base link '{base}'", f"not a link of this robot (links: "
                                                              f"{', '.join(tree.links)})")
    tip = tip_link or tree.longest_chain_tip(base)
    path = tree.path(base, tip)
    subtree = tree.subtree_links(base)
    moving = [tree.parent_joint[n].name for n in subtree[1:] if tree.parent_joint[n].type != "fixed"]
    dof_joints = [j for j in path if j.type != "fixed" and j.mimic is None]
    rows = _mimic_rows(tree, moving, {j.name: k for k, j in enumerate(dof_joints)})
    # A mimic joint on the path whose master is outside the chain is actuated directly.
    free = {j.name for j in path if j.type != "fixed" and j.mimic is not None and not np.any(rows[j.name][0])}
    if free:
        dof_joints = [j for j in path if j.type != "fixed" and (j.mimic is None or j.name in free)]
        rows = _mimic_rows(tree, moving, {j.name: k for k, j in enumerate(dof_joints)})
    if not dof_joints:
        raise ModelError(tree.source, f"chain '{base}' -> '{tip}'", "has no moving joint")
    dof = len(dof_joints)

    bodies = []          # per body: dict(parent, joint, X (4,4), acc)
    link_frames = {}
    stack = [(base, -1, np.eye(4))]
    base_acc = np.zeros(13)
    while stack:
        link, body, T = stack.pop()
        link_frames[link] = (body, T)
        inertial = tree.links[link].inertial
        if inertial is not None:
            _add_inertial(bodies[body]["acc"] if body >= 0 else base_acc, inertial, T)
        for j in reversed(tree.child_joints[link]):
            if j.type != "fixed" and np.any(rows[j.name][0]):
                bodies.append(dict(parent=body, joint=j, X=T @ j.origin, acc=np.zeros(13)))
                stack.append((j.child, len(bodies) - 1, np.eye(4)))
            else:
                value = rows[j.name][1] if j.type != "fixed" else 0.0
                Tc = T @ j.origin if j.type == "fixed" else T @ j.origin @ _motion(j, value)
                stack.append((j.child, body, Tc))
    nb = len(bodies)

    tip_body, tip_off = link_frames[tip]
    tip_path = []
    b = tip_body
    while b >= 0:
        tip_path.append(b)
        b = bodies[b]["parent"]
    tip_path = tip_path[::-1]
    mi = np.zeros(MI_HEADER + MI_STRIDE * nb + 1 + len(tip_path), dtype=np.int64)
    mi[MI_HEADER + MI_STRIDE * nb] = len(tip_path)
    mi[MI_HEADER + MI_STRIDE * nb + 1:] = tip_path
    phys_rows = np.array([rows[b["joint"].name][0] for b in bodies])
    phys_off = np.array([rows[b["joint"].name][1] for b in bodies])
    has_map = not (nb == dof and np.array_equal(phys_rows, np.eye(dof)) and not np.any(phys_off))
    mi[:MI_HEADER] = (nb, dof, tip_body, int(has_map))
    mf = np.zeros(nb * BODY_STRIDE + 12 + nb * dof + nb)
    for i, b in enumerate(bodies):
        j = b["joint"]
        o = i * BODY_STRIDE
        mi[MI_HEADER + i * MI_STRIDE:MI_HEADER + (i + 1) * MI_STRIDE] = (
            b["parent"], JOINT_PRISMATIC if j.type == "prismatic" else JOINT_REVOLUTE, _axis_kind(j.axis))
        mf[o + O_R:o + O_R + 9] = b["X"][:3, :3].ravel()
        mf[o + O_P:o + O_P + 3] = b["X"][:3, 3]
        mf[o + O_AX:o + O_AX + 3] = j.axis
        mf[o + O_M] = b["acc"][0]
        mf[o + O_H:o + O_H + 12] = b["acc"][1:]
    o = nb * BODY_STRIDE
    mf[o:o + 9] = tip_off[:3, :3].ravel()
    mf[o + 9:o + 12] = tip_off[:3, 3]
    o += 12
    mf[o:o + nb * dof] = phys_rows.ravel()
    mf[o + nb * dof:o + nb * dof + nb] = phys_off
    masses = [b["acc"][0] for b in bodies]
    return Compiled(mf=mf, mi=mi, dof_joints=dof_joints, link_frames=link_frames,
                    body_joint_names=[b["joint"].name for b in bodies], total_mass_kg=float(sum(masses)),
                    has_inertia=bool(nb and all(m > 0 for m in masses)))
