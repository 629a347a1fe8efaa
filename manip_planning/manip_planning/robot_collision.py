"""The robot's collision geometry as spheres on the bodies of a manip_core RobotModel, its self-collision
pairs, and the checker that binds it to a scene for the numba kernels (collision_kernels.py).

Geometry comes from the URDF's ``<collision>`` elements with their origins: spheres as they are (the fast
path: ``*_spherized.urdf``), boxes, cylinders and capsules as conservative sphere covers (shapes.py), meshes
(STL, OBJ, DAE, read with trimesh) as a conservative cover of points sampled on the surface, computed once and
cached by the file's SHA-256 (in ``$MANIP_CACHE_DIR`` or ``~/.cache/manip``). Self-collision pairs: every pair
of groups on different bodies (links welded by fixed joints form one body), minus the SRDF's
``disable_collisions``, minus bodies joined by one joint. A URDF without collision elements gets a warning and, with
``fallback_radius_m``, capsules of that radius along the link chain (as the heuristics did). An attached
object (a Shape in the tip link's frame) becomes part of the tip (not checked against the tip's body, nor the
body one joint up).
"""
from __future__ import annotations

import hashlib
import io
import logging
import math
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from .shapes import OBS_STRIDE, Shape, points_sphere_cover

log = logging.getLogger(__name__)


class CollisionModelError(ValueError):
    """A collision description that cannot be used; the message names the file and element."""


def _floats(text, n, what):
    vals = [float(x) for x in (text or "").split()]
    if len(vals) != n:
        raise CollisionModelError(f"{what}: expected {n} numbers, got {text!r}")
    return vals


def _origin(el, what):
    from manip_core.spatial import transform
    T = np.eye(4)
    o = el.find("origin")
    if o is None:
        return T
    xyz = _floats(o.get("xyz", "0 0 0"), 3, f"{what} origin xyz")
    r, p, y = _floats(o.get("rpy", "0 0 0"), 3, f"{what} origin rpy")
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    R = np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                  [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                  [-sp, cp * sr, cp * cr]])
    return transform(R=R, p=np.array(xyz))


def _resolve_mesh(filename, urdf_dir):
    """A mesh path: absolute, file://, relative to the URDF, or package://pkg/rel (searched next to the URDF,
    in its parent folders, and in the ament index when ROS is installed)."""
    f = filename
    if f.startswith("file://"):
        f = f[7:]
    if f.startswith("package://"):
        rest = f[len("package://"):]
        pkg, _, rel = rest.partition("/")
        cands = []
        if urdf_dir is not None:
            cands += [urdf_dir / rest, urdf_dir / rel]
            cands += [p / rest for p in urdf_dir.parents] + [p / pkg / rel for p in urdf_dir.parents]
        try:
            from ament_index_python.packages import get_package_share_directory
            cands.append(Path(get_package_share_directory(pkg)) / rel)
        except Exception:  # noqa: BLE001 - no ROS or no such package: the other candidates remain
            pass
        try:   # MANIP_PACKAGE_PATH, ROS_PACKAGE_PATH, the venv's prefixes (manip_core.package_uri)
            from manip_core.package_uri import resolve_uri
            cands.append(Path(resolve_uri(filename)))
        except FileNotFoundError:
            pass
        for c in cands:
            if c.is_file():
                return c
        return None
    p = Path(f)
    if not p.is_absolute() and urdf_dir is not None:
        p = urdf_dir / p
    return p if p.is_file() else None


