"""Library fuzzing of manip_core (issue 12 item 1): the URDF and kinematic.json parsers on mutations of the bundled
descriptions, and every RobotModel entry point on arrays of any shape, dtype and value.

Each call returns a correct result (checked: finite, within limits where the method promises it, a parsed model
whose FK is finite) or raises the project's own exception naming the input; never a raw numpy/numba error, never
a hang (fuzz_support.bounded).
"""
import copy
import json
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from lxml import etree

from fuzz_support import outcome
from manip_core import RobotModel
from manip_core.errors import InputError, ModelError
from manip_core.robots import robot_path as bundled_path

URDF_ROBOTS = ("ur5", "ypp3", "planar2r")
URDF_TEXT = {name: bundled_path(name).read_text() for name in URDF_ROBOTS}
JSON_TEXT = bundled_path("arm3").read_text()

BAD_NUMBERS = ("nan", "NaN", "inf", "-inf", "1e308", "-1e308", "1e400", "", " ", "abc", "0x10", "1 2",
               "1,5", "--1", "\u0661\u0662", "1e-320", "0", "-0", "1" * 400)
XML_TEXT = st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=12)  # what XML can hold
ODD_TEXT = st.one_of(st.sampled_from(BAD_NUMBERS), XML_TEXT)


def _check_model(model, what):
    """A model that parsed: its numbers are finite and FK at a valid q is a finite rigid transform."""
    assert model.dof >= 0, what
    assert np.all(np.isfinite(model.screw_axes_space)), f"{what}: non-finite screw axes"
    assert np.all(np.isfinite(model.home)), f"{what}: non-finite home pose"
    lo, hi = np.asarray(model.joint_lower), np.asarray(model.joint_upper)
    assert not np.any(np.isnan(lo)) and not np.any(np.isnan(hi)) and np.all(lo <= hi), f"{what}: limits {lo} {hi}"
    if model.dof:
        q = np.clip(np.zeros(model.dof), lo, hi)
        T = model.fk(q)
        assert np.all(np.isfinite(T)), f"{what}: FK not finite"
        assert np.allclose(T[:3, :3].T @ T[:3, :3], np.eye(3), atol=1e-6), f"{what}: FK rotation not orthonormal"


# ------------------------------------------------------------------------------------------------- URDF


@st.composite
def urdf_mutations(draw):
    """(description of the mutation, mutated URDF text)."""
    robot = draw(st.sampled_from(URDF_ROBOTS))
    root = etree.fromstring(URDF_TEXT[robot].encode())
    els = [e for e in root.iter() if isinstance(e.tag, str)]
    kind = draw(st.sampled_from(("delete_attribute", "bad_number", "delete_element", "duplicate_element",
                                 "cycle", "unicode_name", "rename_reference", "odd_joint_type")))
    el = draw(st.sampled_from(els))
    if kind == "delete_attribute" and el.attrib:
        key = draw(st.sampled_from(sorted(el.attrib)))
        del el.attrib[key]
        what = f"<{el.tag}> without '{key}'"
    elif kind == "bad_number":
        numeric = [(e, k) for e in els for k in e.attrib if k not in ("name", "link", "type", "joint", "filename")]
        e, key = draw(st.sampled_from(numeric))
        vals = e.attrib[key].split()
        i = draw(st.integers(0, len(vals) - 1))
        vals[i] = draw(ODD_TEXT)
        e.attrib[key] = " ".join(vals)
        what = f"<{e.tag}> {key}={e.attrib[key]!r}"[:80]
    elif kind == "delete_element" and el is not root:
        el.getparent().remove(el)
        what = f"<{el.tag}> deleted"
    elif kind == "duplicate_element" and el is not root:
        el.getparent().append(copy.deepcopy(el))
        what = f"<{el.tag}> twice"
    elif kind == "cycle":
        joints = root.findall("joint")
        a, b = draw(st.sampled_from(joints)), draw(st.sampled_from(joints))
        a.find("parent").set("link", b.find("child").get("link"))
        what = f"joint '{a.get('name')}' parent := child of '{b.get('name')}' (cycle or re-parent)"
    elif kind == "unicode_name":
        links = root.findall("link")
        link = draw(st.sampled_from(links))
        link.set("name", draw(XML_TEXT))
        what = "link renamed to unicode"
    elif kind == "rename_reference":
        joints = root.findall("joint")
        j = draw(st.sampled_from(joints))
        j.find(draw(st.sampled_from(("parent", "child")))).set("link", "no_such_link")
        what = "joint names an unknown link"
    else:
        joints = root.findall("joint")
        j = draw(st.sampled_from(joints))
        j.set("type", draw(st.sampled_from(("ball", "floating", "planar", "", "REVOLUTE"))))
        what = f"joint type {j.get('type')!r}"
    text = etree.tostring(root, encoding="unicode")
    return f"URDF {robot}: {kind}: {what}", text


