"""Simulated stereo camera: an ideal, rectified pinhole pair rendered with PyBullet's TinyRenderer.

No rclpy here. Conventions (ROS camera_info / OpenCV):
  * the left optical frame (z forward, x right, y down) is at ``position`` / ``orientation_xyzw`` in the base
    frame; the right camera has the same orientation, shifted by ``baseline`` along the left optical x;
  * square pixels, fx = fy = (width / 2) / tan(hfov / 2), principal point at the image centre
    (cx = (width - 1) / 2, cy = (height - 1) / 2: pixel centres are integers);
  * K = [fx 0 cx; 0 fy cy; 0 0 1]; P_left = [K | 0]; P_right = [K | (-fx * baseline, 0, 0)];
  * a point at depth Z has disparity u_left - u_right = fx * baseline / Z.

PyBullet's TinyRenderer samples pixels at their corners; the projection matrix is shifted by half a pixel
so that the rendered images are exactly those of K (see ``projection_matrix``).

Rendering costs about 0.1 s per 640x480 image on a CPU, so the simulator does it in a separate
process (RenderProcess) with its own PyBullet client that mirrors the scene (joint positions and object
poses come over a pipe, images go back), never in the physics loop.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from .transforms import invert, pose_matrix


@dataclass(frozen=True)
class StereoCamera:
    position: tuple                 # left optical centre in the base frame (m)
    orientation_xyzw: tuple         # left optical frame in the base frame
    baseline: float = 0.12          # m
    width: int = 640
    height: int = 480
    hfov_deg: float = 70.0
    near: float = 0.05              # clipping planes of the renderer (m)
    far: float = 5.0
    frame_id: str = "stereo_left_optical"
    right_frame_id: str = "stereo_right_optical"

    def __post_init__(self):
        if not (self.width > 0 and self.height > 0):
            raise ValueError(f"image size must be positive, got {self.width}x{self.height}")
        if not (0.0 < self.hfov_deg < 180.0):
            raise ValueError(f"horizontal_fov_deg must be in (0, 180), got {self.hfov_deg}")
        if not (self.baseline > 0):
            raise ValueError(f"stereo_baseline must be > 0 m, got {self.baseline}")
        if len(self.position) != 3 or len(self.orientation_xyzw) != 4:
            raise ValueError("camera_position needs 3 values and camera_orientation_xyzw 4")
        if abs(np.linalg.norm(self.orientation_xyzw) - 1.0) > 1e-3:
            raise ValueError(f"camera_orientation_xyzw must be a unit quaternion, got {self.orientation_xyzw}")
        if not (0 < self.near < self.far):
            raise ValueError(f"need 0 < near < far, got {self.near}, {self.far}")

    # ------------------------------------------------------------------------------ intrinsics
    @property
    def fx(self):
        return (self.width / 2.0) / math.tan(math.radians(self.hfov_deg) / 2.0)

    @property
    def fy(self):
        return self.fx

    @property
    def cx(self):
        return (self.width - 1) / 2.0

    @property
    def cy(self):
        return (self.height - 1) / 2.0

    @property
    def vfov_deg(self):
        return math.degrees(2.0 * math.atan((self.height / 2.0) / self.fy))

    def K(self):
        return np.array([[self.fx, 0.0, self.cx], [0.0, self.fy, self.cy], [0.0, 0.0, 1.0]])

    def P(self, right=False):
        P = np.zeros((3, 4))
        P[:, :3] = self.K()
        if right:
            P[0, 3] = -self.fx * self.baseline
        return P

    # ------------------------------------------------------------------------------ extrinsics
    def pose(self, right=False):
        """Optical frame (4, 4) of the left (or right) camera in the base frame."""
        T = pose_matrix(self.position, self.orientation_xyzw)
        if right:
            T[:3, 3] += self.baseline * T[:3, 0]
        return T

    def project(self, point_base, right=False):
        """(u, v, Z): pixel coordinates and depth of a base-frame point in the left (or right) image."""
        p = invert(self.pose(right)) @ np.append(np.asarray(point_base, dtype=float), 1.0)
        x, y, z = p[:3]
        return self.fx * x / z + self.cx, self.fy * y / z + self.cy, z

    def view_matrix(self, world_T_base, right=False):
        """OpenGL view matrix (16 floats, column-major) of a camera for PyBullet's getCameraImage."""
        T = np.asarray(world_T_base) @ self.pose(right)
        # OpenGL camera: x right, y up, looking along -z; optical: x right, y down, z forward.
        gl_T_world = invert(T @ np.diag([1.0, -1.0, -1.0, 1.0]))
        return gl_T_world.T.reshape(-1).tolist()

    def projection_matrix(self):
        """OpenGL projection (16 floats, column-major) whose TinyRenderer images match K.

        TinyRenderer samples pixel (u, v) at its corner and flips the rows: with the textbook symmetric
        frustum its principal point is (width / 2, height / 2 - 1) in pixel indices. The frustum is shifted
        by half a pixel in x and y (the 1/width and 1/height terms) so that it is ((width - 1) / 2,
        (height - 1) / 2), the image centre of K (checked by the tests against the depth buffer)."""
        n, f = self.near, self.far
        t = math.tan(math.radians(self.vfov_deg) / 2.0)
        a = self.width / self.height
        M = np.array([[1.0 / (a * t), 0, 1.0 / self.width, 0], [0, 1.0 / t, 1.0 / self.height, 0],
                      [0, 0, -(f + n) / (f - n), -2.0 * f * n / (f - n)], [0, 0, -1.0, 0]])
        return M.T.reshape(-1).tolist()

    def render(self, pb, client, world_T_base):
        """Render the pair; returns (left, right) RGB uint8 arrays of shape (height, width, 3)."""
        proj = self.projection_matrix()
        out = []
        for right in (False, True):
            _, _, rgba, _, _ = pb.getCameraImage(self.width, self.height, self.view_matrix(world_T_base, right),
                                                 proj, renderer=pb.ER_TINY_RENDERER,
                                                 flags=pb.ER_NO_SEGMENTATION_MASK, physicsClientId=client)
            rgba = np.asarray(rgba, dtype=np.uint8).reshape(self.height, self.width, 4)
            out.append(np.ascontiguousarray(rgba[:, :, :3]))
        return out[0], out[1]