def mesh_sphere_cover(path, scale=(1.0, 1.0, 1.0), cell_m=0.05, samples=4000):
    """Spheres (K, 4) in the mesh frame whose union holds the mesh's vertices and sampled surface points;
    cached by SHA-256 of the file, scale and cell size. Needs trimesh."""
    from manip_core.package_uri import read_mesh_bytes
    data = read_mesh_bytes(path)   # a regular file of at most MAX_MESH_BYTES, else ValueError (one line)
    key = hashlib.sha256(data + repr((tuple(scale), cell_m, samples)).encode()).hexdigest()[:32]
    cache = Path(os.environ.get("MANIP_CACHE_DIR", Path.home() / ".cache" / "manip")) / "sphere_covers"
    f = cache / f"{key}.npy"
    if f.is_file():
        return np.load(f)
    import trimesh
    mesh = trimesh.load(io.BytesIO(data), file_type=Path(path).suffix.lstrip(".").lower(), force="mesh")
    V = np.asarray(mesh.vertices, dtype=np.float64) * np.asarray(scale, dtype=np.float64)
    pts = V
    if len(mesh.faces):
        rng = np.random.default_rng(0)
        F = np.asarray(mesh.faces)
        tri = V[F]
        area = 0.5 * np.linalg.norm(np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]), axis=1)
        idx = rng.choice(len(F), size=samples, p=area / area.sum()) if area.sum() > 0 else np.zeros(0, int)
        u = rng.random((len(idx), 2))
        flip = u.sum(axis=1) > 1
        u[flip] = 1 - u[flip]
        t = tri[idx]
        pts = np.vstack([V, t[:, 0] + u[:, :1] * (t[:, 1] - t[:, 0]) + u[:, 1:] * (t[:, 2] - t[:, 0])])
    # a sampled surface leaves gaps of about the sample spacing: pad every sphere by it
    spacing = math.sqrt(max(float(getattr(mesh, "area", 0.0)), 1e-12) / max(samples, 1))
    cover = points_sphere_cover(pts, cell_m)
    cover[:, 3] += spacing
    try:
        cache.mkdir(parents=True, exist_ok=True)
        np.save(f, cover)
    except OSError:
        pass
    return cover


def parse_collision_shapes(urdf_path_or_xml, mesh_cell_m=0.05):
    """{link: spheres (K, 4) [x, y, z, r] in the link frame} from a URDF's <collision> elements."""
    text = str(urdf_path_or_xml)
    urdf_dir = None
    src = "<string>"
    if not text.lstrip().startswith("<"):
        src = text
        urdf_dir = Path(text).resolve().parent
        try:
            text = Path(text).read_text()
        except OSError as e:
            raise CollisionModelError(f"{src}: cannot read: {e.strerror}") from None
    try:
        root = ET.fromstring(text.encode() if isinstance(text, str) else text)
    except ET.ParseError as e:
        raise CollisionModelError(f"{src}: not valid XML: {e}") from None
    out = {}
    for link in root.iter("link"):
        name = link.get("name")
        spheres = []
        for k, col in enumerate(link.findall("collision")):
            what = f"{src}: link '{name}' collision #{k}"
            T = _origin(col, what)
            g = col.find("geometry")
            if g is None or len(g) == 0:
                raise CollisionModelError(f"{what}: no <geometry>")
            geo = g[0]
            tag = geo.tag
            try:
                if tag == "sphere":
                    sh = Shape("sphere", (float(geo.get("radius")),), T, name)
                elif tag == "box":
                    sh = Shape("box", [0.5 * v for v in _floats(geo.get("size"), 3, f"{what} box size")], T, name)
                elif tag == "cylinder":
                    sh = Shape("cylinder", (float(geo.get("radius")), 0.5 * float(geo.get("length"))), T, name)
                elif tag == "capsule":
                    sh = Shape("capsule", (float(geo.get("radius")), 0.5 * float(geo.get("length"))), T, name)
                elif tag == "mesh":
                    fn = geo.get("filename", "")
                    path = _resolve_mesh(fn, urdf_dir)
                    if path is None:
                        raise CollisionModelError(f"{what}: mesh file {fn!r} not found")
                    scale = _floats(geo.get("scale", "1 1 1"), 3, f"{what} mesh scale")
                    c = mesh_sphere_cover(path, scale, mesh_cell_m)
                    c2 = c.copy()
                    c2[:, :3] = c[:, :3] @ T[:3, :3].T + T[:3, 3]
                    spheres.append(c2)
                    continue
                else:
                    raise CollisionModelError(f"{what}: unsupported geometry <{tag}>")
            except (TypeError, ValueError) as e:
                if isinstance(e, CollisionModelError):
                    raise
                raise CollisionModelError(f"{what}: bad <{tag}>: {e}") from None
            spheres.append(sh.sphere_cover())
        if spheres:
            out[name] = np.vstack(spheres)
    return out


