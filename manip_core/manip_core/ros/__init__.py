"""rclpy glue shared by the nodes of every manip package (the only part of manip_core that imports rclpy)."""
