"""ROS 2 node ``state_publisher``: tf of the robot's links from joint_states, robot_state_publisher's semantics.

Subscribes ``joint_states`` (sensor_msgs/JointState); publishes ``/tf_static`` (tf2_msgs/TFMessage,
reliable, transient local, depth 1: one message with every fixed joint of the URDF, sent once per model) and
``/tf`` (tf2_msgs/TFMessage: every moving joint that the joint_states message names, or that a mimic joint
follows, stamped with the joint_states stamp). Frame ids are the URDF link names with ``frame_prefix``
in front. The robot description comes from ``urdf_path`` / ``robot_description``, or the
``robot_description`` topic (manip_core.ros.model_source.RobotModelSource, as the other nodes).

Parameters: ``frame_prefix`` (string, ""), ``publish_frequency`` (double, 0.0: a /tf message for every
joint_states message; > 0: at most this many per second of the node clock, as robot_state_publisher, whose
default is 20 Hz) and the model parameters. ``/tf`` and ``/tf_static`` are absolute names, as tf2 expects.

The transforms are computed by manip_core.link_transforms (no rclpy).
"""
from __future__ import annotations

from rcl_interfaces.msg import ParameterDescriptor
from rclpy.node import Node
from sensor_msgs.msg import JointState
from tf2_msgs.msg import TFMessage

from .errors import InputError, ModelError
from .link_transforms import LinkTransforms
from .ros.model_source import RobotModelSource
from .ros.tf import STATIC_QOS, TF_QOS, transform_msg


class StatePublisher(Node):
    def __init__(self, **kwargs):
        super().__init__("state_publisher", **kwargs)
        self.frame_prefix = self._param("frame_prefix", "", "prefix of every frame id (e.g. 'left/')")
        self.publish_frequency = float(self._param(
            "publish_frequency", 0.0, "maximum /tf rate (Hz of the node clock); 0: every joint_states message"))
        if not self.publish_frequency >= 0.0:
            raise ValueError(f"parameter publish_frequency must be >= 0, got {self.publish_frequency}")
        self._links = None
        self._last_ns = None
        self._warned = set()
        self._static_pub = self.create_publisher(TFMessage, "/tf_static", STATIC_QOS)
        self._tf_pub = self.create_publisher(TFMessage, "/tf", TF_QOS)
        self.create_subscription(JointState, "joint_states", self._on_joint_states, 10)
        self._source = RobotModelSource(self, on_model=self._on_model)

    def _param(self, name, default, description):
        self.declare_parameter(name, default, ParameterDescriptor(description=description))
        return self.get_parameter(name).value

    def _frame(self, link):
        return self.frame_prefix + link

    def _on_model(self, _model, urdf_text):
        try:
            links = LinkTransforms.from_urdf(urdf_text)
        except ModelError as e:
            self.get_logger().error(f"robot description not usable for tf: {e}")
            return
        self._links = links
        stamp = self.get_clock().now().to_msg()
        static = [transform_msg(stamp, self._frame(t.parent), self._frame(t.child), t.matrix)
                  for t in links.static_transforms()]
        self._static_pub.publish(TFMessage(transforms=static))
        skipped = f"; skipped (floating/planar): {', '.join(links.skipped)}" if links.skipped else ""
        self.get_logger().info(f"tf of {links.tree.name}: {len(static)} fixed joints on /tf_static, "
                               f"{len(links.moving)} moving joints on /tf from joint_states{skipped}")

    def _warn_once(self, key, text):
        if key not in self._warned:
            self._warned.add(key)
            self.get_logger().warning(text)

    def _on_joint_states(self, msg):
        links = self._links
        if links is None:
            return
        now = self.get_clock().now().nanoseconds
        if self.publish_frequency > 0.0 and self._last_ns is not None \
                and now - self._last_ns < 1e9 / self.publish_frequency and now >= self._last_ns:
            return
        try:
            moving, missing = links.moving_transforms(list(msg.name), list(msg.position))
        except InputError as e:
            self._warn_once("bad", f"joint_states ignored: {e}")
            return
        if missing:
            self._warn_once(("missing", tuple(missing)),
                            f"joint_states lack joint(s) {', '.join(missing)}: their links get no tf")
        if not moving:
            return
        self._last_ns = now
        stamp = msg.header.stamp if (msg.header.stamp.sec or msg.header.stamp.nanosec) else \
            self.get_clock().now().to_msg()
        self._tf_pub.publish(TFMessage(transforms=[
            transform_msg(stamp, self._frame(t.parent), self._frame(t.child), t.matrix) for t in moving]))


def main(argv=None):
    """Console script ``state_publisher``."""
    from rclpy.executors import SingleThreadedExecutor

    from .ros.node_main import run_node
    return run_node(argv, "state_publisher", StatePublisher, SingleThreadedExecutor)


if __name__ == "__main__":
    import sys
    sys.exit(main())