def parse_srdf_disabled(srdf_path_or_xml):
    """Set of frozenset({link1, link2}) from an SRDF's <disable_collisions>."""
    text = str(srdf_path_or_xml)
    src = "<string>"
    if not text.lstrip().startswith("<"):
        src = text
        try:
            text = Path(text).read_text()
        except OSError as e:
            raise CollisionModelError(f"{src}: cannot read: {e.strerror}") from None
    try:
        root = ET.fromstring(text.encode())
    except ET.ParseError as e:
        raise CollisionModelError(f"{src}: not valid XML: {e}") from None
    out = set()
    for el in root.iter("disable_collisions"):
        a, b = el.get("link1"), el.get("link2")
        if not a or not b:
            raise CollisionModelError(f"{src}: <disable_collisions> without link1/link2")
        out.add(frozenset((a, b)))
    return out


def _kinematics_only(urdf):
    """The URDF's XML without <inertial> elements (collision checking needs no dynamics, and some
    descriptions carry inertias that a dynamics parser rightly rejects)."""
    text = str(urdf)
    if not text.lstrip().startswith("<"):
        try:
            text = Path(text).read_text()
        except OSError as e:
            raise CollisionModelError(f"{urdf}: cannot read: {e.strerror}") from None
    root = ET.fromstring(text.encode())
    for link in root.iter("link"):
        for el in link.findall("inertial"):
            link.remove(el)
    return ET.tostring(root, encoding="unicode")


def _bound(spheres):
    """Bounding sphere [x, y, z, r] of spheres (K, 4): centred on their AABB centre."""
    lo = (spheres[:, :3] - spheres[:, 3:]).min(axis=0)
    hi = (spheres[:, :3] + spheres[:, 3:]).max(axis=0)
    c = 0.5 * (lo + hi)
    r = float(np.max(np.linalg.norm(spheres[:, :3] - c, axis=1) + spheres[:, 3]))
    return np.array([c[0], c[1], c[2], r])


def _capsule_between(p_a, p_b, radius_m, name):
    """Shape: capsule of radius_m from point p_a to p_b (3,)."""
    d = np.asarray(p_b, float) - np.asarray(p_a, float)
    L = float(np.linalg.norm(d))
    z = d / L
    x = np.cross(z, [1.0, 0.0, 0.0])
    if np.linalg.norm(x) < 1e-6:
        x = np.cross(z, [0.0, 1.0, 0.0])
    x /= np.linalg.norm(x)
    T = np.eye(4)
    T[:3, :3] = np.column_stack([x, np.cross(z, x), z])
    T[:3, 3] = 0.5 * (np.asarray(p_a, float) + np.asarray(p_b, float))
    return Shape("capsule", (radius_m, 0.5 * L), T, name)


def capsule_chain_spheres(model, radius_m, tool_length_m=0.0):
    """{link: spheres in the link frame}: capsules of radius_m between consecutive link origins of the chain
    (each link carries the segment to the next link origin), plus tool_length_m from the tip along its z axis,
    covered as in shapes.py."""
    tree = model.tree
    path = tree.path(model.base_link, model.tip_link)
    links = [model.base_link] + [j.child for j in path]
    q0 = np.zeros(model.dof)
    poses = {ln: model.fk(q0, ln) for ln in links}
    out = {}
    for a, b in zip(links[:-1], links[1:]):
        Ta = poses[a]
        pb = np.linalg.inv(Ta) @ np.append(poses[b][:3, 3], 1.0)
        L = float(np.linalg.norm(pb[:3]))
        if L < 1e-9:
            continue
        out.setdefault(a, []).append(_capsule_between(np.zeros(3), pb[:3], radius_m, a).sphere_cover())
    if tool_length_m > 0:
        tip = model.tip_link
        out.setdefault(tip, []).append(_capsule_between(np.zeros(3), [0.0, 0.0, tool_length_m], radius_m,
                                                        tip).sphere_cover())
    return {k: np.vstack(v) for k, v in out.items()}


