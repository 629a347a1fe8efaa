"""Motion planning for the manip stack: joint and Cartesian trajectories, collision-aware paths."""


def planner_main(args=None):
    """Console script ``planner`` (manip_core.ros.node_main.entry: signal handlers before the node imports)."""
    from manip_core.ros.node_main import entry
    return entry("manip_planning.planner_node", args)


def pick_place_main(args=None):
    """Console script ``pick_place`` (manip_core.ros.node_main.entry: signal handlers before the node imports)."""
    from manip_core.ros.node_main import entry
    return entry("manip_planning.pick_place_node", args)