@given(urdf_mutations())
def test_urdf_mutations(robustness, case):
    what, text = case
    res = outcome(what, RobotModel.from_urdf, text)
    robustness.add("URDF mutations (attributes, numbers, elements, cycles, unicode)", "RobotModel.from_urdf",
                   res.label)
    if res.ok:
        _check_model(res.value, what)
    else:
        assert isinstance(res.error, ModelError), what
        assert "<string>" in str(res.error), f"{what}: message does not name the source: {res.error}"


@given(st.binary(max_size=400) | st.text(max_size=400))
def test_urdf_random_bytes(robustness, data):
    res = outcome("random URDF bytes", RobotModel.from_urdf, b"<" + data if isinstance(data, bytes) else "<" + data)
    robustness.add("random text/bytes starting with '<'", "RobotModel.from_urdf", res.label)
    assert not res.ok or _check_model(res.value, "random") is None


def _many_links(n):
    return URDF_TEXT["planar2r"].replace("</robot>", "".join(f'<link name="extra{i}"/>' for i in range(n)) + "</robot>")


HUGE_URDF = {
    "10 MB attribute": lambda: URDF_TEXT["planar2r"].replace('name="planar2r"', 'name="planar2r" junk="'
                                                             + "x" * 10_000_000 + '"', 1),
    "10 MB comment": lambda: URDF_TEXT["planar2r"].replace("</robot>", "<!--" + "y" * 10_000_000 + "--></robot>"),
    "300k nested elements": lambda: "<robot name='r'>" + "<a>" * 300_000 + "</a>" * 300_000 + "</robot>",
    "0.5 MB of extra links (20k)": lambda: _many_links(20_000),
    "10 MB of extra links (450k)": lambda: _many_links(450_000),
}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n.startswith("10 MB of") else n
                                  for n in HUGE_URDF])
def test_urdf_huge_inputs(robustness, tmp_path, name):
    """Large descriptions: parsed or refused (ModelError) within the time bound; the parse is linear in the
    number of elements (about 20-60 us per link on this 2-core machine), 10 MB of links only in the slow run."""
    text = HUGE_URDF[name]()
    res = outcome(f"URDF {name}", RobotModel.from_urdf, text, timeout_s=300)
    robustness.add(f"URDF, {name}", "RobotModel.from_urdf", res.label)
    if res.ok:
        _check_model(res.value, name)
    if name == "10 MB attribute":
        path = tmp_path / "big.urdf"
        path.write_text(text)
        res = outcome("URDF file of 10 MB", RobotModel.from_urdf, str(path))
        robustness.add("URDF file of 10 MB", "RobotModel.from_urdf", res.label)
        assert res.ok


# -------------------------------------------------------------------------------------- kinematic.json


def _json_paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _json_paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _json_paths(v, prefix + (i,))


JSON_VALUES = st.one_of(st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -1e308, 0, -1, None, True, "",
                                         "\u00e9\u4e2d", [], {}, [0.0] * 7, [1, 2], "revolute", "prismatic"]),
                        st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6))


@st.composite
def json_mutations(draw):
    doc = json.loads(JSON_TEXT)
    paths = [p for p in _json_paths(doc) if p]
    path = draw(st.sampled_from(paths))
    parent = doc
    for k in path[:-1]:
        parent = parent[k]
    kind = draw(st.sampled_from(("delete", "replace", "cycle")))
    if kind == "delete":
        del parent[path[-1]]
    elif kind == "replace":
        parent[path[-1]] = draw(JSON_VALUES)
    else:
        links = doc["links"]
        i, j = draw(st.integers(0, len(links) - 1)), draw(st.integers(0, len(links) - 1))
        links[i]["parent"] = links[j]["name"]
    text = json.dumps(doc, allow_nan=True)
    return f"kinematic.json arm3: {kind} {'/'.join(map(str, path))}", text


@given(json_mutations())
def test_kinematic_json_mutations(robustness, tmp_path_factory, case):
    what, text = case
    path = tmp_path_factory.mktemp("kj") / "arm.kinematic.json"
    path.write_text(text)
    res = outcome(what, RobotModel.from_kinematic_json, str(path))
    robustness.add("kinematic.json mutations (deleted keys, NaN/inf/huge, wrong types, cycles)",
                   "RobotModel.from_kinematic_json", res.label)
    if res.ok:
        _check_model(res.value, what)
    else:
        assert isinstance(res.error, ModelError), what
        assert str(path) in str(res.error), f"{what}: message does not name the file: {res.error}"


