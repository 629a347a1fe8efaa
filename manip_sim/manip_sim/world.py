"""PyBullet world of manip_sim: a robot that takes joint torques (or position targets), a table, objects
to pick, obstacles, a suction gripper, ground truth and the stereo camera. No rclpy here.

Units SI (m, rad, s, kg, N, N*m). "base frame" is the robot's base link (everything the world returns is
in it); "world" is PyBullet's frame (gravity along -z), where ``scene.robot.base_pose`` puts the base.

Behaviour, like a real robot driver:
  * default PyBullet joint motors are disabled (velocity control with force 0), joint damping and link
    damping are zero, so ``apply_efforts`` torques act alone (clipped to the URDF effort limits);
  * ``set_position_targets`` switches to PyBullet's position control (max force = the effort limits);
  * watchdog: with ``command_timeout`` > 0, when no command has arrived for that long (simulated time), the
    robot holds the position it has at that moment (position control, like a driver's brake). It also
    starts in that hold. With ``command_timeout`` = 0 there is no watchdog and the robot starts limp
    (zero torque). With ``command_timeout_periods`` > 0 too, effort commands are held to their own rhythm:
    the watchdog then trips when the latest effort command is older than that many command periods (the
    median of the latest 16 intervals between effort commands, simulated time), but not before
    ``min_command_timeout`` s, nor after ``command_timeout`` s. sim_bridge uses it with lockstep, where an
    effort command's simulated age measures the controller, not the machine's load.
  * suction gripper: ``attach`` welds an object to the tip link with a fixed constraint; ``detach``.

The URDF is loaded with the inertias of the file (``URDF_USE_INERTIA_FROM_FILE``: without it PyBullet
recomputes them from collision shapes) and links without ``<inertial>`` get mass 0 (PyBullet would give
them 1 kg), so that the dynamics equal manip_core's RobotModel (checked by the tests).
"""
from __future__ import annotations

import collections
import logging
import math
import os
import shutil
import struct
import tempfile
import xml.etree.ElementTree as ET
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .scene import Scene
from .transforms import invert, matrix_to_pose, pose_matrix, quat_to_matrix

_log = logging.getLogger("manip_sim.world")

MODE_HOLD, MODE_EFFORT, MODE_POSITION, MODE_VELOCITY = "hold", "effort", "position", "velocity"
DEFAULT_GRAVITY = 9.81
_UNLIMITED_EFFORT = 1.0e4   # N*m, used as motor force when the URDF gives no usable effort limit


def import_pybullet():
    """``import pybullet`` without its build-date line on stderr/stdout (the first import prints it)."""
    import sys
    if "pybullet" in sys.modules:
        return sys.modules["pybullet"]
    return _quietly(lambda: __import__("pybullet"))


def _captured(fn):
    """(fn(), what PyBullet's C code printed on file descriptors 1 and 2 meanwhile)."""
    import sys
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass
    saved = [os.dup(1), os.dup(2)]
    with tempfile.TemporaryFile() as tmp:
        try:
            os.dup2(tmp.fileno(), 1)
            os.dup2(tmp.fileno(), 2)
            result = fn()
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
        tmp.seek(0)
        return result, tmp.read(1 << 20).decode("utf-8", "replace")


def _quietly(fn):
    """Run fn with file descriptors 1 and 2 sent to /dev/null (PyBullet's C printouts), then restore them."""
    import sys
    for s in (sys.stdout, sys.stderr):
        try:
            s.flush()
        except Exception:  # noqa: BLE001
            pass
    saved = [os.dup(1), os.dup(2)]
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        return fn()
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved + [devnull]:
            os.close(fd)


class CommandError(ValueError):
    """A joint command was rejected (wrong length, NaN/inf, beyond the joint limits)."""


@dataclass
class JointStateSample:
    """positions (rad or m), velocities (rad/s or m/s), efforts (N*m or N) in model joint order."""

    positions: np.ndarray
    velocities: np.ndarray
    efforts: np.ndarray


@dataclass
class ObjectState:
    """Ground truth of one scene body in the base frame (SceneObject fields)."""

    name: str
    kind: int
    shape: str
    size: tuple
    position: np.ndarray
    orientation_xyzw: np.ndarray
    attached: bool


@dataclass
class GraspResult:
    success: bool
    message: str
    object_name: str = ""


