"""MarkerArray of the analyses: one cube per boundary voxel / evaluated node, serialisable by rclpy."""
import numpy as np
from rclpy.serialization import deserialize_message, serialize_message
from visualization_msgs.msg import Marker, MarkerArray

from manip_core import RobotModel
from manip_core.analysis.singularity_map import singularity_map
from manip_core.analysis.workspace import estimate_workspace
from manip_core.ros.analysis_markers import singularity_map_markers, workspace_markers


def test_workspace_and_map_markers():
    robot = RobotModel.load("ypp3")
    est = estimate_workspace(robot, 50_000, samples_per_voxel=10)
    arr = workspace_markers(est, "base_link")
    m = arr.markers[0]
    pts, _ = est.to_points("boundary")
    assert m.type == Marker.CUBE_LIST and m.header.frame_id == "base_link" and len(m.points) == len(pts)
    assert len(m.colors) == len(m.points) and abs(m.scale.x - est.voxel_m) < 1e-12
    back = deserialize_message(serialize_message(arr), MarkerArray)
    assert len(back.markers[0].points) == len(pts)
    smap = singularity_map(robot, cells=6, levels=2)
    arr = singularity_map_markers(smap, "base_link")
    n = sum(len(mk.points) for mk in arr.markers)
    assert n == int(np.sum(smap.node_computed & np.isfinite(smap.node_values)))
    assert [mk.id for mk in arr.markers] == sorted({mk.id for mk in arr.markers})
    assert arr.markers[0].scale.x > arr.markers[-1].scale.x  # refined nodes are drawn smaller
