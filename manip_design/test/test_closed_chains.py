"""Closed-chain FK/IK of the shipped examples against closed forms from the literature, and the DOF check.

Oracles: the five-bar's circle intersection (FK) and two-link elbow solutions (IK); the Delta robot's
standard trigonometric solution (Clavel 1988; Zsombor-Murray 2004): IK per arm from A cos(t) + B sin(t) = K,
FK as the intersection of three spheres; the Gough-Stewart platform's leg lengths |p + R p_i - b_i|; the planar
cable robot's cable lengths |p + R a_i - b_i| (anchor to attachment point).
"""
import math
from pathlib import Path

import numpy as np
import pytest

from manip_design import parse_file
from manip_design.mobility import dof_report
from manip_design.structure import rpy_matrix

EX = Path(__file__).resolve().parents[1] / "manip_design" / "examples"


def load(name):
    s = parse_file(EX / f"{name}.mrs")
    return s, s.compile()


# --------------------------------------------------------------------------------------------- five-bar
D, L1, L2 = 0.2, 0.25, 0.35
A = np.array([[-D / 2, 0.0], [D / 2, 0.0]])


def five_bar_fk(t1, t2):
    """Tip (x, y) m for shoulder angles measured from +y (counter-clockwise); the upper assembly mode."""
    E = [A[i] + L1 * np.array([-math.sin(t), math.cos(t)]) for i, t in enumerate((t1, t2))]
    m = 0.5 * (E[0] + E[1])
    dvec = E[1] - E[0]
    dist = np.linalg.norm(dvec)
    h = math.sqrt(L2 ** 2 - (dist / 2) ** 2)
    n = np.array([-dvec[1], dvec[0]]) / dist
    c1, c2 = m + h * n, m - h * n
    return c1 if c1[1] > c2[1] else c2


def five_bar_ik(P, i):
    """Both shoulder angles of arm i that put its distal end at P (two-link elbow solutions)."""
    v = P - A[i]
    r = np.linalg.norm(v)
    base = math.atan2(v[1], v[0])
    c = (L1 ** 2 + r ** 2 - L2 ** 2) / (2 * L1 * r)
    out = []
    for s in (1, -1):
        phi = base + s * math.acos(c)  # direction of the proximal link
        out.append(math.remainder(phi - math.pi / 2, 2 * math.pi))
    return out


def test_five_bar_fk_and_ik_match_the_closed_form():
    _s, m = load("dual_scara")
    rng = np.random.default_rng(1)
    for _ in range(30):
        t = rng.uniform(-0.6, 0.6, 2)
        fk = m.fk(t)
        assert fk.success
        np.testing.assert_allclose(fk.pose[:2, 3], five_bar_fk(*t), atol=1e-9)
        assert abs(fk.pose[2, 3]) < 1e-12
        ik = m.ik(fk.pose[:3, 3])
        assert ik.success and ik.position_error_m < 1e-8
        for i, name in enumerate(m.actuated_names):
            cands = five_bar_ik(fk.pose[:2, 3], i)
            assert min(abs(math.remainder(ik.actuated[name] - c, 2 * math.pi)) for c in cands) < 1e-7
        # (LM may land on another working mode of an arm: both candidates above are exact IK solutions)