# ------------------------------------------------------------------------------------------ URDF
@dataclass
class PreparedUrdf:
    path: str                 # the file PyBullet loads
    links_without_inertial: list
    has_visual: bool
    has_collision: bool


MESH_FORMATS = (".stl", ".obj", ".dae")


def _resolve_mesh(filename, src_dir):
    """Absolute path of a mesh file name (package://, file://, relative to the URDF's folder, absolute)."""
    from manip_core.package_uri import resolve_uri
    return resolve_uri(filename, src_dir)


def prepare_urdf(urdf_path, out_dir):
    """Write a copy of the URDF into out_dir for PyBullet: links without <inertial> get a zero mass,
    mesh file names become absolute. Returns a PreparedUrdf."""
    src = Path(urdf_path)
    tree = ET.parse(str(src))
    root = tree.getroot()
    missing = []
    for link in root.findall("link"):
        if link.find("inertial") is None:
            missing.append(link.get("name"))
            inertial = ET.SubElement(link, "inertial")
            ET.SubElement(inertial, "origin", xyz="0 0 0", rpy="0 0 0")
            ET.SubElement(inertial, "mass", value="0")
            ET.SubElement(inertial, "inertia", ixx="0", ixy="0", ixz="0", iyy="0", iyz="0", izz="0")
    for link in root.findall("link"):
        for kind in ("visual", "collision"):
            for mesh in link.findall(f"{kind}/geometry/mesh"):
                name = mesh.get("filename")
                if not name:
                    continue
                where = f"{src}: link '{link.get('name')}' <{kind}> mesh '{name}'"
                try:
                    path = _resolve_mesh(name, src.parent)
                except FileNotFoundError as exc:
                    raise ValueError(f"{where}: {exc}") from None
                if not os.path.isfile(path):
                    raise ValueError(f"{where}: no such file {path}")
                if not path.lower().endswith(MESH_FORMATS):
                    raise ValueError(f"{where}: PyBullet reads {', '.join(MESH_FORMATS)} meshes, not "
                                     f"{os.path.splitext(path)[1] or 'a file without extension'}")
                mesh.set("filename", path)
    has_visual = root.find("link/visual") is not None
    has_collision = root.find("link/collision") is not None
    out = Path(out_dir) / (src.stem + ".pybullet.urdf")
    tree.write(str(out))
    return PreparedUrdf(str(out), missing, has_visual, has_collision)


# -------------------------------------------------------------------------------------- textures
def write_png(path, rgb):
    """Write an (h, w, 3) uint8 array as an 8-bit RGB PNG (no dependency beyond zlib)."""
    rgb = np.ascontiguousarray(rgb, dtype=np.uint8)
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[i].tobytes() for i in range(h))

    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))


def noise_texture(body, texel=0.006):
    """A random grey-level pattern in the body's colour (about ``texel`` m per texel on its largest face),
    repeatable (seeded by the name): texture for stereo matching."""
    n = int(min(256, max(8, round(max(body.size) / texel))))
    rng = np.random.default_rng(zlib.crc32(body.name.encode()))
    shade = 0.45 + 0.55 * rng.random((n, n, 1))
    rgb = np.asarray(body.color[:3]) * 255.0 * shade
    return np.clip(rgb, 0, 255).astype(np.uint8)


# ---------------------------------------------------------------------------------- scene bodies
def create_scene_bodies(pb, client, scene: Scene, world_T_base, texture_dir=None):
    """Create the table, objects and obstacles in a PyBullet client. Returns {name: body id}.

    With texture_dir, bodies whose texture is "noise" get a noise texture (written there as PNG)."""
    ids = {}
    for body in scene.bodies:
        half = [s / 2 for s in body.size]
        if body.shape == "box":
            geom = dict(shapeType=pb.GEOM_BOX, halfExtents=half)
            vis = dict(shapeType=pb.GEOM_BOX, halfExtents=half)
        elif body.shape == "sphere":
            geom = dict(shapeType=pb.GEOM_SPHERE, radius=half[0])
            vis = dict(shapeType=pb.GEOM_SPHERE, radius=half[0])
        else:
            geom = dict(shapeType=pb.GEOM_CYLINDER, radius=half[0], height=body.size[2])
            vis = dict(shapeType=pb.GEOM_CYLINDER, radius=half[0], length=body.size[2])
        col_id = pb.createCollisionShape(physicsClientId=client, **geom)
        vis_id = pb.createVisualShape(rgbaColor=list(body.color), physicsClientId=client, **vis)
        pos, orn = matrix_to_pose(world_T_base @ pose_matrix(body.position, body.orientation_xyzw))
        bid = pb.createMultiBody(baseMass=body.mass, baseCollisionShapeIndex=col_id, baseVisualShapeIndex=vis_id,
                                 basePosition=pos.tolist(), baseOrientation=orn.tolist(), physicsClientId=client)
        pb.changeDynamics(bid, -1, lateralFriction=body.friction, physicsClientId=client)
        if texture_dir is not None and body.texture == "noise":
            path = os.path.join(texture_dir, f"tex_{len(ids)}.png")
            write_png(path, noise_texture(body))
            tex = pb.loadTexture(path, physicsClientId=client)
            if tex >= 0:
                pb.changeVisualShape(bid, -1, textureUniqueId=tex, rgbaColor=[1, 1, 1, body.color[3]],
                                     physicsClientId=client)
        ids[body.name] = bid
    return ids


