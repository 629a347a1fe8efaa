"""The cuda backend's kernels give the CPU kernels' results (run on the CPU with NUMBA_ENABLE_CUDASIM=1, in a
subprocess so that the variable is set before numba is imported)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent / "data" / "mbm"

SCRIPT = r"""
import json, sys
import numpy as np
from manip_planning.planning_scene import PlanningScene
from manip_planning.robot_collision import CollisionChecker, RobotCollisionModel
robot, problem = sys.argv[1], sys.argv[2]
D = sys.argv[3]
rc = RobotCollisionModel.from_urdf(f"{D}/robots/{robot}_spherized.urdf", f"{D}/robots/{robot}.srdf")
sc = PlanningScene.from_moveit_yaml(f"{D}/problems/{robot}/{problem}")
cpu, gpu = CollisionChecker(rc, sc), CollisionChecker(rc, sc, backend="cuda")
rng = np.random.default_rng(5)
Q = rng.uniform(rc.model.joint_lower, rc.model.joint_upper, (24, rc.model.dof))
A, B = Q[:5], 0.8 * Q[:5] + 0.2 * Q[5:10]
path = np.array([Q[0], 0.9 * Q[0] + 0.1 * Q[1]])
print(json.dumps(dict(cpu=cpu.are_free(Q).tolist(), gpu=gpu.are_free(Q).tolist(),
                      cpu_e=cpu.segments_free(A, B, 0.1).tolist(), gpu_e=gpu.segments_free(A, B, 0.1).tolist(),
                      cpu_p=cpu.first_colliding_segment(path, 0.05), gpu_p=gpu.first_colliding_segment(path, 0.05))))
"""


@pytest.mark.parametrize("robot,problem", [("panda", "cage_panda/scene0001.yaml"),
                                           ("ur5", "bookshelf_thin_ur5/scene0001.yaml")])
def test_cudasim_matches_cpu(robot, problem):
    pytest.importorskip("numba.cuda")
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    out = subprocess.run([sys.executable, "-c", SCRIPT, robot, problem, str(DATA)], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["gpu"] == r["cpu"]
    assert 0 < sum(r["cpu"]) < len(r["cpu"])          # both outcomes exercised
    assert r["gpu_e"] == r["cpu_e"]
    assert r["gpu_p"] == r["cpu_p"]


def test_unknown_backend_is_rejected():
    from manip_planning.robot_collision import CollisionChecker, RobotCollisionModel
    rc = RobotCollisionModel.from_urdf(DATA / "robots/panda_spherized.urdf")
    with pytest.raises(ValueError, match="backend"):
        CollisionChecker(rc, None, backend="opencl")