KJ_CASES = {
    "0.5 MB JSON (30k links)": lambda: '{"name": "x", "links": [' + ",".join('{"name": "l%d"}' % i for i in range(30_000))
    + "]}",
    "10 MB JSON (600k links)": lambda: '{"name": "x", "links": ['
    + ",".join('{"name": "l%d"}' % i for i in range(600_000)) + "]}",
    "10 MB string": lambda: '{"name": "' + "n" * 10_000_000 + '", "links": [{"name": "a"}]}',
    "binary": lambda: bytes(range(256)) * 10,
    "100k nested lists": lambda: "[" * 100_000 + "]" * 100_000,
    "empty": lambda: "",
}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n.startswith("10 MB JSON") else n
                                  for n in KJ_CASES])
def test_kinematic_json_huge_and_binary(robustness, tmp_path, name):
    data = KJ_CASES[name]()
    p = tmp_path / "arm.kinematic.json"
    p.write_bytes(data if isinstance(data, bytes) else data.encode())
    res = outcome(f"kinematic.json {name}", RobotModel.from_kinematic_json, str(p), timeout_s=300)
    robustness.add(f"kinematic.json, {name}", "RobotModel.from_kinematic_json", res.label)
    if res.ok:
        _check_model(res.value, name)


# ------------------------------------------------------------------------------------------ RobotModel

MODELS = {name: RobotModel.load(name) for name in ("ur5", "planar2r")}
ELEMENTS = st.one_of(st.floats(-4.0, 4.0), st.sampled_from([math.nan, math.inf, -math.inf, 1e300, -1e300, 0.0]))


@st.composite
def joint_arrays(draw, dof):
    """Arrays of the right shape (mostly), wrong shapes, empty, other dtypes, with NaN/inf/huge values."""
    kind = draw(st.sampled_from(("good", "good", "bad_value", "shape", "empty", "dtype", "list", "scalar")))
    if kind == "good":
        return "valid", draw(hnp.arrays(np.float64, dof, elements=st.floats(-3.0, 3.0)))
    if kind == "bad_value":
        return "NaN/inf/huge", draw(hnp.arrays(np.float64, dof, elements=ELEMENTS))
    if kind == "shape":
        shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, max_side=8).filter(lambda s: s != (dof,)))
        return f"shape {shape}", draw(hnp.arrays(np.float64, shape, elements=st.floats(-3, 3)))
    if kind == "empty":
        return "empty", np.zeros(0)
    if kind == "dtype":
        dt = draw(st.sampled_from([np.int32, np.float32, np.complex128, np.bool_, np.uint8, object, "U3"]))
        a = np.zeros(dof, dtype=dt) if dt != "U3" else np.array(["a"] * dof)
        return f"dtype {np.dtype(dt)}", a
    if kind == "list":
        return "python list", draw(st.lists(st.one_of(st.floats(-3, 3), st.text(max_size=2), st.none()),
                                            min_size=dof, max_size=dof))
    return "scalar", draw(st.one_of(st.floats(), st.none(), st.text(max_size=3)))


SINGLE_METHODS = {
    "fk": lambda m, a, b, c: m.fk(a),
    "jacobian_space": lambda m, a, b, c: m.jacobian_space(a),
    "jacobian_body": lambda m, a, b, c: m.jacobian_body(a),
    "within_limits": lambda m, a, b, c: m.within_limits(a),
    "inverse_dynamics": lambda m, a, b, c: m.inverse_dynamics(a, b, c),
    "mass_matrix": lambda m, a, b, c: m.mass_matrix(a),
    "coriolis_torques": lambda m, a, b, c: m.coriolis_torques(a, b),
    "coriolis_matrix": lambda m, a, b, c: m.coriolis_matrix(a, b),
    "gravity_torques": lambda m, a, b, c: m.gravity_torques(a),
    "forward_dynamics": lambda m, a, b, c: m.forward_dynamics(a, b, c),
    "rnea_derivatives": lambda m, a, b, c: m.rnea_derivatives(a, b, c),
    "forward_dynamics_derivatives": lambda m, a, b, c: m.forward_dynamics_derivatives(a, b, c),
    "jacobian_time_derivative": lambda m, a, b, c: m.jacobian_time_derivative(a, b),
    "manipulability": lambda m, a, b, c: m.manipulability(a),
    "condition_number": lambda m, a, b, c: m.condition_number(a),
    "velocity_ellipsoid": lambda m, a, b, c: m.velocity_ellipsoid(a).lengths,
}


