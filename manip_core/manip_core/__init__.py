"""manip_core: robot descriptions (URDF, Isaac kinematic.json) to a Product-of-Exponentials model with
kinematics, inverse kinematics and dynamics, single and batched (numba). No rclpy import here."""
from .errors import InputError, ModelError
from .model import IKResult, RobotModel

__all__ = ["RobotModel", "IKResult", "ModelError", "InputError"]
