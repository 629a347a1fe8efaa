"""``manip-view ROBOT``: the arm of a bundled robot, a URDF or a kinematic.json in the browser (no ROS graph).

Prints the page's URL and serves until Ctrl-C. Listens on 127.0.0.1 unless ``--host`` says otherwise (then it
warns: anyone who reaches the page can move the sliders). A bad description or argument prints one line on
stderr and exits 2.
"""
from __future__ import annotations

import argparse
import signal
import sys
import threading

from manip_core.errors import InputError, ModelError

from .app import is_loopback

# Bad inputs that end with one line and exit 2 (ValueError: robot_path's "unknown robot").
USER_ERRORS = (ModelError, InputError, ValueError, OSError)  # manip_core.bag.BagError is a ValueError


def build_parser():
    p = argparse.ArgumentParser(prog="manip-view", description=__doc__.split("\n\n")[0])
    p.add_argument("robot", nargs="?", default=None,
                   help="bundled name (ur5, ypp3, planar2r, arm3) or a .urdf / .kinematic.json path (with --bag: "
                        "default the bag's robot_description)")
    p.add_argument("--bag", default=None, help="play a recorded run (rosbag2 folder: joint_states, planned_path, "
                                                "obstacles, stereo/points2, stereo/left/image_rect) with a time slider")
    p.add_argument("--base-link", default=None, help="chain base (default: the root link)")
    p.add_argument("--tip-link", default=None, help="chain tip (default: the leaf with the most moving joints)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1; another one prints a warning)")
    p.add_argument("--port", type=int, default=8080, help="TCP port (default 8080; the next free one if taken)")
    p.add_argument("--q", type=float, nargs="+", default=None, metavar="Q",
                   help="initial joint values (rad or m), one per joint")
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        from .scene import RobotScene, load_robot

        run = None
        if args.bag is not None:
            from .replay import load_run

            run = load_run(args.bag)
        if args.robot is None and run is not None and run.description:
            from manip_core import RobotModel

            text = run.description
            robot = RobotModel.from_urdf(text, args.base_link, args.tip_link) if text.lstrip().startswith("<") \
                else RobotModel.from_kinematic_json(text, args.tip_link)
            urdf = text if text.lstrip().startswith("<") else None
        elif args.robot is None:
            raise InputError("give ROBOT (a bundled name or a description path)"
                             + (": the bag has no robot_description" if run is not None else ""))
        else:
            robot, urdf = load_robot(args.robot, args.base_link, args.tip_link)
        scene = RobotScene(robot, urdf)
        for which in ("visual", "collision"):
            scene.shapes(which)  # parse now: a malformed geometry element is an input error, not a crash later
        q0 = scene.clip(args.q) if args.q is not None else None
    except USER_ERRORS as e:
        print(f"manip-view: {e}", file=sys.stderr)
        return 2
    if not is_loopback(args.host):
        print(f"manip-view: WARNING: listening on {args.host}: anyone who reaches this address can open the page "
              "and move the sliders", file=sys.stderr)
    from .app import OfflineViewer

    # A stop signal from here on ends the page cleanly (exit 0), also one that comes before the URL is printed.
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    try:
        viewer = OfflineViewer(scene, host=args.host, port=args.port)
    except OSError as e:
        print(f"manip-view: cannot listen on {args.host}:{args.port}: {e}", file=sys.stderr)
        return 2
    if q0 is not None:
        viewer.set_q(q0)
    from .overlays import solve_ik_offline
    from .panels import Panels

    panels = Panels(viewer, solve_ik=lambda T, q: solve_ik_offline(robot, T, q))
    print(f"manip-view: {robot.name} ({robot.dof} joints, {robot.base_link} -> {robot.tip_link}) at {viewer.url}",
          flush=True)
    player = None
    if run is not None:
        from .replay_controls import ReplayControls

        player = ReplayControls(viewer, panels, run)
        print(f"manip-view: {args.bag}: {run.duration_s:.1f} s, {len(run.t_joints)} joint states", flush=True)
    while not done.wait(0.5):
        pass
    if player is not None:
        player.close()
    panels.close()
    viewer.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
