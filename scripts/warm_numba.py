#!/usr/bin/env python3
"""Fill numba's on-disk cache of the workspace's ``cache=True`` kernels (what ``scripts/setup.sh`` runs).

Every kernel of manip_core (FK, Jacobians, IK, closed-form IK, dynamics, derivatives, batch lanes, analysis
sampling), manip_planning (collision kernels, RRT-Connect, path simplification, shapes), manip_perception
(voxel grid, clustering, support plane, self filter, back projection), manip_design and the manip_control
regressor is called once through the public API the nodes and tests use, so that the argument types (dtype,
layout, dimensions) are the ones a later process asks for. numba keeps the machine code in ``__pycache__``
next to each source file (or under NUMBA_CACHE_DIR); a later process then loads a kernel in milliseconds
instead of compiling it (seconds each; minutes for the whole set on 2 cores, paid once per fresh clone
instead of once per test process).

    .venv/bin/python scripts/warm_numba.py                      # warm every section
    .venv/bin/python scripts/warm_numba.py --only core analysis  # some sections (setup.sh runs two at once)
    .venv/bin/python scripts/warm_numba.py --audit              # then list the kernels left cold
    .venv/bin/python scripts/warm_numba.py --check              # same, exit 1 if one was left cold

Each section runs on its own; a failing section is reported (stderr) and the others still run; the exit
status is 1 when a section failed (or, with --check, when a kernel was left cold). Progress goes to stderr.
"""
import argparse
import importlib
import math
import pkgutil
import sys
import time
import traceback

import numpy as np

ROBOTS = ("ur5", "ypp3", "planar2r", "arm3")