class RobotCollisionModel:
    """Collision spheres of a RobotModel's links (see module doc).

    link_spheres: {link: (K, 4) spheres in the link frame}; disabled: set of frozenset link pairs;
    self_collision: check the pairs (False: obstacles only);
    check_fixed_links: also check links that no joint moves against obstacles (a base standing in a table
    makes every configuration invalid, so callers with a floor may turn it off).
    """

    ATTACHED = "__attached__"

    def __init__(self, model, link_spheres, disabled=(), check_fixed_links=True, source="", self_collision=True):
        self.model = model
        self.self_collision = bool(self_collision)
        self.source = source
        self.disabled = set(disabled)
        self.check_fixed_links = bool(check_fixed_links)
        frames = model._link_frames
        self.link_spheres = {}
        for link, S in link_spheres.items():
            if link not in frames:
                continue  # a link outside the chain's subtree (e.g. above the base link)
            self.link_spheres[link] = np.asarray(S, dtype=np.float64).reshape(-1, 4)
        self.attached = None
        self.touch_links = set()
        self._build()

    @classmethod
    def from_urdf(cls, urdf, srdf=None, model=None, base_link=None, tip_link=None, fallback_radius_m=None,
                  check_fixed_links=True, mesh_cell_m=0.05):
        """From a URDF path or XML (and an optional SRDF path or XML); model: a RobotModel of the same URDF
        (built when None)."""
        from manip_core.model import RobotModel
        if model is None:
            model = RobotModel.from_urdf(_kinematics_only(urdf), base_link, tip_link)
        spheres = parse_collision_shapes(urdf, mesh_cell_m)
        src = str(urdf) if not str(urdf).lstrip().startswith("<") else "<string>"
        if not spheres:
            msg = f"{src}: the URDF has no <collision> elements"
            if fallback_radius_m:
                log.warning("%s: using capsules of radius %.3f m around the link chain instead (no "
                            "self-collision checks: neighbouring capsules overlap)", msg, fallback_radius_m)
                return cls.capsules(model, fallback_radius_m, check_fixed_links)
            else:
                log.warning("%s: the robot has no collision geometry, nothing will be found in collision", msg)
        disabled = parse_srdf_disabled(srdf) if srdf is not None else set()
        return cls(model, spheres, disabled, check_fixed_links, src)

    @classmethod
    def capsules(cls, model, radius_m, check_fixed_links=False, tool_length_m=0.0):
        """Capsules of radius_m along the link chain of a model without collision geometry (and a tool)."""
        return cls(model, capsule_chain_spheres(model, radius_m, tool_length_m), (), check_fixed_links,
                   "capsules", self_collision=False)

    def attach(self, shape, touch_links=()):
        """Attach a Shape (pose in the tip link's frame) to the tip; it is not checked against the tip's body,
        the body one joint up, nor touch_links. None detaches."""
        self.attached = shape
        self.touch_links = set(touch_links)
        self._build()

    # ------------------------------------------------------------------------------------- packing
    def _build(self):
        m = self.model
        frames = m._link_frames
        groups = []   # (name, body, spheres in body frame)
        for link, S in self.link_spheres.items():
            if len(S) == 0:
                continue
            body, off = frames[link]
            Sb = S.copy()
            Sb[:, :3] = S[:, :3] @ off[:3, :3].T + off[:3, 3]
            groups.append((link, int(body), Sb))
        if self.attached is not None:
            body, off = frames[m.tip_link]
            S = self.attached.transformed(off).sphere_cover()
            groups.append((self.ATTACHED, int(body), S))
        self.group_names = [g[0] for g in groups]
        G = len(groups)
        self.grp_body = np.array([g[1] for g in groups], dtype=np.int64)
        counts = [len(g[2]) for g in groups]
        self.grp_start = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self.sph_local = np.ascontiguousarray(np.vstack([g[2] for g in groups]) if G else np.zeros((0, 4)))
        self.grp_bound = np.array([_bound(g[2]) for g in groups]).reshape(-1, 4)
        self.grp_env = np.array([1 if (b >= 0 or self.check_fixed_links) else 0 for b in self.grp_body],
                                dtype=np.int64)
        self.pairs = np.array(self._pairs(groups), dtype=np.int64).reshape(-1, 2)
        self._build_slots(groups)

    def _build_slots(self, groups):
        """Slots (the bodies that carry groups, the most distal first, the fixed base last), their bounding
        spheres, and the self-collision pairs ordered by slot pair (the hierarchy of collision_kernels)."""
        bodies = sorted({int(b) for b in self.grp_body}, key=lambda b: -b if b >= 0 else 1 << 30)
        slot_of = {b: k for k, b in enumerate(bodies)}
        members = [[g for g in range(len(groups)) if int(self.grp_body[g]) == b] for b in bodies]
        self.sl_body = np.array(bodies, dtype=np.int64)
        self.sl_gstart = np.concatenate([[0], np.cumsum([len(m) for m in members])]).astype(np.int64)
        self.sl_groups = np.array([g for m in members for g in m], dtype=np.int64)
        # + 1 nm: the bound stays conservative whatever the rounding of its placement
        self.sl_bound = np.array([_bound(np.vstack([groups[g][2] for g in m])) + [0, 0, 0, 1e-9]
                                  for m in members]).reshape(-1, 4)
        self.sl_env = np.array([1 if b >= 0 and any(self.grp_env[g] for g in m) else 0
                                for b, m in zip(bodies, members)], dtype=np.int64)
        by_slot = {}
        for p, (g, h) in enumerate(self.pairs):
            key = tuple(sorted((slot_of[int(self.grp_body[g])], slot_of[int(self.grp_body[h])])))
            by_slot.setdefault(key, []).append(p)
        keys = sorted(by_slot)
        self.bpairs = np.array(keys, dtype=np.int64).reshape(-1, 2)
        self.bp_start = np.concatenate([[0], np.cumsum([len(by_slot[k]) for k in keys])]).astype(np.int64)
        self.bp_pairs = np.array([p for k in keys for p in by_slot[k]], dtype=np.int64)

    def _pairs(self, groups):
        from manip_core._layout import MI_HEADER, MI_STRIDE
        mi = self.model._mi
        parent = {i: int(mi[MI_HEADER + i * MI_STRIDE]) for i in range(int(mi[0]))}
        out = []
        if not self.self_collision:
            return out
        for i in range(len(groups)):
            for j in range(i + 1, len(groups)):
                (na, ba, _), (nb, bb, _) = groups[i], groups[j]
                if ba == bb:
                    continue  # one rigid body: nothing moves them relative to each other
                if self.ATTACHED in (na, nb):
                    other = nb if na == self.ATTACHED else na
                    if other in self.touch_links or other == self.model.tip_link:
                        continue
                # the attached object is part of the tip's body: the body one joint up is adjacent to it too (a
                # held cube against the flange overlaps the conservative cover of the UR5's wrist-2 housing; the
                # wrist-3 joint only spins it about the tool axis)
                if parent.get(ba, -2) == bb or parent.get(bb, -2) == ba:
                    continue  # joined by one joint (links welded by fixed joints count as one)
                if frozenset((na, nb)) in self.disabled:
                    continue
                out.append((i, j))
        return out

    @property
    def n_spheres(self):
        return len(self.sph_local)

    def spheres_world(self, q):
        """All collision spheres (S, 4) at q in the planning frame (for plots and tests)."""
        from .collision_kernels import _spheres_of, set_configuration
        ch = CollisionChecker(self, None)
        set_configuration(ch.ca, np.ascontiguousarray(q, dtype=np.float64))
        ca = ch.ca
        for g in range(len(self.grp_body)):
            _spheres_of(ca[2], ca[3], ca[4], ca[7], ca[9], ca[11], g)
        return ch.ca[9].copy()


