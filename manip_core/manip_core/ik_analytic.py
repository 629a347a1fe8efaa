"""Closed-form inverse kinematics with all branches, derived from the screw axes (Paden-Kahan subproblems).

Works on the Product-of-Exponentials description T(q) = e^[S1 q1] ... e^[Sn qn] M (Modern Robotics, Lynch &
Park 2017): S (6, n) space-frame screw axes [omega; v] (v = -omega x p for a revolute joint through p) and the
tip pose M (4, 4) at q = 0, so any URDF frame convention works (not only DH). Lengths in m, angles in rad,
everything in the base frame.

Kinds, as ``AnalyticIK.detect`` recognises them (all joints revolute or continuous, unit axes, zero pitch;
"parallel" = |w_i x w_j| < tol, "intersecting" = common-normal length < tol m, tol = 1e-6 by default; the
"not parallel" conditions need |w_i x w_j| > 1000 tol):

* ``"ur6r"`` (full pose, up to 8 solutions): n = 6, axes 2, 3, 4 parallel (direction h, signs free), axis 1
  not parallel to h, axes 5 and 6 intersecting at W0 and not parallel, h not parallel to axis 5, axes 2/3 and
  3/4 distinct lines. The UR3/5/10 family with any base/tool frame. Solution: W = T M^-1 W0;
  theta1 from (R1 h).(W - p1) = h.(W0 - p1) (two roots: shoulder-left/right); theta5 from
  h.(R5 w6) = h.(R1^T R w6) (two roots: wrist-noflip/flip); theta6 and phi = theta2 + theta3 + theta4 by
  subproblem 1; theta3 by the law of cosines in the plane normal to h (elbow-up/down), theta2 by
  subproblem 1, theta4 = phi - theta2 - theta3. Wrist singularity (axis 6 parallel to h): theta6 = 0
  (or, when that leaves the wrist out of the elbow's reach, the theta6 nearest 0 that does not).
* ``"ypp3"`` (tip position, up to 4): n = 3, axes 2 and 3 parallel (h), axis 1 (the yaw) not parallel to h,
  the tip not on axis 3. theta1 from (R1 h).(P - p1) = h.(P0 - p1) (shoulder-front: facing the target,
  shoulder-back: flipped over the top; a target on the yaw axis gives theta1 = 0 and pi), then the law of
  cosines (elbow-up/down).
* ``"planar2r"`` (tip position in the plane of motion, up to 2): n = 2, the two axes parallel and distinct,
  the tip not on axis 2.

Every returned solution is wrapped by multiples of 2 pi into the joint limits (continuous joints into
(-pi, pi]), free of duplicates (1e-9 rad) and verified by forward kinematics (errors below 1e-9 m and
1e-9 rad). Geometry that is only nearly ideal (within tol) is solved on the ideal geometry; a solution that
then misses the FK check is polished by Newton steps on the true screws and checked again.
"""
from __future__ import annotations

import math

import numpy as np

from .errors import InputError
from .spatial import adjoint, exp6, inv_transform, log3, pose_error, skew

TWO_PI = 2.0 * math.pi
GEOMETRY_TOL = 1e-6     # detection: |w_i x w_j| for "parallel", line distance (m) for "intersecting"
FK_TOL = 1e-9           # m and rad: a solution is returned only if its FK reaches the target this closely
DUPLICATE_TOL = 1e-9    # rad: solutions closer than this (mod 2 pi) are one solution
REACH_TOL = 1e-10       # m (or unitless for directions): slack before a boundary target counts as unreachable
LIMIT_TOL = 1e-10       # rad: a value this far past a limit is clipped onto it
EDGE_SNAP = 1e-13       # m: a target this close to a reach edge is put on it (else sqrt(rounding) ~ 1e-8 rad
                        # splits the double root into two near-duplicate solutions)
SINGULAR_TOL = 1e-10    # |h x u| below which the wrist counts as singular (orientation error <= pi * 1e-10)
_REVOLUTE = ("revolute", "continuous")

_LABEL_ORDER = {"shoulder-left": 0, "shoulder-right": 1, "shoulder-front": 0, "shoulder-back": 1,
                "wrist-noflip": 0, "wrist-flip": 1, "elbow-up": 0, "elbow-down": 1}


# ----------------------------------------------------------------------------------------------- helpers

def fk_poe(S, M, q):
    """T(q) = e^[S1 q1] ... e^[Sn qn] M (4, 4), S (6, n) space screw axes, M (4, 4) tip pose at q = 0."""
    T = np.eye(4)
    for i in range(S.shape[1]):
        T = T @ exp6(S[:, i], q[i])
    return T @ M


def space_jacobian(S, q):
    """J_s (6, n): column i = Ad(e^[S1 q1] ... e^[S(i-1) q(i-1)]) S_i (MR eq. 5.11), rows [omega; v]."""
    n = S.shape[1]
    J = np.zeros((6, n))
    T = np.eye(4)
    for i in range(n):
        J[:, i] = adjoint(T) @ S[:, i] if i else S[:, i]
        T = T @ exp6(S[:, i], q[i])
    return J


