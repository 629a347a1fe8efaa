"""tolerances: control_msgs semantics (0 = default, -1 = no check), goal time tolerance, outcomes."""
import math
from types import SimpleNamespace as NS

import numpy as np
import pytest

from manip_control import tolerances as tol

NAMES = ["j1", "j2", "j3"]


def jt(name, position=0.0, velocity=0.0, acceleration=0.0):
    return NS(name=name, position=position, velocity=velocity, acceleration=acceleration)


def test_defaults_from_params():
    d = tol.defaults_from_params(3, [0.1], [0.0, 0.2, -1.0], [])
    np.testing.assert_array_equal(d.position, [0.1, 0.1, 0.1])
    np.testing.assert_array_equal(d.velocity, [math.inf, 0.2, math.inf])  # <= 0: not checked
    np.testing.assert_array_equal(d.acceleration, [math.inf] * 3)
    with pytest.raises(ValueError, match="1 or 3 values"):
        tol.defaults_from_params(3, [0.1, 0.2])
    with pytest.raises(ValueError, match="NaN"):
        tol.defaults_from_params(3, [math.nan])


def test_resolve_semantics():
    defaults = tol.defaults_from_params(3, [0.1], [0.5], [2.0])
    t = tol.resolve(NAMES, [jt("j2", position=0.01, velocity=-1.0), jt("j3", acceleration=-1.0)], defaults)
    np.testing.assert_array_equal(t.position, [0.1, 0.01, 0.1])         # > 0 overrides, 0 keeps default
    np.testing.assert_array_equal(t.velocity, [0.5, math.inf, 0.5])     # -1 removes the check
    np.testing.assert_array_equal(t.acceleration, [2.0, 2.0, math.inf])
    # no entries: the defaults
    t = tol.resolve(NAMES, [], defaults)
    np.testing.assert_array_equal(t.position, defaults.position)


@pytest.mark.parametrize("entries,text", [([jt("nope", 0.1)], "joint 'nope'"),
                                          ([jt("j1", 0.1), jt("j1", 0.2)], "twice"),
                                          ([jt("j1", math.nan)], "NaN")])
def test_resolve_errors(entries, text):
    with pytest.raises(tol.ToleranceError, match=text):
        tol.resolve(NAMES, entries, tol.StateTolerances.unchecked(3), "path_tolerance")


def test_check_first_violation():
    t = tol.StateTolerances(np.array([0.1, 0.1, math.inf]), np.array([1.0, 1.0, 1.0]), np.full(3, math.inf))
    assert tol.check(t, NAMES, [0.05, -0.1, 50.0], [0.0, 0.0, 0.0]) is None  # bound inclusive, inf unchecked
    v = tol.check(t, NAMES, [0.05, -0.2, 0.0], [0.0, 0.0, 5.0])
    assert (v.joint, v.quantity, v.error, v.tolerance) == ("j2", "position", -0.2, 0.1)
    assert "joint j2: position error -0.2 rad beyond tolerance 0.1 rad" == str(v)
    v = tol.check(t, NAMES, [0.0, 0.0, 0.0], [0.0, 0.0, -1.5])
    assert (v.joint, v.quantity) == ("j3", "velocity")
    assert tol.check(t, NAMES, [math.nan, 0, 0]).quantity == "position"  # NaN errors are violations
    # acceleration is only checked when an error is given
    t2 = tol.StateTolerances(np.full(3, math.inf), np.full(3, math.inf), np.full(3, 0.1))
    assert tol.check(t2, NAMES, [0, 0, 0], [0, 0, 0]) is None
    assert tol.check(t2, NAMES, [0, 0, 0], [0, 0, 0], [0, 0.2, 0]).quantity == "acceleration"


def test_goal_time_tolerance():
    assert tol.resolve_goal_time(0.0, 1.5) == 1.5      # 0 in the goal: the default
    assert tol.resolve_goal_time(0.3, 1.5) == 0.3
    assert tol.resolve_goal_time(0.0, 0.0) == math.inf  # default 0: no limit
    with pytest.raises(tol.ToleranceError):
        tol.resolve_goal_time(-1.0, 1.0)


def test_goal_outcome():
    assert tol.goal_outcome(0.9, 1.0, 0.5, True) == tol.RUNNING      # before the end: never done
    assert tol.goal_outcome(1.0, 1.0, 0.5, True) == tol.SUCCEEDED
    assert tol.goal_outcome(1.4, 1.0, 0.5, False) == tol.RUNNING
    assert tol.goal_outcome(1.6, 1.0, 0.5, False) == tol.TIMED_OUT
    assert tol.goal_outcome(1.6, 1.0, 0.5, True) == tol.SUCCEEDED
    assert tol.goal_outcome(1e9, 1.0, math.inf, False) == tol.RUNNING
