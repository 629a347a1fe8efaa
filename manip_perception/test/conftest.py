"""Ground truth for the manip_perception tests: PyBullet scenes rendered with the stereo camera of
``manip_sim/config/stereo_camera.yaml``.

Camera model (ideal pinhole pair): fx = fy = (width / 2) / tan(hfov / 2); the right camera is the left one
shifted by +baseline along the left optical x axis. PyBullet's TinyRenderer samples pixel (u, v) at the
integer position of its corner and flips rows, so its principal point in pixel-index coordinates is
(cx, cy) = (width / 2, height / 2 - 1) = (320, 239); ``test_stereo.py::test_renderer_principal_point``
checks this against the depth buffer (the table plane back-projects to z = 0 within 1 mm).
Depth buffer -> metric depth along the optical axis: far * near / (far - (far - near) * buf).
"""
import math
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

PKG_ROOT = Path(__file__).resolve().parents[1]
REPO = PKG_ROOT.parent
CAMERA_YAML = REPO / 'manip_sim' / 'config' / 'stereo_camera.yaml'
ERD = Path(sysconfig.get_paths()['purelib']) / 'cmeel.prefix/share/example-robot-data'
#: example-robot-data's Panda (collision: STL meshes through package://, visual: DAE meshes).
PANDA_URDF = ERD / 'robots/panda_description/urdf/panda.urdf'
#: Panda reaching over the table towards the camera, hand low next to box_b (most of the arm in view; it
#: hides the cylinder).
PANDA_Q = (-0.6, 0.4, 0.0, -1.8, 0.0, 2.2, 0.8)
PANDA_HELD_SIZE = 0.08  # m: a cube held below the finger tips


def _import_from_source(package, module, root):
    """Import package.module; when only a namespace stub of the source folder is visible (package not
    installed in the venv), put its folder on sys.path and import again."""
    import importlib
    try:
        return importlib.import_module(f'{package}.{module}')
    except ImportError:
        pass
    sys.path.insert(0, str(root))
    # Drop the stub and what was imported through it, not pytest's modules of the test folder.
    for name in [n for n in sys.modules if n == package or (n.startswith(package + '.')
                                                              and not n.startswith(package + '.test'))]:
        del sys.modules[name]
    importlib.invalidate_caches()
    return importlib.import_module(f'{package}.{module}')


_import_from_source('manip_perception', 'image_conversion', PKG_ROOT)


def source_root(package):
    """Folder to put on PYTHONPATH so that ``package`` imports in a subprocess."""
    import importlib
    mod = importlib.import_module(package)
    return str(Path(mod.__file__).resolve().parents[1])


def import_manip_core_model():
    """manip_core.model (from the venv or the source tree), or pytest.skip."""
    try:
        return _import_from_source('manip_core', 'model', REPO / 'manip_core')
    except ImportError as e:
        pytest.skip(f'manip_core not importable: {e}')


