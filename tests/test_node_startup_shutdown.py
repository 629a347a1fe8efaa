"""Every node, as its console script, process to process (issues 13 and 16):

* a SIGINT/SIGTERM at several moments of its start-up (loading its modules, waiting for the robot description,
  running), one or two SIGINTs as ``ros2 launch`` sends them: exit status 0, no traceback, within seconds;
* ``get_parameters`` with every name from ``list_parameters`` (what ``ros2 param dump`` does) answers every
  parameter.
Fixtures: tests/conftest.py.
"""
import re
import signal
import time
from pathlib import Path

import pytest

UR5_URDF = Path(__file__).resolve().parents[1] / "manip_core" / "manip_core" / "robots" / "ur5.urdf"

# console script -> parameters that let it start without the rest of the graph (it then waits for
# robot_description where it needs a model)
NODES = {
    "model_server": {},
    "controller": {},
    "planner": {},
    "pick_place": {},
    "stereo_obstacles": {},
    "sim_bridge": {"camera_rate_hz": 0.0, "real_time_factor": 1.0},
}
READY = {  # a line each logs once it spins
    "model_server": r"no valid robot model|robot model:",
    "controller": r"waiting for the robot_description topic",
    "planner": r"waiting for the robot_description topic",
    "pick_place": r"waiting for the robot_description topic",
    "stereo_obstacles": r"stereo_obstacles ready",
    "sim_bridge": r"physics .* Hz",
}


def _wait_catching(pid, sig, timeout=30.0):
    """Until process pid has a handler for sig (SigCgt in /proc): before that, the interpreter is starting."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return
        cgt = int(re.search(r"^SigCgt:\s*([0-9a-f]+)", status, re.M).group(1), 16)
        if cgt >> (sig - 1) & 1:
            return
        time.sleep(0.005)
    raise AssertionError(f"pid {pid} installed no handler for {sig!r} within {timeout} s")


def _check_clean(p, code, started, limit_s=12.0):
    elapsed = time.monotonic() - started
    assert code == 0, f"{p.exe}: exit status {code}\n{p.log}"
    assert "Traceback" not in p.log, f"{p.exe}: traceback\n{p.log}"
    assert elapsed < limit_s, f"{p.exe}: {elapsed:.1f} s to stop\n{p.log}"


@pytest.mark.parametrize("moment", ["loading", "waiting_two_sigints",
                                    pytest.param("waiting_sigterm", marks=pytest.mark.slow)])
def test_every_node_stops_cleanly_during_start_up(node_procs, moment):
    """All six nodes at once; the signal while they load their modules (right after their console script
    installed its handlers: the Python interpreter's own start is out of reach, see node_main) or once
    they wait for the robot description (two SIGINTs 0.2 s apart, as ros2 launch sends them; or SIGTERM)."""
    procs = [node_procs(exe, params) for exe, params in NODES.items()]
    if moment == "loading":  # as soon as the console script's handlers are in place (the imports follow)
        for p in procs:
            _wait_catching(p.proc.pid, signal.SIGTERM)  # Python itself catches SIGINT from its start
    else:
        for p in procs:
            p.wait_log(READY[p.exe], timeout=90)
    t0 = time.monotonic()
    for p in procs:
        p.signal(signal.SIGTERM if moment == "waiting_sigterm" else signal.SIGINT)
    if moment == "waiting_two_sigints":
        time.sleep(0.2)
        for p in procs:
            p.signal(signal.SIGINT)
    for p in procs:
        _check_clean(p, p.wait(20.0), t0)


def test_every_node_answers_get_parameters_for_all_listed_names(node_procs, ros_client):
    """``ros2 param dump``: list_parameters, then get_parameters with every name, for every node (with a
    robot model, so that the model-dependent parameters are declared too)."""
    from rcl_interfaces.srv import GetParameters, ListParameters
    procs = {}
    for exe, params in NODES.items():
        params = dict(params)
        if exe != "sim_bridge":
            params["urdf_path"] = str(UR5_URDF)
        if exe == "stereo_obstacles":
            params["self_filter"] = "true"
        procs[exe] = node_procs(exe, params, name=f"params-{exe}")
    missing = {}
    for exe, p in procs.items():
        listed = ros_client.call(ListParameters, f"/{exe}/list_parameters", ListParameters.Request(),
                              timeout=90)
        assert listed is not None, f"{exe}: no answer to list_parameters\n{p.log}"
        names = list(listed.result.names)
        assert "use_sim_time" in names and len(names) > 3, (exe, names)
        got = ros_client.call(GetParameters, f"/{exe}/get_parameters", GetParameters.Request(names=names))
        assert got is not None, f"{exe}: no answer to get_parameters"
        if len(got.values) != len(names):
            missing[exe] = names
    assert not missing, f"get_parameters answered nothing for these nodes (an unset parameter?): {missing}"
