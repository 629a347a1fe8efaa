"""PyBullet simulation of the manip stack: robot, joint states and camera images."""


def sim_bridge_main(args=None):
    """Console script ``sim_bridge`` (manip_core.ros.node_main.entry: signal handlers before the node imports)."""
    from manip_core.ros.node_main import entry
    return entry("manip_sim.sim_bridge_node", args)
