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


@pytest.mark.parametrize("law_name", ["pd", "pid", "computed_torque", "robust", "adaptive", "osc"])
def test_control_law_text_input_is_input_error(ur5, law_name):
    """np.asarray(['x', ...], float) leaked a raw numpy ValueError from every law."""
    from manip_control.laws import make_law
    law = make_law(law_name, ur5)
    z = np.zeros(6)
    with pytest.raises(InputError, match="q_d must be 6 numbers"):
        law(z, z, ["x"] * 6, z, z)
    with pytest.raises(InputError, match="qd: expected 6 values, got 3"):
        law(z, np.zeros(3), z, z, z)


def test_damaged_bag_is_bag_error(tmp_path):
    """rosbags' ReaderError ('File magic is invalid.') leaked from read_bag on a damaged mcap file."""
    from rclpy.serialization import serialize_message
    from std_msgs.msg import String
    from manip_core.bag import BagError, BagRecorder, read_bag
    path = tmp_path / "bag"
    with BagRecorder(path) as rec:
        rec.add_topic("/chatter", "std_msgs/msg/String")
        rec.write("/chatter", 1000, serialize_message(String(data="m")))
    data = next(path.glob("*.mcap"))
    raw = bytearray(data.read_bytes())
    raw[0] ^= 0xFF
    data.write_bytes(bytes(raw))
    with pytest.raises(BagError, match="cannot open the bag"):
        read_bag(path)


def test_model_server_refuses_overflowing_dynamics():
    """compute_dynamics answered success with NaN efforts for velocities of 1e300 (the dynamics overflow)."""
    import rclpy
    from manip_msgs.srv import ComputeDynamics
    from manip_core.model_server_node import ModelServer
    from pathlib import Path
    urdf = Path(__file__).resolve().parents[2] / "manip_core" / "manip_core" / "robots" / "ur5.urdf"
    if rclpy.ok():
        pytest.skip("the default rclpy context is in use by another test of this process")
    rclpy.init(args=["--ros-args", "-p", f"urdf_path:={urdf}"], domain_id=__import__("random").randint(100, 200))
    try:
        node = ModelServer()
        try:
            z = [0.0] * 6
            res = node._compute_dynamics(ComputeDynamics.Request(positions=z, velocities=[1e300] * 6,
                                                                 accelerations=z), ComputeDynamics.Response())
            assert not res.success and "overflow" in res.message
            res = node._compute_dynamics(ComputeDynamics.Request(positions=z, velocities=z, accelerations=z),
                                         ComputeDynamics.Response())
            assert res.success and np.all(np.isfinite(res.efforts))
        finally:
            node.destroy_node()
    finally:
        rclpy.shutdown()


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_control_law_non_finite_input_is_input_error(ur5, bad):
    """robust: LinAlgError('Eigenvalues did not converge') leaked on a NaN target; every law now refuses it."""
    from manip_control.laws import make_law
    z = np.zeros(6)
    for name in ("pd", "computed_torque", "robust", "adaptive"):
        with pytest.raises(InputError, match="q_d holds NaN or inf"):
            make_law(name, ur5)(z, z, np.full(6, bad), z, z)


def test_robust_law_overflow_is_input_error(ur5):
    """robust: a finite but huge target (1e300 rad) overflowed the error bounds into eigvalsh's LinAlgError."""
    from manip_control.laws import make_law
    z = np.zeros(6)
    law = make_law("robust", ur5)
    try:
        out = law(z, z, np.full(6, 1e300), z, z)
    except InputError as e:
        assert "overflow" in str(e)
    else:
        assert np.all(np.isfinite(out.tau)) and np.all(np.abs(out.tau) <= ur5.effort_limits)


DYNAMICS = {
    "inverse_dynamics": lambda m, v: m.inverse_dynamics(np.zeros(6), v, np.zeros(6)),
    "coriolis_torques": lambda m, v: m.coriolis_torques(np.zeros(6), v),
    "forward_dynamics": lambda m, v: m.forward_dynamics(np.zeros(6), v, np.zeros(6)),
    "rnea_derivatives": lambda m, v: m.rnea_derivatives(np.zeros(6), v, np.zeros(6)),
    "forward_dynamics_derivatives": lambda m, v: m.forward_dynamics_derivatives(np.zeros(6), v, np.zeros(6)),
    "inverse_dynamics_batch": lambda m, v: m.inverse_dynamics_batch(np.zeros((2, 6)), np.vstack([v * 0, v]),
                                                                    np.zeros((2, 6))),
    "forward_dynamics_batch": lambda m, v: m.forward_dynamics_batch(np.zeros((2, 6)), np.vstack([v * 0, v]),
                                                                    np.zeros((2, 6))),
}