def _log(msg):
    print(f"warm_numba: {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------------- sections
def _seven_dof():
    """A 7-DOF arm (no closed form: the numerical IK and the general paths), built from URDF text."""
    from manip_core import RobotModel
    links, joints = [], []
    axes = ("0 0 1", "0 1 0", "0 0 1", "0 1 0", "0 0 1", "0 1 0", "0 0 1")
    for i in range(8):
        links.append(f'<link name="l{i}"><inertial><mass value="{2.0 - 0.2 * i}"/>'
                     f'<origin xyz="0 0 0.1"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/>'
                     f'</inertial></link>')
    for i in range(7):
        joints.append(f'<joint name="j{i + 1}" type="revolute"><parent link="l{i}"/><child link="l{i + 1}"/>'
                      f'<origin xyz="0 0 {0.2 if i else 0.1}"/><axis xyz="{axes[i]}"/>'
                      f'<limit lower="-2.8" upper="2.8" effort="50" velocity="2"/></joint>')
    xml = f'<robot name="warm7">{"".join(links)}{"".join(joints)}</robot>'
    return RobotModel.from_urdf(xml)


def _models():
    from manip_core import RobotModel
    return [RobotModel.load(n) for n in ROBOTS] + [_seven_dof()]


def warm_core():
    """manip_core: single and batched kinematics/dynamics/derivatives, IK (numerical and closed form)."""
    from manip_core import dynamics_derivatives  # noqa: F401  (its kernels are reached through the model)
    for r in _models():
        rng = np.random.default_rng(0)
        lo = np.where(np.isfinite(r.joint_lower), r.joint_lower, -math.pi)
        hi = np.where(np.isfinite(r.joint_upper), r.joint_upper, math.pi)
        Q = rng.uniform(lo, hi, (8, r.dof))
        q, qd, qdd = Q[0].copy(), Q[1].copy(), Q[2].copy()
        T = r.fk(q)
        r.fk(q, link=r.link_names[len(r.link_names) // 2])
        r.jacobian_space(q), r.jacobian_body(q)
        r.fk_batch(Q), r.jacobian_space_batch(Q), r.jacobian_body_batch(Q)
        r.ik(T, q + 0.05)
        r.ik(T, q + 0.05, position_only=True)
        r.ik(T)
        r.within_limits(q)
        closed = r.analytic_ik()
        if closed is not None:
            r.ik_all(T)
            closed.solve_batch(np.stack([T, r.fk(Q[1])]))
        for part in ("full", "position", "orientation"):
            r.manipulability(q, part), r.manipulability_batch(Q, part)
            r.min_singular_value(q, part), r.condition_number(q, part), r.isotropy(q, part)
            r.velocity_ellipsoid(q, part), r.force_ellipsoid(q, part)
        if not r._has_inertia:  # noqa: SLF001  (arm3 has no inertial data: no dynamics)
            continue
        tau = r.inverse_dynamics(q, qd, qdd)
        r.inverse_dynamics(q, qd, qdd, f_tip=np.ones(6))
        r.mass_matrix(q), r.coriolis_torques(q, qd), r.coriolis_matrix(q, qd), r.gravity_torques(q)
        r.forward_dynamics(q, qd, tau), r.forward_dynamics(q, qd, tau, f_tip=np.ones(6))
        r.inverse_dynamics_batch(Q, Q, Q), r.mass_matrix_batch(Q), r.forward_dynamics_batch(Q, Q, Q)
        r.rnea_derivatives(q, qd, qdd), r.forward_dynamics_derivatives(q, qd, tau)
        r.rnea_derivatives_batch(Q, Q, Q), r.forward_dynamics_derivatives_batch(Q, Q, Q)
        r.jacobian_time_derivative(q, qd, "space"), r.jacobian_time_derivative(q, qd, "body")
        data = r.create_data()
        out_t = np.empty((4, 4))
        out_j = np.empty((6, r.dof))
        out_v = np.empty(r.dof)
        out_m = np.empty((r.dof, r.dof))
        r.fk(q, out=out_t, data=data), r.jacobian_space(q, out=out_j, data=data)
        r.jacobian_body(q, out=out_j, data=data)
        r.inverse_dynamics(q, qd, qdd, out=out_v, data=data), r.mass_matrix(q, out=out_m, data=data)
        r.coriolis_torques(q, qd, out=out_v, data=data), r.gravity_torques(q, out=out_v, data=data)
        r.forward_dynamics(q, qd, tau, out=out_v, data=data)
        r.rnea_derivatives(q, qd, qdd, data=data), r.forward_dynamics_derivatives(q, qd, tau, data=data)
        r.jacobian_time_derivative(q, qd, out=out_j, data=data)
        r.jacobian_time_derivative(q, qd, "body", out=out_j, data=data)


def warm_analysis():
    """manip_core.analysis: workspace sampling, singularity map (closed-form and LM arms), path check."""
    from manip_core.analysis import path_singularity, singularity_map, workspace
    for r in _models():
        workspace.estimate_workspace(r, 4096)
        Q = np.linspace(np.zeros(r.dof), np.full(r.dof, 0.3), 3)
        path_singularity.check_path(r, Q, 1e-6)
    from manip_core import RobotModel
    for name in ("ur5", "ypp3"):
        singularity_map.singularity_map(RobotModel.load(name), cells=4, levels=1)
    singularity_map.singularity_map(_seven_dof(), cells=4, levels=1)


def warm_planning():
    """manip_planning: the planner's own warm-up, one obstacle-avoiding plan, collision queries."""
    from manip_core import RobotModel
    from manip_planning.collision import Obstacle
    from manip_planning.planning import Planner, PlanRequest
    for r in (RobotModel.load("ur5"), _seven_dof()):
        p = Planner(r)
        p._warm_up()  # noqa: SLF001  (the public warm_up() swallows errors; here they must show)
        lo = np.where(np.isfinite(r.joint_lower), r.joint_lower, -math.pi)
        hi = np.where(np.isfinite(r.joint_upper), r.joint_upper, math.pi)
        q0, q1 = lo + 0.45 * (hi - lo), lo + 0.55 * (hi - lo)
        mid = r.fk(0.5 * (q0 + q1))[:3, 3]
        obstacle = Obstacle(center=mid + np.array([0.0, 0.0, 0.3]), size=np.array([0.05, 0.05, 0.05]))
        p.plan(PlanRequest(start=q0, goal_joints=q1, avoid_obstacles=True), [obstacle])
        p.plan(PlanRequest(start=q0, goal_pose=r.fk(q1), avoid_obstacles=True), [obstacle])
        p.plan(PlanRequest(start=q0, goal_pose=r.fk(q1), path_type="cartesian"), [])
        for profile in ("trapezoidal", "toppra", "jerk_limited"):
            p.plan(PlanRequest(start=q0, goal_joints=q1, profile=profile), [])
        ch = _checker(p)
        if ch is not None:
            Q = np.linspace(q0, q1, 5)
            ch.is_free(q0), ch.are_free(Q), ch.segment_free(q0, q1), ch.segments_free(Q[:-1], Q[1:])
            ch.first_colliding_segment(Q), ch.distances(q0)
            p.collision_model.spheres_world(q0)


def _checker(planner):
    from manip_planning.planning import PlanningScene, Shape, pose_matrix
    from manip_planning.robot_collision import CollisionChecker
    scene = PlanningScene([Shape("box", (0.05, 0.05, 0.05), pose_matrix((0.4, 0.0, 0.3)), "box"),
                           Shape("sphere", (0.05,), pose_matrix((0.0, 0.4, 0.3)), "ball")])
    return CollisionChecker(planner.collision_model, scene)


def warm_perception():
    """manip_perception: the obstacle chain's warm-up, back projection, self filter."""
    from manip_perception import obstacles, robot_body, stereo
    obstacles.warm_up()
    z = np.full((48, 64), 1.0, dtype=np.float32)
    stereo.back_project(z, 50.0, 50.0, 32.0, 24.0)
    stereo.back_project(z.astype(np.float64), 50.0, 50.0, 32.0, 24.0, max_depth=3.0)
    pts = np.random.default_rng(0).uniform(-1, 1, (500, 3)).astype(np.float32)
    spheres = np.array([[0.0, 0.0, 0.0, 0.2], [0.3, 0.0, 0.0, 0.1]])
    robot_body.outside_spheres_mask(pts, spheres, padding=0.01)
    robot_body.outside_spheres_mask(pts.astype(np.float64), spheres, padding=0.01)


def warm_design():
    """manip_design: closed-chain FK/IK (LM and CCD) of the shipped examples, link-length synthesis."""
    from pathlib import Path

    import manip_design
    from manip_design import parse_file
    from manip_design.synthesis import read_targets, synthesize
    ex = Path(manip_design.__file__).resolve().parent / "examples"
    for name in ("dual_scara", "delta", "scara"):
        s = parse_file(ex / f"{name}.mrs")
        m = s.compile()
        fk = m.fk(np.zeros(len(m.actuated_names)))
        m.ik(fk.pose[:3, 3]), m.ik(fk.pose[:3, 3], method="ccd")
        m.closure_jacobian(fk.q), m.ee_jacobian(fk.q)
    s = parse_file(ex / "scara_synthesis.mrs")
    synthesize(s, read_targets(ex / "scara_synthesis_targets.txt"), attempts=1)


def warm_control():
    """manip_control: the dynamics regressors (manip_core's RNEA kernel called from manip_control)."""
    from manip_control import regressor
    for r in _models():
        if not r._has_inertia:  # noqa: SLF001  (arm3 has no inertial data: no dynamics)
            continue
        q = np.full(r.dof, 0.2)
        regressor.regressor(r, q, q, q)
        regressor.slotine_li_regressor(r, q, q, q, q)


SECTIONS = {"core": warm_core, "analysis": warm_analysis, "planning": warm_planning,
            "perception": warm_perception, "design": warm_design, "control": warm_control}
PACKAGES = ("manip_core", "manip_planning", "manip_perception", "manip_design", "manip_control")


# ------------------------------------------------------------------------------------------------- audit
def cached_kernels():
    """(module, name, dispatcher) of every numba CPU dispatcher defined in the packages' modules (imported
    here; CUDA-only modules and modules that need a display or ROS are skipped)."""
    from numba.core.registry import CPUDispatcher
    seen, out = set(), []
    for pkg in PACKAGES:
        try:
            root = importlib.import_module(pkg)
        except ImportError:
            continue
        for info in pkgutil.walk_packages(root.__path__, pkg + "."):
            if "cuda" in info.name or ".test" in info.name or info.name.endswith("__main__"):
                continue
            try:
                mod = importlib.import_module(info.name)
            except (Exception, SystemExit):  # noqa: BLE001 - modules that need a display/ROS: no kernels
                continue
            for name, obj in vars(mod).items():
                if isinstance(obj, CPUDispatcher) and id(obj) not in seen and obj.__module__ == mod.__name__:
                    seen.add(id(obj))
                    out.append((mod.__name__, name, obj))
    return out


def audit():
    """(cold, uncached, multi): cache=True kernels with no index file in their cache (never compiled there;
    kernels inlined with inline='always' are left out: they are compiled inside their callers), kernels
    without cache=True (compiled in every process), kernels with several signatures in this process."""
    import os
    cold, uncached, multi = [], [], []
    for mod, name, d in cached_kernels():
        cache = d._cache  # noqa: SLF001  (numba has no public accessor)
        if type(cache).__name__ == "NullCache":
            uncached.append(f"{mod}.{name}")
            continue
        if len(d.signatures) > 1:
            multi.append(f"{mod}.{name}: {len(d.signatures)}")
        if d.targetoptions.get("inline", "never") == "always":
            continue
        if not os.path.exists(cache._cache_file._index_path):  # noqa: SLF001
            cold.append(f"{mod}.{name}")
    return cold, uncached, multi


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--audit", action="store_true", help="list the cached kernels this run did not compile "
                                                             "(imports every module of the packages)")
    ap.add_argument("--check", action="store_true", help="--audit, and exit 1 when a kernel was left cold")
    ap.add_argument("--only", nargs="*", choices=sorted(SECTIONS), help="run only these sections")
    args = ap.parse_args(argv)
    failed = []
    t_all = time.perf_counter()
    for name, fn in SECTIONS.items():
        if args.only and name not in args.only:
            continue
        t0 = time.perf_counter()
        try:
            fn()
            _log(f"{name}: {time.perf_counter() - t0:.1f} s")
        except Exception:  # noqa: BLE001 - report and go on with the other sections
            failed.append(name)
            _log(f"{name}: FAILED after {time.perf_counter() - t0:.1f} s:\n{traceback.format_exc()}")
    _log(f"done in {time.perf_counter() - t_all:.1f} s; sections failed: {', '.join(failed) or 'none'}")
    if not (args.audit or args.check):
        return 1 if failed else 0
    cold, uncached, multi = audit()
    if uncached:
        _log("dispatchers without cache=True (compiled in every process): " + ", ".join(uncached))
    if multi:
        _log("kernels with several compiled signatures: " + "; ".join(multi))
    if cold:
        _log(f"{len(cold)} cached kernels with nothing in their cache: " + ", ".join(cold))
    return 1 if failed or (args.check and cold) else 0


if __name__ == "__main__":
    sys.exit(main())