# ---------------------------------------------------------------------------------------------- camera
@dataclass
class Camera:
    width: int
    height: int
    hfov_deg: float
    baseline: float
    position: np.ndarray
    orientation_xyzw: np.ndarray
    base_frame: str
    camera_frame: str
    near: float = 0.05
    far: float = 10.0

    @property
    def fx(self):
        return (self.width / 2) / math.tan(math.radians(self.hfov_deg) / 2)

    @property
    def fy(self):
        return self.fx

    @property
    def cx(self):
        return self.width / 2

    @property
    def cy(self):
        return self.height / 2 - 1

    @property
    def vfov_deg(self):
        return 2 * math.degrees(math.atan((self.height / 2) / self.fy))

    @property
    def rotation(self):
        from manip_perception.obstacles import quaternion_xyzw_to_matrix
        return quaternion_xyzw_to_matrix(self.orientation_xyzw)

    @property
    def K(self):
        return np.array([[self.fx, 0, self.cx], [0, self.fy, self.cy], [0, 0, 1.0]])

    def P(self, side):
        P = np.zeros((3, 4))
        P[:, :3] = self.K
        if side == 'right':
            P[0, 3] = -self.fx * self.baseline
        return P

    def info_fields(self, side):
        """CameraInfo contents (ROS conventions) of a rectified ideal pair."""
        return dict(height=self.height, width=self.width, distortion_model='plumb_bob', d=[0.0] * 5,
                    k=self.K.reshape(-1).tolist(), r=np.eye(3).reshape(-1).tolist(),
                    p=self.P(side).reshape(-1).tolist())

    def camera_info(self, side, stamp=None, frame_id=None):
        from sensor_msgs.msg import CameraInfo
        msg = CameraInfo(**self.info_fields(side))
        msg.header.frame_id = frame_id if frame_id is not None else self.camera_frame
        if stamp is not None:
            msg.header.stamp = stamp
        return msg

    def back_project_base(self, depth):
        """(H, W, 3) base-frame points of a metric depth image (ground-truth geometry)."""
        v, u = np.mgrid[0:self.height, 0:self.width].astype(np.float64)
        pc = np.stack([(u - self.cx) / self.fx * depth, (v - self.cy) / self.fy * depth, depth], axis=-1)
        return pc @ self.rotation.T + self.position


def load_camera():
    import yaml
    p = yaml.safe_load(CAMERA_YAML.read_text())['/**']['ros__parameters']
    return Camera(width=int(p['image_width']), height=int(p['image_height']),
                  hfov_deg=float(p['horizontal_fov_deg']), baseline=float(p['stereo_baseline']),
                  position=np.array(p['camera_position'], float),
                  orientation_xyzw=np.array(p['camera_orientation_xyzw'], float),
                  base_frame=p['base_frame'], camera_frame=p['camera_frame'])


# ---------------------------------------------------------------------------------------------- scenes
@dataclass
class SceneObject:
    name: str
    kind: str  # 'box' or 'cylinder'
    position: np.ndarray  # centre of the solid, base frame
    half_extents: np.ndarray  # box half sizes; cylinder (r, r, h/2)
    body: int = -1
    visible_points: np.ndarray = None  # ground-truth base-frame points of its pixels

    @property
    def top(self):
        return self.position[2] + self.half_extents[2]

    def expected_center(self, plane_margin):
        """Centre of what a camera above the table sees of the solid once the table band is removed: the
        whole footprint (top face fully visible) from z = plane_margin up to the top."""
        c = self.position.copy()
        c[2] = (max(plane_margin, self.position[2] - self.half_extents[2]) + self.top) / 2
        return c

    def visible_center(self, plane_margin):
        """Centre of the axis-aligned box of the ground-truth visible surface above plane_margin."""
        q = self.visible_points[self.visible_points[:, 2] > plane_margin]
        return (q.min(axis=0) + q.max(axis=0)) / 2


@dataclass
class Rendered:
    camera: Camera
    left: np.ndarray  # (H, W, 3) uint8 RGB
    right: np.ndarray
    depth: np.ndarray  # (H, W) float64, metric Z of the left camera (ground truth)
    seg: np.ndarray  # (H, W) body ids
    table: int
    objects: list = field(default_factory=list)


def _texture(path, size, rng, blur=0.0):
    import cv2
    img = rng.random((size, size, 3)).astype(np.float32) * 255
    if blur:
        img = cv2.GaussianBlur(img, (0, 0), blur)
    img = (img - img.min()) / max(float(img.max() - img.min()), 1e-6) * 200 + 30
    cv2.imwrite(str(path), img.astype(np.uint8))
    return str(path)


