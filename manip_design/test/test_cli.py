"""manip-design on the command line: JSON output, exit codes, one-line user errors."""
import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from manip_design.cli import main

EX = Path(__file__).resolve().parents[1] / "manip_design" / "examples"


def run(*args):
    """In-process run (the subprocess test below checks the real entry point once)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = main([str(a) for a in args], out=out)
    return rc, out.getvalue(), err.getvalue()


def test_entry_point_user_error_in_a_subprocess():
    p = subprocess.run([sys.executable, "-m", "manip_design.cli", "dof", str(EX / "nope.mrs"), "--json"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and p.stdout == "" and "Traceback" not in p.stderr
    expected = f"manip-design: {EX / 'nope.mrs'}: cannot read the structure file: No such file or directory"
    assert p.stderr.strip() == expected


def last_json(out):
    return json.loads(out.strip().splitlines()[-1])


def test_dof_fk_ik_json():
    rc, out, _ = run("dof", EX / "delta.mrs", "--json")
    d = last_json(out)
    assert rc == 0 and d["mobility"] == 3 and d["actuated"] == 3
    rc, out, _ = run("fk", EX / "delta.mrs", "--actuated", 0.2, 0.3, 0.4, "--json")
    d = last_json(out)
    assert rc == 0 and len(d["position"]) == 3 and len(d["orientation_xyzw"]) == 4
    assert abs(d["orientation_xyzw"][3]) == pytest.approx(1.0)  # the Delta platform does not turn
    rc, out, _ = run("ik", EX / "delta.mrs", "--xyz", *d["position"], "--json")
    e = last_json(out)
    assert rc == 0 and e["success"]
    assert [e["actuated"][k] for k in ("leg1.shoulder", "leg2.shoulder", "leg3.shoulder")] == \
        pytest.approx([0.2, 0.3, 0.4], abs=1e-7)
    rc, out, _ = run("ik", EX / "dual_scara.mrs", "--xyz", 0, 2, 0, "--json")
    assert rc == 1 and last_json(out)["success"] is False


def test_urdf_synthesize_codegen(tmp_path):
    rc, out, err = run("urdf", EX / "scara.mrs", "-o", tmp_path / "scara.urdf")
    assert rc == 0 and "<robot" in (tmp_path / "scara.urdf").read_text()
    rc, out, _ = run("synthesize", EX / "scara_synthesis.mrs", "--targets", EX / "scara_synthesis_targets.txt",
                     "--json")
    d = last_json(out)
    assert rc == 0 and d["success"] and set(d["params"]) == {"l1", "l2"}
    rc, out, _ = run("codegen", EX / "dual_scara.mrs", "--no-cache", "--json")
    assert rc == 0 and last_json(out)["functions"][:2] == ["fk", "jacobian"]
    rc, out, _ = run("plot", EX / "stewart.mrs", "-o", tmp_path / "stewart.png", "--actuated", *[1.1] * 6)
    png = (tmp_path / "stewart.png").read_bytes()
    assert rc == 0 and png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20000


@pytest.mark.parametrize("args, words", [
    (("fk", "missing.mrs", "--actuated", 1), "cannot read"),
    (("fk", EX / "delta.mrs", "--actuated", 1, 2), "expected 3 actuated values"),
    (("fk", EX / "delta.mrs", "--actuated", 5, 0, 0), "outside its range"),
    (("urdf", EX / "stewart.mrs", "-o", "/tmp/x.urdf"), "not a serial structure"),
    (("fk", EX / "scara_synthesis.mrs", "--actuated", 0, 0), "scara_synthesis.mrs:6:"),
    (("frobnicate",), "invalid choice"),
])
def test_user_errors_are_one_line_with_exit_2(args, words):
    rc, out, err = run(*args)
    assert rc == 2 and words in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_fk_lists_the_five_bar_assembly_branches():
    rc, out, _ = run("fk", EX / "dual_scara.mrs", "--actuated", 0.1, 0.2, "--branches", 8, "--json")
    d = last_json(out)
    assert rc == 0 and len(d["branches"]) == 2
    assert d["branches"][0]["position"] == d["position"]  # the home branch first, then the elbow-down one
    assert d["branches"][1]["position"][1] < d["position"][1] - 0.3
