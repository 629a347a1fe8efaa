"""ROS 2 node ``analysis_markers``: the workspace estimate and the singularity map of the robot, for RViz.

When a robot model arrives (``urdf_path`` / ``robot_description`` parameters or the ``robot_description``
topic, manip_core.ros.model_source.RobotModelSource as the other nodes), it computes, on a worker thread:

- the Monte Carlo workspace (manip_core.analysis.workspace.estimate_workspace, ``workspace_samples`` joint
  samples, seed 0): its boundary voxels, coloured by the dexterity index 0..1 (namespace ``workspace``);
- the singularity map (manip_core.analysis.singularity_map, plane ``map_plane``, ``map_cells`` coarse cells,
  ``map_levels`` refinement levels near the threshold): the reachable nodes coloured by the minimum singular
  value, one marker per level (namespace ``singularity_map``);

and publishes them as one visualization_msgs/MarkerArray on ``analysis_markers`` (reliable, transient local,
depth 1: RViz started later still gets it), in the frame ``frame_id`` (default: the model's base link). A
model that arrives while a computation runs is computed next. Either analysis is skipped with
``workspace_samples`` = 0 or ``map_cells`` = 0.

Parameters: ``workspace_samples`` (int, 200000; 0 or >= 4096), ``map_cells`` (int, 16), ``map_levels`` (int, 3,
0..8), ``map_plane`` ("xz": "xy", "xz", "yz" through the base origin, or "auto": the plane of a planar arm),
``frame_id`` (""), and the model parameters. The maths is in manip_core.analysis (no rclpy); the markers in
manip_core.ros.analysis_markers.
"""
from __future__ import annotations

import threading
import time

from rcl_interfaces.msg import ParameterDescriptor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from visualization_msgs.msg import MarkerArray

from .ros.model_source import RobotModelSource

LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
PLANES = ("xy", "xz", "yz", "auto")


class AnalysisMarkers(Node):
    def __init__(self, **kwargs):
        super().__init__("analysis_markers", **kwargs)
        self.samples = int(self._param("workspace_samples", 200000, "Monte Carlo joint samples (0: no workspace)"))
        self.cells = int(self._param("map_cells", 16, "coarse cells per side of the singularity map (0: no map)"))
        self.levels = int(self._param("map_levels", 3, "refinement levels of the singularity map (0..8)"))
        self.plane = str(self._param("map_plane", "xz", "plane of the map: xy, xz, yz (through the base) or auto"))
        self.frame_id = str(self._param("frame_id", "", "frame of the markers (empty: the model's base link)"))
        if self.samples != 0 and self.samples < 4096:
            raise ValueError(f"parameter workspace_samples must be 0 or >= 4096, got {self.samples}")
        if self.cells < 0 or not 0 <= self.levels <= 8:
            raise ValueError(f"parameters map_cells must be >= 0 and map_levels in 0..8, got {self.cells}, "
                             f"{self.levels}")
        if self.plane not in PLANES:
            raise ValueError(f"parameter map_plane must be one of {', '.join(PLANES)}, got {self.plane!r}")
        self._pub = self.create_publisher(MarkerArray, "analysis_markers", LATCHED)
        self._lock = threading.Condition()
        self._next = None
        self._stop = False
        self._worker = threading.Thread(target=self._work, name="analysis_markers_worker", daemon=True)
        self._worker.start()
        self._source = RobotModelSource(self, on_model=self._on_model)

    def _param(self, name, default, description):
        self.declare_parameter(name, default, ParameterDescriptor(description=description))
        return self.get_parameter(name).value

    def _on_model(self, model, _text):
        with self._lock:
            self._next = model
            self._lock.notify()

    def _work(self):
        while True:
            with self._lock:
                while self._next is None and not self._stop:
                    self._lock.wait()
                if self._stop:
                    return
                model, self._next = self._next, None
            try:
                self._publish(model)
            except Exception as e:  # a model the analyses cannot handle must not kill the node
                self.get_logger().error(f"analysis of {model.name} failed: {type(e).__name__}: {e}")

    def _publish(self, model):
        from .analysis.singularity_map import singularity_map
        from .analysis.workspace import estimate_workspace
        from .ros.analysis_markers import singularity_map_markers, workspace_markers
        frame = self.frame_id or model.base_link
        out = MarkerArray()
        log = self.get_logger()
        if self.samples:
            t0 = time.perf_counter()
            est = estimate_workspace(model, self.samples, seed=0)
            out.markers.extend(workspace_markers(est, frame).markers)
            log.info(f"{model.name}: workspace of {self.samples} samples, measure {est.measure:.4f} +- "
                     f"{est.uncertainty:.4f} m^{est.dimension}, {len(out.markers[-1].points)} boundary voxels "
                     f"({time.perf_counter() - t0:.2f} s)")
        if self.cells:
            t0 = time.perf_counter()
            m = singularity_map(model, plane=None if self.plane == "auto" else self.plane, cells=self.cells,
                                levels=self.levels)
            arr = singularity_map_markers(m, frame)
            out.markers.extend(arr.markers)
            log.info(f"{model.name}: singularity map ({m.part} Jacobian, threshold {m.threshold:.4g}), "
                     f"{m.points_evaluated} nodes, {sum(len(k.points) for k in arr.markers)} reachable "
                     f"({time.perf_counter() - t0:.2f} s)")
        self._pub.publish(out)
        log.info(f"published {len(out.markers)} markers on {self._pub.topic_name} in frame '{frame}'")

    def destroy_node(self):
        with self._lock:
            self._stop = True
            self._lock.notify()
        return super().destroy_node()


def main(argv=None):
    """Console script ``analysis_markers``."""
    from rclpy.executors import SingleThreadedExecutor

    from .ros.node_main import run_node
    return run_node(argv, "analysis_markers", AnalysisMarkers, SingleThreadedExecutor)


if __name__ == "__main__":
    import sys
    sys.exit(main())
