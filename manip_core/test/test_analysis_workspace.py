"""Monte Carlo workspace: closed-form area and volume recovered within the stated uncertainty, the sampling
kernel against fk_batch, and the numba.cuda kernel (CUDA simulator, in a subprocess) against the CPU kernel."""
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from manip_core import InputError, RobotModel
from manip_core.analysis.workspace import TipSampler, estimate_workspace, ypp3_volume_m3
from manip_core.reference_robots import PANDA_REL, example_robot


def test_planar2r_area_within_stated_uncertainty_and_converging():
    l1, l2 = 0.5, 0.4
    true = math.pi * ((l1 + l2) ** 2 - (l1 - l2) ** 2)
    e = estimate_workspace(RobotModel.load("planar2r"), 400_000, seed=3)
    assert e.dimension == 2 and e.volume_m3 == 0.0 and e.samples_outside_grid == 0
    assert abs(e.measure - true) <= e.uncertainty, (e.measure, e.uncertainty, true)
    assert e.uncertainty < 0.03 * true  # the bound is tight enough to mean something
    u = [c["boundary_half_layer"] for c in e.convergence]
    assert len(u) >= 3 and all(b < a for a, b in zip(u, u[1:]))  # shrinks as the samples grow
    assert abs(e.convergence[-1]["measure"] - true) < abs(e.convergence[0]["measure"] - true) + 1e-3


def test_ypp3_volume_within_stated_uncertainty():
    robot = RobotModel.load("ypp3")
    # ypp3.urdf: upper arm 0.3 m, forearm 0.25 m, shoulder +-pi/2, elbow +-2.6 rad, yaw +-pi
    true = ypp3_volume_m3(0.3, 0.25, 2.6)
    # cross-check of the closed form with the quadrature of the same integral
    assert ypp3_volume_m3(0.3, 0.25, 2.6, math.pi / 2 - 1e-12) == pytest.approx(true, rel=1e-8)
    e = estimate_workspace(robot, 1_000_000, seed=1)
    assert e.dimension == 3 and e.samples_outside_grid == 0
    assert abs(e.volume_m3 - true) <= e.volume_uncertainty_m3, (e.volume_m3, e.volume_uncertainty_m3, true)
    assert e.volume_uncertainty_m3 < 0.1 * true
    # a 3-joint arm positions its tip but cannot also turn its approach axis everywhere
    assert e.dexterous_measure < 0.02 * true
    s = e.summary()
    json.dumps(s)
    assert s["samples"] == 1_000_000 and s["samples_per_s"] > 0


def test_ur5_dexterous_workspace_is_inside_the_reachable_one():
    e = estimate_workspace(RobotModel.load("ur5"), 300_000, seed=2, samples_per_voxel=10)
    assert e.dimension == 3 and 0 < e.dexterous_measure < e.volume_m3
    pts, dex = e.to_points("boundary")
    assert pts.shape[1] == 3 and dex.shape == (len(pts),) and np.all((dex >= 0) & (dex <= 1))
    assert np.max(np.linalg.norm(pts, axis=1)) < 1.1  # UR5 reach about 0.95 m from the shoulder


@pytest.mark.parametrize("name", ["ur5", "panda_finger"])
def test_sampled_tips_equal_fk_of_the_sampled_joints(name):
    if name == "ur5":
        robot = RobotModel.load("ur5")
    else:  # a chain through a mimic joint
        robot = RobotModel.from_urdf(example_robot(PANDA_REL), tip_link="panda_leftfinger")
    s = TipSampler(robot, seed=11)
    P, dbin = s(5000, 2000)
    Q = s.joints(5000, 2000)
    assert np.all(Q >= robot.joint_lower) and np.all(Q <= robot.joint_upper)
    T = robot.fk_batch(Q)
    np.testing.assert_allclose(P, T[:, :3, 3], atol=1e-13)
    z = T[:, :3, 2]
    band = np.clip(((z[:, 2] + 1) * 4).astype(int), 0, 7)
    sector = np.clip(((np.arctan2(z[:, 1], z[:, 0]) + np.pi) * 8 / (2 * np.pi)).astype(int), 0, 7)
    assert np.mean(dbin == band * 8 + sector) > 0.999
    # a sample does not depend on the batch it is drawn in
    P2, _ = s(5000 + 700, 10)
    np.testing.assert_array_equal(P2, P[700:710])


CUDASIM_SCRIPT = r"""
import json, sys
import numpy as np
from numba import config
assert config.ENABLE_CUDASIM
from manip_core import RobotModel
from manip_core.analysis.workspace import TipSampler
out = {}
for name in ("ur5", "ypp3"):
    robot = RobotModel.load(name)
    cpu, gpu = TipSampler(robot, seed=5), TipSampler(robot, seed=5, device="cuda")
    Pc, bc = cpu(123456, 300)
    Pg, bg = gpu(123456, 300)
    out[name] = {"max_abs_diff_m": float(np.max(np.abs(Pc - Pg))), "identical": bool(np.array_equal(Pc, Pg)),
                 "bins_equal": bool(np.array_equal(bc, bg)), "finite": bool(np.isfinite(Pg).all())}
print(json.dumps(out))
"""


def test_cuda_kernel_equals_cpu_kernel_under_cudasim():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    p = subprocess.run([sys.executable, "-c", CUDASIM_SCRIPT], capture_output=True, text=True, env=env,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(p.stdout.strip().splitlines()[-1])
    for name, r in res.items():
        assert r["finite"] and r["bins_equal"], (name, r)
        assert r["max_abs_diff_m"] <= 1e-15, (name, r)


def test_bad_input():
    robot = RobotModel.load("ypp3")
    with pytest.raises(InputError, match="samples"):
        estimate_workspace(robot, 100)
    with pytest.raises(InputError, match="approach_axis"):
        estimate_workspace(robot, 10_000, approach_axis="w")
    with pytest.raises(InputError, match="device"):
        estimate_workspace(robot, 10_000, device="tpu")
