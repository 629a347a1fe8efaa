"""Regression tests for the defects the fuzzers of issue 12 found (one test per defect, the smallest input)."""
import numpy as np
import pytest

from manip_core import RobotModel
from manip_core.errors import InputError, ModelError


@pytest.fixture(scope="module")
def ur5():
    return RobotModel.load("ur5")


@pytest.mark.parametrize("call", [
    lambda m: m.fk([0.0, 0.0, 0.0, 0.0, "", None]),           # was numpy ValueError "could not convert string"
    lambda m: m.inverse_dynamics(["a"] * 6, np.zeros(6), np.zeros(6)),
    lambda m: m.fk_batch(np.array([["a"] * 6])),               # was numpy ValueError in _batch
    lambda m: m.ik("pose"),                                    # was numpy ValueError in ik
    lambda m: m.ik_all([[1, 2], [3]]),                          # ragged list
    lambda m: m.fk(object()),
])
def test_non_numeric_input_is_input_error(ur5, call):
    with pytest.raises(InputError, match="must be an array of numbers"):
        call(ur5)


def test_deeply_nested_kinematic_json_is_model_error(tmp_path):
    """json.loads raised RecursionError on 100k nested lists."""
    p = tmp_path / "nested.kinematic.json"
    p.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ModelError, match="nested too deeply") as e:
        RobotModel.from_kinematic_json(str(p))
    assert str(p) in str(e.value)
