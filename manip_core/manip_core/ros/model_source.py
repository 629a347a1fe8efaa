"""RobotModelSource: the robot model of a node, from its start-up parameters or the robot_description topic.

The robot-description contract (docs/graph.md, as in ROS 2):

* The ``robot_description`` topic (std_msgs/String, reliable, transient local, as published by model_server)
  and the ``robot_description`` parameter carry the description's TEXT: URDF (first non-space character
  ``<``) or Isaac ``kinematic.json`` (``{``). Anything else (a file path, a device name, an empty string,
  other text) is refused with one log line naming what came; nothing from the ROS graph is ever opened as a
  file. A path is read only from the ``urdf_path`` parameter, at start-up (read-only afterwards), and only
  when it names a regular file.
* At most :data:`MAX_DESCRIPTION_BYTES` (UTF-8) per description, on every interface.
* A description that gives the same model as the current one (a transient-local republish, a late joiner)
  is a no-op. A different robot is refused while ``busy()`` names a reason (the controller: a trajectory is
  being followed); otherwise it replaces the model (logged).
* Topic descriptions are parsed by a worker thread of this object (the newest one wins), never on the
  executor: a control loop or a service is never held up by a large description. The parsed model is then
  installed on the executor (a guard condition), where ``on_model(model, text)`` is called.
* Parse errors are one line (manip_core.errors.ModelError: source, element, reason); lists in them are cut
  to the first few items and a count.

Parameters declared: ``urdf_path`` (start-up only), ``robot_description`` (text), ``base_link``,
``tip_link`` (empty: the root and the end of the longest chain). With both description parameters empty the
node waits for the topic.
"""
import os
import stat
import threading

import numpy as np
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

from ..errors import ModelError

DESCRIPTION_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
MAX_DESCRIPTION_BYTES = 4 * 1024 * 1024
"""Largest robot description accepted, in bytes of UTF-8 (4 MiB; a UR5 URDF is about 12 kB)."""


def _declare(node, name, default, description, read_only=False):
    from rcl_interfaces.msg import ParameterDescriptor
    if not node.has_parameter(name):
        node.declare_parameter(name, default, ParameterDescriptor(description=description, read_only=read_only))
    return node.get_parameter(name).value


def _preview(text, n=40):
    head = text[:n].replace("\n", "\\n")
    return repr(head + ("..." if len(text) > n else ""))


def description_problem(text):
    """Why ``text`` is not acceptable as robot-description text (cheap checks only), or None."""
    if not isinstance(text, str):
        return f"not a string ({type(text).__name__})"
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_DESCRIPTION_BYTES:
        return f"{size} bytes, more than the maximum of {MAX_DESCRIPTION_BYTES} bytes"
    body = text.lstrip("\ufeff \t\r\n")
    if not body:
        return "empty"
    if body[0] not in "<{":
        return (f"not URDF or kinematic.json text (starts with {_preview(body)}); a file path is read only from "
                f"the urdf_path parameter at start-up")
    return None


def parse_description(text, base_link=None, tip_link=None, source="robot_description"):
    """RobotModel from description text (URDF or kinematic.json); ModelError naming ``source`` otherwise."""
    from ..model import RobotModel
    problem = description_problem(text)
    if problem:
        raise ModelError(source, "", problem)
    body = text.lstrip("\ufeff \t\r\n")
    try:
        if body[0] == "{":
            from ..kinematic_json import parse_kinematic_json
            return RobotModel(parse_kinematic_json(body), base_link, tip_link)
        return RobotModel.from_urdf(body, base_link=base_link, tip_link=tip_link)
    except ModelError as e:
        raise ModelError(source, e.element, _one_line(e.reason)) from None


def _one_line(reason, limit=400):
    reason = " ".join(str(reason).split())
    return reason if len(reason) <= limit else f"{reason[:limit]}... ({len(reason) - limit} more characters)"


