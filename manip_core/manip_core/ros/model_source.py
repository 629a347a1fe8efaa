"""RobotModelSource: the robot model of a node, from its parameters or from the robot_description topic.

Parameters declared: ``urdf_path`` (file), ``robot_description`` (URDF text), ``base_link``, ``tip_link``
(empty: the root and the end of the longest chain). With both URDF parameters empty the node waits for the
``robot_description`` topic (std_msgs/String, reliable, transient local), as published by model_server.
"""
import threading
from pathlib import Path

from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

from ..errors import ModelError
from ..model import RobotModel

DESCRIPTION_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)


def _declare(node, name, default, description):
    from rcl_interfaces.msg import ParameterDescriptor
    if not node.has_parameter(name):
        node.declare_parameter(name, default, ParameterDescriptor(description=description))
    return node.get_parameter(name).value


class RobotModelSource:
    """Holds ``model`` (RobotModel or None) and ``urdf_text``; calls ``on_model(model, urdf_text)`` when one
    arrives (possibly from inside the constructor)."""

    def __init__(self, node, on_model=None, subscribe=True):
        self._node = node
        self._on_model = on_model
        self.model = None
        self.urdf_text = ""
        self._ready = threading.Event()
        path = _declare(node, "urdf_path", "", "URDF file of the robot (alternative to robot_description)")
        text = _declare(node, "robot_description", "", "URDF text of the robot")
        self.base_link = _declare(node, "base_link", "", "base link of the chain (empty: the URDF root)") or None
        self.tip_link = _declare(node, "tip_link", "", "tip link of the chain (empty: longest chain)") or None
        self._sub = None
        if text or path:
            try:
                self.load(text if text else Path(path).read_text(), source=path or "robot_description")
            except (OSError, ModelError, ValueError) as e:
                node.get_logger().error(f"robot model not loaded: {e}")
        if self.model is None and subscribe:
            node.get_logger().info("waiting for the robot_description topic")
            self._sub = node.create_subscription(String, "robot_description", self._on_description,
                                                 DESCRIPTION_QOS)

    def load(self, urdf_text, source="robot_description"):
        """Build the model from URDF text; raises ModelError (message names the element and reason)."""
        try:
            model = RobotModel.from_urdf(urdf_text, base_link=self.base_link, tip_link=self.tip_link)
        except ModelError as e:
            raise ModelError(source, e.element, e.reason) from None
        self.model, self.urdf_text = model, urdf_text
        self._node.get_logger().info(f"robot model: {model.name}, {model.base_link} -> {model.tip_link}, "
                                     f"{model.dof} joints ({', '.join(model.joint_names)})")
        self._ready.set()
        if self._on_model is not None:
            self._on_model(model, urdf_text)
        return model

    def _on_description(self, msg):
        try:
            self.load(msg.data)
        except (ModelError, ValueError) as e:
            self._node.get_logger().error(f"rejected robot_description: {e}")

    def wait(self, timeout_s):
        """True once a model is loaded (the caller must spin the node meanwhile in another thread)."""
        return self._ready.wait(timeout_s)
