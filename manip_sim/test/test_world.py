"""manip_sim.world: PyBullet dynamics against manip_core, effort limits, watchdog, suction, ground truth."""
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from manip_sim.scene import KIND_OBJECT, load_scene
from manip_sim.world import MODE_EFFORT, MODE_HOLD, MODE_POSITION, CommandError, World, prepare_urdf

SCENE = Path(__file__).resolve().parents[1] / "config" / "pick_place_scene.yaml"
Q_TEST = np.array([0.3, -1.2, 1.4, -1.8, -1.57, 0.2])   # a generic configuration, arm stretched sideways


@pytest.fixture(scope="module")
def scene():
    return load_scene(SCENE)


@pytest.fixture
def limp(scene):
    """No watchdog: the robot starts limp (zero torque)."""
    with World(scene, command_timeout=0.0) as w:
        yield w


def _seconds(world, t):
    return int(round(t / world.dt))


def test_loads_like_the_model(limp):
    w = limp
    assert w.joint_names == ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint",
                             "wrist_2_joint", "wrist_3_joint"]
    assert w.mode == MODE_EFFORT and w.time == 0.0
    js = w.joint_state()
    q0 = w.scene.initial_joint_positions(w.joint_names)
    assert np.allclose(js.positions, q0) and np.allclose(js.velocities, 0)
    # PyBullet's tip link frame equals manip_core's forward kinematics.
    w.set_joint_positions(Q_TEST)
    assert np.allclose(w.tool_pose(), w.model.fk(Q_TEST), atol=1e-9)
    assert np.allclose(w.effort_limits, [150, 150, 150, 28, 28, 28])
    assert "tool0" in w.urdf.links_without_inertial


def test_prepare_urdf_gives_massless_links_zero_mass(tmp_path, scene):
    import xml.etree.ElementTree as ET

    out = prepare_urdf(scene.robot.urdf, tmp_path)
    tool0 = [link for link in ET.parse(out.path).getroot().findall("link") if link.get("name") == "tool0"][0]
    assert tool0.find("inertial/mass").get("value") == "0"
    assert out.has_visual and out.has_collision   # the bundled UR5 is drawn and solid (its cylinders)


def test_uncommanded_arm_falls(limp):
    w = limp
    w.set_joint_positions(Q_TEST)
    z0 = w.tool_pose()[2, 3]
    w.step(_seconds(w, 0.5))
    moved = np.abs(w.joint_state().positions - Q_TEST)
    # the shoulder gives way and the tool drops (until the solid arm lands on the table)
    assert moved[1] > 0.05 and w.tool_pose()[2, 3] < z0 - 0.05, (moved, z0, w.tool_pose()[2, 3])


@pytest.mark.parametrize("base_orientation", [(0.0, 0.0, 0.0, 1.0), (0.258819, 0.0, 0.0, 0.9659258)])
def test_gravity_compensation_from_manip_core_holds_still(scene, base_orientation):
    """tau = RobotModel.gravity_torques(q) keeps the arm within 1e-3 rad over 1 s: PyBullet and manip_core
    agree on the dynamics (also with the base tilted 30 degrees, gravity then seen in the base frame)."""
    tilted = replace(scene, robot=replace(scene.robot, base_orientation_xyzw=base_orientation))
    with World(tilted, command_timeout=0.0) as w:
        w.set_joint_positions(Q_TEST)
        g = w.gravity_base
        assert np.allclose(g, [0, 0, -9.81]) == (base_orientation[3] == 1.0)
        worst = 0.0
        for _ in range(_seconds(w, 1.0)):
            q = w.joint_state().positions
            w.apply_efforts(w.model.gravity_torques(q, gravity=g))
            w.step()
            worst = max(worst, float(np.max(np.abs(w.joint_state().positions - Q_TEST))))
        assert worst < 1e-3, worst
        # Sanity: the torques are far from zero (the test would be empty otherwise).
        assert np.max(np.abs(w.model.gravity_torques(Q_TEST, gravity=g))) > 5.0


