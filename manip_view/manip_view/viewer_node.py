"""ROS 2 node ``viewer``: the arm on the ROS graph in the browser, live, and joint sliders that drive it.

The robot comes from the usual parameters / the ``robot_description`` topic (manip_core.ros.model_source); the page
(manip_view.app, served on ``host``:``port``, 127.0.0.1 by default, a warning for any other address) draws the arm
at the newest ``joint_states`` (at most ``redraw_rate_hz`` redraws per second). A slider moved in the page sends
a short trajectory (manip_view.command.slider_move: a quintic from the measured position, at most
``speed_fraction`` of each velocity limit, never a jump) on ``trajectory_topic`` (trajectory_msgs/JointTrajectory,
the controller's ``joint_trajectory_controller/joint_trajectory``, which validates it as any client's); the Stop
button sends the empty trajectory (the controller stops and holds the measured position). No move is sent before
a joint_states message names every joint of the robot.
"""
from __future__ import annotations

import threading
import time

import numpy as np
from builtin_interfaces.msg import Duration
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.node import Node
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from manip_core.ros.model_source import RobotModelSource

from .app import OfflineViewer, is_loopback
from .command import slider_move
from .scene import RobotScene


def _duration(t_s):
    sec = int(t_s)
    return Duration(sec=sec, nanosec=int(round((t_s - sec) * 1e9)))


class Viewer(Node):
    def __init__(self):
        super().__init__("viewer")
        d = ParameterDescriptor
        self.host = self.declare_parameter("host", "127.0.0.1", d(description="address of the page (a non-loopback "
                                                                  "one lets anyone who reaches it move the arm)")).value
        self.port = self.declare_parameter("port", 8080, d(description="TCP port of the page")).value
        self.speed_fraction = self.declare_parameter(
            "speed_fraction", 0.25, d(description="slider moves: fraction of each joint's velocity limit")).value
        self.redraw_rate_hz = self.declare_parameter(
            "redraw_rate_hz", 30.0, d(description="most redraws of the arm per second")).value
        topic = self.declare_parameter("trajectory_topic", "joint_trajectory_controller/joint_trajectory",
                                       d(description="where slider moves and Stop go (JointTrajectory)")).value
        if not is_loopback(self.host):
            self.get_logger().warning(f"listening on {self.host}: anyone who reaches this address can move the arm")
        self._pub = self.create_publisher(JointTrajectory, topic, 10)
        self._lock = threading.Lock()
        self.q_measured = None
        self.viewer = None
        self._last_draw = 0.0
        self.create_subscription(JointState, "joint_states", self._on_joint_states, 50)
        self.source = RobotModelSource(self, on_model=self._on_model)

    def _on_model(self, model, text):
        urdf = text if text.lstrip("\ufeff \t\r\n").startswith("<") else None
        if self.viewer is not None:
            self.viewer.stop()
        self.q_measured = None
        self.viewer = OfflineViewer(RobotScene(model, urdf), host=self.host, port=self.port,
                                    on_target=self.send_target, on_stop=self.send_hold)
        self.get_logger().info(f"{model.name}: page at {self.viewer.url}")

    def _on_joint_states(self, msg):
        viewer = self.viewer
        if viewer is None:
            return
        index = {n: i for i, n in enumerate(msg.name)}
        names = viewer.scene.robot.joint_names
        if any(n not in index for n in names) or len(msg.position) != len(msg.name):
            return
        q = np.array([msg.position[index[n]] for n in names])
        if not np.all(np.isfinite(q)):
            return
        first = self.q_measured is None
        with self._lock:
            self.q_measured = q
        if first:
            viewer.set_sliders(q)
        now = time.monotonic()
        if now - self._last_draw >= 1.0 / self.redraw_rate_hz:
            self._last_draw = now
            viewer.update(q)

    def _publish(self, times, positions, velocities):
        msg = JointTrajectory()
        msg.joint_names = list(self.viewer.scene.robot.joint_names)
        for t, p, v in zip(times, positions, velocities):
            msg.points.append(JointTrajectoryPoint(positions=p.tolist(), velocities=v.tolist(),
                                                   time_from_start=_duration(float(t))))
        self._pub.publish(msg)

    def send_target(self, q_target):
        """A slider moved in the page: a short move from the measured position (nothing before joint_states)."""
        with self._lock:
            q = self.q_measured
        if q is None:
            self.get_logger().warning("slider moved before joint_states named every joint: nothing sent")
            return
        r = self.viewer.scene.robot
        t, p, v = slider_move(q, q_target, r.joint_lower, r.joint_upper, r.velocity_limits, self.speed_fraction)
        self._publish(t, p, v)
        self.get_logger().info(f"move to {np.round(p[-1], 4).tolist()} over {t[-1] - t[0]:.2f} s")

    def send_hold(self):
        """Stop: the empty trajectory (ros2_control semantics: the controller holds where the arm is)."""
        self._publish([], [], [])
        self.get_logger().info("stop: empty trajectory sent (the controller holds the current position)")

    def close(self):
        if self.viewer is not None:
            self.viewer.stop()
        self.source.close()


def main(argv=None):
    """Console script ``viewer``."""
    from rclpy.executors import SingleThreadedExecutor

    from manip_core.ros.node_main import run_node
    return run_node(argv, "viewer", Viewer, SingleThreadedExecutor,
                    on_exit=lambda node: node is not None and node.close())


if __name__ == "__main__":
    import sys
    sys.exit(main())
