"""The demo's objects placed for any arm: the UR5 reference layout scaled to the arm's reach, checked by IK.

No rclpy here. Frames: the robot's base frame (z up, the table top at z = 0, the work area along +x). Units m.

How the positions are chosen (:func:`demo_layout`): the reference layout is the one of
``manip_sim/config/pick_place_scene.yaml`` (made for the UR5, whose horizontal reach with tool0 at z >= 0 is
:data:`REFERENCE_REACH_M`): cube at (0.45, -0.25), place at (0.45, +0.25), a 0.10 x 0.10 x 0.30 m pillar
between them, the camera at (0.45, -0.9, 0.7). Every horizontal coordinate, the pillar and the table scale by
``s = reach / REFERENCE_REACH_M`` (manip_core.ready_pose.horizontal_reach); the cube keeps its 4 cm (the
gripper's size). The grasp and approach poses of pick and place (tip ``grasp_offset`` and ``grasp_offset +
approach_height`` above the cube's centre, tool pointing down) must each have an IK solution with every link
above the table; otherwise ``s`` shrinks by 5 % steps (down to 40 % of the first value) until they do.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from manip_core.ready_pose import DEFAULT_APPROACH_AXIS, horizontal_reach, tool_down_solutions

REFERENCE_REACH_M = 0.946          # UR5 (manip_core bundled), tool0, horizontal_reach(samples=4096, seed=0)
CUBE_SIZE_M = 0.04


@dataclass
class Layout:
    scale: float
    reach_m: float
    scene: dict                   # table, objects, obstacles, gripper, tasks (scene file keys)
    camera_position_m: list       # left optical centre in the base frame
    description: str


def _reference(s):
    h = CUBE_SIZE_M / 2
    return {
        "table": {"size": [1.2 * s, 1.4 * s, 0.05], "center_xy": [0.25 * s, 0.0], "color": [0.55, 0.45, 0.35, 1.0]},
        "objects": [{"name": "cube", "shape": "box", "size": [CUBE_SIZE_M] * 3, "position": [0.45 * s, -0.25 * s, h],
                     "mass": 0.1, "color": [0.85, 0.1, 0.1, 1.0]}],
        "obstacles": [{"name": "pillar", "shape": "box", "size": [0.10 * s, 0.10 * s, 0.30 * s],
                       "position": [0.45 * s, 0.0, 0.15 * s], "color": [0.15, 0.35, 0.8, 1.0]}],
        "gripper": {"max_distance": 0.05},
        "tasks": [{"object": "cube", "place_position": [0.45 * s, 0.25 * s, h]}],
    }


def demo_layout(model, approach_axis=DEFAULT_APPROACH_AXIS, grasp_offset=0.03, approach_height=0.10, reach=None):
    """:class:`Layout` of the demo's table, cube, pillar and place target for ``model`` (module docstring)."""
    reach = horizontal_reach(model) if reach is None else float(reach)
    s0 = reach / REFERENCE_REACH_M
    s = s0
    tried = []
    while s >= 0.4 * s0 - 1e-9:
        scene = _reference(s)
        cube = np.array(scene["objects"][0]["position"])
        place = np.array(scene["tasks"][0]["place_position"])
        poses = [c + [0.0, 0.0, dz] for c in (cube, place) for dz in (grasp_offset, grasp_offset + approach_height)]
        missing = [p for p in poses if not tool_down_solutions(model, p, approach_axis, yaws=4, seeds=2, floor_m=0.0)]
        if not missing:
            how = (f"horizontal reach {reach:.3f} m -> scale {s:.3f} of the UR5 reference layout (reach "
                   f"{REFERENCE_REACH_M} m)" + (f", shrunk from {s0:.3f}: {'; '.join(tried)}" if tried else "")
                   + f"; cube at {np.round(cube, 3).tolist()}, place at {np.round(place, 3).tolist()}, pillar "
                   f"{np.round(scene['obstacles'][0]['size'], 3).tolist()} at "
                   f"{np.round(scene['obstacles'][0]['position'], 3).tolist()} m; grasp and approach poses "
                   f"reachable with the tool down")
            return Layout(s, reach, scene, [0.45 * s, -0.9 * s, 0.7 * s], how)
        tried.append(f"{s:.3f}: no tool-down IK at {np.round(missing[0], 3).tolist()}")
        s *= 0.95
    raise ValueError(f"{model.name}: no scale of the demo layout puts pick and place within reach with the tool "
                     f"({model.tip_link} axis {list(approach_axis)}) pointing down; tried {'; '.join(tried[:3])}"
                     f"{' ...' if len(tried) > 3 else ''}")
