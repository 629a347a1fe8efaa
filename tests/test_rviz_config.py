"""launch/manip.rviz (issue 7): RViz is not installed here, so the config is checked against what RViz would
load: every display and tool class is one that rviz_default_plugins registers in Humble (and later), every topic
it subscribes to is one the manip graph publishes with the message type that display reads (docs/graph.md), and
the fixed frame is the base frame the launch files use by default."""
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
RVIZ = ROOT / "launch" / "manip.rviz"
GRAPH = (ROOT / "docs" / "graph.md").read_text()

# rviz_default_plugins/plugins_description.xml, branch humble of https://github.com/ros2/rviz (Jazzy's list is
# this one plus CameraInfo), and the panels that rviz_common itself provides
DEFAULT_PLUGINS = set("""AccelStamped Axes Camera DepthCloud Effort FPS FluidPressure FocusCamera Grid GridCells
Illuminance Image Interact InteractiveMarkers LaserScan Map Marker MarkerArray Measure MoveCamera Odometry Orbit
Path PointCloud PointCloud2 PointStamped Polygon Pose PoseArray PoseWithCovariance PublishPoint Range
RelativeHumidity RobotModel Select SetGoal SetInitialPose TF Temperature ThirdPersonFollower TopDownOrtho
TwistStamped Wrench XYOrbit""".split())
COMMON_PANELS = {"Displays", "Views", "Selection", "Time", "Tool Properties"}
# the message type each topic display reads, as docs/graph.md names it
DISPLAY_TYPE = {"MarkerArray": "MarkerArray", "PointCloud2": "PointCloud2", "RobotModel": "String"}


def _config():
    return yaml.safe_load(RVIZ.read_text())


def _classes(node):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "Class" and v:
                yield v
            yield from _classes(v)
    elif isinstance(node, list):
        for v in node:
            yield from _classes(v)


def test_every_class_is_one_rviz_registers():
    unknown = []
    for cls in _classes(_config()):
        pkg, _, name = cls.partition("/")
        ok = (pkg == "rviz_default_plugins" and name in DEFAULT_PLUGINS) or (pkg == "rviz_common" and
                                                                             name in COMMON_PANELS)
        if not ok:
            unknown.append(cls)
    assert not unknown, f"classes RViz does not register: {unknown}"


def test_every_topic_is_published_by_the_graph_with_the_display_type():
    displays = _config()["Visualization Manager"]["Displays"]
    checked = []
    for d in displays:
        name = d["Class"].split("/")[1]
        topic = (d.get("Topic") or d.get("Description Topic") or {}).get("Value")
        if topic is None:
            continue
        assert d.get("Enabled", True), d["Name"]
        bare = topic.lstrip("/")
        rows = re.findall(rf"`{re.escape(bare)}` \((\w+)", GRAPH)
        assert rows, f"{d['Name']}: topic {topic} is not in docs/graph.md"
        assert DISPLAY_TYPE[name] in rows, (d["Name"], topic, rows)
        checked.append(bare)
    assert sorted(checked) == ["obstacle_markers", "planned_path", "robot_description", "stereo/points2"]


def test_fixed_frame_is_the_launch_files_default_base_frame():
    frame = _config()["Visualization Manager"]["Global Options"]["Fixed Frame"]
    launch = (ROOT / "launch" / "pick_place_sim.launch.xml").read_text()
    m = re.search(r'<arg name="base_link" default="([^"]*)"', launch)
    assert m, "pick_place_sim.launch.xml has no base_link argument"
    assert frame == (m.group(1) or "base_link")