def test_five_bar_ik_flips_an_elbow_when_only_the_other_working_mode_is_within_the_limits():
    # shoulders (-0.0239, 0.7739), one of bench/design.py's 1,000 five-bar targets: the left arm's two elbow
    # solutions at the tip are 2.4306 rad (beyond its 2.0 rad limit) and -0.0239 rad (elbow bent the other
    # way from the home assembly); restarts that kept the home branch all converged onto the limit (the one
    # failure in 1,000)
    _s, m = load("dual_scara")
    lo, hi = m.lo[m.actuated], m.hi[m.actuated]
    rng = np.random.default_rng(2)
    ts = [np.array([-0.02391678551036258, 0.7739282108991095])] + list(
        rng.uniform(lo + 0.2 * (hi - lo), hi - 0.2 * (hi - lo), (25, 2)))
    for t in ts:
        fk = m.fk(t)  # the target on the home assembly branch, as the honest check defines it
        assert fk.success
        P = fk.pose[:2, 3]
        ik = m.ik(fk.pose[:3, 3])
        assert ik.success and ik.position_error_m < 1e-8, (t, ik.message)
        for i, name in enumerate(m.actuated_names):
            cands = [c for c in five_bar_ik(P, i) if lo[i] - 1e-9 <= c <= hi[i] + 1e-9]
            assert min(abs(ik.actuated[name] - c) for c in cands) < 1e-7, (t, name, ik.actuated, cands)
    P = m.fk(ts[0]).pose[:2, 3]
    np.testing.assert_allclose(P, [-0.42030948, 0.12329489], atol=1e-8)
    out = [c for c in five_bar_ik(P, 0) if not lo[0] <= c <= hi[0]]
    assert len(out) == 1 and abs(out[0] - 2.430623681) < 1e-6  # the oracle: one left solution out of range
    assert abs(m.ik([P[0], P[1], 0.0]).actuated["left.shoulder"] - ts[0][0]) < 1e-7


def five_bar_fk_both(t1, t2):
    """Both tip positions (x, y) m for the shoulder angles: the two intersections of the distal circles."""
    E = [A[i] + L1 * np.array([-math.sin(t), math.cos(t)]) for i, t in enumerate((t1, t2))]
    m, dvec = 0.5 * (E[0] + E[1]), E[1] - E[0]
    dist = np.linalg.norm(dvec)
    h = math.sqrt(L2 ** 2 - (dist / 2) ** 2)
    n = np.array([-dvec[1], dvec[0]]) / dist
    return [m + h * n, m - h * n]


def test_five_bar_fk_branches_are_both_closed_form_assemblies():
    _s, m = load("dual_scara")
    rng = np.random.default_rng(5)
    for _ in range(10):
        t = rng.uniform(-0.6, 0.6, 2)
        br = m.fk_branches(t, attempts=16)
        assert len(br) == 2 and all(b.success for b in br)
        np.testing.assert_allclose(br[0].pose, m.fk(t).pose, atol=1e-12)  # the home branch first
        exact = five_bar_fk_both(*t)
        found = [b.pose[:2, 3] for b in br]
        for c in exact:  # each closed-form assembly found once
            assert sum(np.linalg.norm(f - c) < 1e-9 for f in found) == 1, (t, found, exact)
        # choosing the other branch: FK seeded with its joints follows it under a small actuator move
        lower = br[1]
        t2 = t + 0.05
        fk2 = m.fk(t2, seed=lower.q)
        assert fk2.success
        np.testing.assert_allclose(fk2.pose[:2, 3], min(five_bar_fk_both(*t2), key=lambda c: c[1]), atol=1e-9)
        assert lower.pose[1, 3] < br[0].pose[1, 3]


def test_ik_reports_an_unreachable_target_honestly():
    _s, m = load("dual_scara")
    ik = m.ik([0.0, 1.0, 0.0])  # beyond l1 + l2 from both shoulders
    assert not ik.success and ik.position_error_m > 0.3 and "missed" in ik.message
    ccd = m.ik([0.0, 1.0, 0.0], method="ccd")
    assert not ccd.success


# ------------------------------------------------------------------------------------------------ Delta
RB, RP, RF, RE = 0.20, 0.05, 0.20, 0.45
PHI = [0.0, 2 * math.pi / 3, 4 * math.pi / 3]


def _rz(a):
    return rpy_matrix(0, 0, a)


def delta_ik(P):
    """Shoulder angles (rad, positive = arm down), elbow-out branch of the standard trigonometric solution."""
    out = []
    for phi in PHI:
        w = _rz(-phi) @ P + np.array([RP, 0, 0])  # wrist joint in the arm's frame
        a = w[0] - RB
        Acoef, Bcoef = -2 * a * RF, 2 * w[2] * RF
        K = RE ** 2 - a ** 2 - RF ** 2 - w[1] ** 2 - w[2] ** 2
        base = math.atan2(Bcoef, Acoef)
        d = math.acos(K / math.hypot(Acoef, Bcoef))
        sols = [base + d, base - d]
        out.append(max(sols, key=lambda t: math.cos(t)))  # elbow outward
    return np.array([math.remainder(t, 2 * math.pi) for t in out])


