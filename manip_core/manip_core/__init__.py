"""manip_core: robot descriptions (URDF, Isaac kinematic.json) to a Product-of-Exponentials model with
kinematics, inverse kinematics and dynamics, single and batched (numba). No rclpy import here.

``RobotModel`` and ``IKResult`` are imported on first use (PEP 562), so that the tools of this package
that need no model (``manip-launch``) start without loading NumPy and numba: the launcher must be able
to act on a Ctrl-C within its first few tens of milliseconds."""
from .errors import InputError, ModelError

__all__ = ["RobotModel", "IKResult", "ModelError", "InputError"]


def __getattr__(name):
    if name in ("RobotModel", "IKResult"):
        from .model import IKResult, RobotModel
        globals().update(RobotModel=RobotModel, IKResult=IKResult)
        return globals()[name]
    raise AttributeError(f"module 'manip_core' has no attribute {name!r}")


def model_server_main(args=None):
    """Console script ``model_server`` (manip_core.ros.node_main.entry: signal handlers before the node imports)."""
    from manip_core.ros.node_main import entry
    return entry("manip_core.model_server_node", args)


def state_publisher_main(args=None):
    """Console script ``state_publisher`` (tf from joint_states, robot_state_publisher's semantics)."""
    from manip_core.ros.node_main import entry
    return entry("manip_core.state_publisher_node", args)


def analysis_markers_main(args=None):
    """Console script ``analysis_markers`` (workspace and singularity-map MarkerArray for RViz)."""
    from manip_core.ros.node_main import entry
    return entry("manip_core.analysis_markers_node", args)
