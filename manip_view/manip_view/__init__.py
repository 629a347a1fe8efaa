"""manip_view: a browser viewer of a manipulator (viser). No ROS import in the library modules
(viewer_node is the live node).

geometry (URDF shapes, skeleton capsules), scene (link poses, readout, camera of a RobotModel), camera (pinhole
projection), app (viser glue), browser (headless Chromium over the DevTools protocol, for tests and screenshots),
cli (``manip-view``)."""


def viewer_main(args=None):
    """Console script ``viewer`` (the live node; manip_core.ros.node_main.entry: signal handlers first)."""
    from manip_core.ros.node_main import entry
    return entry("manip_view.viewer_node", args)