BACKENDS = ("cpu", "cuda")


class CollisionChecker:
    """A RobotCollisionModel bound to a PlanningScene: the kernel tuple ``ca`` and Python entry points.

    backend: "cpu" (numba CPU kernels) or "cuda" (collision_cuda.py): the batched checks (are_free,
    segments_free, first_colliding_segment) then run on the GPU; single checks and the planners' inner loops
    stay on the CPU."""

    def __init__(self, robot, scene=None, backend="cpu"):
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
        self.backend = backend
        self.robot = robot
        self.scene = scene
        m = robot.model
        from manip_core import _kernels as K
        obs = scene.packed if scene is not None and len(scene) else np.zeros((0, OBS_STRIDE))
        G, S = len(robot.grp_body), len(robot.sph_local)
        B = len(robot.sl_body)
        self.ca = (m._mf, m._mi, K.new_ws(m._mi), robot.grp_body, robot.grp_start, robot.grp_bound,
                   robot.grp_env, robot.sph_local, np.ascontiguousarray(obs), np.zeros((S, 4)), np.zeros((G, 4)),
                   np.zeros(G, dtype=np.int64), robot.pairs, robot.sl_body, robot.sl_gstart, robot.sl_groups,
                   robot.sl_bound, robot.sl_env, np.zeros((B, 4)), np.zeros(B, dtype=np.int64), robot.bpairs,
                   robot.bp_start, robot.bp_pairs, np.array([0, -1, -1, -1], dtype=np.int64))
        from .collision_kernels import fixed_env_hit
        self.ca[23][0] = fixed_env_hit(self.ca)
        self.dof = m.dof
        self.lower = np.array(m.joint_lower, dtype=np.float64)
        self.upper = np.array(m.joint_upper, dtype=np.float64)
        self._gpu = None
        if backend == "cuda":
            from .collision_cuda import CudaCollisionChecker
            self._gpu = CudaCollisionChecker(self)

    def _q(self, q):
        return np.ascontiguousarray(q, dtype=np.float64).reshape(self.dof)

    def is_free(self, q):
        from .collision_kernels import config_free
        return bool(config_free(self.ca, self._q(q)))

    def are_free(self, Q):
        """(N,) bools for configurations Q (N, dof)."""
        from .collision_kernels import configs_free
        Q = np.ascontiguousarray(Q, dtype=np.float64).reshape(-1, self.dof)
        if self._gpu is not None:
            return self._gpu.are_free(Q)
        out = np.zeros(len(Q), dtype=np.bool_)
        configs_free(self.ca, Q, out)
        return out

    def segment_free(self, a, b, resolution=1.0 / 32.0):
        from .collision_kernels import edge_free
        return bool(edge_free(self.ca, self._q(a), self._q(b), float(resolution), np.empty(self.dof)))

    def segments_free(self, A, B, resolution=1.0 / 32.0):
        """(E,) bools: each straight edge A[e] -> B[e] (E, dof) free at steps <= resolution (rad); the
        batched mode (all samples of all edges in one launch with the cuda backend)."""
        from .collision_kernels import edges_free
        A = np.ascontiguousarray(A, dtype=np.float64).reshape(-1, self.dof)
        B = np.ascontiguousarray(B, dtype=np.float64).reshape(-1, self.dof)
        if self._gpu is not None:
            return self._gpu.edges_free(A, B, resolution)
        out = np.zeros(len(A), dtype=np.bool_)
        edges_free(self.ca, A, B, float(resolution), out, np.empty(self.dof))
        return out

    def first_colliding_segment(self, path, resolution=1.0 / 32.0):
        """Index of the first segment of path (N, dof) that collides at the resolution (rad), or -1 (0 also
        when path[0] collides)."""
        from .collision_kernels import path_free
        P = np.ascontiguousarray(path, dtype=np.float64).reshape(-1, self.dof)
        if self._gpu is not None:
            if not self._gpu.are_free(P[:1])[0]:
                return 0
            bad = np.flatnonzero(~self._gpu.edges_free(P[:-1], P[1:], resolution))
            return int(bad[0]) if len(bad) else -1
        return int(path_free(self.ca, P, float(resolution), np.empty(self.dof)))

    def distances(self, q):
        """(min signed distance to obstacles, min self distance) in m at q; inf when nothing is checked."""
        from .collision_kernels import min_distances
        out = np.empty(2)
        min_distances(self.ca, self._q(q), out)
        return float(out[0]), float(out[1])