def test_effort_clipping(scene):
    with World(scene, command_timeout=0.0) as a, World(scene, command_timeout=0.0) as b:
        for w in (a, b):
            w.set_joint_positions(Q_TEST)
        clipped = a.apply_efforts([200.0, -10.0, 0.0, 0.0, 0.0, -40.0])
        assert clipped.tolist() == [True, False, False, False, False, True]
        assert np.allclose(a.joint_state().efforts, [150.0, -10.0, 0, 0, 0, -28.0])
        assert not b.apply_efforts([150.0, -10.0, 0.0, 0.0, 0.0, -28.0]).any()
        a.step(20)
        b.step(20)
        assert np.allclose(a.joint_state().positions, b.joint_state().positions, atol=1e-12)


def test_bad_commands_are_rejected_and_the_previous_one_kept(limp):
    w = limp
    w.apply_efforts([0.0, 1.0, 0.0, 0.0, 0.0, 0.0])
    for bad in ([0.0] * 5, [0.0] * 7, [0.0, float("nan"), 0, 0, 0, 0], [[0.0] * 6], "abc"):
        with pytest.raises(CommandError):
            w.apply_efforts(bad)
        with pytest.raises(CommandError):
            w.set_position_targets(bad)
    with pytest.raises(CommandError, match="joint limits"):
        w.set_position_targets([0.0, 0.0, 7.0, 0.0, 0.0, 0.0])
    assert w.mode == MODE_EFFORT
    assert np.allclose(w.joint_state().efforts, [0.0, 1.0, 0.0, 0.0, 0.0, 0.0])


def test_position_control_reaches_the_target(scene):
    with World(scene, command_timeout=0.2) as w:
        assert w.mode == MODE_HOLD
        target = np.array(w.scene.initial_joint_positions(w.joint_names)) + [0.2, -0.1, 0.1, 0.2, -0.2, 0.3]
        for _ in range(10):          # commands at 10 Hz for 1 s (the watchdog wants them)
            w.set_position_targets(target)
            w.step(_seconds(w, 0.1))
        assert w.mode == MODE_POSITION
        assert np.allclose(w.joint_state().positions, target, atol=5e-3)


def test_watchdog_holds_when_commands_stop(scene):
    with World(scene, command_timeout=0.2) as w:
        q0 = w.joint_state().positions
        w.step(_seconds(w, 0.5))                          # starts braked: stays put
        assert w.mode == MODE_HOLD
        assert np.allclose(w.joint_state().positions, q0, atol=1e-3)
        w.apply_efforts(np.zeros(6))                      # limp: the arm starts to fall...
        w.step(_seconds(w, 0.15))
        assert w.mode == MODE_EFFORT and w.watchdog_trips == 0
        w.step(_seconds(w, 0.1))                          # ...until 0.2 s without a command
        assert w.mode == MODE_HOLD and w.watchdog_trips == 1
        w.step(_seconds(w, 0.5))
        q_hold = w.joint_state().positions
        w.step(_seconds(w, 0.5))
        js = w.joint_state()
        assert np.max(np.abs(js.positions - q_hold)) < 1e-3
        assert np.max(np.abs(js.velocities)) < 1e-2
        assert np.max(np.abs(q_hold - q0)) > 1e-3         # it did fall a bit before the brake
        assert np.all(np.abs(js.efforts) <= w.effort_limits + 1e-9)


