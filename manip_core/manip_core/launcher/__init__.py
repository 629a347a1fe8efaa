"""manip-launch: run ROS 2 XML launch files (the subset manip uses) without ros2 launch.

``main`` is the ``manip-launch`` console script; ``xml_frontend.load_launch_file`` parses a file into
resolved node descriptions; ``runner.Runner`` runs them. No rclpy import anywhere in this package.
"""
from .cli import main

__all__ = ['main']
