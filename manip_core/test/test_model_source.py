"""The robot-description contract at library level (manip_core.ros.model_source): what is text, size bound,
files only from start-up paths, one-line errors with the first few items, same-robot detection. The same
contract between processes: tests/test_robot_description_contract.py."""
from pathlib import Path

import pytest

from manip_core import ModelError, RobotModel
from manip_core.errors import name_some
from manip_core.ros.model_source import (MAX_DESCRIPTION_BYTES, description_problem, model_signature,
                                         parse_description, read_description_file)

ROBOTS = Path(__file__).resolve().parents[1] / "manip_core" / "robots"


@pytest.mark.parametrize("text,says", [
    ("", "empty"), ("  \n", "empty"), (str(ROBOTS / "ur5.urdf"), "a file path is read only from"),
    ("/dev/zero", "a file path"), ("robot: x", "not URDF or kinematic.json text"),
    ("<" + "a" * MAX_DESCRIPTION_BYTES, f"more than the maximum of {MAX_DESCRIPTION_BYTES} bytes"),
])
def test_what_is_not_description_text(text, says):
    assert says in description_problem(text)
    with pytest.raises(ModelError, match="robot_description"):
        parse_description(text)


def test_urdf_and_kinematic_json_text_parse_like_their_files():
    for name in ("ur5.urdf", "arm3.kinematic.json"):
        text = (ROBOTS / name).read_text()
        assert description_problem(text) is None
        from_text = parse_description("\n  " + text)
        from_file = RobotModel.load(str(ROBOTS / name))
        assert model_signature(from_text) == model_signature(from_file)
    assert model_signature(parse_description((ROBOTS / "ur5.urdf").read_text() + "<!-- x -->")) == \
        model_signature(RobotModel.load("ur5"))
    assert model_signature(RobotModel.load("planar2r")) != model_signature(RobotModel.load("ur5"))


def test_start_up_files_must_be_regular_and_bounded(tmp_path):
    assert read_description_file(str(ROBOTS / "ur5.urdf")).lstrip().startswith("<")
    with pytest.raises(ModelError, match="not a regular file"):
        read_description_file("/dev/zero")
    with pytest.raises(ModelError, match="not a regular file"):
        read_description_file(str(tmp_path))
    big = tmp_path / "big.urdf"
    big.write_bytes(b"<" + b" " * MAX_DESCRIPTION_BYTES)
    with pytest.raises(ModelError, match="more than the maximum"):
        read_description_file(str(big))
    with pytest.raises(ModelError, match="cannot read file"):
        read_description_file(str(tmp_path / "missing.urdf"))


def test_parse_errors_name_the_first_few_items_and_count_the_rest():
    links = "".join(f'<link name="l{i}"/>' for i in range(2000))
    with pytest.raises(ModelError) as e:
        parse_description(f'<robot name="many">{links}</robot>')
    msg = str(e.value)
    assert "several root links (l0, l1, l2, l3, l4 and 1995 more)" in msg and len(msg) < 300, msg
    assert name_some(["a", "b"]) == "a, b"
    with pytest.raises(ModelError) as e:
        parse_description((ROBOTS / "ur5.urdf").read_text(), tip_link="nope")
    assert "and " in str(e.value) and "more" in str(e.value) and len(str(e.value)) < 300