def test_watchdog_after_two_observed_effort_command_periods(scene):
    """command_timeout_periods (sim_bridge with lockstep): effort commands every 4 ms of simulated time (a 250 Hz
    controller, physics at 500 Hz), then none. The arm is held at the first step at which the last command is
    more than 2 observed periods (8 ms) old, not after command_timeout (0.2 s). Oracle: the same world without
    command_timeout_periods, given the same commands: its arm falls on for 0.2 s while the watched one stays
    where the watchdog caught it."""
    kw = dict(command_timeout=0.2, min_command_timeout=0.006)
    with World(scene, command_timeout_periods=2.0, **kw) as w, World(scene, **kw) as ref:
        assert w.command_period is None and w.watchdog_timeout == 0.2
        for _ in range(20):                   # gravity compensation at 250 Hz
            for x in (w, ref):
                x.apply_efforts(x.model.gravity_torques(x.joint_state().positions))
                x.step(2)
        assert w.command_period == pytest.approx(0.004, abs=1e-12)
        assert w.watchdog_timeout == pytest.approx(0.008, abs=1e-12) and ref.watchdog_timeout == 0.2
        for x in (w, ref):                    # the last command (limp: the arm falls), then the controller dies
            x.apply_efforts(np.zeros(6))
        q_last = w.joint_state().positions
        w.step(5)
        ref.step(5)                           # 10 ms after it: the 6th step is the first at which it is > 8 ms old
        assert w.mode == MODE_EFFORT and w.watchdog_trips == 0
        w.step(1)
        ref.step(1)
        assert w.mode == MODE_HOLD and w.watchdog_trips == 1 and w.tripped_from == MODE_EFFORT
        q_caught = w.joint_state().positions
        w.step(_seconds(w, 0.3))
        ref.step(_seconds(ref, 0.3))
        assert ref.watchdog_trips == 1 and ref.tripped_from == MODE_EFFORT      # after command_timeout, 0.2 s
        fell = np.max(np.abs(ref.joint_state().positions - q_last))
        moved = np.max(np.abs(w.joint_state().positions - q_last))
        assert np.max(np.abs(w.joint_state().positions - q_caught)) < 1e-3
        assert fell > 0.01 and moved < 0.05 * fell, (moved, fell)
        # a new command ends the hold; a position command is watched by command_timeout alone
        w.apply_efforts(w.model.gravity_torques(w.joint_state().positions))
        assert w.mode == MODE_EFFORT and w.tripped_from is None
        w.set_position_targets(w.joint_state().positions)
        assert w.command_period is None and w.watchdog_timeout == 0.2


def test_watchdog_periods_never_below_min_command_timeout(scene):
    """A burst (several effort commands in one step: a late controller catching up) gives a median interval of 0:
    the watchdog then waits min_command_timeout (sim_bridge: lockstep_max_age), and never more than
    command_timeout."""
    with World(scene, command_timeout=0.2, command_timeout_periods=2.0, min_command_timeout=0.008) as w:
        tau = w.model.gravity_torques(w.joint_state().positions)
        for _ in range(17):
            w.apply_efforts(tau)
        assert w.command_period == 0.0 and w.watchdog_timeout == 0.008
    with World(scene, command_timeout=0.2, command_timeout_periods=2.0) as w:
        for i in range(17):                   # a controller at about 5 Hz: 2 periods would be 0.38 s
            w.apply_efforts(w.model.gravity_torques(w.joint_state().positions))
            if i < 16:
                w.step(_seconds(w, 0.19))
        assert w.mode == MODE_EFFORT and w.command_period == pytest.approx(0.19) and w.watchdog_timeout == 0.2
    with pytest.raises(ValueError, match="command_timeout_periods must be finite and >= 0"):
        World(scene, command_timeout_periods=-1.0)


def _grasp_configuration(w, point, q_near):
    T = np.eye(4)
    T[:3, :3] = np.diag([1.0, -1.0, -1.0])     # tool z pointing down
    T[:3, 3] = point
    sols = w.model.ik_all(T)
    return min(sols, key=lambda q: np.linalg.norm(np.asarray(q) - q_near))


def _cube(w):
    return [o for o in w.object_states() if o.name == "cube"][0]


def test_attach_moves_the_object_with_the_tool_and_detach_drops_it(scene):
    with World(scene, command_timeout=0.0) as w:
        cube = _cube(w)
        assert cube.kind == KIND_OBJECT and not cube.attached
        q_init = np.array(w.scene.initial_joint_positions(w.joint_names))
        # Too far: nothing to attach.
        r = w.attach()
        assert not r.success and "max_distance" in r.message
        q_grasp = _grasp_configuration(w, cube.position + [0, 0, 0.025], q_init)
        q_lift = _grasp_configuration(w, cube.position + [0, 0, 0.175], q_grasp)
        w.set_joint_positions(q_grasp)
        w.set_position_targets(q_grasp)
        assert not w.attach("pillar").success               # obstacles cannot be picked
        r = w.attach()                                       # the nearest object
        assert r.success and r.object_name == "cube" and w.attached == "cube"
        assert not w.attach("cube").success                  # already holding it
        w.set_position_targets(q_lift)
        w.step(_seconds(w, 1.5))
        held = _cube(w)
        assert held.attached
        assert np.allclose(held.position, cube.position + [0, 0, 0.15], atol=5e-3), held.position
        # It stays where the tool holds it (5 mm below tool0).
        assert np.allclose(w.tool_pose()[:3, 3] - held.position, [0, 0, 0.025], atol=3e-3)
        r = w.detach()
        assert r.success and r.object_name == "cube" and w.attached is None
        w.step(_seconds(w, 1.0))
        dropped = _cube(w)
        assert not dropped.attached
        assert abs(dropped.position[2] - 0.02) < 3e-3         # back on the table
        assert np.linalg.norm(dropped.position[:2] - cube.position[:2]) < 0.05
        assert w.detach().success                              # releasing nothing is fine