@pytest.mark.parametrize("name", sorted(DYNAMICS))
def test_dynamics_of_huge_finite_input_is_input_error(ur5, name):
    """The dynamics answered NaN (no error) for finite velocities from about 1e150 rad/s: qd^2 times inertias
    overflowed into inf - inf. Inputs above 1e100 in magnitude are now refused, naming the bound."""
    for v in (1e151, 1e300, -1e200):
        with pytest.raises(InputError, match=r"NaN, inf or a magnitude above 1e\+100"):
            DYNAMICS[name](ur5, np.full(6, v))


def test_dynamics_just_below_the_input_bound_is_finite_and_matches_pinocchio(ur5):
    """Just below the bound the result is finite and still right: RNEA against Pinocchio at |qd| = 1e99 rad/s."""
    pin = pytest.importorskip("pinocchio")
    from pathlib import Path
    pm = pin.buildModelFromUrdf(str(Path(__file__).resolve().parents[2] / "manip_core" / "manip_core" / "robots"
                                    / "ur5.urdf"))
    q = np.array([0.3, -1.1, 1.4, -0.6, 0.9, 0.2])
    qd = 1e99 * np.array([1.0, -0.5, 0.25, 0.8, -1.0, 0.6])
    tau = ur5.inverse_dynamics(q, qd, np.zeros(6))
    ref = pin.rnea(pm, pm.createData(), q, qd, np.zeros(6))
    assert np.all(np.isfinite(tau))
    np.testing.assert_allclose(tau, ref, rtol=1e-9, atol=1e-9 * np.max(np.abs(ref)))
    assert np.all(np.isfinite(ur5.forward_dynamics(q, qd, np.zeros(6))))


def test_far_first_point_is_refused_not_jumped_to(ur5):
    """A trajectory whose first point, at t = 0, lay 0.5 rad from the arm was taken as the set point at once (the
    arm lunged, only the effort clipping limited it). The controller now refuses a first point the joints cannot
    reach within their velocity limits by its time (start_tolerance 0.05 rad at t = 0)."""
    from manip_control.trajectory_sampler import InvalidTrajectory, Trajectory, check_start
    q = np.array([0.1, -1.2, 1.3, -0.4, 0.5, 0.0])
    vmax = np.asarray(ur5.velocity_limits)

    def first_point(dq, t):
        return Trajectory(tuple(ur5.joint_names), np.array([t]), (q + dq)[None, :], None, None)

    far = np.array([0.0, 0.5, 0.0, 0.0, 0.0, 0.0])
    with pytest.raises(InvalidTrajectory, match=r"joint shoulder_lift_joint 0\.5 away .* at once .* jump"):
        check_start(first_point(far, 0.0), q, 0.0, vmax, 0.05)
    # the same point due sooner than the velocity limit allows (0.5 rad at 3.15 rad/s needs 0.159 s)
    with pytest.raises(InvalidTrajectory, match=r"in 0\.100 s: more than start_tolerance 0\.05 \+ velocity limit"):
        check_start(first_point(far, 0.1), q, 0.1, vmax, 0.05)
    check_start(first_point(far, 0.2), q, 0.2, vmax, 0.05)            # reachable: accepted
    check_start(first_point(far * 0.08, 0.0), q, 0.0, vmax, 0.05)     # 0.04 rad at once: within the tolerance
    check_start(first_point(far, 0.0), q, 0.0, vmax, 0.0)             # 0: not checked (ros2_control's behaviour)
    # a future header.stamp gives the point time: lead 0.3 s with time_from_start 0
    check_start(first_point(far, 0.0), q, 0.3, vmax, 0.05)
    # a joint without a velocity limit: only the tolerance at once, no bound later
    with pytest.raises(InvalidTrajectory, match="at once"):
        check_start(first_point(far, 0.0), q, 0.0, np.full(6, np.inf), 0.05)
    check_start(first_point(far * 100, 0.5), q, 0.5, np.zeros(6), 0.05)