def render_scene(camera, objects, tmp_dir, seed=0, right_camera=None, extra_bodies=None,
                 table_center=(0.0, 0.0), table_half_size=(2.0, 2.0)):
    """Render the pair of ``camera`` looking at a textured table (top at z = 0) and the objects (each given a
    random-noise texture so that SGBM has something to match).

    ``right_camera``: optional (eye, rotation) overriding the ideal right camera (for rectification tests).
    ``extra_bodies``: optional callable(client, texture_id) adding more bodies (e.g. a robot stand-in).
    ``table_center``/``table_half_size``: the table top (x, y); beyond it the renderer's background is a
    texture-less white.
    """
    import pybullet as pb
    rng = np.random.default_rng(seed)
    tmp_dir = Path(tmp_dir)
    tmp_dir.mkdir(parents=True, exist_ok=True)
    cid = pb.connect(pb.DIRECT)
    try:
        tex_table = pb.loadTexture(_texture(tmp_dir / 'table.png', 1024, rng, 0.7), physicsClientId=cid)
        tex_obj = pb.loadTexture(_texture(tmp_dir / 'object.png', 32, rng), physicsClientId=cid)
        vis = pb.createVisualShape(pb.GEOM_BOX, halfExtents=[*table_half_size, 0.01], physicsClientId=cid)
        table = pb.createMultiBody(0, -1, vis, basePosition=[*table_center, -0.01], physicsClientId=cid)
        pb.changeVisualShape(table, -1, textureUniqueId=tex_table, rgbaColor=[1, 1, 1, 1], physicsClientId=cid)
        for o in objects:
            if o.kind == 'box':
                vis = pb.createVisualShape(pb.GEOM_BOX, halfExtents=o.half_extents.tolist(), physicsClientId=cid)
            else:
                vis = pb.createVisualShape(pb.GEOM_CYLINDER, radius=float(o.half_extents[0]),
                                           length=float(2 * o.half_extents[2]), physicsClientId=cid)
            o.body = pb.createMultiBody(0, -1, vis, basePosition=o.position.tolist(), physicsClientId=cid)
            pb.changeVisualShape(o.body, -1, textureUniqueId=tex_obj, rgbaColor=[1, 1, 1, 1], physicsClientId=cid)
        if extra_bodies is not None:
            extra_bodies(cid, tex_obj)
        proj = pb.computeProjectionMatrixFOV(camera.vfov_deg, camera.width / camera.height, camera.near,
                                             camera.far, physicsClientId=cid)

        def shoot(eye, R):
            view = pb.computeViewMatrix(eye.tolist(), (eye + R[:, 2]).tolist(), (-R[:, 1]).tolist(),
                                        physicsClientId=cid)
            _, _, rgb, dep, seg = pb.getCameraImage(camera.width, camera.height, view, proj,
                                                    renderer=pb.ER_TINY_RENDERER, physicsClientId=cid)
            rgb = np.reshape(np.asarray(rgb, np.uint8), (camera.height, camera.width, 4))[:, :, :3].copy()
            buf = np.reshape(np.asarray(dep, np.float64), (camera.height, camera.width))
            depth = camera.far * camera.near / (camera.far - (camera.far - camera.near) * buf)
            return rgb, depth, np.reshape(np.asarray(seg), (camera.height, camera.width))

        R = camera.rotation
        left, depth, seg = shoot(camera.position, R)
        if right_camera is None:
            right_camera = (camera.position + camera.baseline * R[:, 0], R)
        right, _, _ = shoot(*right_camera)
    finally:
        pb.disconnect(cid)
    pts = camera.back_project_base(depth)
    for o in objects:
        o.visible_points = pts[seg == o.body]
    return Rendered(camera=camera, left=left, right=right, depth=depth, seg=seg, table=table, objects=objects)


def main_objects():
    """Two boxes and a cylinder on the table, none hiding another from the camera."""
    return [
        SceneObject('box_a', 'box', np.array([0.25, 0.15, 0.075]), np.array([0.05, 0.05, 0.075])),
        SceneObject('box_b', 'box', np.array([0.70, -0.15, 0.05]), np.array([0.08, 0.04, 0.05])),
        SceneObject('cylinder', 'cylinder', np.array([0.50, 0.45, 0.10]), np.array([0.04, 0.04, 0.10])),
    ]


