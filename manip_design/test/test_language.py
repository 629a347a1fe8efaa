"""The .mrs language: parsing, the graph model, Clone/Merge semantics and file:line:col errors."""
import pytest

from manip_design import DesignError, parse_text
from manip_design.language import parse_file

FIVE_BAR = """param d = 0.2
param l1 = 0.25
param l2 = 0.35
left = Revolute(z, in (-1.2, 2.0), actuated, name=shoulder) -> Beam(l1)
       -> Revolute(z, name=elbow) -> Beam(l2)
right = Clone(left) -> Revolute(z, name=tool)
tip = Merge(left, right)
Anchor(left, (-d/2, 0, 0), yaw=pi/2)
Anchor(right, (d/2, 0, 0), yaw=pi/2)
EndEffector(tip)
"""


def test_graph_of_the_five_bar():
    s = parse_text(FIVE_BAR, "five.mrs")
    g = s.graph()
    # ground, 2 proximal links, 2 distal links; the tool pin welds the right distal's pin body to the left one
    assert len(g["bodies"]) == 5
    assert [j["name"] for j in g["joints"]] == ["left.shoulder", "left.elbow", "right.shoulder", "right.elbow",
                                                "right.tool"]
    assert [j["actuated"] for j in g["joints"]] == [True, False, True, False, False]
    assert g["welds"] == [["left.elbow", "right.tool"]]
    assert g["end_effector_body"] == "left.elbow"
    assert not s.is_serial
    m = s.compile()
    assert m.actuated_names == ["left.shoulder", "right.shoulder"]
    assert m.nv == 5 and len(m.welds) == 1


def test_clone_preserve_makes_independent_parameters():
    s = parse_text("param a = 0.3\nparam b\n"
                   "x = Revolute(z, actuated) -> Beam(a) -> Revolute(z, actuated) -> Beam(b)\n"
                   "y = Clone(x, preserve=(a))\n"
                   "Anchor(x, (0, 0, 0))\nAnchor(y, (1, 0, 0))\nEndEffector(x)\n")
    assert s.free_params == ["b", "b_y"]
    m = s.compile({"b": 0.2, "b_y": 0.4})
    assert m.nv == 4


@pytest.mark.parametrize("text, line, col, words", [
    ("a = Beam(0.1\nAnchor(a, (0, 0, 0))\n", 2, 1, "expected ')' to close Beam("),
    ("a = Revolute(z) -> Bem(0.1)\n", 1, 20, "unknown component or structure 'Bem'"),
    ("a = Revolute(z, in (1, 0))\nAnchor(a, (0, 0, 0))\nEndEffector(a)\n", 1, 5, "empty joint range"),
    ("a = Beam(q)\n", 1, 10, "unknown name 'q'"),
    ("a = Beam(0.1)\nAnchor(a, (0, 0))\n", 2, 11, "expected 3 numbers"),
    ("a = Revolute(z)\nb = Revolute(z)\nEndEffector(b)\nAnchor(a, (0, 0, 0))\n", 2, 5, "not attached to the ground"),
    ("a = Beam(0.1, colour=3)\n", 1, 5, "Beam does not take colour="),
    ("a = Revolute(z) $\n", 1, 17, "unexpected character '$'"),
    ("param L\na = Beam(L)\nAnchor(a, (0, 0, 0))\nEndEffector(a)\n", 2, 10, "free parameter 'L' has no value"),
])
def test_errors_name_file_line_column(text, line, col, words):
    with pytest.raises(DesignError) as e:
        parse_text(text, "bad.mrs").compile()
    assert (e.value.source, e.value.line, e.value.col) == ("bad.mrs", line, col), str(e.value)
    assert words in str(e.value)
    assert str(e.value).startswith(f"bad.mrs:{line}:{col}: ")


def test_structure_level_errors(tmp_path):
    with pytest.raises(DesignError, match="no EndEffector"):
        parse_text("a = Beam(1)\nAnchor(a, (0, 0, 0))\n")
    with pytest.raises(DesignError, match="cannot read"):
        parse_file(tmp_path / "missing.mrs")
    with pytest.raises(DesignError, match="cannot be assembled"):
        # two 0.1 m arms anchored 1 m apart cannot meet
        parse_text("a = Revolute(z, actuated) -> Beam(0.1) -> Revolute(z)\nb = Clone(a) -> Beam(0.0)\n"
                   "m = Merge(a, b)\nAnchor(a, (0, 0, 0))\nAnchor(b, (1, 0, 0))\nEndEffector(m)\n").compile()