def test_ground_truth_in_the_base_frame_with_a_moved_base(scene):
    moved = replace(scene, robot=replace(scene.robot, base_position=(1.0, 2.0, 0.8),
                                         base_orientation_xyzw=(0.0, 0.0, 0.7071068, 0.7071068)))
    with World(moved, command_timeout=0.2) as w:
        w.step(_seconds(w, 0.3))
        truth = {o.name: o for o in w.object_states()}
        assert np.allclose(truth["cube"].position, [0.45, -0.25, 0.02], atol=1e-3)
        assert np.allclose(truth["pillar"].position, [0.45, 0.0, 0.15], atol=1e-9)
        assert np.allclose(truth["table"].position, [0.25, 0.0, -0.025], atol=1e-9)
        q = w.joint_state().positions
        assert np.allclose(w.tool_pose(), w.model.fk(q), atol=1e-6)


def test_urdf_meshes_resolved_or_named_in_one_line(tmp_path):
    """package:// meshes (example-robot-data, DAE) resolve to existing files; a missing mesh, an unknown package or a
    format PyBullet cannot read is one line naming the link, the element and the file."""
    import xml.etree.ElementTree as ET

    from manip_core.package_uri import resolve_uri
    kinova = resolve_uri("package://example-robot-data/robots/kinova_description/robots/kinova.urdf")
    out = prepare_urdf(kinova, tmp_path)
    names = [m.get("filename") for m in ET.parse(out.path).getroot().iter("mesh")]
    assert names and all(Path(n).is_file() and n.endswith(".dae") for n in names)
    link = ('<robot name="r"><link name="a"><visual><geometry><mesh filename="{}"/></geometry></visual></link>'
            '</robot>')
    for i, (mesh, reason) in enumerate([("missing.stl", "no such file"),
                                        ("package://no_such_pkg/m.stl", "package 'no_such_pkg' not found"),
                                        ("m.ply", "PyBullet reads .stl, .obj, .dae meshes, not .ply")]):
        (tmp_path / "m.ply").write_text("ply\n")
        f = tmp_path / f"r{i}.urdf"
        f.write_text(link.format(mesh))
        with pytest.raises(ValueError, match=rf"r{i}.urdf: link 'a' <visual> mesh '{re.escape(mesh)}': .*{reason}"):
            prepare_urdf(f, tmp_path)


def test_off_chain_joints_are_held_where_the_model_welds_them():
    """example-robot-data's Panda with its mimic fingers, chain panda_link0 -> panda_hand: the fingers (off the
    chain, welded at 0 by manip_core) stay at 0 while the arm moves; the arm's gravity torques from the model hold
    it still (model and simulator agree)."""
    from manip_core.package_uri import resolve_uri
    from manip_sim.scene import parse_scene
    urdf = resolve_uri("package://example-robot-data/robots/panda_description/urdf/panda.urdf")
    events = []
    w = World(parse_scene({"robot": {"urdf": urdf, "base_link": "panda_link0", "tip_link": "panda_hand",
                                     "initial_positions": [0.0, -0.5, 0.0, -2.0, 0.0, 1.6, 0.8]}}),
              command_timeout=0.0, on_event=lambda level, text: events.append(text))
    try:
        assert any("held at 0" in e and "panda_finger_joint1" in e for e in events), events
        pb = w._pb
        fingers = [i for i in range(pb.getNumJoints(w.robot, physicsClientId=w.client))
                   if b"finger" in pb.getJointInfo(w.robot, i, physicsClientId=w.client)[1]]
        q0 = w.joint_state().positions
        for k in range(500):
            w.apply_efforts(w.model.gravity_torques(w.joint_state().positions) + (2.0 if k < 250 else -2.0))
            w.step()
        assert np.abs(w.joint_state().positions - q0).max() > 0.01       # the arm moved
        for i in fingers:
            assert abs(pb.getJointState(w.robot, i, physicsClientId=w.client)[0]) < 1e-3
    finally:
        w.close()