def quat_xyzw(R):
    """Quaternion (x, y, z, w) of a rotation matrix (Shepperd's method)."""
    R = np.asarray(R, float)
    t = np.trace(R)
    i = int(np.argmax([t, R[0, 0], R[1, 1], R[2, 2]]))
    if i == 0:
        w = math.sqrt(1 + t) / 2
        return [(R[2, 1] - R[1, 2]) / (4 * w), (R[0, 2] - R[2, 0]) / (4 * w), (R[1, 0] - R[0, 1]) / (4 * w), w]
    a, b, c = i - 1, i % 3, (i + 1) % 3
    v = [0.0, 0.0, 0.0]
    v[a] = math.sqrt(max(0.0, 1 + 2 * R[a, a] - t)) / 2
    v[b] = (R[b, a] + R[a, b]) / (4 * v[a])
    v[c] = (R[c, a] + R[a, c]) / (4 * v[a])
    return v + [(R[c, b] - R[b, c]) / (4 * v[a])]


#: UR5 pose of the self-filter scenes: the arm reaches over the table to the left of the objects.
ROBOT_Q = (-1.2, -1.3, 1.6, -0.3, 0.0, 0.0)


def robot_stand_in(model, q, radius=0.045):
    """(chain, extra_bodies) for render_scene: the link origins of ``model`` at ``q`` (manip_core forward
    kinematics) and a callable adding a textured cylinder along each segment between them."""
    links = np.array([model.fk(np.asarray(q, float), name)[:3, 3] for name in model.link_names])
    chain = [links[0]] + [p for a, p in zip(links[:-1], links[1:]) if np.linalg.norm(p - a) > 1e-6]

    def add(cid, tex):
        import pybullet as pb
        for a, b in zip(chain[:-1], chain[1:]):
            axis = b - a
            length = float(np.linalg.norm(axis))
            z = axis / length
            x = np.cross(z, [0, 0, 1] if abs(z[2]) < 0.9 else [1, 0, 0])
            x /= np.linalg.norm(x)
            R = np.column_stack([x, np.cross(z, x), z])
            vis = pb.createVisualShape(pb.GEOM_CYLINDER, radius=radius, length=length, physicsClientId=cid)
            body = pb.createMultiBody(0, -1, vis, basePosition=((a + b) / 2).tolist(),
                                      baseOrientation=quat_xyzw(R), physicsClientId=cid)
            pb.changeVisualShape(body, -1, textureUniqueId=tex, rgbaColor=[1, 1, 1, 1], physicsClientId=cid)

    return np.array(chain), add


def ur5_stand_in_description(tmp_path):
    """Path of the bundled UR5's URDF without its <collision> elements: the robot whose self-filter is the
    capsule fallback along the link chain, which is what robot_stand_in renders (cylinders between the link
    origins), whatever collision geometry the bundled file has."""
    import xml.etree.ElementTree as ET
    root = ET.parse(REPO / 'manip_core/manip_core/robots/ur5.urdf').getroot()
    for link in root.iter('link'):
        for c in link.findall('collision'):
            link.remove(c)
    out = Path(tmp_path) / 'ur5_stand_in.urdf'
    out.write_text(ET.tostring(root, encoding='unicode'))
    return out