def read_description_file(path):
    """Text of a description file given at start-up: a regular file of at most MAX_DESCRIPTION_BYTES."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise ModelError(path, "", f"cannot read file: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ModelError(path, "", "not a regular file")
    if st.st_size > MAX_DESCRIPTION_BYTES:
        raise ModelError(path, "", f"{st.st_size} bytes, more than the maximum of {MAX_DESCRIPTION_BYTES} bytes")
    try:
        with open(path, "rb") as f:
            return f.read(MAX_DESCRIPTION_BYTES + 1).decode("utf-8")
    except OSError as e:
        raise ModelError(path, "", f"cannot read file: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise ModelError(path, "", f"not UTF-8 text: {e.reason}") from None


def _resolve_start_up_path(path):
    """A ``package://`` or ``file://`` URI given as urdf_path (start-up only) -> the file's path
    (manip_core.package_uri search path); any other path as it is."""
    if path.startswith(("package://", "file://")):
        from ..package_uri import resolve_uri
        try:
            return resolve_uri(path)
        except FileNotFoundError as e:
            raise ModelError(path, "", str(e)) from None
    return path


def model_signature(model):
    """What makes two models the same robot for a controller: chain, joints, limits, kinematics, inertia."""
    arrays = (model.joint_lower, model.joint_upper, model.velocity_limits, model.effort_limits,
              model.screw_axes_space, model.home, model.link_masses)
    return (model.name, model.base_link, model.tip_link, tuple(model.joint_names), tuple(model.joint_types),
            tuple(np.asarray(a, dtype=float).tobytes() for a in arrays))


class RobotModelSource:
    """Holds ``model`` (RobotModel or None) and ``urdf_text``; calls ``on_model(model, text)`` when one arrives
    (from inside the constructor at start-up, else on the node's executor). ``busy()``: None, or the reason
    why the robot may not change now (a different robot is then refused)."""

    def __init__(self, node, on_model=None, subscribe=True, busy=None):
        self._node = node
        self._on_model = on_model
        self._busy = busy
        self.model = None
        self.urdf_text = ""
        self._signature = None
        self._ready = threading.Event()
        self._lock = threading.Lock()
        self._pending_text = None       # newest topic text waiting for the parser thread
        self._parsed = None             # (model, text) parsed, waiting to be installed on the executor
        self._wake = threading.Condition(self._lock)
        self._closed = False
        self._thread = None
        self._guard = None
        path = _declare(node, "urdf_path", "", "path (or package:// URI) of a URDF or *.kinematic.json file, read "
                                               "at start-up only (alternative to robot_description)", read_only=True)
        text = _declare(node, "robot_description", "", "URDF or kinematic.json TEXT of the robot (never a path; "
                                                       "files: urdf_path)")
        self.base_link = _declare(node, "base_link", "", "base link of the chain (empty: the URDF root)") or None
        self.tip_link = _declare(node, "tip_link", "", "tip link of the chain (empty: longest chain)") or None
        self._sub = None
        if text or path:
            try:
                if text:
                    self.load(text, source="robot_description parameter")
                else:
                    self.load(read_description_file(_resolve_start_up_path(path)), source=path)
            except ModelError as e:
                node.get_logger().error(f"robot model not loaded: {e}")
        if self.model is None and subscribe:
            node.get_logger().info("waiting for the robot_description topic")
        if subscribe:
            self._guard = node.create_guard_condition(self._install_parsed)
            self._thread = threading.Thread(target=self._parse_loop, name="robot_description_parser", daemon=True)
            self._thread.start()
            self._sub = node.create_subscription(String, "robot_description", self._on_description,
                                                 DESCRIPTION_QOS)

    # --------------------------------------------------------------------------------- synchronous
    def load(self, text, source="robot_description"):
        """Parse and install a description (start-up, model_server's parameter); ModelError when malformed.
        Returns the model (the current one when the text gives the same robot)."""
        model = parse_description(text, self.base_link, self.tip_link, source)
        self._install(model, text, source)
        return self.model

    def _install(self, model, text, source):
        signature = model_signature(model)
        if signature == self._signature:
            self.urdf_text = text
            return False
        self.model, self.urdf_text, self._signature = model, text, signature
        self._node.get_logger().info(f"robot model from {source}: {model.name}, {model.base_link} -> "
                                     f"{model.tip_link}, {model.dof} joints ({', '.join(model.joint_names)})")
        self._ready.set()
        if self._on_model is not None:
            self._on_model(model, text)
        return True

    def check_change(self, model):
        """None when ``model`` may replace the current one now, else the reason (one line)."""
        if self.model is None or model_signature(model) == self._signature:
            return None
        why = self._busy() if self._busy is not None else None
        if why:
            return f"a different robot ({model.name}, {model.dof} joints) while {why}"
        return None

    # ------------------------------------------------------------------------------------- topic
    def _on_description(self, msg):
        text = msg.data
        problem = description_problem(text)
        if problem:
            self._reject(problem)
            return
        if self.model is not None and text == self.urdf_text:
            return  # the same text again (transient local republish): nothing to do
        with self._lock:
            self._pending_text = text
            self._wake.notify()

    def _reject(self, reason):
        current = f"; keeping {self.model.name}" if self.model is not None else ""
        self._node.get_logger().error(f"rejected robot_description: {reason}{current}")

    def _parse_loop(self):
        while True:
            with self._lock:
                while self._pending_text is None and not self._closed:
                    self._wake.wait()
                if self._closed:
                    return
                text, self._pending_text = self._pending_text, None
            try:
                model = parse_description(text, self.base_link, self.tip_link, "robot_description topic")
            except ModelError as e:
                self._reject(str(e))
                continue
            except Exception as e:  # noqa: BLE001  (a bug in a parser must not end the thread silently)
                self._reject(f"{type(e).__name__}: {_one_line(e)}")
                continue
            with self._lock:
                self._parsed = (model, text)
            try:
                self._guard.trigger()
            except Exception:  # noqa: BLE001  (the node is being destroyed)
                return

    def _install_parsed(self):
        with self._lock:
            parsed, self._parsed = self._parsed, None
        if parsed is None:
            return
        model, text = parsed
        if self.model is not None and model_signature(model) == self._signature:
            self._node.get_logger().debug("robot_description: the same robot again, nothing changed")
            self.urdf_text = text
            return
        refused = self.check_change(model)
        if refused:
            self._reject(refused)
            return
        self._install(model, text, "robot_description topic")

    def close(self):
        """Stop the parser thread (it is a daemon thread: exiting without close is fine too)."""
        with self._lock:
            self._closed = True
            self._wake.notify()

    def wait(self, timeout_s):
        """True once a model is loaded (the caller must spin the node meanwhile in another thread)."""
        return self._ready.wait(timeout_s)
