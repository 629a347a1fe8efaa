"""Camera and stereo perception of the manip stack: depth, point clouds, object clustering."""


def stereo_obstacles_main(args=None):
    """Console script ``stereo_obstacles`` (manip_core.ros.node_main.entry: signal handlers before the node imports)."""
    from manip_core.ros.node_main import entry
    return entry("manip_perception.stereo_obstacles_node", args)