def test_root_link_with_an_offset_inertial_frame_is_placed_by_its_link_frame(scene, tmp_path):
    """PyBullet places a body by its root's centre-of-mass frame; a root <inertial> with an origin (the MBM
    Panda's panda_link0 has z = 0.05 m) must not shift the arm (it did, by that offset, so perception's
    self-filter, posed by manip_core, missed the rendered arm). Oracle: manip_core's forward kinematics."""
    from manip_core.robots import robot_path
    text = Path(robot_path("ur5")).read_text()
    head, tail = text.split('<link name="base_link">', 1)
    tail = tail.replace('<origin xyz="0 0 0" rpy="0 0 0"/>', '<origin xyz="0.1 -0.05 0.07" rpy="0.3 0 0.2"/>', 1)
    urdf = tmp_path / "ur5_offset_root_inertial.urdf"
    urdf.write_text(head + '<link name="base_link">' + tail)
    moved = replace(scene, robot=replace(scene.robot, urdf=str(urdf), base_position=(0.2, -0.1, 0.3)))
    with World(moved, command_timeout=0.0) as w:
        w.set_joint_positions(Q_TEST)
        # (PyBullet's link states carry ~1e-7 of round-off; the defect was a 0.1 m shift)
        assert np.allclose(w.link_pose("base_link"), np.eye(4), atol=1e-6)
        for link in ("forearm_link", "tool0"):
            assert np.allclose(w.link_pose(link), w.model.fk(Q_TEST, link), rtol=0, atol=1e-6), link


MIMIC_URDF = """<robot name="mimic_arm">
  <link name="base"/>
  <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><origin xyz="0 0 0.1"/>
    <axis xyz="0 1 0"/><limit lower="-3" upper="3" effort="80" velocity="2"/></joint>
  <link name="l1"><inertial><origin xyz="0.15 0 0"/><mass value="1.2"/>
    <inertia ixx="0.002" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="j2" type="revolute"><parent link="l1"/><child link="l2"/><origin xyz="0.3 0 0"/>
    <axis xyz="0 1 0"/><limit lower="-3" upper="3" effort="80" velocity="2"/>
    <mimic joint="j1" multiplier="-0.5" offset="0.3"/></joint>
  <link name="l2"><inertial><origin xyz="0.12 0 0.01"/><mass value="0.8"/>
    <inertia ixx="0.001" iyy="0.006" izz="0.006" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="j3" type="revolute"><parent link="l2"/><child link="l3"/><origin xyz="0.25 0 0"/>
    <axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="40" velocity="2"/></joint>
  <link name="l3"><inertial><origin xyz="0.05 0 0"/><mass value="0.4"/>
    <inertia ixx="0.0005" iyy="0.001" izz="0.001" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="tip_joint" type="fixed"><parent link="l3"/><child link="tip"/><origin xyz="0.1 0 0"/></joint>
  <link name="tip"/>
  <joint name="finger_a" type="prismatic"><parent link="l3"/><child link="fa"/><origin xyz="0.1 0.02 0"/>
    <axis xyz="0 1 0"/><limit lower="0" upper="0.04" effort="20" velocity="0.1"/></joint>
  <link name="fa"><inertial><mass value="0.02"/><inertia ixx="1e-6" iyy="1e-6" izz="1e-6" ixy="0" ixz="0" iyz="0"/>
    </inertial></link>
  <joint name="finger_b" type="prismatic"><parent link="l3"/><child link="fb"/><origin xyz="0.1 -0.02 0"/>
    <axis xyz="0 -1 0"/><limit lower="0" upper="0.04" effort="20" velocity="0.1"/>
    <mimic joint="finger_a" multiplier="1" offset="0.01"/></joint>
  <link name="fb"><inertial><mass value="0.02"/><inertia ixx="1e-6" iyy="1e-6" izz="1e-6" ixy="0" ixz="0" iyz="0"/>
    </inertial></link>
  <joint name="wrist_mimic" type="revolute"><parent link="l3"/><child link="wm"/><origin xyz="0.05 0 0.03"/>
    <axis xyz="1 0 0"/><limit lower="-6" upper="6" effort="5" velocity="2"/>
    <mimic joint="j3" multiplier="2.0" offset="-0.1"/></joint>
  <link name="wm"><inertial><mass value="0.05"/><inertia ixx="1e-5" iyy="1e-5" izz="1e-5" ixy="0" ixz="0" iyz="0"/>
    </inertial></link>
</robot>
"""


