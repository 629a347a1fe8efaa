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
USER_ERRORS = (ModelError, InputError, ValueError, OSError)


def build_parser():
    p = argparse.ArgumentParser(prog="manip-view", description=__doc__.split("\n\n")[0])
    p.add_argument("robot", help="bundled name (ur5, ypp3, planar2r, arm3) or a .urdf / .kinematic.json path")
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
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    while not done.wait(0.5):
        pass
    panels.close()
    viewer.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
