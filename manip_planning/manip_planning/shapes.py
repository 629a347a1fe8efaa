"""Collision primitives (sphere, box, cylinder, capsule) with a pose, their exact signed distance to a point,
and conservative sphere covers.

A shape is given in a parent frame (the robot base for obstacles, a link frame for robot geometry) by a pose
``T`` (4, 4) and its dimensions in metres:
  sphere: radius;  box: half extents (hx, hy, hz) along its own x, y, z;
  cylinder: radius and half height along its own z;  capsule: radius and half length of its axis segment
  along its own z (the caps add ``radius`` at each end).
Signed distance (m): positive outside, negative inside (minus the depth of the point). The distance between
a sphere (centre c, radius r) and a convex shape S is sdf_S(c) - r, exact for both separation and penetration,
so every robot-sphere / obstacle pair is exact. Packed for the numba kernels as rows of OBS_STRIDE floats:
[kind, p (3), R row-major (9), a, b, c, bounding radius, AABB lo (3), AABB hi (3)].
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

SPHERE, BOX, CYLINDER, CAPSULE = 0, 1, 2, 3
KINDS = {"sphere": SPHERE, "box": BOX, "cylinder": CYLINDER, "capsule": CAPSULE}
KIND_NAMES = {v: k for k, v in KINDS.items()}
OBS_STRIDE = 23
_JIT = dict(cache=True, nogil=True, fastmath=False, error_model="numpy")


class ShapeError(ValueError):
    """A shape with bad dimensions or pose; the message names the shape."""


@dataclass
class Shape:
    """One primitive. kind: 'sphere' | 'box' | 'cylinder' | 'capsule'; dims: (radius,) | (hx, hy, hz) half
    extents | (radius, half_height) | (radius, half_length), metres; T: (4, 4) pose in the parent frame."""

    kind: str
    dims: tuple
    T: np.ndarray = None
    name: str = ""

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ShapeError(f"shape {self.name!r}: unknown kind {self.kind!r} (expected {', '.join(KINDS)})")
        need = {"sphere": 1, "box": 3, "cylinder": 2, "capsule": 2}[self.kind]
        d = np.asarray(self.dims, dtype=np.float64).reshape(-1)
        if d.size != need or not np.all(np.isfinite(d)) or np.any(d < 0):
            raise ShapeError(f"shape {self.name!r}: {self.kind} needs {need} finite dimensions >= 0, got {list(d)}")
        self.dims = tuple(float(x) for x in d)
        T = np.eye(4) if self.T is None else np.asarray(self.T, dtype=np.float64)
        if T.shape != (4, 4) or not np.all(np.isfinite(T)):
            raise ShapeError(f"shape {self.name!r}: pose must be a finite (4, 4) transform")
        R = T[:3, :3]
        if np.max(np.abs(R.T @ R - np.eye(3))) > 1e-6 or np.linalg.det(R) < 0:
            raise ShapeError(f"shape {self.name!r}: pose rotation is not orthonormal")
        self.T = T

    @property
    def center(self):
        return self.T[:3, 3]

    def bounding_radius(self):
        """Radius (m) of a sphere about the shape's origin that holds the whole shape."""
        d = self.dims
        if self.kind == "sphere":
            return d[0]
        if self.kind == "box":
            return math.sqrt(d[0] ** 2 + d[1] ** 2 + d[2] ** 2)
        if self.kind == "cylinder":
            return math.hypot(d[0], d[1])
        return d[0] + d[1]

    def aabb(self):
        """(lo, hi) corners (3,) of the axis-aligned box around the shape in the parent frame."""
        R, p = self.T[:3, :3], self.T[:3, 3]
        d = self.dims
        if self.kind == "sphere":
            e = np.full(3, d[0])
        elif self.kind == "box":
            e = np.abs(R) @ np.array(d)
        else:
            e = np.abs(R[:, 2]) * d[1] + (np.sqrt(np.maximum(0.0, 1.0 - R[:, 2] ** 2)) * d[0]
                                          if self.kind == "cylinder" else d[0])
        return p - e, p + e

    def transformed(self, T_parent):
        """The same shape with its pose premultiplied by T_parent (4, 4)."""
        return Shape(self.kind, self.dims, np.asarray(T_parent) @ self.T, self.name)

    def signed_distance(self, points):
        """Exact signed distance (m) of points (N, 3) (parent frame) to the shape; (N,)."""
        P = np.ascontiguousarray(np.asarray(points, dtype=np.float64).reshape(-1, 3))
        row = pack([self])[0]
        out = np.empty(len(P))
        for i in range(len(P)):
            out[i] = sdf_point(row, P[i, 0], P[i, 1], P[i, 2])
        return out

    def sphere_cover(self, max_spheres=64):
        """Spheres (K, 4) [x, y, z, r] in the parent frame whose union contains the shape (conservative)."""
        local = _cover_local(self.kind, self.dims, max_spheres)
        out = local.copy()
        out[:, :3] = local[:, :3] @ self.T[:3, :3].T + self.T[:3, 3]
        return out


