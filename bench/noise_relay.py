"""bench/noise_relay.py: encoder noise between a simulator and a controller, as its own ROS 2 process.

Subscribes ``joint_states`` and republishes each message on ``joint_states_noisy`` with N(0, sigma^2) added to
every position (rad) and the velocities replaced by differencing those noisy positions over the stamps (an
encoder-only driver). Used by bench/control.py --pybullet for the noise conditions; a process of its own so
that the relay's latency does not depend on the bench process's other callbacks.

    python bench/noise_relay.py SIGMA_RAD SEED [--ros-args ...]
"""
import sys

import numpy as np
import rclpy
from rclpy.node import Node
from sensor_msgs.msg import JointState


class NoiseRelay(Node):
    def __init__(self, sigma, seed):
        super().__init__("noise_relay")
        self.sigma = float(sigma)
        self.rng = np.random.default_rng(int(seed))
        self.last = None
        self.pub = self.create_publisher(JointState, "joint_states_noisy", 10)
        self.create_subscription(JointState, "joint_states", self.relay, 10)

    def relay(self, m):
        t = m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec
        z = np.asarray(m.position, dtype=np.float64) + self.rng.normal(0.0, self.sigma, len(m.position))
        if self.last is not None and t > self.last[0] and len(self.last[1]) == len(z):
            m.velocity = ((z - self.last[1]) / (t - self.last[0])).tolist()
        self.last = (t, z)
        m.position = z.tolist()
        self.pub.publish(m)


def main(argv=None):
    argv = sys.argv if argv is None else argv
    args = rclpy.utilities.remove_ros_args(argv)
    rclpy.init(args=argv)
    node = NoiseRelay(args[1], args[2])
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, rclpy.executors.ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()