def delta_fk(theta):
    """Platform centre (m): the lower intersection of three spheres of radius re."""
    C = [_rz(phi) @ np.array([RB + RF * math.cos(t), 0, -RF * math.sin(t)]) - _rz(phi) @ np.array([RP, 0, 0])
         for phi, t in zip(PHI, theta)]
    p1, p2, p3 = C
    ex = (p2 - p1) / np.linalg.norm(p2 - p1)
    i = ex @ (p3 - p1)
    ey = p3 - p1 - i * ex
    ey /= np.linalg.norm(ey)
    ez = np.cross(ex, ey)
    d = np.linalg.norm(p2 - p1)
    j = ey @ (p3 - p1)
    x = d / 2
    y = (i * i + j * j) / (2 * j) - i * x / j
    z = math.sqrt(RE ** 2 - x * x - y * y)
    cands = [p1 + x * ex + y * ey + s * z * ez for s in (1, -1)]
    return min(cands, key=lambda c: c[2])


def test_delta_fk_and_ik_match_the_trigonometric_solution():
    _s, m = load("delta")
    rng = np.random.default_rng(2)
    for _ in range(30):
        t = rng.uniform(-0.4, 0.9, 3)
        fk = m.fk(t)
        assert fk.success
        np.testing.assert_allclose(fk.pose[:3, 3], delta_fk(t), atol=1e-9)
        np.testing.assert_allclose(fk.pose[:3, :3], np.eye(3), atol=1e-9)  # the platform only translates
        ik = m.ik(fk.pose[:3, 3])
        assert ik.success
        np.testing.assert_allclose(list(ik.actuated.values()), delta_ik(fk.pose[:3, 3]), atol=1e-7)
        np.testing.assert_allclose(delta_ik(fk.pose[:3, 3]), t, atol=1e-9)  # the oracles agree


def test_delta_ik_by_cyclic_coordinate_descent():
    _s, m = load("delta")
    P = np.array([0.04, -0.03, -0.33])
    ik = m.ik(P, method="ccd", max_iter=2000)  # CCD converges linearly: many sweeps
    assert ik.success and ik.method == "ccd"
    np.testing.assert_allclose(list(ik.actuated.values()), delta_ik(P), atol=1e-6)


# ---------------------------------------------------------------------------------------------- Stewart
SB = 0.5 * np.array([[math.cos(math.radians(a)), math.sin(math.radians(a)), 0]
                     for a in (-15, 15, 105, 135, 225, 255)])
SP = 0.3 * np.array([[math.cos(math.radians(a)), math.sin(math.radians(a)), 0]
                     for a in (-45, 45, 75, 165, 195, 285)])


def test_stewart_ik_is_the_leg_length_formula_and_fk_iterates_back():
    _s, m = load("stewart")
    rng = np.random.default_rng(3)
    for _ in range(10):
        p = np.array([0, 0, 1.15]) + rng.uniform(-0.08, 0.08, 3)
        rpy = rng.uniform(-0.15, 0.15, 3)
        R = rpy_matrix(*rpy)
        ik = m.ik(p, rpy)
        assert ik.success
        lengths = np.linalg.norm(p + SP @ R.T - SB, axis=1)
        np.testing.assert_allclose(list(ik.actuated.values()), lengths, atol=1e-8)
        fk = m.fk(lengths)
        assert fk.success
        np.testing.assert_allclose(fk.pose[:3, 3], p, atol=1e-9)
        np.testing.assert_allclose(fk.pose[:3, :3], R, atol=1e-9)


