"""Self-collision pairs that a configuration the robot is really at already violates in its collision model.

A URDF without an SRDF gets every pair of non-adjacent links checked for self-collision, and a conservative
sphere cover of its meshes (robot_collision.py) can make neighbouring links overlap where the real links do not
touch (example-robot-data's UR10 at its ready pose: wrist links 1.9 cm into each other). The arm is at its
start configuration, so such a contact is an artefact of the model; MoveIt's setup assistant disables the
pairs in collision at the default configuration for the same reason. ``touching_pairs`` finds the pairs of a
RobotCollisionModel whose spheres overlap at given configurations; ``without_pairs`` returns a copy of the
model with them disabled. No rclpy.
"""
from __future__ import annotations

import numpy as np

from .robot_collision import RobotCollisionModel


def touching_pairs(robot, qs):
    """Link-name pairs (frozensets) of ``robot.pairs`` whose spheres overlap (m, < 0 distance) at any of the
    configurations ``qs`` (rad); pairs with the attached object are not counted (a held object is real)."""
    model = robot.model
    names = robot.group_names
    out = set()
    for q in qs:
        q = np.asarray(q, dtype=np.float64)
        world = {}
        for g, name in enumerate(names):
            if name == robot.ATTACHED:
                continue
            T = model.fk(q, name)
            S = robot.link_spheres[name]
            world[g] = (S[:, :3] @ T[:3, :3].T + T[:3, 3], S[:, 3])
        for g, h in robot.pairs:
            if g not in world or h not in world:
                continue
            (A, ra), (B, rb) = world[int(g)], world[int(h)]
            d = np.linalg.norm(A[:, None, :] - B[None, :, :], axis=2) - ra[:, None] - rb[None, :]
            if float(np.min(d)) < 0.0:
                out.add(frozenset((names[int(g)], names[int(h)])))
    return out


def without_pairs(robot, pairs):
    """A copy of the RobotCollisionModel ``robot`` (attached object included) with ``pairs`` also disabled."""
    new = RobotCollisionModel(robot.model, robot.link_spheres, set(robot.disabled) | set(pairs),
                              robot.check_fixed_links, robot.source, robot.self_collision)
    if robot.attached is not None:
        new.attach(robot.attached, robot.touch_links)
    return new


def near_pairs(robot, pairs):
    """Of link-name ``pairs``, those whose bodies are at most two joints apart along the tree (grandparent or
    sibling): where conservative covers of neighbouring links overlap without the links touching."""
    from manip_core._layout import MI_HEADER, MI_STRIDE
    mi = robot.model._mi
    parent = {i: int(mi[MI_HEADER + i * MI_STRIDE]) for i in range(int(mi[0]))}
    body = {name: int(b) for name, b in zip(robot.group_names, robot.grp_body)}
    out = set()
    for p in pairs:
        a, b = (body.get(n) for n in p)
        if a is None or b is None:
            continue
        pa, pb = parent.get(a, -2), parent.get(b, -2)
        if pa == b or pb == a or parent.get(pa, -3) == b or parent.get(pb, -3) == a or pa == pb:
            out.add(p)
    return out
