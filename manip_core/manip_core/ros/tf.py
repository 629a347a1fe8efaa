"""tf2 message helpers shared by the nodes that publish frames (state_publisher, sim_bridge).

``/tf`` and ``/tf_static`` carry tf2_msgs/TFMessage. QoS as tf2_ros' broadcasters: ``/tf`` reliable,
volatile, depth 100; ``/tf_static`` reliable, transient local, depth 1 (a late subscriber gets the last
message, so a node publishes all its static frames in one message).
"""
from geometry_msgs.msg import TransformStamped
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

from ..link_transforms import to_translation_quat_xyzw

STATIC_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
TF_QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)


def transform_msg(stamp, parent, child, matrix):
    """geometry_msgs/TransformStamped of a 4x4 T_parent_child (m; quaternion x, y, z, w)."""
    t = TransformStamped()
    t.header.stamp = stamp
    t.header.frame_id = parent
    t.child_frame_id = child
    (t.transform.translation.x, t.transform.translation.y, t.transform.translation.z), \
        (t.transform.rotation.x, t.transform.rotation.y, t.transform.rotation.z, t.transform.rotation.w) = \
        to_translation_quat_xyzw(matrix)
    return t
