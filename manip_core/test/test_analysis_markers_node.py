"""analysis_markers over real DDS, process to process: the latched MarkerArray holds the workspace's boundary
voxels and the singularity map's reachable nodes that the library computes for the same robot and parameters."""
import os
import random
import subprocess
import sys
import time

import numpy as np
import rclpy
from rclpy.executors import SingleThreadedExecutor
from visualization_msgs.msg import Marker, MarkerArray

from manip_core import RobotModel
from manip_core.analysis.singularity_map import singularity_map
from manip_core.analysis.workspace import estimate_workspace
from manip_core.analysis_markers_node import LATCHED
from manip_core.robots import robot_path


def test_markers_of_the_bundled_3dof_arm():
    env = dict(os.environ, ROS_DOMAIN_ID=str(random.randint(100, 200)), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    proc = subprocess.Popen([sys.executable, "-m", "manip_core.analysis_markers_node", "--ros-args",
                             "-p", f"urdf_path:={robot_path('ypp3')}", "-p", "workspace_samples:=20000",
                             "-p", "map_cells:=6", "-p", "map_levels:=2", "-p", "frame_id:=arm_base"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=int(env["ROS_DOMAIN_ID"]))
    node = rclpy.create_node("analysis_markers_test", context=ctx)
    executor = SingleThreadedExecutor(context=ctx)
    executor.add_node(node)
    got = []
    try:
        # subscribed after the node started: the array arrives through transient local durability
        node.create_subscription(MarkerArray, "analysis_markers", got.append, LATCHED)
        deadline = time.monotonic() + 120
        while not got and time.monotonic() < deadline and proc.poll() is None:
            executor.spin_once(timeout_sec=0.2)
        assert got, f"no MarkerArray within 120 s (node exit code {proc.poll()})"
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.shutdown(context=ctx)
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    arr = got[0]
    robot = RobotModel.load("ypp3")
    est = estimate_workspace(robot, 20000, seed=0)
    smap = singularity_map(robot, plane="xz", cells=6, levels=2)
    ws = [m for m in arr.markers if m.ns == "workspace"]
    sm = [m for m in arr.markers if m.ns == "singularity_map"]
    assert all(m.type == Marker.CUBE_LIST and m.header.frame_id == "arm_base" for m in arr.markers)
    assert len(ws) == 1 and len(ws[0].points) == len(est.to_points("boundary")[0])
    assert abs(ws[0].scale.x - est.voxel_m) < 1e-12
    assert sum(len(m.points) for m in sm) == int(np.sum(smap.node_computed & np.isfinite(smap.node_values)))
    assert "published" in out and "singularity map" in out, out