def pack(shapes):
    """(N, OBS_STRIDE) float64 rows for the kernels."""
    out = np.zeros((len(shapes), OBS_STRIDE))
    for i, s in enumerate(shapes):
        out[i, 0] = KINDS[s.kind]
        out[i, 1:4] = s.T[:3, 3]
        out[i, 4:13] = s.T[:3, :3].ravel()
        out[i, 13:13 + len(s.dims)] = s.dims
        out[i, 16] = s.bounding_radius()
        lo, hi = s.aabb()
        out[i, 17:20] = lo
        out[i, 20:23] = hi
    return out


@njit(inline="always", **_JIT)
def aabb_misses(O, i, x, y, z, r):
    """True when the sphere (x, y, z, r) misses the axis-aligned box around shape O[i] (a cheap reject)."""
    dx = max(O[i, 17] - x, 0.0, x - O[i, 20])
    dy = max(O[i, 18] - y, 0.0, y - O[i, 21])
    dz = max(O[i, 19] - z, 0.0, z - O[i, 22])
    return dx * dx + dy * dy + dz * dz > r * r


# ------------------------------------------------------------------------------------- signed distances
@njit(inline="always", **_JIT)
def sdf_row(O, i, x, y, z):
    """Signed distance (m) of point (x, y, z) to the packed shape O[i] (see module doc); 2-D indexing, no
    row views (a view costs reference counting in numba)."""
    dx, dy, dz = x - O[i, 1], y - O[i, 2], z - O[i, 3]
    kind = int(O[i, 0])
    if kind == SPHERE:
        return math.sqrt(dx * dx + dy * dy + dz * dz) - O[i, 13]
    # local coordinates: R^T d
    lx = O[i, 4] * dx + O[i, 7] * dy + O[i, 10] * dz
    ly = O[i, 5] * dx + O[i, 8] * dy + O[i, 11] * dz
    lz = O[i, 6] * dx + O[i, 9] * dy + O[i, 12] * dz
    if kind == BOX:
        qx, qy, qz = abs(lx) - O[i, 13], abs(ly) - O[i, 14], abs(lz) - O[i, 15]
        ox, oy, oz = max(qx, 0.0), max(qy, 0.0), max(qz, 0.0)
        return math.sqrt(ox * ox + oy * oy + oz * oz) + min(max(qx, max(qy, qz)), 0.0)
    if kind == CYLINDER:
        qr = math.sqrt(lx * lx + ly * ly) - O[i, 13]
        qa = abs(lz) - O[i, 14]
        orr, oa = max(qr, 0.0), max(qa, 0.0)
        return math.sqrt(orr * orr + oa * oa) + min(max(qr, qa), 0.0)
    # capsule
    t = min(max(lz, -O[i, 14]), O[i, 14])
    ez = lz - t
    return math.sqrt(lx * lx + ly * ly + ez * ez) - O[i, 13]


@njit(**_JIT)
def sdf_point(o, x, y, z):
    """Signed distance (m) of point (x, y, z) to one packed shape row o (OBS_STRIDE,)."""
    return sdf_row(o.reshape(1, OBS_STRIDE), 0, x, y, z)


def sphere_sphere_distance(c1, r1, c2, r2):
    """Signed distance (m) between two spheres: |c1 - c2| - r1 - r2."""
    return float(np.linalg.norm(np.asarray(c1, float) - np.asarray(c2, float)) - r1 - r2)


def sphere_shape_distance(center, radius, shape):
    """Signed distance (m) between a sphere and a shape (exact: sdf(center) - radius)."""
    return float(shape.signed_distance(np.asarray(center, float).reshape(1, 3))[0] - radius)


# ----------------------------------------------------------------------------------------- sphere covers
def _grid(n_cells, half):
    """Cell centres (1-D) of n_cells equal cells over [-half, half]."""
    w = 2.0 * half / n_cells
    return -half + w * (np.arange(n_cells) + 0.5), 0.5 * w


