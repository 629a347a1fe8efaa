"""Singularity check along a joint path (manip_core.analysis.path_singularity) on the UR5's known wrist
singularity (q5 = 0: axes 4 and 6 aligned, minimum singular value 0) crossed between two waypoints."""
import numpy as np
import pytest

from manip_core import RobotModel
from manip_core.analysis.path_singularity import SingularPathError, check_path, require_nonsingular
from manip_core.errors import InputError


@pytest.fixture(scope="module")
def ur5():
    return RobotModel.load("ur5")


def test_wrist_singularity_between_waypoints_is_found(ur5):
    a = np.array([0.4, -1.0, 1.3, -0.7, -0.3, 0.9])
    b = a.copy()
    b[4] = 0.3                       # q5 crosses 0 half way
    r = check_path(ur5, [a, b], threshold=0.01)
    assert r.below and r.segment == 0 and r.fraction == pytest.approx(0.5)
    assert abs(r.q[4]) < 1e-12 and r.min_value < 1e-12 and r.part == "full"
    # the checked points are no more than max_step apart, and both waypoints are among them
    assert np.max(np.abs(np.diff(r.points, axis=0))) <= 0.05 + 1e-12
    np.testing.assert_array_equal(r.points[0], a)
    np.testing.assert_array_equal(r.points[-1], b)
    # the values are the model's own measure at those points
    np.testing.assert_allclose(r.values, ur5.min_singular_value_batch(r.points), rtol=0, atol=0)
    # the waypoints alone are far from singular: the dip is only seen between them
    assert ur5.min_singular_value(a) > 0.01 and ur5.min_singular_value(b) > 0.01
    assert not check_path(ur5, [a, b], threshold=0.01, max_step=1.0).below
    with pytest.raises(SingularPathError, match=r"waypoint 0 -> 1 at 50%"):
        require_nonsingular(ur5, [a, b], 0.01)
    # a path that stays away passes, and warns nothing
    c = a.copy()
    c[4] = -0.6
    ok = require_nonsingular(ur5, [a, c, a], 0.01)
    assert not ok.below and ok.min_value > 0.01 and ok.points.shape[0] == 1 + 6 + 6
    assert check_path(ur5, a, 0.01).points.shape == (1, 6)


def test_bad_input(ur5):
    q = np.zeros(6)
    with pytest.raises(InputError, match="part"):
        check_path(ur5, [q], 0.1, part="tip")
    with pytest.raises(InputError, match="threshold"):
        check_path(ur5, [q], -1.0)
    with pytest.raises(InputError, match="max_step"):
        check_path(ur5, [q], 0.1, max_step=0.0)
    with pytest.raises(InputError, match=r"shape \(N, 6\)"):
        check_path(ur5, np.zeros((2, 5)), 0.1)
    with pytest.raises(InputError, match="NaN"):
        check_path(ur5, [q, np.full(6, np.nan)], 0.1)