def root_inertial_frame(pb, client, body):
    """Pose (4, 4) of a body's root inertial frame in its root link's URDF frame (PyBullet's base pose is the
    former's)."""
    dyn = pb.getDynamicsInfo(body, -1, physicsClientId=client)
    return pose_matrix(dyn[3], dyn[4])


def load_robot(pb, client, urdf_file, world_T_base, base_link):
    """Load the robot with a fixed base so that its link ``base_link`` lies at world_T_base.

    Returns (body id, {joint name: index}, {link name: index}); the root link has index -1."""
    rid, output = _captured(lambda: pb.loadURDF(urdf_file, useFixedBase=True, flags=pb.URDF_USE_INERTIA_FROM_FILE,
                                                physicsClientId=client))
    lines = [ln for ln in output.splitlines() if ln.strip()]
    if lines:   # e.g. an OBJ mesh's missing texture, once per mesh and search folder: one line for all of them
        text = [ln.strip() for ln in lines if not ln.strip().endswith("]:")] or [lines[0].strip()]
        _log.warning(f"PyBullet, loading {urdf_file}: {len(lines)} loader message line(s), first: {text[0]!r}")
    joints, links = {}, {pb.getBodyInfo(rid, physicsClientId=client)[0].decode(): -1}
    for i in range(pb.getNumJoints(rid, physicsClientId=client)):
        info = pb.getJointInfo(rid, i, physicsClientId=client)
        joints[info[1].decode()] = i
        links[info[12].decode()] = i
    if base_link not in links:
        raise ValueError(f"{urdf_file}: no link {base_link!r} (links: {', '.join(links)})")
    # PyBullet places a body by its root's inertial (centre-of-mass) frame, not by the root link's URDF frame:
    # the two differ when the root's <inertial> has an origin (the MBM Panda's panda_link0: z = 0.05 m).
    com_world = pose_matrix(*pb.getBasePositionAndOrientation(rid, physicsClientId=client))
    if links[base_link] == -1:
        base_world = com_world @ invert(root_inertial_frame(pb, client, rid))
    else:   # base_link hangs below the URDF root (e.g. world -> base_link)
        st = pb.getLinkState(rid, links[base_link], computeForwardKinematics=True, physicsClientId=client)
        base_world = pose_matrix(st[4], st[5])
    com_T_base = invert(com_world) @ base_world
    pos, orn = matrix_to_pose(world_T_base @ invert(com_T_base))
    pb.resetBasePositionAndOrientation(rid, pos.tolist(), orn.tolist(), physicsClientId=client)
    return rid, joints, links


def follower_joints(tree_joints, actuated, others):
    """How each moving, non-actuated joint of ``others`` moves, as manip_core's compiled model has it:
    {name: (actuated joint name, multiplier, offset)} for a mimic (chain) of an actuated joint, q = multiplier *
    q_actuated + offset; {name: (None, 0.0, value)} for one welded at a fixed value (0, or the value its mimic
    chain gives from a welded joint). tree_joints: {name: manip_core.tree.Joint}; the model has already
    refused mimic cycles."""
    actuated = set(actuated)
    out = {}
    for name in others:
        multiplier, offset, j, seen = 1.0, 0.0, tree_joints.get(name), {name}
        while j is not None and j.mimic is not None and j.mimic.joint not in actuated and j.mimic.joint not in seen:
            multiplier, offset = multiplier * j.mimic.multiplier, multiplier * j.mimic.offset + offset
            seen.add(j.mimic.joint)
            j = tree_joints.get(j.mimic.joint)
        if j is not None and j.mimic is not None and j.mimic.joint in actuated:
            out[name] = (j.mimic.joint, multiplier * j.mimic.multiplier, multiplier * j.mimic.offset + offset)
        else:   # the end of the chain is welded at 0: q = multiplier * 0 + offset
            out[name] = (None, 0.0, offset)
    return out