def _cross(a, b):
    """a x b for 3-vectors (np.cross is slow on single vectors)."""
    return np.array([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]])


def _unit(x):
    """x / |x|."""
    return x / np.linalg.norm(x)


def _perp(h, x):
    """Component of x normal to the unit vector h: x - (h.x) h."""
    return x - np.dot(h, x) * h


def _rot_about(h, phi, x):
    """Rodrigues rotation of x about the unit axis h by phi (rad)."""
    return x * math.cos(phi) + _cross(h, x) * math.sin(phi) + h * np.dot(h, x) * (1.0 - math.cos(phi))


def _angle_about(h, x, y):
    """Angle phi (rad) of the rotation about the unit h taking perp(x) onto the direction of perp(y)."""
    return math.atan2(float(np.dot(h, _cross(x, y))), float(np.dot(_perp(h, x), _perp(h, y))))


def _axis_point(w, v):
    """Point on the screw axis [w; v] closest to the origin: p = w x v (unit w, zero pitch)."""
    return _cross(w, v)


def _closest_points(p1, w1, p2, w2):
    """(midpoint, distance) of the common normal of two non-parallel lines p + t w (m)."""
    n = _cross(w1, w2)
    nn = float(np.dot(n, n))
    d = p2 - p1
    t1 = float(np.dot(_cross(d, w2), n)) / nn
    t2 = float(np.dot(_cross(d, w1), n)) / nn
    a, b = p1 + t1 * w1, p2 + t2 * w2
    return 0.5 * (a + b), float(np.linalg.norm(a - b))


def _wrap_pi(x):
    """x wrapped into (-pi, pi]."""
    y = math.remainder(x, TWO_PI)
    return math.pi if y <= -math.pi else y


def _solve_acos_bsin(a, b, c, tol=REACH_TOL):
    """Roots x of a cos x + b sin x = c: atan2(b, a) +- atan2(sqrt(r^2 - c^2), c), r = hypot(a, b).

    Returns (roots, excess): roots [] and excess = |c| - r > 0 when there is none; a double root is returned
    twice (duplicates are removed later).
    """
    r = math.hypot(a, b)
    if abs(c) > r + tol:
        return [], abs(c) - r
    s = 0.0 if r - abs(c) < EDGE_SNAP else math.sqrt((r - c) * (r + c))
    base, half = math.atan2(b, a), math.atan2(s, c)
    return [base + half, base - half], 0.0


class _Planar2:
    """Two parallel revolute axes a, b (direction h, through pa, pb) moving the point x0 (m).

    Solves perp(e^[Sa pa] e^[Sb pb] x0 - pa) = perp(target - pa) for the rotations (phi_a, phi_b) about +h:
    |a + Rot(h, phi_b) b| = |d| (law of cosines) gives phi_b, then subproblem 1 rotates a + Rot b onto d.
    """

    def __init__(self, h, pa, pb, x0):
        self.h, self.pa = h, pa
        self.a = _perp(h, pb - pa)
        self.b = _perp(h, x0 - pb)
        self.la, self.lb = float(np.linalg.norm(self.a)), float(np.linalg.norm(self.b))
        self.lo, self.hi = abs(self.la - self.lb), self.la + self.lb
        self._A = float(np.dot(self.a, self.b))
        self._B = float(np.dot(self.a, _cross(h, self.b)))

    def distance(self, target):
        """|perp(target - pa)| (m): the target's distance from axis a."""
        return float(np.linalg.norm(_perp(self.h, target - self.pa)))

    def solve(self, target, up=None):
        """[(phi_a, phi_b, elbow_label)], [] when |d| is outside [lo, hi] (with REACH_TOL slack)."""
        d = _perp(self.h, target - self.pa)
        ld = float(np.linalg.norm(d))
        if ld > self.hi + REACH_TOL or ld < self.lo - REACH_TOL:
            return []
        if self.hi - ld < EDGE_SNAP or ld - self.lo < EDGE_SNAP:
            ld = self.hi if self.hi - ld < EDGE_SNAP else self.lo     # exactly stretched / folded: one root
        C = 0.5 * (ld * ld - self.la * self.la - self.lb * self.lb)
        # sqrt((la lb)^2 - C^2) from the well-conditioned factors (hi^2 - ld^2)(ld^2 - lo^2) / 4.
        s2 = 0.25 * max(0.0, (self.hi - ld) * (self.hi + ld)) * max(0.0, (ld - self.lo) * (ld + self.lo))
        base, half = math.atan2(self._B, self._A), math.atan2(math.sqrt(s2), C)
        out = []
        for phi_b in (base + half, base - half):
            v = self.a + _rot_about(self.h, phi_b, self.b)
            phi_a = _angle_about(self.h, v, d) if ld > 0.0 else 0.0
            out.append((phi_a, phi_b, self._elbow_label(phi_a, d, ld, up)))
        return out

    def _elbow_label(self, phi_a, d, ld, up):
        """'elbow-up' when the elbow (axis b) lies on the 'up' side of the line from axis a to the target.

        'up' is the first joint's axis (base vertical) projected into the plane of motion; for a planar arm,
        or when that is along the line, it is h x d (to the left of the line, looking down -h).
        """
        e = _rot_about(self.h, phi_a, self.a)
        dh = d / ld if ld > 0.0 else _unit(self.a)
        n = np.zeros(3) if up is None else _perp(dh, _perp(self.h, up))
        if np.linalg.norm(n) < 1e-9:
            n = _cross(self.h, dh)
        return "elbow-up" if np.dot(e, n) >= -1e-12 * self.la else "elbow-down"   # straight: "up"