def test_mimic_joints_follow_their_master_as_urdf_mimic_says(tmp_path):
    """URDF <mimic>: q = multiplier * q_master + offset. A mimic joint on the chain (j2 of j1) and one off it (a
    wrist joint of j3) are coupled in PyBullet (gear constraints), as manip_core's model couples them; a mimic of
    a welded finger is held at its mimic value (offset). Oracles: the mimic formula on PyBullet's own joint
    values, manip_core's forward kinematics of the tip and of the off-chain link, and its gravity torques, which
    must hold the coupled arm still (the model's dynamics with the mimic coupling are PyBullet's)."""
    from manip_sim.scene import parse_scene
    from manip_sim.world import follower_joints
    urdf = tmp_path / "mimic_arm.urdf"
    urdf.write_text(MIMIC_URDF)
    events = []
    w = World(parse_scene({"robot": {"urdf": str(urdf), "base_link": "base", "tip_link": "tip",
                                     "initial_positions": [0.4, -0.3]}}),
              command_timeout=0.0, on_event=lambda level, text: events.append(text))
    try:
        pb, c = w._pb, w.client
        assert w.joint_names == ["j1", "j3"]
        assert any("coupled" in e and "j2 = -0.5 * j1 + 0.3" in e and "wrist_mimic = 2 * j3 + -0.1" in e
                   for e in events), events
        idx = {pb.getJointInfo(w.robot, i, physicsClientId=c)[1].decode(): i
               for i in range(pb.getNumJoints(w.robot, physicsClientId=c))}

        def joint(name):
            return pb.getJointState(w.robot, idx[name], physicsClientId=c)[0]

        def check(q, atol):
            assert abs(joint("j2") - (-0.5 * q[0] + 0.3)) < atol
            assert abs(joint("wrist_mimic") - (2.0 * q[1] - 0.1)) < atol
            assert abs(joint("finger_a")) < atol and abs(joint("finger_b") - 0.01) < atol
            assert np.allclose(w.tool_pose(), w.model.fk(q), atol=atol)
            assert np.allclose(w.link_pose("wm"), w.model.fk(q, "wm"), atol=atol)

        check(w.joint_state().positions, 1e-6)            # the start: set by set_joint_positions
        w.set_joint_positions([-0.7, 1.1])
        check(np.array([-0.7, 1.1]), 1e-6)
        q0 = w.joint_state().positions
        for _ in range(500):                              # 1 s held by the model's gravity torques
            w.apply_efforts(w.model.gravity_torques(w.joint_state().positions))
            w.step()
        assert np.abs(w.joint_state().positions - q0).max() < 2e-3, w.joint_state().positions - q0
        for k in range(1000):                             # then driven: the mimic joints follow throughout
            js = w.joint_state()      # j1 pushed by +-1.5 N*m, j3 pulled towards 0.6 rad by a PD (N*m)
            push = np.array([1.5 if k < 500 else -1.5, 0.2 * (0.6 - js.positions[1]) - 0.02 * js.velocities[1]])
            w.apply_efforts(w.model.gravity_torques(js.positions) + push)
            w.step()
            if k % 50 == 0:
                check(w.joint_state().positions, 2e-4)
        assert np.abs(w.joint_state().positions - q0).max() > 0.1          # it moved
    finally:
        w.close()
    # the follower rule itself: a chain of mimics composes, a mimic of a welded joint sits at its offset
    from manip_core.tree import Joint, Mimic
    J = {"a": Joint("a", "revolute", "p", "c"), "b": Joint("b", "revolute", "p", "c", mimic=Mimic("a", 2.0, 0.1)),
         "c": Joint("c", "revolute", "p", "c", mimic=Mimic("b", -3.0, 0.5)), "w": Joint("w", "revolute", "p", "c"),
         "x": Joint("x", "revolute", "p", "c", mimic=Mimic("w", 4.0, 0.2))}
    assert follower_joints(J, ["a"], ["b", "c", "w", "x"]) == {
        "b": ("a", 2.0, 0.1), "c": ("a", -6.0, -3.0 * 0.1 + 0.5), "w": (None, 0.0, 0.0), "x": (None, 0.0, 0.2)}
