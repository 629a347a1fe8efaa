"""manip-model: describe, fk, ik, and user errors without tracebacks."""
import io
import json
import subprocess
import sys

import numpy as np

from manip_core import RobotModel
from manip_core.cli import main
from manip_core.spatial import rpy_to_matrix


def run(argv):
    out = io.StringIO()
    rc = main(argv, out=out)
    return rc, out.getvalue()


def test_describe_json_matches_model():
    rc, text = run(["describe", "ur5", "--json"])
    assert rc == 0
    d = json.loads(text)
    robot = RobotModel.load("ur5")
    assert d["dof"] == 6 and [j["name"] for j in d["joints"]] == robot.joint_names
    np.testing.assert_allclose([j["screw_axis_space"] for j in d["joints"]], np.asarray(robot.screw_axes_space).T)
    assert [j["effort_limit"] for j in d["joints"]] == [150, 150, 150, 28, 28, 28]


def test_describe_text_lists_every_joint():
    rc, text = run(["describe", "ypp3"])
    assert rc == 0
    for name in RobotModel.load("ypp3").joint_names:
        assert name in text
    assert "closed-form IK: ypp3" in text


def test_fk_json_matches_model():
    q = [0.1, -1.0, 1.2, 0.3, -0.4, 0.5]
    rc, text = run(["fk", "ur5", "--q", *map(str, q), "--json"])
    assert rc == 0
    np.testing.assert_allclose(json.loads(text)["matrix"], RobotModel.load("ur5").fk(q), atol=1e-12)


def test_ik_lists_all_closed_form_solutions_that_reach_the_target():
    xyz, rpy = [0.3, 0.2, 0.4], [3.0, 0.1, -0.5]
    rc, text = run(["ik", "ur5", "--xyz", *map(str, xyz), "--rpy", *map(str, rpy), "--json"])
    assert rc == 0
    d = json.loads(text)
    assert d["method"].startswith("closed form") and len(d["solutions"]) == 8
    robot = RobotModel.load("ur5")
    for s in d["solutions"]:
        T = robot.fk(s["q"])
        np.testing.assert_allclose(T[:3, 3], xyz, atol=1e-9)
        np.testing.assert_allclose(T[:3, :3], rpy_to_matrix(rpy), atol=1e-9)


def test_ik_numerical_for_arms_without_closed_form(tmp_path):
    from manip_core.reference_robots import PANDA_REL, example_robot
    panda = str(example_robot(PANDA_REL))
    rc, text = run(["ik", panda, "--tip", "panda_hand_tcp", "--xyz", "0.4", "0.1", "0.4", "--rpy", "3.14159", "0",
                    "0", "--json"])
    assert rc == 0
    d = json.loads(text)
    assert d["method"].startswith("numerical") and len(d["solutions"]) == 1
    T = RobotModel.from_urdf(panda, tip_link="panda_hand_tcp").fk(d["solutions"][0]["q"])
    np.testing.assert_allclose(T[:3, 3], [0.4, 0.1, 0.4], atol=1e-6)


def test_user_errors_exit_2_without_traceback(tmp_path):
    bad = tmp_path / "bad.urdf"
    bad.write_text("<robot name='x'><link name='a'>")
    for argv in (["describe", str(bad)], ["fk", "ur5", "--q", "0", "1"], ["ik", "ypp3", "--xyz", "5", "0", "0"],
                 ["describe", "no_such_robot"]):
        p = subprocess.run([sys.executable, "-m", "manip_core.cli", *argv], capture_output=True, text=True)
        assert p.returncode == 2, (argv, p.stdout, p.stderr)
        assert "Traceback" not in p.stderr and p.stderr.startswith("manip-model: error:"), p.stderr


def test_workspace_json_last_line_png_ply_and_progress(tmp_path):
    import math
    png, ply = tmp_path / "ws.png", tmp_path / "ws.ply"
    p = subprocess.run([sys.executable, "-m", "manip_core.cli", "workspace", "planar2r", "--samples", "200000",
                        "--png", str(png), "--ply", str(ply), "--json"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout.strip().splitlines()[-1])
    for k in ("volume_m3", "volume_uncertainty_m3", "samples", "samples_per_s"):
        assert k in d
    assert d["samples"] == 200000 and d["samples_per_s"] > 0 and d["dimension"] == 2
    assert abs(d["measure_m2"] - math.pi * (0.9 ** 2 - 0.1 ** 2)) <= d["uncertainty_m2"]
    assert "100.0%" in p.stderr  # progress bar on stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    head = ply.read_bytes()[:400].decode("ascii", "replace")
    n = int(head.split("element vertex ")[1].split()[0])
    assert head.startswith("ply") and n == d["occupied_voxels"]


def test_singularity_map_json_and_png(tmp_path):
    png = tmp_path / "map.png"
    rc, text = run(["singularity-map", "ypp3", "--cells", "8", "--levels", "2", "--png", str(png), "--json",
                    "--quiet"])
    assert rc == 0
    d = json.loads(text.strip().splitlines()[-1])
    assert [s["level"] for s in d["steps"]] == [0, 1, 2] and d["part"] == "position"
    assert 0 < d["points_evaluated"] < d["finest_grid_nodes"] and png.stat().st_size > 1000
    rc = main(["singularity-map", "ypp3", "--cells", "0"], out=io.StringIO())
    assert rc == 2