def right_frame_name(camera_frame):
    """Default frame_id of the right camera: the last "left" of camera_frame replaced by "right"
    ("stereo_left_optical" -> "stereo_right_optical"), else camera_frame + "_right"."""
    i = camera_frame.rfind("left")
    if i >= 0:
        return camera_frame[:i] + "right" + camera_frame[i + 4:]
    return camera_frame + "_right"


# ----------------------------------------------------------------------------------- mirror scene
def texture_robot(pb, client, robot, texture_dir, texel_m=0.006):
    """Give every visual shape of the robot a grey noise texture (about ``texel_m`` per texel over a 0.4 m
    tile), each in its URDF colour: stereo matching needs texture on the arm as on the scene's bodies (an
    untextured arm gives disparities that stray off its surface, beyond the self-filter's padding)."""
    import zlib

    import numpy as np

    from .world import write_png
    n = int(round(0.4 / texel_m))
    rng = np.random.default_rng(zlib.crc32(b"robot"))
    path = f"{texture_dir}/robot_noise.png"
    write_png(path, np.clip(255.0 * (0.45 + 0.55 * rng.random((n, n, 1))), 0, 255).astype(np.uint8).repeat(3, 2))
    tex = pb.loadTexture(path, physicsClientId=client)
    if tex < 0:
        return
    for shape in pb.getVisualShapeData(robot, physicsClientId=client):
        link, rgba = shape[1], shape[7]
        pb.changeVisualShape(robot, link, shapeIndex=-1, textureUniqueId=tex, rgbaColor=list(rgba),
                             physicsClientId=client)