def _cover_local(kind, d, max_spheres):
    """Conservative cover in the shape frame: every cell of a grid gets the sphere through its corners."""
    if kind == "sphere":
        return np.array([[0.0, 0.0, 0.0, d[0]]])
    if kind == "capsule":
        r, hl = d
        n = max(1, int(math.ceil(hl / max(r, 1e-9))) + 1)
        n = min(n, max_spheres)
        if n == 1:
            return np.array([[0.0, 0.0, 0.0, r + hl]])
        z = np.linspace(-hl, hl, n)
        gap = 0.5 * (z[1] - z[0])
        return np.column_stack([np.zeros(n), np.zeros(n), z, np.full(n, math.hypot(r, gap))])
    if kind == "cylinder":
        r, hh = d
        # spheres on the axis, in slabs at most r/2 thick: at most 1.118 r (as the capsule's), but reaching
        # up to 0.62 r past the caps; a disc-like cylinder is covered better in its plane
        n = min(max(1, int(math.ceil(hh / max(0.5 * r, 1e-9)))), max_spheres)
        z, half_w = _grid(n, hh)
        axial = np.column_stack([np.zeros(n), np.zeros(n), z, np.full(n, math.hypot(r, half_w))])
        if hh >= r:
            return axial
        flat = _flat_cylinder_cover(r, hh, max_spheres)
        return min((axial, flat), key=lambda S: _cylinder_overshoot(S, r, hh))
    h = np.array(d)
    # cells about as wide as the smallest extent, at most max_spheres of them
    w = max(2.0 * h.min(), 1e-9)
    while True:
        n = np.maximum(1, np.ceil(2.0 * h / w - 1e-9)).astype(int)
        if n.prod() <= max_spheres:
            break
        w *= 1.25
    axes = [_grid(n[k], h[k]) for k in range(3)]
    X, Y, Z = np.meshgrid(axes[0][0], axes[1][0], axes[2][0], indexing="ij")
    r = math.sqrt(sum(a[1] ** 2 for a in axes))
    return np.column_stack([X.ravel(), Y.ravel(), Z.ravel(), np.full(X.size, r)])


def _cylinder_overshoot(S, r, hh):
    """How far (m) a cover S (K, 4), in the frame of a cylinder (radius r, half height hh along z), reaches past
    its mantle or past its caps, whichever is more."""
    return max(float(np.max(np.hypot(S[:, 0], S[:, 1]) + S[:, 3])) - r, float(np.max(np.abs(S[:, 2]) + S[:, 3])) - hh)


def _flat_cylinder_cover(r, hh, max_spheres):
    """Cover of a disc-like cylinder (radius r, half height hh < r) by spheres in its mid-plane: one on the
    axis for the centre disc and rings of annular sectors around it, each sphere reaching the farthest corner
    of its sector (the distance from a point of the bisector to the sector is largest at a corner: it grows
    with |angle| and is convex along the radius) and the caps (+ hh in quadrature). One sphere on the axis
    would reach r above and below a disc only 2 hh thick."""
    cell = max(hh, r / 5.0)   # half size of a cell in the plane (grown when that needs more than max_spheres)
    while True:
        r0 = min(cell, r)
        rings = int(math.ceil((r - r0) / (2.0 * cell) - 1e-9)) if r > r0 else 0
        edges = np.linspace(r0, r, rings + 1)
        sectors = [max(3, int(math.ceil(2.0 * math.pi * rb / (2.0 * cell) - 1e-9))) for rb in edges[1:]]
        if 1 + sum(sectors) <= max_spheres or cell >= r:
            break
        cell *= 1.25
    out = [[0.0, 0.0, 0.0, math.hypot(r0, hh)]]
    for ra, rb, m in zip(edges[:-1], edges[1:], sectors):
        phi = math.pi / m
        c, s = math.cos(phi), math.sin(phi)
        rc = 0.5 * (ra * c + rb)
        reach = max(math.hypot(ra * c - rc, ra * s), math.hypot(rb * c - rc, rb * s))
        R = math.hypot(reach, hh)
        for k in range(m):
            a = 2.0 * phi * k
            out.append([rc * math.cos(a), rc * math.sin(a), 0.0, R])
    return np.array(out)


def points_sphere_cover(points, cell_m):
    """Spheres (K, 4) covering a point set (N, 3): one per occupied cell of a cell_m grid, centred on the
    cell and reaching its farthest point plus nothing else (conservative for the points given)."""
    P = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    if len(P) == 0:
        return np.zeros((0, 4))
    keys = np.floor(P / cell_m).astype(np.int64)
    uniq, inv = np.unique(keys, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    out = np.zeros((len(uniq), 4))
    for k in range(len(uniq)):
        pts = P[inv == k]
        c = 0.5 * (pts.min(axis=0) + pts.max(axis=0))
        out[k, :3] = c
        out[k, 3] = np.max(np.linalg.norm(pts - c, axis=1))
    return out
