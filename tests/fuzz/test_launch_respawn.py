"""Which nodes of the project's launch files come back after they die (issue 12 item 3), read by manip-launch's
parser (manip_core.launcher.xml_frontend; the real ``ros2 launch`` reads the same attributes: tests/test_real_launch.py).

The simulated graph respawns the nodes whose restart loses nothing: the controller (it comes back holding the
measured position; sim_bridge's watchdog holds the arm meanwhile), the planner and stereo_obstacles (their inputs
are topics), 2 s after their death and without ``on_exit="shutdown"`` (which would end the launch instead). The
others do not come back: sim_bridge (a new one would reset the world), pick_place (it would
lose its task and what the gripper holds), model_server and state_publisher. Alone, real_robot.launch.xml and
perception.launch.xml respawn nothing (a lab's real arm: a person decides), unless asked. The kill -9 of the
respawned nodes under manip-launch: test_faults_launch.py (slow).
"""
from pathlib import Path

import pytest

from manip_core.launcher import xml_frontend as xf
from manip_core.launcher.packages import PackageResolver

ROOT = Path(__file__).resolve().parents[2]
LAUNCH = ROOT / "launch"
RESPAWNED = {"controller", "planner", "stereo_obstacles"}


def _nodes(name, args=()):
    plan = xf.load_launch_file(str(LAUNCH / name), list(args), resolver=PackageResolver([str(ROOT)]),
                               resolve_executables=False)
    assert plan.warnings == [], plan.warnings
    return {n.name: n for n in plan.nodes}


def test_simulated_graph_respawns_the_nodes_whose_restart_is_safe():
    nodes = _nodes("pick_place_sim.launch.xml", [("view", "true")])
    assert set(nodes) == {"sim_bridge", "model_server", "controller", "state_publisher", "stereo_obstacles",
                          "planner", "pick_place", "viewer"}
    for name, n in nodes.items():
        if name in RESPAWNED:
            assert n.respawn and n.respawn_delay == 2.0 and n.on_exit is None, name
        else:
            assert not n.respawn, name


@pytest.mark.parametrize("name,args,respawned", [
    ("real_robot.launch.xml", (), set()),
    ("perception.launch.xml", (), set()),
    ("real_robot.launch.xml", (("respawn_controller", "true"),), {"controller"}),
    ("perception.launch.xml", (("respawn", "true"),), {"stereo_obstacles"}),
])
def test_included_files_respawn_only_when_asked(name, args, respawned):
    nodes = _nodes(name, args)
    assert {k for k, n in nodes.items() if n.respawn} == respawned
    for k in respawned:
        assert nodes[k].respawn_delay == 2.0 and nodes[k].on_exit is None, k
    with pytest.raises(xf.LaunchFileError, match="is not one of"):
        _nodes(name, [(args[0][0] if args else ("respawn_controller" if "robot" in name else "respawn"), "yes")])
