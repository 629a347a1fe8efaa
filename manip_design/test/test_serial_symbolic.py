"""Serial structures as URDF / RobotModel (checked against the SCARA closed form and Pinocchio), SymPy code
generation (equal to the numeric kernels to 1e-12, cached on disk), and link-length synthesis."""
import math
from pathlib import Path

import numpy as np
import pytest

from manip_design import parse_file
from manip_design.serial import to_robot_model, to_urdf
from manip_design.symbolic import generate
from manip_design.synthesis import read_targets, synthesize

EX = Path(__file__).resolve().parents[1] / "manip_design" / "examples"


def load(name, values=None):
    s = parse_file(EX / f"{name}.mrs")
    return s, s.compile(values)


def scara_closed_form(q):
    t1, t2, d, t4 = q
    c = t1 + t2 + t4
    x = 0.35 * math.cos(t1) + 0.25 * math.cos(t1 + t2) + 0.05 * math.cos(c)
    y = 0.35 * math.sin(t1) + 0.25 * math.sin(t1 + t2) + 0.05 * math.sin(c)
    R = np.array([[math.cos(c), -math.sin(c), 0], [math.sin(c), math.cos(c), 0], [0, 0, 1]])
    return np.array([x, y, 0.4 + d - 0.1]), R


def test_scara_urdf_robot_model_matches_the_closed_form_and_pinocchio():
    pin = pytest.importorskip("pinocchio")
    _s, m = load("scara")
    urdf = to_urdf(m)
    rm = to_robot_model(m)
    assert rm.joint_names == m.variable_names == ["arm.shoulder", "arm.elbow", "arm.quill", "arm.wrist"]
    np.testing.assert_allclose(rm.joint_lower, [-2.6, -2.5, -0.3, -math.pi])
    pm = pin.buildModelFromXML(urdf)
    pdata = pm.createData()
    rng = np.random.default_rng(4)
    for _ in range(20):
        q = rng.uniform(m.lo, m.hi)
        p, R = scara_closed_form(q)
        for T in (m.pose(q), rm.fk(q)):
            np.testing.assert_allclose(T[:3, 3], p, atol=1e-12)
            np.testing.assert_allclose(T[:3, :3], R, atol=1e-12)
        np.testing.assert_allclose(rm.mass_matrix(q), pin.crba(pm, pdata, q), atol=1e-10)
    ik = rm.ik(rm.fk(q))
    assert ik.success


def test_closed_chains_have_no_urdf():
    from manip_design import DesignError
    _s, m = load("delta")
    with pytest.raises(DesignError, match="not a serial structure"):
        to_urdf(m)


@pytest.mark.parametrize("name", ["scara", "dual_scara", "delta", "stewart"])
def test_symbolic_equals_numeric(name, tmp_path, monkeypatch):
    monkeypatch.setenv("MANIP_DESIGN_CACHE", str(tmp_path))
    _s, m = load(name)
    g = generate(m)
    assert not g.cached and g.path.is_file()
    rng = np.random.default_rng(5)
    rows = [i for k in range(len(m.welds)) for i in range(6 * k, 6 * k + 3)]
    for _ in range(5):
        q = m.q_home + rng.uniform(-0.2, 0.2, m.nv)  # any q: the tree kinematics need no closure
        np.testing.assert_allclose(g.fk(q), m.pose(q), atol=1e-12, rtol=0)
        np.testing.assert_allclose(g.jacobian(q), m.ee_jacobian(q), atol=1e-12, rtol=0)
        if rows:
            Tf = m.frames(q)
            res = np.concatenate([Tf[a, :3, 3] - Tf[b, :3, 3] for a, b in m.welds])
            np.testing.assert_allclose(g.closure(q), res, atol=1e-12, rtol=0)
            np.testing.assert_allclose(g.closure_jacobian(q), m.closure_jacobian(q)[rows], atol=1e-12, rtol=0)
        if name == "scara":
            np.testing.assert_allclose(g.mass_matrix(q), to_robot_model(m).mass_matrix(q), atol=1e-12, rtol=0)
    assert g.has_mass_matrix == (name == "scara")
    again = generate(m)
    assert again.cached and again.path == g.path and again.seconds < g.seconds
    np.testing.assert_array_equal(again.fk(q), g.fk(q))


def test_synthesis_of_the_papers_scara():
    s = parse_file(EX / "scara_synthesis.mrs")
    target = np.array([math.sqrt(2) / 2, math.sqrt(2) / 2, 0.0])
    r = synthesize(s, [target])
    assert r.success and set(r.params) == {"l1", "l2"}
    l1, l2 = r.params["l1"], r.params["l2"]
    assert abs(l1 - l2) <= 1.0 + 1e-9 <= l1 + l2 + 1e-9  # the target (1 m away) is inside the annulus
    m = s.compile(r.params)
    fk = m.fk([r.actuated[0][n] for n in m.actuated_names])
    np.testing.assert_allclose(fk.pose[:3, 3], target, atol=1e-9)
    targets = read_targets(EX / "scara_synthesis_targets.txt")
    r = synthesize(s, targets)
    assert r.success and max(r.errors_m) < 1e-9
    far = synthesize(s, [[30.0, 0.0, 0.0]], attempts=2)  # beyond the 10 m bound of each length
    assert not far.success