def _finite_result(value):
    if isinstance(value, (bool, np.bool_)):
        return True
    if isinstance(value, tuple):
        return all(_finite_result(v) for v in value)
    a = np.asarray(value, dtype=np.float64)
    return bool(np.all(np.isfinite(a)) or np.all(~np.isnan(a)) and np.isposinf(a).any())  # cond number may be inf


@pytest.mark.parametrize("robot", sorted(MODELS))
@given(data=st.data())
def test_robot_model_methods(robustness, robot, data):
    model = MODELS[robot]
    name = data.draw(st.sampled_from(sorted(SINGLE_METHODS)))
    (ka, a), (kb, b), (kc, c) = (data.draw(joint_arrays(model.dof)) for _ in range(3))
    kinds = {ka, kb, kc}
    kind = "valid" if kinds == {"valid"} else sorted(kinds - {"valid"})[0]
    what = f"{robot}.{name}({ka}, {kb}, {kc})"
    res = outcome(what, SINGLE_METHODS[name], model, a, b, c)
    robustness.add(f"joint vectors: {kind.split(' (')[0] if not kind.startswith('shape') else 'wrong shape'}",
                   f"RobotModel.{name}", res.label)
    # finite input so large that the dynamics overflow (|qd| >~ 1e150) gave NaN: the kernels now refuse every
    # input above 1e100 in magnitude (InputError), so a success is always finite
    assert not res.ok or _finite_result(res.value), f"{what}: success with NaN: {res.value}"
    if not res.ok:
        assert isinstance(res.error, (InputError, ModelError)), what
    if kind == "valid":
        assert res.ok, f"{what}: valid input refused: {res.error}"


@given(data=st.data())
def test_robot_model_batches(robustness, data):
    model = MODELS["ur5"]
    n = data.draw(st.sampled_from([0, 1, 5]))
    kind = data.draw(st.sampled_from(("valid", "NaN/inf/huge", "wrong shape", "dtype")))
    if kind == "valid":
        Q = data.draw(hnp.arrays(np.float64, (n, 6), elements=st.floats(-3, 3)))
    elif kind == "NaN/inf/huge":
        Q = data.draw(hnp.arrays(np.float64, (max(n, 1), 6), elements=ELEMENTS))
    elif kind == "wrong shape":
        Q = data.draw(hnp.arrays(np.float64, hnp.array_shapes(min_dims=0, max_dims=3, max_side=7)
                                 .filter(lambda s: len(s) != 2 or s[1] != 6), elements=st.floats(-3, 3)))
    else:
        Q = np.array([["a"] * 6] * max(n, 1))
    name = data.draw(st.sampled_from(("fk_batch", "jacobian_space_batch", "mass_matrix_batch",
                                      "inverse_dynamics_batch", "forward_dynamics_batch", "manipulability_batch")))
    fn = getattr(model, name)
    args = (Q,) if name in ("fk_batch", "jacobian_space_batch", "mass_matrix_batch", "manipulability_batch") \
        else (Q, Q, Q)
    what = f"ur5.{name}({kind} {np.shape(Q)})"
    res = outcome(what, fn, *args)
    robustness.add(f"batches: {kind}", f"RobotModel.{name}", res.label)
    assert not res.ok or _finite_result(res.value), f"{what}: success with NaN"
    if kind == "valid":
        assert res.ok, f"{what}: {res.error}"


POSES = st.one_of(
    hnp.arrays(np.float64, (4, 4), elements=ELEMENTS),
    hnp.arrays(np.float64, hnp.array_shapes(min_dims=0, max_dims=3, max_side=5), elements=st.floats(-2, 2)),
    st.builds(lambda s: np.diag([s, s, s, 1.0]), st.sampled_from([0.0, 2.0, -1.0, math.nan])),
    st.just(np.zeros((4, 4))), st.just("pose"), st.none())


@pytest.mark.parametrize("robot", sorted(MODELS))
@given(T=POSES)
def test_ik(robustness, robot, T):
    model = MODELS[robot]
    what = f"{robot}.ik({np.asarray(T).shape if T is not None else None})"
    res = outcome(what, model.ik, T, max_restarts=2)
    robustness.add("IK targets: NaN/inf, wrong shapes, non-orthonormal, zero", "RobotModel.ik", res.label)
    if res.ok and res.value.success:
        q = res.value.q
        assert np.all(np.isfinite(q)) and model.within_limits(q), f"{what}: success outside limits {q}"
    res = outcome(what, model.ik_all, T, allowed=(NotImplementedError,))
    robustness.add("IK targets: NaN/inf, wrong shapes, non-orthonormal, zero", "RobotModel.ik_all", res.label)
    if res.ok:
        for q in res.value:
            assert np.all(np.isfinite(q)) and model.within_limits(q, 1e-9), f"{what}: solution outside limits"