class SceneMirror:
    """A second PyBullet client (DIRECT) with the same scene, posed from World.render_state(); renders."""

    def __init__(self, scene, camera):
        import tempfile

        from .world import create_scene_bodies, import_pybullet, load_robot, prepare_urdf

        pb = import_pybullet()

        self._pb = pb
        self.camera = camera
        self.world_T_base = pose_matrix(scene.robot.base_position, scene.robot.base_orientation_xyzw)
        self._tmp = tempfile.TemporaryDirectory(prefix="manip_sim_render_")
        self.client = pb.connect(pb.DIRECT)
        urdf = prepare_urdf(scene.robot.urdf, self._tmp.name)
        base_link = scene.robot.base_link
        if base_link is None:
            from manip_core import RobotModel
            base_link = RobotModel.from_urdf(scene.robot.urdf, None, scene.robot.tip_link).base_link
        self.robot, _, _ = load_robot(pb, self.client, urdf.path, self.world_T_base, base_link)
        texture_robot(pb, self.client, self.robot, self._tmp.name)
        self.bodies = create_scene_bodies(pb, self.client, scene, self.world_T_base, texture_dir=self._tmp.name)

    def apply(self, state):
        pb, c = self._pb, self.client
        for idx, q in state.get("joints", ()):
            pb.resetJointState(self.robot, idx, q, physicsClientId=c)
        for name, (pos, orn) in state.get("bodies", {}).items():
            if name in self.bodies:
                pb.resetBasePositionAndOrientation(self.bodies[name], pos, orn, physicsClientId=c)

    def render(self, state=None):
        if state is not None:
            self.apply(state)
        return self.camera.render(self._pb, self.client, self.world_T_base)

    def close(self):
        try:
            self._pb.disconnect(physicsClientId=self.client)
        except Exception:  # noqa: BLE001
            pass
        self._tmp.cleanup()


def _render_main(requests, results):
    """Entry point of the render process. First message: (scene, camera); then ('render', stamp,
    t_request, state) requests, each answered with the images; None or a closed pipe ends it."""
    import os
    import sys
    import traceback

    from .world import _quietly

    mirror = None
    try:
        scene, camera = requests.recv()
        mirror = _quietly(lambda: SceneMirror(scene, camera))   # PyBullet's build line and URDF warnings
        results.send(("ready", os.getpid()))
        while True:
            try:
                msg = requests.recv()
            except (EOFError, OSError):
                break
            if msg is None:
                break
            _, stamp, t_request, state = msg
            t0 = time.monotonic()
            left, right = mirror.render(state)
            results.send(("images", stamp, t_request, time.monotonic() - t0, left.tobytes(), right.tobytes()))
    except (EOFError, OSError, BrokenPipeError):
        pass
    except Exception:  # noqa: BLE001 (reported to the parent)
        try:
            results.send(("error", traceback.format_exc()))
        except Exception:  # noqa: BLE001
            print(traceback.format_exc(), file=sys.stderr)
    finally:
        if mirror is not None:
            mirror.close()


def _worker(read_fd, write_fd):
    """``python -c`` entry of the render process (file descriptors inherited from the parent)."""
    from multiprocessing.connection import Connection

    _render_main(Connection(int(read_fd), writable=False), Connection(int(write_fd), readable=False))


@dataclass
class StereoFrame:
    stamp: float           # simulated time of the state that was rendered (s)
    left: np.ndarray       # (h, w, 3) uint8 RGB
    right: np.ndarray
    render_s: float        # time the renderer took for the pair (s)
    latency_s: float       # wall time from the request to the arrival of the images (s)
    requested: float       # time.monotonic() of the request