# -------------------------------------------------------------------------------------------- the solver

class AnalyticIK:
    """Closed-form IK of one recognised arm geometry; build with ``AnalyticIK.detect``.

    Attributes: kind ("ur6r", "ypp3", "planar2r"), position_only (True for ypp3 and planar2r), S (6, n),
    M (4, 4), lower/upper (n,) joint limits in rad (+-inf for continuous), joint_names.
    """

    def __init__(self, kind, S, M, joint_types, lower, upper, joint_names, geometry):
        self.kind = kind
        self.position_only = kind != "ur6r"
        self.S, self.M = S, M
        self.n = S.shape[1]
        self.joint_types = list(joint_types)
        self.lower, self.upper = lower, upper
        self.joint_names = list(joint_names)
        self._g = geometry

    def __repr__(self):
        return f"AnalyticIK(kind={self.kind!r}, joints={self.joint_names})"

    def packed(self):
        """(kind code, gf, S, M, M^-1, lower, upper): this solver's geometry as the arrays of the numba kernels
        in manip_core._ik_closed_kernel (solve_all / solve_all_batch); cached."""
        if getattr(self, "_packed", None) is None:
            from . import _ik_closed_kernel as C
            g = self._g
            gf = np.zeros(C.G_SIZE)

            def put(o, x):
                x = np.atleast_1d(np.asarray(x, dtype=float))
                gf[o:o + x.size] = x

            put(C.G_H, g["h"])
            put(C.G_SIGNS, g["signs"])
            for key, o in (("w1", C.G_W1), ("p1", C.G_P1), ("w5", C.G_W5), ("w6", C.G_W6), ("W0", C.G_W0),
                           ("p4", C.G_P4), ("c1", C.G_C1), ("hav_min", C.G_HAV_MIN), ("cos2_max", C.G_COS2_MAX),
                           ("gamma0", C.G_GAMMA0), ("x6", C.G_X6), ("xh", C.G_XH), ("P0", C.G_P0)):
                if key in g:
                    put(o, g[key])
            pl = g["planar"]
            for x, o in ((pl.pa, C.G_PA), (pl.a, C.G_A), (pl.b, C.G_B), (pl.la, C.G_LA), (pl.lb, C.G_LB),
                         (pl.lo, C.G_LO), (pl.hi, C.G_HI), (pl._A, C.G_AB_A), (pl._B, C.G_AB_B)):
                put(o, x)
            kind = {"ur6r": C.KIND_UR6R, "ypp3": C.KIND_YPP3, "planar2r": C.KIND_PLANAR2R}[self.kind]
            c = np.ascontiguousarray
            self._packed = (kind, gf, c(self.S, dtype=float), c(self.M, dtype=float), c(inv_transform(self.M)),
                            c(self.lower, dtype=float), c(self.upper, dtype=float))
        return self._packed

    def solve_batch(self, T_targets):
        """All in-limit solutions of N targets at once (numba, one thread): (Q (N, 8, n), counts (N,)), the
        solutions of target i in Q[i, :counts[i]] (unsorted, no labels). T_targets: (N, 4, 4) tip poses in the
        base frame (position-only kinds use T[:, :3, 3]); a target holding NaN or inf gets no solution."""
        from . import _ik_closed_kernel as C
        T = np.ascontiguousarray(T_targets, dtype=np.float64)
        if T.ndim != 3 or T.shape[1:] != (4, 4):
            raise InputError(f"T_targets must have shape (N, 4, 4), got {T.shape}")
        Q = np.full((T.shape[0], C.MAX_SOLUTIONS, self.n), np.nan)
        counts = np.zeros(T.shape[0], dtype=np.int64)
        if T.shape[0]:
            C.solve_all_batch(*self.packed(), T, Q, counts)
        return Q, counts

    # ------------------------------------------------------------------------------------------ detect

    @classmethod
    def detect(cls, screw_axes_space, home, joint_types, lower=None, upper=None, joint_names=None,
               tol=GEOMETRY_TOL):
        """An AnalyticIK for this chain, or None when no closed form applies.

        screw_axes_space (6, n) [omega; v] in the base frame; home (4, 4) tip pose M at q = 0; joint_types
        ("revolute"/"continuous"; anything else means no closed form); lower/upper (n,) rad, None or +-inf =
        unbounded; tol: |w_i x w_j| below it = parallel, line distance (m) below it = intersecting.
        Rules: see the module docstring. Slightly inexact geometry (within tol) is solved on the ideal
        geometry, and a solution that then misses the FK check is polished by Newton steps on the true screws.
        Raises InputError when lower/upper/joint_names do not have n entries.
        """
        S = np.asarray(screw_axes_space, dtype=float)
        M = np.asarray(home, dtype=float)
        if S.ndim != 2 or S.shape[0] != 6 or M.shape != (4, 4) or len(joint_types) != S.shape[1]:
            return None
        n = S.shape[1]
        if n not in (2, 3, 6) or not np.all(np.isfinite(S)) or not np.all(np.isfinite(M)):
            return None
        if any(str(t).lower() not in _REVOLUTE for t in joint_types):
            return None
        w, v = S[:3], S[3:]
        if np.any(np.abs(np.linalg.norm(w, axis=0) - 1.0) > tol) or np.any(np.abs(np.sum(w * v, 0)) > tol):
            return None                                   # not unit-axis, zero-pitch rotations
        lower = np.full(n, -np.inf) if lower is None else np.asarray(lower, dtype=float).copy()
        upper = np.full(n, np.inf) if upper is None else np.asarray(upper, dtype=float).copy()
        names = list(joint_names) if joint_names is not None else [f"joint {i + 1}" for i in range(n)]
        if lower.shape != (n,) or upper.shape != (n,) or len(names) != n:
            raise InputError(f"lower, upper and joint_names need {n} entries, got {lower.shape}, {upper.shape}, "
                             f"{len(names)}")
        for i, t in enumerate(joint_types):
            if str(t).lower() == "continuous":
                lower[i], upper[i] = -np.inf, np.inf
        axes = [_unit(w[:, i]) for i in range(n)]
        points = [_axis_point(axes[i], v[:, i]) for i in range(n)]
        builder = {6: cls._geometry_ur6r, 3: cls._geometry_ypp3, 2: cls._geometry_planar2r}[n]
        found = builder(axes, points, M, tol)
        if found is None:
            return None
        kind, geometry = found
        return cls(kind, S, M, joint_types, lower, upper, names, geometry)

    @staticmethod
    def _parallel_group(axes, idx, tol):
        """(h, signs) when the axes idx are parallel (h = their sign-aligned mean), else None."""
        h0 = axes[idx[0]]
        signs = [1.0 if np.dot(axes[i], h0) > 0 else -1.0 for i in idx]
        if any(np.linalg.norm(_cross(axes[i], h0)) > tol for i in idx):
            return None
        return _unit(sum(s * axes[i] for s, i in zip(signs, idx))), np.array(signs)

    @classmethod
    def _geometry_ur6r(cls, axes, points, M, tol):
        """Axes 2, 3, 4 parallel to h; axis 1 not parallel to h; axes 5, 6 intersect at W0; h not || axis 5."""
        group = cls._parallel_group(axes, [1, 2, 3], tol)
        if group is None:
            return None
        h, signs = group
        w1, w5, w6 = axes[0], axes[4], axes[5]
        if min(np.linalg.norm(_cross(w1, h)), np.linalg.norm(_cross(w5, w6)),
               np.linalg.norm(_cross(h, w5))) < 1e3 * tol:
            return None
        W0, gap = _closest_points(points[4], w5, points[5], w6)
        if gap > tol:
            return None
        planar = _Planar2(h, points[1], points[2], points[3])
        if min(planar.la, planar.lb) < 1e3 * tol:
            return None
        sigma = math.atan2(np.linalg.norm(_cross(h, w5)), np.dot(h, w5))     # angle(h, w5)
        rho = math.atan2(np.linalg.norm(_cross(w5, w6)), np.dot(w5, w6))     # angle(w5, w6)
        w6_perp = _perp(w5, w6)
        return "ur6r", dict(
            h=h, signs=signs, w1=w1, p1=points[0], w5=w5, w6=w6, W0=W0, planar=planar, p4=points[3],
            c1=float(np.dot(h, W0 - points[0])),
            hav_min=math.sin(0.5 * (sigma - rho)) ** 2, cos2_max=math.cos(0.5 * (sigma + rho)) ** 2,
            wrist_range=(abs(sigma - rho), sigma + rho),
            gamma0=math.atan2(np.dot(h, _cross(w5, w6)), np.dot(h, w6_perp)),
            x6=_unit(_cross(w6, w5)), xh=_unit(_cross(h, w5)))

    @classmethod
    def _geometry_ypp3(cls, axes, points, M, tol):
        """Axes 2, 3 parallel to h; axis 1 not parallel to h; tip off axis 3; axes 2, 3 distinct."""
        group = cls._parallel_group(axes, [1, 2], tol)
        if group is None or np.linalg.norm(_cross(axes[0], group[0])) < 1e3 * tol:
            return None
        h, signs = group
        P0 = M[:3, 3].copy()
        planar = _Planar2(h, points[1], points[2], P0)
        if min(planar.la, planar.lb) < 1e3 * tol:
            return None
        w1, p1 = axes[0], points[0]
        reach = _perp(w1, _perp(h, P0 - points[1]))            # the arm's horizontal reach direction at home
        forward = reach if np.linalg.norm(reach) > 1e3 * tol else _cross(h, w1)
        return "ypp3", dict(h=h, signs=signs, w1=w1, p1=p1, P0=P0, planar=planar, p2=points[1],
                            c1=float(np.dot(h, P0 - p1)), forward=_unit(_perp(w1, forward)),
                            vertical_plane=bool(abs(np.dot(w1, h)) < tol))

    @classmethod
    def _geometry_planar2r(cls, axes, points, M, tol):
        """Axes 1, 2 parallel (distinct), tip off axis 2."""
        group = cls._parallel_group(axes, [0, 1], tol)
        if group is None:
            return None
        h, signs = group
        P0 = M[:3, 3].copy()
        planar = _Planar2(h, points[0], points[1], P0)
        if min(planar.la, planar.lb) < 1e3 * tol:
            return None
        return "planar2r", dict(h=h, signs=signs, P0=P0, planar=planar, p1=points[0])

    # ------------------------------------------------------------------------------------------- solve

    def solve(self, T_target, near=None):
        """(solutions, reason): every in-limit joint vector (n,) reaching T_target, reason "" when any.

        T_target: (4, 4) tip pose in the base frame; for position-only kinds a (3,) position (m) is accepted
        too (only T_target[:3, 3] is used). near: optional (n,) joints; each angle then takes the in-limit
        2 pi-representative nearest to it and solutions are sorted by distance to it (default: nearest 0,
        sorted by branch: shoulder, wrist, elbow).
        """
        labeled, reason = self.solve_labeled(T_target, near)
        return [q for q, _ in labeled], reason

    def solve_labeled(self, T_target, near=None):
        """([(q, label)], reason), label like "shoulder-left/wrist-noflip/elbow-up"; see solve."""
        target = self._check_target(T_target)
        if near is not None:
            near = np.asarray(near, dtype=float).reshape(-1)
            if near.shape != (self.n,) or not np.all(np.isfinite(near)):
                raise InputError(f"near must be ({self.n},) finite joint values, got shape {near.shape}")
        raw, failures = {"ur6r": self._branches_ur6r, "ypp3": self._branches_ypp3,
                         "planar2r": self._branches_planar2r}[self.kind](target)
        if not raw:
            return [], min(failures)[1] if failures else "no closed-form solution"
        return self._finish(raw, target, near)

    def _check_target(self, T_target):
        """(4, 4) pose, or for position-only kinds a (3,) position; raises InputError on bad input."""
        T = np.asarray(T_target, dtype=float)
        if self.position_only and T.shape == (3,):
            P = np.eye(4)
            P[:3, 3] = T
            T = P
        if T.shape != (4, 4):
            want = "(4, 4) pose or (3,) position" if self.position_only else "(4, 4) pose"
            raise InputError(f"target must be a {want}, got shape {T.shape}")
        if not np.all(np.isfinite(T)):
            raise InputError("target holds NaN or inf")
        return T

    # ---------------------------------------------------------------------------------- kind: ur6r

    def _theta1(self, w1, p1, h, c1, X):
        """Roots of (R1 h).(X - p1) = c1 for the rotation R1 = Rot(w1, theta1): (roots, excess m).

        R1 h = cos t (h - (w1.h) w1) + sin t (w1 x h) + (w1.h) w1, so a cos t + b sin t = c.
        A point on axis 1 with c = 0 leaves theta1 free: 0 and pi are returned.
        """
        r = X - p1
        wh = float(np.dot(w1, h))
        a = float(np.dot(h - wh * w1, r))
        b = float(np.dot(_cross(w1, h), r))
        c = c1 - wh * float(np.dot(w1, r))
        if math.hypot(a, b) < REACH_TOL and abs(c) <= REACH_TOL:
            return [0.0, math.pi], 0.0
        return _solve_acos_bsin(a, b, c)

    def _shoulder_label(self, w1, p1, h, theta1, X, left_right, index=0):
        """Shoulder branch: left/right = side of the offset axis seen from above; front/back = facing the
        target or not (for a target on the yaw axis: the root index, 0 front, 1 back)."""
        r = _perp(w1, X - p1)
        if left_right:
            h1 = _rot_about(w1, theta1, h)
            return "shoulder-left" if np.dot(_cross(w1, r), h1) >= 0.0 else "shoulder-right"
        if np.linalg.norm(r) < REACH_TOL:
            return "shoulder-front" if index == 0 else "shoulder-back"
        f = _rot_about(w1, theta1, self._g["forward"])
        return "shoulder-front" if np.dot(f, r) >= -REACH_TOL else "shoulder-back"

    def _wrist_roots(self, u):
        """theta5 with h . R5 w6 = h . u, from the spherical triangle (h, w5, R5 w6) with half-angle formulas.

        hav(angle(h, u)) = hav(sigma - rho) + sin(sigma) sin(rho) hav(psi), psi = rotation about w5 away from
        gamma0 (where R5 w6 is closest to h): theta5 = gamma0 +- psi. Returns (roots, excess).
        """
        g = self._g
        h = g["h"]
        hav_e = 0.25 * float(np.dot(u - h, u - h))       # sin^2(eps / 2), accurate near eps = 0
        cos2_e = 0.25 * float(np.dot(u + h, u + h))      # cos^2(eps / 2), accurate near eps = pi
        lo, hi = hav_e - g["hav_min"], cos2_e - g["cos2_max"]
        if lo < -REACH_TOL or hi < -REACH_TOL:
            return [], max(-lo, -hi)
        psi = 2.0 * math.atan2(math.sqrt(max(lo, 0.0)), math.sqrt(max(hi, 0.0)))
        return [g["gamma0"] + psi, g["gamma0"] - psi], 0.0

    def _wrist_rest(self, R_rem, theta5):
        """(phi, theta6, sigma) with Rot(h, phi) R5 R6 = R_rem, phi = theta2 + theta3 + theta4 (signed about h).

        Subproblem 1 on w6: Rot(h, phi) R5 w6 = R_rem w6, then theta6 from R6 = R5^T Rot(h, -phi) R_rem;
        sigma = 0. At the wrist singularity (R_rem w6 = sigma h, sigma = +-1; sin(theta5) = 0 for UR) only
        phi + sigma theta6 is fixed: theta6 = 0 is returned with phi taking the whole rotation, and
        _singular_theta6 then settles theta6.
        """
        g = self._g
        h, w5, w6 = g["h"], g["w5"], g["w6"]
        R5 = _rodrigues(w5, theta5)
        u = R_rem @ w6
        if np.linalg.norm(_cross(h, u)) < SINGULAR_TOL:
            R_phi = R_rem @ R5.T
            return _angle_about(h, g["xh"], R_phi @ g["xh"]), 0.0, (1.0 if np.dot(h, u) > 0 else -1.0)
        phi = _angle_about(h, R5 @ w6, u)
        R6 = R5.T @ _rodrigues(h, -phi) @ R_rem
        return phi, _angle_about(w6, g["x6"], R6 @ g["x6"]), 0.0

    def _singular_theta6(self, Y, g5_inv, sigma):
        """theta6 at the wrist singularity: 0 when the joint-4 axis is then within the elbow's reach, else the
        theta6 nearest 0 that brings it onto the edge of the reach shell; None when no theta6 does.

        There axes 2, 3, 4, 6 are parallel: turning theta6 (and phi by -sigma theta6) swings the joint-4 axis
        point Q on a circle about the axis-6 line, Q(theta6) - W = Rot(h, -sigma theta6)(Q(0) - W), so
        |D + Rot(h, t) e| = reach edge is a cos t + b sin t = c in t = -sigma theta6. Y = e^-[S1 q1] X.
        """
        g = self._g
        h, planar = g["h"], g["planar"]
        G0 = Y @ g5_inv
        Q0 = G0[:3, :3] @ g["p4"] + G0[:3, 3]
        d0 = planar.distance(Q0)
        if planar.lo <= d0 <= planar.hi:
            return 0.0
        W = Y[:3, :3] @ g["W0"] + Y[:3, 3]
        e, D = _perp(h, Q0 - W), _perp(h, W - planar.pa)
        edge = planar.hi if d0 > planar.hi else planar.lo
        roots, _ = _solve_acos_bsin(float(np.dot(D, e)), float(np.dot(D, _cross(h, e))),
                                    0.5 * (edge * edge - float(np.dot(D, D)) - float(np.dot(e, e))))
        if not roots:
            return None
        return min((_wrap_pi(-sigma * t) for t in roots), key=abs)

    def _branches_ur6r(self, T):
        """Raw (q, label) candidates for the 6R UR-type arm and the failure reasons (excess, sentence)."""
        g, S = self._g, self.S
        h, w1, p1, planar = g["h"], g["w1"], g["p1"], g["planar"]
        X = T @ inv_transform(self.M)                    # e^[S1 q1] ... e^[S6 q6]
        W = X[:3, :3] @ g["W0"] + X[:3, 3]               # axis-5/axis-6 intersection point at the target
        raw, failures = [], []
        roots1, excess = self._theta1(w1, p1, h, g["c1"], W)
        if not roots1:
            dist = float(np.linalg.norm(_perp(w1, W - p1)))
            failures.append((excess, f"target out of reach: the wrist centre is {dist:.3f} m from the base "
                                     f"axis, inside the {abs(g['c1']):.3f} m shoulder-offset cylinder"))
        for t1 in roots1:
            g1 = exp6(S[:, 0], t1)
            Y = inv_transform(g1) @ X                    # e^[S2 q2] ... e^[S6 q6]
            shoulder = self._shoulder_label(w1, p1, h, t1, W, left_right=True)
            R_rem = Y[:3, :3]
            roots5, excess5 = self._wrist_roots(R_rem @ g["w6"])
            if not roots5:
                lo, hi = g["wrist_range"]
                failures.append((excess5, "tool orientation out of reach: the last axis cannot make that "
                                          f"angle with the parallel axes (range {lo:.3f}..{hi:.3f} rad)"))
            for k5, t5 in enumerate(roots5):
                phi, t6, sigma = self._wrist_rest(R_rem, t5)
                g5_inv = exp6(S[:, 4], -t5)
                if sigma:
                    t6 = self._singular_theta6(Y, g5_inv, sigma)
                    if t6 is None:
                        failures.append((0.0, "target out of reach: at the wrist singularity no turn of the "
                                              "last joint brings the wrist within the elbow's reach"))
                        continue
                    phi -= sigma * t6
                G = Y @ exp6(S[:, 5], -t6) @ g5_inv       # e^[S2 q2] e^[S3 q3] e^[S4 q4]
                Q = G[:3, :3] @ g["p4"] + G[:3, 3]       # where axis 4 must pass (point on it)
                sols = planar.solve(Q, up=w1)
                if not sols:
                    failures.append(self._reach_failure(planar, Q, "the wrist (joint-4 axis) would be"))
                wrist = "wrist-noflip" if k5 == 0 else "wrist-flip"
                for phi2, phi3, elbow in sols:
                    s = g["signs"]
                    q = np.array([t1, s[0] * phi2, s[1] * phi3, s[2] * (phi - phi2 - phi3), t5, t6])
                    raw.append((q, f"{shoulder}/{wrist}/{elbow}"))
        return raw, failures

    @staticmethod
    def _reach_failure(planar, Q, what, suffix=""):
        """(excess m, sentence) for a planar target outside the reach shell [lo, hi]."""
        d = planar.distance(Q)
        where = "beyond" if d > planar.hi else "inside"
        why = "" if d > planar.hi else " (too close)"
        excess = d - planar.hi if d > planar.hi else planar.lo - d
        return excess, (f"target out of reach: {what} {d:.3f} m from the shoulder axis, {where} the reach "
                        f"shell {planar.lo:.3f}..{planar.hi:.3f} m{why}{suffix}")

    # ---------------------------------------------------------------------------------- kind: ypp3

    def _branches_ypp3(self, T):
        """Raw (q, label) candidates for the yaw-pitch-pitch arm (tip position) and failure reasons."""
        g, S = self._g, self.S
        h, w1, p1, planar = g["h"], g["w1"], g["p1"], g["planar"]
        P = T[:3, 3]
        raw, failures = [], []
        roots1, excess = self._theta1(w1, p1, h, g["c1"], P)
        if not roots1:
            dist = float(np.linalg.norm(_perp(w1, P - p1)))
            failures.append((excess, f"target out of reach: {dist:.3f} m from the yaw axis, inside the "
                                     f"{abs(g['c1']):.3f} m shoulder-offset cylinder"))
        for k1, t1 in enumerate(roots1):
            g1 = exp6(S[:, 0], t1)
            Q = g1[:3, :3].T @ (P - g1[:3, 3])           # e^-[S1 t1] P
            sols = planar.solve(Q, up=w1)
            if not sols:
                failures.append(self._reach_failure(planar, Q, "the target is", self._height_hint(P)))
            shoulder = self._shoulder_label(w1, p1, h, t1, P, left_right=False, index=k1)
            for phi2, phi3, elbow in sols:
                s = g["signs"]
                raw.append((np.array([t1, s[0] * phi2, s[1] * phi3]), f"{shoulder}/{elbow}"))
        return raw, failures

    def _height_hint(self, P):
        """'; height z = .. m is above/below ..' when the height along the yaw axis alone is out of reach."""
        g = self._g
        if not g["vertical_plane"]:
            return ""
        z, zs, reach = float(np.dot(g["w1"], P)), float(np.dot(g["w1"], g["p2"])), g["planar"].hi
        if z < zs - reach - REACH_TOL:
            return f"; its height z = {z:.3f} m is below the lowest reachable z = {zs - reach:.3f} m"
        if z > zs + reach + REACH_TOL:
            return f"; its height z = {z:.3f} m is above the highest reachable z = {zs + reach:.3f} m"
        return ""

    # ------------------------------------------------------------------------------ kind: planar2r

    def _branches_planar2r(self, T):
        """Raw (q, label) candidates for the planar 2R arm; the target must lie in the plane of motion."""
        g = self._g
        h, planar = g["h"], g["planar"]
        P = T[:3, 3]
        off = float(np.dot(h, P - g["P0"]))
        if abs(off) > REACH_TOL:
            return [], [(abs(off), f"target is {abs(off):.3g} m off the plane of motion (normal "
                                   f"{np.round(h, 6).tolist()}, through the tip at q = 0)")]
        sols = planar.solve(P)
        if not sols:
            d = planar.distance(P)
            excess = d - planar.hi if d > planar.hi else planar.lo - d
            where = "beyond" if d > planar.hi else "inside"
            return [], [(excess, f"target out of reach: {d:.3f} m from the first axis, {where} the reach "
                                 f"annulus {planar.lo:.3f}..{planar.hi:.3f} m")]
        s = g["signs"]
        return [(np.array([s[0] * a, s[1] * b]), elbow) for a, b, elbow in sols], []

    # ------------------------------------------------------------------------------- post-processing

    def _finish(self, raw, T, near):
        """Wrap into limits, drop duplicates, verify by FK (polishing only what fails), sort.

        Returns ([(q, label)], reason).
        """
        candidates, violations, failed = [], [], 0
        for q, label in raw:
            wrapped, bad = self._wrap(q, near)
            if not bad and not self._fk_ok(wrapped, T):
                wrapped, bad = self._wrap(self._polish(q, T), near)
                if not bad and not self._fk_ok(wrapped, T):
                    failed += 1
                    continue
            if bad:
                violations.append(bad)
            elif not any(_same(wrapped, c[0]) for c in candidates):
                candidates.append((wrapped, label))
        if not candidates:
            if failed:
                return [], (f"{failed} candidate solutions failed the forward-kinematics check "
                            "(internal error: please report)")
            return [], self._limit_reason(violations)
        if near is not None:
            candidates.sort(key=lambda c: float(np.linalg.norm(c[0] - near)))
        else:
            candidates.sort(key=lambda c: tuple(_LABEL_ORDER[p] for p in c[1].split("/")))
        return candidates, ""

    def _pose_errors(self, q, T):
        """(position error m, rotation error rad; 0 for position-only kinds) of FK(q) against T."""
        A = fk_poe(self.S, self.M, q)
        if self.position_only:
            return float(np.linalg.norm(A[:3, 3] - T[:3, 3])), 0.0
        return pose_error(A, T)

    def _fk_ok(self, q, T):
        """FK(q) reaches T within FK_TOL (m and rad): the numba check of _ik_closed_kernel (the same maths as
        _pose_errors, ~100x faster than the NumPy product of exponentials)."""
        from . import _ik_closed_kernel as C
        _, _, S, M, _, _, _ = self.packed()
        return bool(C._fk_ok(S, M, np.ascontiguousarray(q, dtype=float), np.ascontiguousarray(T, dtype=float),
                             self.position_only))

    def _polish(self, q, T, iterations=5):
        """Newton steps J dq = error on the true screws while the FK error is above 1e-13 (a no-op for exact
        geometry; it absorbs geometry that detect accepted as parallel/intersecting within its tol)."""
        for _ in range(iterations):
            A = fk_poe(self.S, self.M, q)
            p = A[:3, 3]
            if self.position_only:
                e = T[:3, 3] - p
                if np.linalg.norm(e) < 1e-13:
                    break
                J = space_jacobian(self.S, q)
                Jp = J[3:] - skew(p) @ J[:3]              # tip-point velocity rows: v + omega x p
                q = q + np.linalg.lstsq(Jp, e, rcond=None)[0]
                continue
            w = log3(T[:3, :3] @ A[:3, :3].T)             # space-frame rotation error
            V = np.concatenate([w, T[:3, 3] - p - _cross(w, p)])
            if np.linalg.norm(V) < 1e-13:
                break
            q = q + np.linalg.lstsq(space_jacobian(self.S, q), V, rcond=None)[0]
        return q

    def _wrap(self, q, near):
        """(q wrapped by multiples of 2 pi into [lower, upper], [(joint index, value)] that cannot be)."""
        out, bad = q.copy(), []
        for i in range(self.n):
            lo, hi = self.lower[i], self.upper[i]
            ref = 0.0 if near is None else float(near[i])
            x = float(q[i])
            if not (np.isfinite(lo) and np.isfinite(hi)):
                out[i] = _wrap_pi(x) if near is None else x + TWO_PI * round((ref - x) / TWO_PI)
                if np.isfinite(lo) and out[i] < lo:
                    out[i] += TWO_PI * math.ceil((lo - out[i]) / TWO_PI)
                if np.isfinite(hi) and out[i] > hi:
                    out[i] -= TWO_PI * math.ceil((out[i] - hi) / TWO_PI)
                continue
            kmin = math.ceil((lo - LIMIT_TOL - x) / TWO_PI)
            kmax = math.floor((hi + LIMIT_TOL - x) / TWO_PI)
            if kmin > kmax:
                bad.append((i, _wrap_pi(x)))
                continue
            k = min(max(round((ref - x) / TWO_PI), kmin), kmax)
            out[i] = min(max(x + TWO_PI * k, lo), hi)
        return out, bad

    def _limit_reason(self, violations):
        """'all N solutions violate joint limits (joint 'x' outside a..b rad in k, e.g. v rad; ...)'."""
        per_joint = {}
        for bad in violations:
            for i, x in bad:
                per_joint.setdefault(i, []).append(x)
        n = len(violations)
        parts = [f"joint '{self.joint_names[i]}' outside {self.lower[i]:.3f}..{self.upper[i]:.3f} rad in "
                 f"{len(xs)} of {n} (e.g. {xs[0]:.3f} rad)" for i, xs in sorted(per_joint.items())]
        return f"all {n} solutions violate joint limits ({'; '.join(parts)})"


def _rodrigues(w, theta):
    """Rot(w, theta) = I + sin [w] + (1 - cos) [w]^2 for a unit w."""
    K = skew(w)
    return np.eye(3) + math.sin(theta) * K + (1.0 - math.cos(theta)) * (K @ K)


def _same(q1, q2):
    """q1 and q2 equal within DUPLICATE_TOL, angles compared mod 2 pi."""
    return all(abs(math.remainder(float(a - b), TWO_PI)) < DUPLICATE_TOL for a, b in zip(q1, q2))