def surface_distance(point, body, position, orientation_xyzw):
    """Distance (m) from a point to the surface of a body (0 inside); all in one frame."""
    local = quat_to_matrix(orientation_xyzw).T @ (np.asarray(point) - np.asarray(position))
    half = np.asarray(body.size) / 2
    if body.shape == "box":
        return float(np.linalg.norm(np.maximum(np.abs(local) - half, 0.0)))
    if body.shape == "sphere":
        return max(float(np.linalg.norm(local)) - half[0], 0.0)
    radial = max(math.hypot(local[0], local[1]) - half[0], 0.0)
    axial = max(abs(local[2]) - half[2], 0.0)
    return math.hypot(radial, axial)


# ------------------------------------------------------------------------------------------ World
class World:
    """The simulated robot cell. Not thread-safe: call it from one thread (or under a lock)."""

    def __init__(self, scene: Scene, *, time_step=1.0 / 500.0, gui=False, command_timeout=0.2,
                 command_timeout_periods=0.0, min_command_timeout=0.0,
                 gravity=DEFAULT_GRAVITY, model=None, on_event=None):
        pb = import_pybullet()
        from manip_core import RobotModel

        if not (time_step > 0 and math.isfinite(time_step)):
            raise ValueError(f"time_step must be > 0 s, got {time_step}")
        if command_timeout < 0:
            raise ValueError(f"command_timeout must be >= 0 s (0: no watchdog), got {command_timeout}")
        for name, value in (("command_timeout_periods", command_timeout_periods),
                            ("min_command_timeout", min_command_timeout)):
            if not (value >= 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be finite and >= 0, got {value}")
        self._pb = pb
        self.scene = scene
        self.dt = float(time_step)
        self.command_timeout = float(command_timeout)
        self.command_timeout_periods = float(command_timeout_periods)
        self.min_command_timeout = float(min_command_timeout)
        self._effort_times = collections.deque(maxlen=17)   # simulated times of the latest effort commands (s)
        self._on_event = on_event or (lambda level, text: _log.log(level, text))
        self.model = model or RobotModel.from_urdf(scene.robot.urdf, scene.robot.base_link, scene.robot.tip_link)
        self.joint_names = list(self.model.joint_names)
        self.dof = len(self.joint_names)
        self.base_link = self.model.base_link
        self.tip_link = self.model.tip_link
        lim = np.array(self.model.effort_limits, dtype=float)
        self.effort_limits = np.where(np.isfinite(lim) & (lim > 0), lim, np.inf)
        self._motor_force = np.where(np.isfinite(self.effort_limits), self.effort_limits, _UNLIMITED_EFFORT)
        self.world_T_base = pose_matrix(scene.robot.base_position, scene.robot.base_orientation_xyzw)
        self.base_T_world = invert(self.world_T_base)
        self.gravity_world = np.array([0.0, 0.0, -float(gravity)])
        self.gravity_base = self.base_T_world[:3, :3] @ self.gravity_world

        self.workdir = tempfile.mkdtemp(prefix="manip_sim_")
        self.client = None
        try:
            self.urdf = prepare_urdf(scene.robot.urdf, self.workdir)
            self.client = pb.connect(pb.GUI if gui else pb.DIRECT)
            if self.client < 0:
                raise RuntimeError("PyBullet could not connect" + (" (GUI needs a display)" if gui else ""))
            c = self.client
            pb.setGravity(*self.gravity_world, physicsClientId=c)
            pb.setPhysicsEngineParameter(fixedTimeStep=self.dt, numSubSteps=0, physicsClientId=c)
            self.robot, self._joint_index, self._link_index = load_robot(
                pb, c, self.urdf.path, self.world_T_base, self.base_link)
            missing = [n for n in self.joint_names if n not in self._joint_index]
            if missing:
                raise ValueError(f"PyBullet's {scene.robot.urdf} lacks joints {missing}")
            self._idx = [self._joint_index[n] for n in self.joint_names]
            self._tip_index = self._link_index[self.tip_link]
            self._all_movable = [i for i in range(pb.getNumJoints(self.robot, physicsClientId=c))
                                 if pb.getJointInfo(self.robot, i, physicsClientId=c)[2] != pb.JOINT_FIXED]
            for i in range(-1, pb.getNumJoints(self.robot, physicsClientId=c)):
                pb.changeDynamics(self.robot, i, linearDamping=0.0, angularDamping=0.0, jointDamping=0.0,
                                  physicsClientId=c)
            self._disable_motors(self._all_movable)
            self._hold_off_chain_joints()
            self.bodies = create_scene_bodies(pb, c, scene, self.world_T_base,
                                              texture_dir=self.workdir if gui else None)
            self._specs = {b.name: b for b in scene.bodies}
            q0 = scene.initial_joint_positions(self.joint_names)
        except Exception:
            self.close()
            raise
        self.time = 0.0
        self.steps = 0
        self._attached = None      # (name, constraint id)
        self._tau = np.zeros(self.dof)
        self._q_target = np.array(q0, dtype=float)
        self._qd_target = np.zeros(self.dof)
        self._last_command_time = 0.0
        self.watchdog_trips = 0
        self.tripped_from = None   # the mode the watchdog's hold interrupted, until the next command
        self.set_joint_positions(q0)
        if self.command_timeout > 0:
            self.mode = MODE_HOLD
        else:
            self.mode = MODE_EFFORT

    # ---------------------------------------------------------------------------------- internals
    def _hold_off_chain_joints(self):
        """Moving joints that are not actuated, as manip_core's model has them (manip_core.compile): a mimic joint
        of an actuated joint (on the chain or off it) follows it, q = multiplier * q_master + offset, through a
        PyBullet gear constraint (the coupled dynamics the model has: tau = A^T tau_phys); every other one
        (fingers, a second arm...) is welded in the model at 0, or at its mimic value, and held there (position
        control, its URDF effort limit as force) instead of left limp."""
        pb, c = self._pb, self.client
        tree_joints = getattr(getattr(self.model, "tree", None), "joints", {}) or {}
        names = {i: pb.getJointInfo(self.robot, i, physicsClientId=c)[1].decode() for i in self._all_movable}
        follow = follower_joints(tree_joints, self.joint_names, [names[i] for i in self._all_movable
                                                                  if i not in self._idx])
        held, targets, forces, coupled = [], [], [], []
        self._followers = []    # (joint index, actuated index k, multiplier, offset)
        for i in self._all_movable:
            if i in self._idx:
                continue
            master, multiplier, offset = follow[names[i]]
            if master is None:
                info = pb.getJointInfo(self.robot, i, physicsClientId=c)
                held.append(i)
                targets.append(offset)
                forces.append(float(info[10]) if info[10] and info[10] > 0 else _UNLIMITED_EFFORT)
                pb.resetJointState(self.robot, i, offset, 0.0, physicsClientId=c)
                continue
            k = self.joint_names.index(master)
            # gear row: q_i + ratio * q_master = target, i.e. q_i = multiplier * q_master + offset
            cid = pb.createConstraint(self.robot, i, self.robot, self._idx[k], pb.JOINT_GEAR, [0, 0, 1], [0, 0, 0],
                                      [0, 0, 0], physicsClientId=c)
            pb.changeConstraint(cid, gearRatio=-multiplier, relativePositionTarget=offset, erp=0.2,
                                maxForce=_UNLIMITED_EFFORT, physicsClientId=c)
            self._followers.append((i, k, multiplier, offset))
            coupled.append(f"{names[i]} = {multiplier:g} * {master} + {offset:g}")
        if held:
            pb.setJointMotorControlArray(self.robot, held, pb.POSITION_CONTROL, targetPositions=targets,
                                         forces=forces, physicsClientId=c)
            self._on_event(logging.INFO, f"joints outside the {self.base_link} -> {self.tip_link} chain held at 0 "
                                         f"or their mimic value (welded in the model): "
                                         f"{', '.join(names[i] for i in held)}")
        if coupled:
            self._on_event(logging.INFO, f"mimic joints coupled to the actuated joints: {'; '.join(coupled)}")

    def _disable_motors(self, indices):
        self._pb.setJointMotorControlArray(self.robot, list(indices), self._pb.VELOCITY_CONTROL,
                                           targetVelocities=[0.0] * len(indices), forces=[0.0] * len(indices),
                                           physicsClientId=self.client)

    def _vector(self, values, what):
        try:
            a = np.asarray(values, dtype=float)
        except (TypeError, ValueError):
            raise CommandError(f"{what}: not a list of numbers") from None
        if a.ndim != 1 or a.shape[0] != self.dof:
            n = a.shape[0] if a.ndim == 1 else f"shape {a.shape}"
            raise CommandError(f"{what}: expected {self.dof} values (joints {', '.join(self.joint_names)}), "
                               f"got {n}")
        if not np.all(np.isfinite(a)):
            raise CommandError(f"{what}: holds NaN or inf at joint(s) "
                               f"{[self.joint_names[i] for i in np.flatnonzero(~np.isfinite(a))]}")
        return a

    # Checks without touching PyBullet (safe from any thread): what apply_efforts / set_position_targets
    # would reject.
    def check_efforts(self, tau):
        """The effort command as an array; raises CommandError (wrong length, NaN/inf)."""
        return self._vector(tau, "effort command")

    def check_positions(self, q):
        """The position command as an array; raises CommandError (wrong length, NaN/inf, beyond limits)."""
        q = self._vector(q, "position command")
        lo, hi = np.asarray(self.model.joint_lower), np.asarray(self.model.joint_upper)
        bad = (q < lo - 1e-9) | (q > hi + 1e-9)
        if bad.any():
            raise CommandError(f"position command beyond the joint limits at "
                               f"{[self.joint_names[i] for i in np.flatnonzero(bad)]}")
        return q

    def check_velocities(self, qd):
        """The velocity command as an array; raises CommandError (wrong length, NaN/inf, beyond the URDF
        velocity limits)."""
        qd = self._vector(qd, "velocity command")
        limits = np.asarray(self.model.velocity_limits, dtype=float)
        bad = np.abs(qd) > limits + 1e-9
        if bad.any():
            raise CommandError(f"velocity command beyond the velocity limits at "
                               f"{[self.joint_names[i] for i in np.flatnonzero(bad)]}")
        return qd

    # ----------------------------------------------------------------------------------- commands
    def apply_efforts(self, tau):
        """Command joint efforts (N*m or N, model order), applied every step until the next command (or the
        watchdog). Values beyond the URDF effort limits are clipped. Returns the boolean mask of clipped
        joints. Raises CommandError (keeping the previous command) for a wrong length or NaN/inf."""
        tau = self.check_efforts(tau)
        clipped = np.abs(tau) > self.effort_limits
        if self.mode != MODE_EFFORT:
            self._disable_motors(self._idx)
            self.mode = MODE_EFFORT
        self._tau = np.clip(tau, -self.effort_limits, self.effort_limits)
        self._last_command_time = self.time
        self._effort_times.append(self.time)
        self.tripped_from = None
        if clipped.any():
            names = [self.joint_names[i] for i in np.flatnonzero(clipped)]
            self._on_event(logging.DEBUG, f"effort command clipped to the limits at {names}")
        return clipped

    def set_position_targets(self, q):
        """Command joint positions (rad or m, model order): PyBullet position control with the effort limits
        as maximum force. Raises CommandError for a wrong length, NaN/inf or targets beyond the limits."""
        q = self.check_positions(q)
        self._q_target = q.copy()
        self.mode = MODE_POSITION
        self._last_command_time = self.time
        self._effort_times.clear()
        self.tripped_from = None

    def set_velocity_targets(self, qd):
        """Command joint velocities (rad/s or m/s, model order): PyBullet velocity control with the effort
        limits as maximum force. Raises CommandError for a wrong length, NaN/inf or beyond the velocity limits."""
        qd = self.check_velocities(qd)
        self._qd_target = qd.copy()
        self.mode = MODE_VELOCITY
        self._last_command_time = self.time
        self._effort_times.clear()
        self.tripped_from = None

    @property
    def last_command_time(self):
        """Simulated time (s) of the latest accepted joint command."""
        return self._last_command_time

    @property
    def command_period(self):
        """Median of the latest 16 intervals (s, simulated) between effort commands; None before there are 16."""
        t = self._effort_times
        return float(np.median(np.diff(np.asarray(t)))) if len(t) == t.maxlen else None

    @property
    def watchdog_timeout(self):
        """Command age (s, simulated) beyond which the watchdog holds the arm now: command_timeout; in effort
        mode with command_timeout_periods > 0 and a measured command period, that many periods (at least
        min_command_timeout) when shorter. 0: no watchdog."""
        timeout = self.command_timeout
        period = self.command_period if self.command_timeout_periods > 0 and self.mode == MODE_EFFORT else None
        if timeout > 0 and period is not None:
            timeout = min(timeout, max(self.command_timeout_periods * period, self.min_command_timeout))
        return timeout

    def hold(self):
        """Hold the current position (what the watchdog does)."""
        self._q_target = self.joint_state().positions
        self.mode = MODE_HOLD

    def set_joint_positions(self, q, velocities=None):
        """Teleport the joints (model order), e.g. for tests; the hold target follows."""
        q = self._vector(q, "joint positions")
        qd = np.zeros(self.dof) if velocities is None else self._vector(velocities, "joint velocities")
        for i, idx in enumerate(self._idx):
            self._pb.resetJointState(self.robot, idx, q[i], qd[i], physicsClientId=self.client)
        for idx, k, multiplier, offset in self._followers:
            self._pb.resetJointState(self.robot, idx, multiplier * q[k] + offset, multiplier * qd[k],
                                     physicsClientId=self.client)
        self._q_target = q.copy()

    # -------------------------------------------------------------------------------------- stepping
    def step(self, n=1):
        """Advance the simulation by n fixed steps (n * dt seconds)."""
        pb, c = self._pb, self.client
        for _ in range(int(n)):
            timeout = self.watchdog_timeout
            age = self.time - self._last_command_time
            if timeout > 0 and self.mode != MODE_HOLD and age > timeout + 1e-12:
                period = self.command_period if self.mode == MODE_EFFORT else None
                why = ("command_timeout" if timeout >= self.command_timeout or period is None else
                       f"{self.command_timeout_periods:g} observed command periods of {1e3 * period:.1f} ms, at "
                       f"least min_command_timeout {self.min_command_timeout:g} s")
                self.tripped_from = self.mode
                self.hold()
                self.watchdog_trips += 1
                self._on_event(logging.WARNING, f"watchdog: no joint command for {age:.3f} s (the last: "
                                                f"{self.tripped_from}; more than {timeout:g} s: {why}), holding "
                                                f"the current position")
            if self.mode == MODE_EFFORT:
                pb.setJointMotorControlArray(self.robot, self._idx, pb.TORQUE_CONTROL, forces=self._tau.tolist(),
                                             physicsClientId=c)
            elif self.mode == MODE_VELOCITY:
                pb.setJointMotorControlArray(self.robot, self._idx, pb.VELOCITY_CONTROL,
                                             targetVelocities=self._qd_target.tolist(),
                                             forces=self._motor_force.tolist(), physicsClientId=c)
            else:
                pb.setJointMotorControlArray(self.robot, self._idx, pb.POSITION_CONTROL,
                                             targetPositions=self._q_target.tolist(),
                                             targetVelocities=[0.0] * self.dof,
                                             forces=self._motor_force.tolist(), physicsClientId=c)
            pb.stepSimulation(physicsClientId=c)
            self.steps += 1
            self.time = self.steps * self.dt

    # ------------------------------------------------------------------------------------- sensing
    def joint_state(self):
        """Measured joint positions, velocities and efforts (the commanded, clipped torque in effort mode;
        the motor torque PyBullet applied in the last step in position/hold mode)."""
        states = self._pb.getJointStates(self.robot, self._idx, physicsClientId=self.client)
        q = np.array([s[0] for s in states])
        qd = np.array([s[1] for s in states])
        if self.mode == MODE_EFFORT:
            tau = self._tau.copy()
        else:
            tau = np.array([s[3] for s in states])
        return JointStateSample(q, qd, tau)

    def link_pose(self, link):
        """Pose (4, 4) of a robot link frame in the base frame."""
        idx = self._link_index[link]
        if idx == -1:
            T = (pose_matrix(*self._pb.getBasePositionAndOrientation(self.robot, physicsClientId=self.client))
                 @ invert(root_inertial_frame(self._pb, self.client, self.robot)))
        else:
            st = self._pb.getLinkState(self.robot, idx, computeForwardKinematics=True, physicsClientId=self.client)
            T = pose_matrix(st[4], st[5])
        return self.base_T_world @ T

    def tool_pose(self):
        """Pose (4, 4) of the tip link (the suction point) in the base frame."""
        return self.link_pose(self.tip_link)

    def _body_world(self, name):
        return self._pb.getBasePositionAndOrientation(self.bodies[name], physicsClientId=self.client)

    def object_states(self):
        """Ground truth of every scene body (table, objects, obstacles) in the base frame."""
        out = []
        held = self._attached[0] if self._attached else None
        for body in self.scene.bodies:
            pos, orn = matrix_to_pose(self.base_T_world @ pose_matrix(*self._body_world(body.name)))
            out.append(ObjectState(body.name, body.kind, body.shape, body.size, pos, orn, body.name == held))
        return out

    def render_state(self):
        """What a mirror of this world (the render process) needs: joint positions by PyBullet index and the
        world poses of the movable bodies."""
        idx = self._all_movable
        states = self._pb.getJointStates(self.robot, idx, physicsClientId=self.client) if idx else []
        joints = [(i, s[0]) for i, s in zip(idx, states)]
        bodies = {b.name: self._body_world(b.name) for b in self.scene.objects}
        return {"joints": joints, "bodies": bodies}

    # --------------------------------------------------------------------------------- suction
    @property
    def attached(self):
        """Name of the object held by the suction gripper, or None."""
        return self._attached[0] if self._attached else None

    def object_distance(self, name):
        """Distance (m) from the tool tip (tip link origin) to the surface of a body."""
        tip = self.tool_pose()[:3, 3]
        pos, orn = matrix_to_pose(self.base_T_world @ pose_matrix(*self._body_world(name)))
        return surface_distance(tip, self._specs[name], pos, orn)

    def attach(self, name="", max_distance=None):
        """Suction on: weld an object to the tip link where it is now. name "" picks the nearest object;
        the object must be within max_distance (m, default the scene's gripper.max_distance) of the tool
        tip. Only objects (not obstacles or the table) can be attached."""
        pb, c = self._pb, self.client
        max_distance = self.scene.grasp_max_distance if not max_distance or max_distance <= 0 else max_distance
        if self._attached:
            return GraspResult(False, f"already holding {self._attached[0]!r}; release it first", self._attached[0])
        objects = [b.name for b in self.scene.objects]
        if name:
            if name not in self._specs:
                return GraspResult(False, f"no object {name!r} (objects: {', '.join(objects) or 'none'})", name)
            if name not in objects:
                return GraspResult(False, f"{name!r} is not an object to pick (obstacle or table)", name)
            candidates = [name]
        else:
            candidates = objects
        if not candidates:
            return GraspResult(False, "the scene has no objects to pick")
        dist = {n: self.object_distance(n) for n in candidates}
        best = min(dist, key=dist.get)
        if dist[best] > max_distance:
            return GraspResult(False, f"{best!r} is {dist[best]:.3f} m from the tool tip, more than "
                                      f"max_distance {max_distance:.3f} m", best if name else "")
        # Constraint frames are relative to the parent link's centre-of-mass frame and the child's base.
        if self._tip_index == -1:
            com = pb.getBasePositionAndOrientation(self.robot, physicsClientId=c)
        else:
            st = pb.getLinkState(self.robot, self._tip_index, computeForwardKinematics=True, physicsClientId=c)
            com = (st[0], st[1])
        rel = invert(pose_matrix(*com)) @ pose_matrix(*self._body_world(best))
        p_rel, q_rel = matrix_to_pose(rel)
        cid = pb.createConstraint(self.robot, self._tip_index, self.bodies[best], -1, pb.JOINT_FIXED, [0, 0, 0],
                                  parentFramePosition=p_rel.tolist(), childFramePosition=[0, 0, 0],
                                  parentFrameOrientation=q_rel.tolist(), physicsClientId=c)
        self._attached = (best, cid)
        return GraspResult(True, f"attached {best!r} ({dist[best]:.3f} m from the tool tip)", best)

    def detach(self):
        """Suction off: release the held object (success also when nothing was held)."""
        if not self._attached:
            return GraspResult(True, "nothing was attached")
        name, cid = self._attached
        self._pb.removeConstraint(cid, physicsClientId=self.client)
        self._attached = None
        return GraspResult(True, f"released {name!r}", name)

    # ------------------------------------------------------------------------------------ cleanup
    def close(self):
        if self.client is not None:
            try:
                self._pb.disconnect(physicsClientId=self.client)
            except Exception:  # noqa: BLE001 (already disconnected)
                pass
            self.client = None
        if self.workdir and os.path.isdir(self.workdir):
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