class RenderProcess:
    """Renders the stereo pair of a mirrored scene in a child Python process (own PyBullet client).

    One request at a time: ``request`` returns False while the previous pair is being rendered (a
    frame is dropped, the physics never waits). ``poll`` returns a StereoFrame when one is ready.
    """

    def __init__(self, scene, camera, start_timeout=None):
        import os
        import subprocess
        import sys
        from multiprocessing.connection import Connection

        self.camera = camera
        req_r, req_w = os.pipe()
        res_r, res_w = os.pipe()
        # The child imports manip_sim (and manip_core) from wherever this process found them.
        import manip_core
        import manip_sim
        paths = [os.path.dirname(os.path.dirname(os.path.abspath(m.__file__))) for m in (manip_sim, manip_core)]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(paths + [p for p in [env.get("PYTHONPATH")] if p])
        # A separate interpreter (not multiprocessing: no re-import of the caller's __main__, no fork of a
        # process with DDS threads) in its own session (a terminal's Ctrl-C goes to the parent only; the
        # child exits when its pipe closes).
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", f"from manip_sim.camera import _worker; _worker({req_r}, {res_w})"],
                pass_fds=(req_r, res_w), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                start_new_session=True)
        finally:
            os.close(req_r)
            os.close(res_w)
        self._req_w = Connection(req_w, readable=False)
        self._res_r = Connection(res_r, writable=False)
        self.ready = False
        self.busy = False
        self.error = None
        self.closed = False
        try:
            self._req_w.send((scene, camera))
        except (OSError, BrokenPipeError) as exc:
            self.error = f"render process pipe: {exc}"
        if start_timeout:
            self.wait_ready(start_timeout)

    @property
    def pid(self):
        return self._proc.pid

    def is_alive(self):
        return self._proc.poll() is None

    def wait_ready(self, timeout):
        end = time.monotonic() + timeout
        while not self.ready and self.error is None and time.monotonic() < end:
            self.poll(min(0.1, max(0.0, end - time.monotonic())))
        if self.error:
            raise RuntimeError(f"render process failed:\n{self.error}")
        if not self.ready:
            raise TimeoutError(f"render process not ready after {timeout} s")

    def request(self, stamp, state):
        """Ask for the pair of this state (stamp: its simulated time). False when busy or not ready."""
        if not self.ready or self.busy or self.closed:
            return False
        try:
            self._req_w.send(("render", float(stamp), time.monotonic(), state))
        except (OSError, BrokenPipeError) as exc:
            self.error = f"render process pipe: {exc}"
            return False
        self.busy = True
        return True

    def poll(self, timeout=0.0):
        """A StereoFrame if one arrived within timeout (s), else None. Sets ready / error on the way."""
        if self.closed:
            return None
        try:
            if not self._res_r.poll(timeout):
                return None
            msg = self._res_r.recv()
        except (EOFError, OSError):
            if self.error is None:
                self.error = "render process exited"
            self.busy = False
            return None
        kind = msg[0]
        if kind == "ready":
            self.ready = True
            return None
        if kind == "error":
            self.error = msg[1]
            self.busy = False
            return None
        _, stamp, t_request, render_s, left, right = msg
        self.busy = False
        shape = (self.camera.height, self.camera.width, 3)
        return StereoFrame(stamp, np.frombuffer(left, np.uint8).reshape(shape),
                           np.frombuffer(right, np.uint8).reshape(shape), render_s, time.monotonic() - t_request,
                           t_request)

    def close(self, timeout=2.0):
        """Stop the child (asks, then terminates, then kills)."""
        if self.closed:
            return
        self.closed = True
        try:
            self._req_w.send(None)
        except (OSError, BrokenPipeError):
            pass
        import subprocess
        for action in (None, self._proc.terminate, self._proc.kill):
            if action is not None:
                action()
            try:
                self._proc.wait(timeout if action is None else 1.0)
                break
            except subprocess.TimeoutExpired:
                continue
        for conn in (self._req_w, self._res_r):
            try:
                conn.close()
            except OSError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