# ---------------------------------------------------------------------------------------- planar cables
CB = np.array([[math.cos(math.radians(a)), math.sin(math.radians(a)), 0] for a in (150, 30, 270)])
CA = 0.1 * np.array([[math.cos(math.radians(a)), math.sin(math.radians(a)), 0] for a in (90, 330, 210)])


def cable_lengths(p, phi):
    """Closed form: each cable's length is the distance from its anchor to its attachment point (m)."""
    return np.linalg.norm(p + CA @ rpy_matrix(0, 0, phi).T - CB, axis=1)


def test_planar_cable_ik_is_the_distance_formula_and_fk_iterates_back():
    _s, m = load("planar_cable")
    rng = np.random.default_rng(4)
    for _ in range(15):
        p = np.append(rng.uniform(-0.15, 0.15, 2), 0.0)
        phi = rng.uniform(-0.2, 0.2)
        ik = m.ik(p, [0, 0, phi])
        assert ik.success
        lengths = cable_lengths(p, phi)
        np.testing.assert_allclose(list(ik.actuated.values()), lengths, atol=1e-8)
        fk = m.fk(lengths)
        assert fk.success
        np.testing.assert_allclose(fk.pose[:3, 3], p, atol=1e-9)
        np.testing.assert_allclose(fk.pose[:3, :3], rpy_matrix(0, 0, phi), atol=1e-9)
        # position only: the platform's yaw is free, the lengths still fit the distance formula at its pose
        ikp = m.ik(p)
        assert ikp.success
        yaw = math.atan2(ikp.pose[1, 0], ikp.pose[0, 0])
        np.testing.assert_allclose(list(ikp.actuated.values()), cable_lengths(p, yaw), atol=1e-8)


def test_planar_cable_three_cables_cannot_pretension_the_platform():
    # Grubler-Kutzbach (and dof_report) call 3 cables for 3 freedoms "ok", as for rigid struts. Cables only
    # pull: with no load the tensions t must solve W t = 0 with t > 0, and W (the three unit cable wrenches
    # [force; moment about the centre]) is full rank here, so only t = 0: the platform is not held
    _s, m = load("planar_cable")
    ik = m.ik([0.05, -0.03, 0.0], [0, 0, 0.1])
    assert ik.success
    R, p = ik.pose[:3, :3], ik.pose[:3, 3]
    W = []
    for a, b in zip(CA, CB):
        r = R @ a
        u = (b - (p + r)) / np.linalg.norm(b - (p + r))
        W.append([u[0], u[1], r[0] * u[1] - r[1] * u[0]])
    assert np.linalg.matrix_rank(np.array(W).T) == 3


# ------------------------------------------------------------------------------------------------- DOF
@pytest.mark.parametrize("name, mobility", [("dual_scara", 2), ("delta", 3), ("stewart", 6), ("scara", 4),
                                            ("planar_cable", 3)])
def test_dof_check_of_the_examples(name, mobility):
    s, m = load(name)
    d = dof_report(s, m)
    assert (d["mobility"], d["actuated"], d["mobility_instantaneous"], d["status"]) == (mobility, mobility,
                                                                                         mobility, "ok")
    if name in ("dual_scara", "planar_cable"):  # the spatial count is wrong for a planar linkage
        assert d["lambda"] == 3 and any("spatial formula would give -" in x for x in d["messages"])


def test_dof_check_flags_idle_struts_and_missing_actuators():
    text = (EX / "stewart.mrs").read_text().replace("Universal(x, y)", "Spherical()")  # 6-SPS
    from manip_design import parse_text
    s = parse_text(text, "sps.mrs")
    d = dof_report(s, s.compile())
    assert d["mobility"] == 12 and d["end_effector_dof"] == 6
    assert d["status"] == "warning" and any("idle" in x for x in d["messages"])
    text = (EX / "delta.mrs").read_text().replace("leg2 = Clone(leg1)", "leg2 = Clone(leg1) -> Revolute(z)")
    s = parse_text(text, "delta4.mrs")
    d = dof_report(s, s.compile())
    assert d["mobility"] == 4 and d["actuated"] == 3 and d["status"] == "error"
