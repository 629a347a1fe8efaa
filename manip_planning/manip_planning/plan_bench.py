"""manip-plan-bench: plan MotionBenchMaker-style problems and write one JSON line per problem.

    manip-plan-bench PROBLEM_DIR... --urdf URDF [--srdf SRDF] [--time-limit S] [--seed N] --out FILE.jsonl

Each PROBLEM_DIR holds ``requestNNNN.yaml`` (MoveIt MotionPlanRequest: start joint_state, goal
joint_constraints) and ``sceneNNNN.yaml`` (MoveIt PlanningScene). Per problem the line holds: scenario (the
folder's name), problem ("request0001"), valid (start and goal collision-free in the planner's model),
success, path (waypoints of the request's goal joints in their order, from exactly the start to exactly the
goal; every straight segment is collision-free), planning_time_s, simplification_time_s, path_length_rad,
validation_time_s (the planner's re-check of the final path every 0.005 rad, not part of the other two),
and the same three stages in the planning thread's CPU time (planning_cpu_s, simplification_cpu_s,
validation_cpu_s; on a machine shared with other work the wall times include waiting for a core).
Progress goes to stderr; a file that cannot be read gets a one-line error naming it (exit status 1 at the end).
"""
from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

import numpy as np

from .path_planning import plan_path
from .planning_scene import PlanningScene, SceneError


class ProblemError(ValueError):
    """A request file that cannot be used; the message names it."""


def read_request(path):
    """(start {joint: value}, goal [(joint, value)] in the request's order) of a MotionPlanRequest YAML."""
    import yaml
    try:
        data = yaml.safe_load(Path(path).read_text())
        js = data["start_state"]["joint_state"]
        start = {str(n): float(v) for n, v in zip(js["name"], js["position"])}
        goal = [(str(c["joint_name"]), float(c["position"]))
                for c in data["goal_constraints"][0]["joint_constraints"]]
    except OSError as e:
        raise ProblemError(f"{path}: cannot read: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise ProblemError(f"{path}: not YAML: {str(e).splitlines()[0]}") from None
    except (KeyError, IndexError, TypeError, ValueError) as e:
        raise ProblemError(f"{path}: not a MotionPlanRequest with start_state.joint_state and "
                           f"goal_constraints[0].joint_constraints ({type(e).__name__}: {e})") from None
    if not goal:
        raise ProblemError(f"{path}: goal_constraints[0].joint_constraints is empty")
    return start, goal


def model_for_joints(urdf, joint_names, srdf=None):
    """RobotCollisionModel whose chain's actuated joints are exactly joint_names (any order): the first link
    (deepest first) whose chain from the root has them."""
    from manip_core.model import RobotModel
    from .robot_collision import RobotCollisionModel, _kinematics_only
    xml = _kinematics_only(urdf)
    base = RobotModel.from_urdf(xml)
    want = set(joint_names)
    if set(base.joint_names) == want:
        return RobotCollisionModel.from_urdf(urdf, srdf, model=base)
    tree = base.tree
    best = None
    for link in tree.links:
        try:
            path = tree.path(tree.root, link)
        except Exception:  # noqa: BLE001 - not below the root
            continue
        names = {j.name for j in path if j.type != "fixed" and j.mimic is None}
        if names == want and (best is None or len(path) > best[0]):
            best = (len(path), link)
    if best is None:
        raise ProblemError(f"{urdf}: no chain from '{tree.root}' has exactly the joints {sorted(want)}")
    return RobotCollisionModel.from_urdf(urdf, srdf, model=RobotModel.from_urdf(xml, tip_link=best[1]))


def _problems(dirs):
    for d in dirs:
        d = Path(d)
        if not d.is_dir():
            yield d, None, None, f"{d}: not a directory"
            continue
        reqs = sorted(d.glob("request*.yaml"))
        if not reqs:
            yield d, None, None, f"{d}: no requestNNNN.yaml files"
        for r in reqs:
            s = d / re.sub(r"^request", "scene", r.name)
            yield d, r, s, None


def _progress(i, n, label):
    w = 30
    k = int(w * i / max(n, 1))
    sys.stderr.write(f"\r[{'#' * k}{'.' * (w - k)}] {i}/{n} {label[:50]:<50}")
    sys.stderr.flush()


def main(argv=None):
    ap = argparse.ArgumentParser(prog="manip-plan-bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("problem_dirs", nargs="+", metavar="PROBLEM_DIR")
    ap.add_argument("--urdf", required=True)
    ap.add_argument("--srdf", default=None)
    ap.add_argument("--time-limit", type=float, default=1.0, help="s per problem (default 1)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True, metavar="FILE.jsonl")
    a = ap.parse_args(argv)
    if not (a.time_limit > 0 and math.isfinite(a.time_limit)):
        ap.error(f"--time-limit must be > 0, got {a.time_limit}")
    from .robot_collision import CollisionModelError
    from manip_core.errors import InputError, ModelError
    jobs = list(_problems(a.problem_dirs))
    errors = 0
    models = {}
    n = len(jobs)
    with open(a.out, "w") as out:
        for i, (d, req, scene_file, err) in enumerate(jobs):
            _progress(i, n, f"{d.name}/{req.stem if req else ''}")
            try:
                if err:
                    raise ProblemError(err)
                start, goal = read_request(req)
                names = [g[0] for g in goal]
                key = tuple(sorted(names))
                if key not in models:
                    try:
                        models[key] = model_for_joints(a.urdf, names, a.srdf)
                    except (CollisionModelError, ModelError, InputError, OSError) as e:
                        sys.stderr.write(f"\nmanip-plan-bench: error: {e}\n")
                        return 2
                robot = models[key]
                missing = [j for j in robot.model.joint_names if j not in start]
                if missing:
                    raise ProblemError(f"{req}: start_state lacks joints {missing}")
                order = [names.index(j) for j in robot.model.joint_names]
                q0 = np.array([start[j] for j in robot.model.joint_names])
                q1 = np.array([goal[k][1] for k in order])
                if not scene_file.is_file():
                    raise ProblemError(f"{scene_file}: missing (expected next to {req.name})")
                scene = PlanningScene.from_moveit_yaml(scene_file)
            except (ProblemError, SceneError) as e:
                errors += 1
                sys.stderr.write(f"\nmanip-plan-bench: error: {e}\n")
                continue
            from .robot_collision import CollisionChecker
            res = plan_path(CollisionChecker(robot, scene), q0, q1, time_limit_s=a.time_limit, seed=a.seed)
            inv = np.argsort(order)  # model order -> request order
            path = None if res.path is None else res.path[:, inv].tolist()
            rec = dict(scenario=d.name, problem=req.stem, valid=res.valid, success=res.success, path=path,
                       planning_time_s=res.planning_time_s, simplification_time_s=res.simplification_time_s,
                       path_length_rad=res.path_length_rad if res.success else None,
                       validation_time_s=res.validation_time_s, planning_cpu_s=res.planning_cpu_s,
                       simplification_cpu_s=res.simplification_cpu_s, validation_cpu_s=res.validation_cpu_s)
            if not res.success and res.message:
                rec["message"] = res.message
            out.write(json.dumps(rec) + "\n")
            out.flush()
        _progress(n, n, "done")
        sys.stderr.write("\n")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
