"""Joint-space and task-space controllers of the manip stack."""


def controller_main(args=None):
    """Console script ``controller`` (manip_core.ros.node_main.entry: signal handlers before the node imports)."""
    from manip_core.ros.node_main import entry
    return entry("manip_control.controller_node", args)
