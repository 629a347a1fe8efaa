"""Degrees of freedom of a structure: Grubler-Kutzbach count, checked against the loop-closure Jacobian.

Grubler-Kutzbach: M = lambda (N - 1 - J) + sum f_i, with N bodies (ground included, welded bodies counted
once), J joints of f_i freedoms, lambda = 6 in space and 3 for planar or spherical mechanisms (detected from
the joint axes at the home assembly: all revolute axes parallel and prismatic axes normal to them, or all
revolute axes through one point and no prismatic joint).

The count ignores geometry, so it is checked against the rank of the loop-closure Jacobian C at a generic
assembly (the actuators moved slightly off home, which is often singular): instantaneous mobility =
n_q - rank(C); with the actuators locked, n_passive - rank(C_passive) passive motions remain (idle
freedoms such as a strut spinning between two spherical joints, or an under-actuated design); the end
effector moves in rank(J_ee Z) directions (Z a basis of null(C)).

Where the count misleads for cable robots (examples/planar_cable.mrs): a cable is modelled as an actuated
prismatic joint, so the count treats it as a rigid strut that pushes and pulls. Cables only pull, so a design the
count calls "ok" (3 cables, 3 freedoms) may not hold its platform: with no load W t = 0 has no solution t > 0
when the cable wrench matrix W is square and full rank, and a fully constrained platform with n freedoms needs
at least n + 1 cables (or gravity as the extra one). Tension (wrench) feasibility is not checked here.
"""
from __future__ import annotations

import numpy as np


def _rank(A, tol=1e-8):
    if A.size == 0:
        return 0
    s = np.linalg.svd(A, compute_uv=False)
    return int(np.sum(s > tol * max(1.0, s[0])))


def _null(A, n, tol=1e-8):
    if A.size == 0 or A.shape[0] == 0:
        return np.eye(n)
    _u, s, vt = np.linalg.svd(A)
    r = int(np.sum(s > tol * max(1.0, s[0] if s.size else 1.0)))
    return vt[r:].T


def motion_type(mech, q):
    """'planar', 'spherical' or 'spatial' from the joint axes (ground frame) at q."""
    axes = mech.axes_world(q)
    revs = [(a, p) for k, a, p in axes if k == "R"]
    pris = [a for k, a, _p in axes if k == "P"]
    if revs:
        n = revs[0][0]
        if all(abs(abs(float(a @ n)) - 1.0) < 1e-9 for a, _ in revs) and all(abs(float(a @ n)) < 1e-9
                                                                           for a in pris):
            return "planar"
        if not pris and len(revs) >= 2:
            # all axes through one point: least-squares point, then distances
            A = np.zeros((3, 3))
            b = np.zeros(3)
            for a, p in revs:
                P = np.eye(3) - np.outer(a, a)
                A += P
                b += P @ p
            try:
                c = np.linalg.solve(A, b)
            except np.linalg.LinAlgError:
                return "spatial"
            if all(np.linalg.norm((np.eye(3) - np.outer(a, a)) @ (c - p)) < 1e-9 for a, p in revs):
                return "spherical"
    elif pris and _rank(np.array(pris)) <= 2:
        return "planar"
    return "spatial"


def generic_configuration(mech, spread=0.15, seed=7):
    """An assembled configuration near home with the actuators moved by a small random amount (the home
    assembly is often singular, e.g. a stretched arm); the home one if that does not close."""
    rng = np.random.default_rng(seed)
    a = mech.q_home[mech.actuated].copy()
    lo, hi = mech.lo[mech.actuated], mech.hi[mech.actuated]
    span = np.where(np.isfinite(hi - lo), hi - lo, 2 * np.pi)
    a = np.clip(a + rng.uniform(-spread, spread, a.size) * np.minimum(span, 1.0), lo, hi)
    fk = mech.fk(a)
    return fk.q if fk.success else mech.q_home


def dof_report(structure, mech):
    """Dict: mobility (Grubler-Kutzbach), actuated, lambda, motion, bodies, joints, mobility_instantaneous,
    passive_free, end_effector_dof, status ('ok' | 'warning' | 'error'), messages (list of str)."""
    g = structure.graph()
    n_bodies = len(g["bodies"])
    joints = g["joints"]
    f = sum(j["dof"] for j in joints)
    q = generic_configuration(mech)
    motion = motion_type(mech, q)
    lam = 3 if motion in ("planar", "spherical") else 6
    grubler = lam * (n_bodies - 1 - len(joints)) + f
    actuated = int(len(mech.actuated))
    C = mech.closure_jacobian(q)
    inst = mech.nv - _rank(C)
    passive_free = len(mech.passive) - _rank(C[:, mech.passive]) if len(mech.passive) else 0
    Z = _null(C, mech.nv)
    Jee = mech.ee_jacobian(q)
    ee_dof = _rank(Jee @ Z) if Z.size else 0
    messages = []
    status = "ok"
    if motion != "spatial":
        messages.append(f"note: every joint axis is {motion} at the home assembly, so the count uses lambda = 3 "
                        f"(the spatial formula would give {6 * (n_bodies - 1 - len(joints)) + f})")
    if grubler != inst:
        messages.append(f"note: Grubler-Kutzbach gives {grubler} but the loop-closure Jacobian at a generic "
                        f"assembly gives {inst}: the count is misleading here (special geometry such as parallel "
                        f"or concurrent axes makes constraints redundant, e.g. Bennett or Delta-like linkages, "
                        f"or the home assembly is singular)")
    idle = inst - ee_dof
    if idle > 0 and passive_free > 0:
        messages.append(f"note: {idle} freedom(s) do not move the end effector (idle motions such as a strut "
                        f"spinning about its own axis between two spherical joints); they are not controllable "
                        f"and need no actuator")
    effective = inst - max(0, min(idle, passive_free))
    if actuated != grubler:
        status = "warning" if actuated == effective else "error"
        kind = "more" if actuated > grubler else "fewer"
        messages.append(f"{status}: {actuated} actuated joint value(s) but the mobility is {grubler}: {kind} "
                        f"actuators than freedoms" + (f" (the {actuated} match the {effective} freedoms that move "
                                                      f"the end effector)" if status == "warning" else ""))
    elif passive_free > max(0, idle):
        status = "error"
        messages.append(f"error: with the actuators locked {passive_free} passive motion(s) remain: the actuated "
                        f"joints do not determine the structure")
    return {"mobility": int(grubler), "actuated": actuated, "lambda": lam, "motion": motion,
            "bodies": n_bodies, "joints": len(joints), "joint_freedoms": f,
            "mobility_instantaneous": int(inst), "passive_free": int(passive_free),
            "end_effector_dof": int(ee_dof), "status": status, "messages": messages,
            "actuated_names": list(mech.actuated_names)}