def panda_in_pybullet(model, q, held_size, tmp_path):
    """extra_bodies callable for render_scene: the Panda from its URDF (package:// resolved to the
    example-robot-data folder) with its joints set by name, and a box held below the hand (pose from
    PyBullet's own hand link). Returns (callable, ids: filled with 'robot', 'held', 'held_T')."""
    ids = {}
    text = PANDA_URDF.read_text().replace('package://example-robot-data/', str(ERD) + '/')
    urdf = Path(tmp_path) / 'panda_resolved.urdf'
    urdf.write_text(text)

    def add(cid, tex):
        import pybullet as pb
        rid = pb.loadURDF(str(urdf), useFixedBase=True, physicsClientId=cid)
        values = dict(zip(model.joint_names, q))
        hand = None
        for j in range(pb.getNumJoints(rid, physicsClientId=cid)):
            info = pb.getJointInfo(rid, j, physicsClientId=cid)
            if info[1].decode() in values:
                pb.resetJointState(rid, j, values[info[1].decode()], physicsClientId=cid)
            if info[12].decode() == 'panda_hand':
                hand = j
        pos, orn = pb.getLinkState(rid, hand, computeForwardKinematics=True, physicsClientId=cid)[4:6]
        R = np.array(pb.getMatrixFromQuaternion(orn)).reshape(3, 3)
        centre = np.array(pos) + R @ [0, 0, 0.105 + held_size / 2]  # below the finger tips
        vis = pb.createVisualShape(pb.GEOM_BOX, halfExtents=[held_size / 2] * 3, physicsClientId=cid)
        hid = pb.createMultiBody(0, -1, vis, basePosition=centre.tolist(), baseOrientation=orn, physicsClientId=cid)
        pb.changeVisualShape(hid, -1, textureUniqueId=tex, rgbaColor=[1, 1, 1, 1], physicsClientId=cid)
        T = np.eye(4)
        T[:3, :3], T[:3, 3] = R, centre
        ids.update(robot=rid, held=hid, held_T=T)

    return add, ids


@pytest.fixture(scope='session')
def panda_scene(camera, tmp_path_factory):
    """(Rendered, ids, model): the Panda at PANDA_Q holding a cube, with main_objects() on the table (box_a
    is the object to pick in the tests; box_b is in view; the arm hides the cylinder)."""
    if not PANDA_URDF.is_file():
        pytest.skip('example-robot-data Panda not installed')
    model = import_manip_core_model().RobotModel.from_urdf(str(PANDA_URDF), None, 'panda_hand')
    tmp = tmp_path_factory.mktemp('panda_scene')
    add, ids = panda_in_pybullet(model, np.array(PANDA_Q), PANDA_HELD_SIZE, tmp)
    return render_scene(camera, main_objects(), tmp, seed=5, extra_bodies=add), ids, model


@pytest.fixture(scope='session')
def camera():
    return load_camera()


@pytest.fixture(scope='session')
def scene(camera, tmp_path_factory):
    return render_scene(camera, main_objects(), tmp_path_factory.mktemp('scene'))


@pytest.fixture(scope='session')
def empty_scene(camera, tmp_path_factory):
    return render_scene(camera, [], tmp_path_factory.mktemp('empty_scene'), seed=1)


def _regression_module():
    import importlib.util
    spec = importlib.util.spec_from_file_location('manip_perception_regression_bags',
                                                  Path(__file__).with_name('regression_bags.py'))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope='session')
def regression_bags(tmp_path_factory):
    """(module regression_bags, [mcap bag path, sqlite3 bag path]): generated once per session (about 5 s;
    about 9 MB each, so they are not kept in the repository)."""
    mod = _regression_module()
    return mod, mod.generate(tmp_path_factory.mktemp('regression_bags'))


@pytest.fixture(scope='session')
def gt():
    """The helpers of this file (test modules cannot import conftest under --import-mode=importlib)."""
    from types import SimpleNamespace
    return SimpleNamespace(render_scene=render_scene, SceneObject=SceneObject, main_objects=main_objects,
                           source_root=source_root, import_manip_core_model=import_manip_core_model,
                           robot_stand_in=robot_stand_in, ROBOT_Q=ROBOT_Q, quat_xyzw=quat_xyzw,
                           CAMERA_YAML=CAMERA_YAML, REPO=REPO, PKG_ROOT=PKG_ROOT, PANDA_URDF=PANDA_URDF,
                           PANDA_Q=PANDA_Q, PANDA_HELD_SIZE=PANDA_HELD_SIZE,
                           ur5_stand_in_description=ur5_stand_in_description)
