"""RobotModel: kinematics, inverse kinematics and dynamics of one chain of a robot description.

Units: rad, m, s, kg, N, N*m. Frames: everything in the base link's frame unless a name says body/tip.
Twists and screw axes are [omega; v], wrenches [moment; force] (Modern Robotics, Lynch & Park 2017).
"""
from __future__ import annotations

import math
import warnings
import weakref
from dataclasses import dataclass
import numpy as np

from . import _cpython as C, _derivative_kernels as _DK, _entry as E, _fast as F, _ik_kernel, _kernels as K
from . import _lane_kernels as _LK
from . import dynamics_derivatives as _deriv
from .compile import compile_tree
from .errors import InputError, ModelError
from .robot_data import RobotData

GRAVITY_DEFAULT = (0.0, 0.0, -9.81)
_EMPTY = np.zeros(0)
_G_ZERO = np.zeros(3)
_QVA, _QVT = ("q", "qd", "qdd"), ("q", "qd", "tau")
_F64 = np.dtype(np.float64)


def _no_c(*args):
    """Stands in for manip_core._cpython's functions where that path is not available: 'not done'."""
    return None


class _LazyC:
    """Stands in for the builtin function ``name`` of manip_core._cpython until its first call, which makes it
    and puts it in its model's __dict__ (so later calls go straight to it)."""

    __slots__ = ("model", "name", "c", "f")

    def __init__(self, model, name, c):
        self.model, self.name, self.c, self.f = weakref.ref(model), name, c, None

    def __call__(self, *args):
        if self.f is None:
            try:
                self.f = C.function(self.name, self.c)
            except Exception as e:  # noqa: BLE001 - numba could not build it here: the numba fast path serves
                warnings.warn(f"manip_core: no builtin function for {self.name} ({type(e).__name__}: {e}); "
                              f"single calls take manip_core._fast", RuntimeWarning, stacklevel=2)
                self.f = _no_c
            m = self.model()
            if m is not None and m.__dict__.get(f"_c_{self.name}") is self:
                m.__dict__[f"_c_{self.name}"] = self.f
        return self.f(*args)


def _float64(x, what, convert=np.asarray):
    """convert(x) as float64; InputError naming ``what`` when x holds no numbers (text, None, ragged lists)."""
    try:
        return convert(x, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise InputError(f"{what} must be an array of numbers, got {type(x).__name__}: {e}") from None


@dataclass
class IKResult:
    """Outcome of RobotModel.ik.

    q: joint values (rad or m), always within the joint limits; success: True only when q reaches the target
    within the requested tolerances; position_error_m / rotation_error_rad: the achieved errors of q;
    iterations: Levenberg-Marquardt steps over all attempts; restarts: random restarts used.
    """

    q: np.ndarray
    success: bool
    position_error_m: float
    rotation_error_rad: float
    iterations: int
    restarts: int = 0
    message: str = ""


class RobotModel:
    """A serial chain (base link -> tip link) of a robot description, with joints and inertias compiled for
    the numba kernels. Build with :meth:`from_urdf` or :meth:`from_kinematic_json`."""

    def __init__(self, tree, base_link=None, tip_link=None):
        c = compile_tree(tree, base_link, tip_link)
        self.tree = tree
        self.name = tree.name
        self.source = tree.source
        self._mf, self._mi = c.mf, c.mi
        self._ws = K.new_ws(c.mi)  # scratch of the single-call kernels (they hold the GIL)
        self._dws = _DK.new_dws(c.mi)  # scratch of the derivative kernels
        # one int reaches mf, mi, ws, dws and the default gravity (manip_core._fast: the single calls' fast path)
        self._hdr, self._h = F.make_handle(c.mf, c.mi, self._ws, self._dws, self._g_default, c.has_inertia)
        self._bind_c(len(c.dof_joints))
        self._link_frames = c.link_frames
        self._has_inertia = c.has_inertia
        self.base_link = base_link or tree.root
        self.tip_link = tip_link or tree.longest_chain_tip(self.base_link)
        joints = c.dof_joints
        self.dof = len(joints)
        self._qshape = (self.dof,)
        self.joint_names = [j.name for j in joints]
        self.joint_types = [j.type for j in joints]
        self.joint_lower = np.array([j.lower for j in joints])
        self.joint_upper = np.array([j.upper for j in joints])
        self.velocity_limits = np.array([j.velocity_limit for j in joints])
        self.effort_limits = np.array([j.effort_limit for j in joints])
        self.moving_mass_kg = c.total_mass_kg
        for a in (self.joint_lower, self.joint_upper, self.velocity_limits, self.effort_limits):
            a.setflags(write=False)
        zero = np.zeros(self.dof)
        self.home = self.fk(zero)
        self.screw_axes_space = self.jacobian_space(zero)
        self.home.setflags(write=False)
        self.screw_axes_space.setflags(write=False)
        self._analytic = None
        self._analytic_checked = False
        lo = np.where(np.isfinite(self.joint_lower), self.joint_lower, -math.pi)
        hi = np.where(np.isfinite(self.joint_upper), self.joint_upper, math.pi)
        self._ik_default_seed = 0.5 * (lo + hi)  # the middle of the limits

    # ------------------------------------------------------------------------------------ construction
    @classmethod
    def from_urdf(cls, path_or_xml, base_link=None, tip_link=None):
        """Model of the chain base_link -> tip_link of a URDF (a path or the XML text).

        Defaults: the root link, and the leaf with the most moving joints below it.
        """
        from .urdf import parse_urdf
        return cls(parse_urdf(path_or_xml), base_link, tip_link)

    @classmethod
    def from_kinematic_json(cls, path, tip_link=None):
        """Model of an Isaac-style ``*.kinematic.json`` tree from its root to tip_link (default: longest)."""
        from .kinematic_json import parse_kinematic_json
        return cls(parse_kinematic_json(path), None, tip_link)

    @classmethod
    def load(cls, name_or_path, base_link=None, tip_link=None):
        """A bundled robot by name (see manip_core.robots) or a .urdf / .kinematic.json file."""
        from .robots import robot_path
        path = robot_path(name_or_path)
        if str(path).endswith(".json"):
            from .kinematic_json import parse_kinematic_json
            return cls(parse_kinematic_json(path), base_link, tip_link)
        return cls.from_urdf(path, base_link, tip_link)

    def _bind_c(self, dof):
        """self._c_<name>: manip_core._cpython's builtin function on this model's handle (or _no_c), made on its
        first call (each compiles, or loads from numba's cache, its own cfunc: ~5 s when compiled)."""
        self._c_self = c = C.make_self(self._h, dof)
        for name in C.NAMES:
            self.__dict__[f"_c_{name}"] = _no_c if c is None else _LazyC(self, name, c)

    def __getstate__(self):
        """pickle: without the builtin functions (bound to this object's arrays; __setstate__ binds new ones)."""
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_c_")}

    def __setstate__(self, state):
        """copy.deepcopy / pickle: the handle must point at this object's own arrays, not the original's."""
        self.__dict__.update(state)
        self._hdr, self._h = F.make_handle(self._mf, self._mi, self._ws, self._dws, self._g_default,
                                           self._has_inertia)
        self._bind_c(self.dof)

    def __repr__(self):
        return (f"RobotModel({self.name!r}, {self.base_link!r} -> {self.tip_link!r}, dof={self.dof}, "
                f"source={self.source!r})")

    @property
    def link_names(self):
        """Links whose pose fk(q, link) can give (every link below the base)."""
        return list(self._link_frames)

    @property
    def link_masses(self):
        """Mass (kg) moved by each actuated joint's body, welded links included."""
        from ._layout import BODY_STRIDE, O_M
        return np.array([self._mf[i * BODY_STRIDE + O_M] for i in range(int(self._mi[0]))])

    # --------------------------------------------------------------------------------------- checks
    def _vec(self, x, n, what):
        """x as a float64 C-contiguous aligned (n,) array (x itself when it is one), else InputError naming it.
        The kernels' compiled entry points (manip_core._entry) rely on these checks."""
        if x.__class__ is np.ndarray and x.shape == (n,) and x.dtype is _F64 and x.flags.carray:
            return x  # the common case, checked in ~0.1 us
        if x.__class__ is np.ndarray and x.shape == (n,) and x.dtype is _F64 and x.flags.c_contiguous \
                and x.flags.aligned:
            return x  # read-only: the kernels never write their inputs
        a = _float64(x, what, lambda v, dtype: np.require(v, dtype, ("C", "A")))
        if a.shape != (n,):
            raise InputError(f"{what} must have shape ({n},) for {self.name} ({', '.join(self.joint_names)})"
                             if n == self.dof else f"{what} must have shape ({n},), got {a.shape}")
        return a

    def _vec3(self, a, b, c, names):
        """Three joint vectors at once (one call instead of three on the hot path; same checks as _vec)."""
        n = self.dof
        if (a.__class__ is np.ndarray and b.__class__ is np.ndarray and c.__class__ is np.ndarray
                and a.shape == b.shape == c.shape == (n,) and a.dtype is _F64 and b.dtype is _F64
                and c.dtype is _F64 and a.flags.carray and b.flags.carray and c.flags.carray):
            return a, b, c
        return self._vec(a, n, names[0]), self._vec(b, n, names[1]), self._vec(c, n, names[2])

    @staticmethod
    def _out(out, shape):
        """The caller's output array (float64, C-contiguous, writeable, of this shape) or a new one."""
        if out is None:
            return np.empty(shape)
        if out.__class__ is np.ndarray and out.shape == shape and out.dtype is _F64 and out.flags.carray:
            return out  # carray: C-contiguous, aligned, writeable
        raise InputError(f"out must be a writeable aligned C-contiguous float64 array of shape {shape}, got "
                         f"{type(out).__name__} {getattr(out, 'shape', '')} {getattr(out, 'dtype', '')}")

    def _ws_of(self, data):
        if data._mi is not self._mi:
            raise InputError(f"data was created by another RobotModel than {self.name!r} (use create_data())")
        return data._ws

    # The fast path of every single call below: manip_core._fast's kernel with the model's (or data's) handle.
    # Its numba dispatcher accepts only writeable aligned C-contiguous float64 arrays (TypeError otherwise) and
    # the kernel returns 3 for a wrong size, 1 for NaN/inf, 2 for a singular mass matrix; on any of these the
    # method goes on to its checked path, which converts what it can or raises the project's errors.

    def create_data(self):
        """A RobotData: preallocated kernel scratch owned by one caller (or thread); pass it as ``data=``."""
        return RobotData(self)

    def _batch(self, X, what):
        a = _float64(X, what, np.ascontiguousarray)
        if a.ndim != 2 or a.shape[1] != self.dof:
            raise InputError(f"{what} must have shape (N, {self.dof}), got {a.shape}")
        return a

    def _gravity(self, gravity):
        if gravity is GRAVITY_DEFAULT:
            return self._g_default
        return self._vec(gravity, 3, "gravity (m/s^2, base frame)")

    _g_default = np.array(GRAVITY_DEFAULT)

    def _ftip(self, f_tip):
        return _EMPTY if f_tip is None else self._vec(f_tip, 6, "f_tip ([moment; force] in the tip frame)")

    def _need_inertia(self):
        if not self._has_inertia:
            raise ModelError(self.source, f"chain '{self.base_link}' -> '{self.tip_link}'",
                             "dynamics need a positive mass on every moving body; this description has links "
                             "without <inertial> data")

    @staticmethod
    def _status(st, what):
        if st == 1:
            raise InputError(f"{what}: input holds NaN, inf or a magnitude above {K.INPUT_BOUND:g} (refused: larger "
                             f"values overflow the dynamics)")
        if st == 2:
            raise InputError(f"{what}: the mass matrix is singular (a moving body without mass)")

    @staticmethod
    def _batch_status(bad, what, *arrays):
        if bad:
            finite = np.all([(np.abs(a) <= K.INPUT_BOUND).all(axis=1) for a in arrays], axis=0)
            rows = np.flatnonzero(~finite)
            detail = f"rows {rows[:5].tolist()}{' ...' if rows.size > 5 else ''} hold NaN, inf or a magnitude " \
                f"above {K.INPUT_BOUND:g}" if rows.size \
                else "the mass matrix is singular (a moving body without mass)"
            raise InputError(f"{what}: {bad} of {arrays[0].shape[0]} configurations failed: {detail}")

    # ----------------------------------------------------------------------------------- kinematics
    def fk(self, q, link=None, *, out=None, data=None):
        """Pose (4, 4) of the tip (or of ``link``) in the base frame at joint values q (rad or m).

        out: optional (4, 4) float64 array to fill and return; data: a RobotData from create_data() (the
        model's own scratch when None). Every single-call method below takes the same two keywords."""
        if link is None:
            if data is None:  # manip_core._cpython: ndarrays of the right kind, or None
                r = self._c_fk(q) if out is None else self._c_fk(q, out)
                if r is not None:
                    return r
            o = np.empty((4, 4)) if out is None else out
            try:
                if not (F.fk(self._h, q, o) if data is None else F.fk_nogil(
                        data._h if data._mi is self._mi else self._ws_of(data), q, o)):
                    return o
            except TypeError:
                pass
        q = self._vec(q, self.dof, "q")
        out = np.empty((4, 4)) if out is None else self._out(out, (4, 4))
        if link is None:
            # compiled entry points (manip_core._entry): q and out are checked above; with data= without the GIL
            st = E.fk(self._mf, self._mi, self._ws, q, out) if data is None else \
                E.fk_nogil(self._mf, self._mi, self._ws_of(data), q, out)
        else:
            ws = self._ws if data is None else self._ws_of(data)
            frame = self._link_frames.get(link)
            if frame is None:
                raise InputError(f"link '{link}' is not below base '{self.base_link}' of {self.name} "
                                 f"(links: {', '.join(self._link_frames)})")
            st = K.fk_frame(self._mf, self._mi, ws, q, frame[0], frame[1], out)
        if st:
            self._status(st, "fk")
        return out

    def fk_batch(self, Q):
        """Tip poses (N, 4, 4) for N joint vectors Q (N, dof); numba, parallel over N."""
        Q = self._batch(Q, "Q")
        out = np.empty((Q.shape[0], 4, 4))
        self._batch_status(_LK.fk_batch_lanes(self._mf, self._mi, Q, out), "fk_batch", Q)
        return out

    def jacobian_space(self, q, *, out=None, data=None):
        """Space Jacobian (6, dof): the tip's spatial twist [omega; v] in the base frame is J_s qd."""
        if data is None:
            r = self._c_jacobian_space(q) if out is None else self._c_jacobian_space(q, out)
            if r is not None:
                return r
        o = np.empty((6, self.dof)) if out is None else out
        try:
            if not (F.jacobian_space(self._h, q, o) if data is None else F.jacobian_space_nogil(
                    data._h if data._mi is self._mi else self._ws_of(data), q, o)):
                return o
        except TypeError:
            pass
        q = self._vec(q, self.dof, "q")
        out = np.empty((6, self.dof)) if out is None else self._out(out, (6, self.dof))
        if E.jacobian_space(self._mf, self._mi, self._ws, q, out) if data is None else \
                E.jacobian_space_nogil(self._mf, self._mi, self._ws_of(data), q, out):
            self._status(1, "jacobian_space")
        return out

    def jacobian_body(self, q, *, out=None, data=None):
        """Body Jacobian (6, dof): the tip's twist [omega; v] in the tip frame is J_b qd; J_b = Ad_{T^-1} J_s."""
        if data is None:
            r = self._c_jacobian_body(q) if out is None else self._c_jacobian_body(q, out)
            if r is not None:
                return r
        o = np.empty((6, self.dof)) if out is None else out
        try:
            if not (F.jacobian_body(self._h, q, o) if data is None else F.jacobian_body_nogil(
                    data._h if data._mi is self._mi else self._ws_of(data), q, o)):
                return o
        except TypeError:
            pass
        q = self._vec(q, self.dof, "q")
        out = np.empty((6, self.dof)) if out is None else self._out(out, (6, self.dof))
        if E.jacobian_body(self._mf, self._mi, self._ws, q, out) if data is None else \
                E.jacobian_body_nogil(self._mf, self._mi, self._ws_of(data), q, out):
            self._status(1, "jacobian_body")
        return out

    def jacobian_space_batch(self, Q):
        """Space Jacobians (N, 6, dof)."""
        Q = self._batch(Q, "Q")
        out = np.empty((Q.shape[0], 6, self.dof))
        self._batch_status(_LK.jacobian_batch_lanes(self._mf, self._mi, Q, False, out), "jacobian_space_batch", Q)
        return out

    def jacobian_body_batch(self, Q):
        """Body Jacobians (N, 6, dof)."""
        Q = self._batch(Q, "Q")
        out = np.empty((Q.shape[0], 6, self.dof))
        self._batch_status(_LK.jacobian_batch_lanes(self._mf, self._mi, Q, True, out), "jacobian_body_batch", Q)
        return out

    def within_limits(self, q, tol=0.0):
        """True when lower - tol <= q <= upper + tol for every joint."""
        q = self._vec(q, self.dof, "q")
        return bool(np.all(q >= self.joint_lower - tol) and np.all(q <= self.joint_upper + tol))

    # ------------------------------------------------------------------------------------------- IK
    def ik(self, T_target, q_seed=None, *, tol_position_m=1e-6, tol_rotation_rad=1e-6, position_only=None,
           max_iterations=60, max_restarts=50, seed=0):
        """Numerical IK: Levenberg-Marquardt on the pose error, joint limits enforced, random restarts.

        T_target: (4, 4) tip pose in the base frame, or a (3,) position (then position_only). q_seed:
        start (default: the middle of the limits). position_only: match the position alone; default True
        for arms with fewer than six joints. success is True only when the returned q is within limits and
        within both tolerances. Restarts draw from a generator seeded with ``seed`` (repeatable).
        """
        T = _float64(T_target, "T_target")
        if T.shape == (3,):
            T = np.vstack([np.hstack([np.eye(3), T[:, None]]), [0, 0, 0, 1]])
            position_only = True if position_only is None else position_only
        if T.shape != (4, 4):
            raise InputError(f"T_target must be a (4, 4) pose or a (3,) position, got shape {T.shape}")
        if position_only is None:
            position_only = self.dof < 6
        q0 = self._ik_default_seed if q_seed is None else np.clip(self._vec(q_seed, self.dof, "q_seed"),
                                                                  self.joint_lower, self.joint_upper)
        q = np.empty(self.dof)
        info = np.zeros(5)
        st = _ik_kernel.solve(self._mf, self._mi, np.ascontiguousarray(T), q0, self.joint_lower, self.joint_upper,
                              float(tol_position_m), float(tol_rotation_rad), bool(position_only),
                              int(max_iterations), int(max_restarts), int(seed), 1e-12, q, info)
        if st == 1:
            raise InputError(f"T_target or q_seed holds NaN, inf or a magnitude above {K.INPUT_BOUND:g}")
        if st == 2:
            raise InputError("T_target's rotation is not orthonormal (R^T R != I or det R < 0)")
        ok, dp, dr = bool(info[0]), float(info[1]), float(info[2])
        msg = "" if ok else (f"no solution within {tol_position_m:g} m / {tol_rotation_rad:g} rad after "
                             f"{int(info[4])} restarts (best: {dp:.3g} m, {dr:.3g} rad); the target may be "
                             f"out of reach or only reachable outside the joint limits")
        return IKResult(q=q, success=ok, position_error_m=dp, rotation_error_rad=dr,
                        iterations=int(info[3]), restarts=int(info[4]), message=msg)

    def analytic_ik(self):
        """The closed-form solver for this arm (manip_core.ik_analytic.AnalyticIK) or None."""
        if not self._analytic_checked:
            from .ik_analytic import AnalyticIK
            self._analytic = AnalyticIK.detect(np.array(self.screw_axes_space), np.array(self.home),
                                               self.joint_types, self.joint_lower, self.joint_upper)
            self._analytic_checked = True
        return self._analytic

    def ik_all(self, T_target):
        """All exact IK solutions (list of q within limits) from the closed form of this arm's geometry.

        Supported: UR-type 6R (up to 8), yaw-pitch-pitch 3R (position only, up to 4), planar 2R (up to 2).
        Raises NotImplementedError for other arms (use ik()); returns [] for unreachable targets (the reason
        is in ``last_ik_all_reason``).
        """
        solver = self.analytic_ik()
        if solver is None:
            raise NotImplementedError(f"{self.name}: no closed-form IK for this joint geometry; use ik()")
        T = _float64(T_target, "T_target")
        if not np.all(np.isfinite(T)):
            raise InputError("T_target holds NaN or inf")
        sols, reason = solver.solve(T)
        self.last_ik_all_reason = reason
        return sols

    # ------------------------------------------------------------------------------------- dynamics
    def inverse_dynamics(self, q, qd, qdd, gravity=GRAVITY_DEFAULT, f_tip=None, *, out=None, data=None):
        """tau = M(q) qdd + c(q, qd) + g(q) + J_b^T f_tip (N*m or N), recursive Newton-Euler.

        gravity: (3,) m/s^2 in the base frame. f_tip: the wrench [moment; force] (N*m; N) that the tip
        exerts on the environment, expressed in the tip frame at the tip origin (Modern Robotics' F_tip).
        """
        if gravity is GRAVITY_DEFAULT and f_tip is None:
            if data is None:
                r = self._c_rnea(q, qd, qdd) if out is None else self._c_rnea(q, qd, qdd, out)
                if r is not None:
                    return r
            o = np.empty(self.dof) if out is None else out
            try:
                if not (F.rnea(self._h, q, qd, qdd, o) if data is None else F.rnea_nogil(
                        data._h if data._mi is self._mi else self._ws_of(data), q, qd, qdd, o)):
                    return o
            except TypeError:
                pass
        if not self._has_inertia:
            self._need_inertia()
        q, qd, qdd = self._vec3(q, qd, qdd, _QVA)
        out = np.empty(self.dof) if out is None else self._out(out, (self.dof,))
        # the defaults inline (no call): this is the hot path of a control loop
        g = self._g_default if gravity is GRAVITY_DEFAULT else self._gravity(gravity)
        f = _EMPTY if f_tip is None else self._ftip(f_tip)
        if E.rnea(self._mf, self._mi, self._ws, q, qd, qdd, g, f, out) if data is None else \
                E.rnea_nogil(self._mf, self._mi, self._ws_of(data), q, qd, qdd, g, f, out):
            self._status(1, "inverse_dynamics")
        return out

    def inverse_dynamics_batch(self, Q, QD, QDD, gravity=GRAVITY_DEFAULT, f_tip=None):
        """Joint forces (N, dof) for N states; numba, parallel over N."""
        self._need_inertia()
        Q, QD, QDD = self._batch(Q, "Q"), self._batch(QD, "QD"), self._batch(QDD, "QDD")
        if not Q.shape == QD.shape == QDD.shape:
            raise InputError(f"Q, QD, QDD must have the same shape, got {Q.shape}, {QD.shape}, {QDD.shape}")
        out = np.empty_like(Q)
        g, f = self._gravity(gravity), self._ftip(f_tip)
        if not (np.all(np.abs(g) <= K.INPUT_BOUND) and np.all(np.abs(f) <= K.INPUT_BOUND)):
            raise InputError(f"inverse_dynamics_batch: gravity or f_tip holds NaN, inf or a magnitude above "
                             f"{K.INPUT_BOUND:g}")
        # W configurations side by side in SIMD lanes (manip_core._lane_kernels)
        self._batch_status(_LK.rnea_batch_lanes(self._mf, self._mi, Q, QD, QDD, g, f, out),
                           "inverse_dynamics_batch", Q, QD, QDD)
        return out

    def mass_matrix(self, q, *, out=None, data=None):
        """Joint-space mass matrix M(q) (dof, dof), symmetric positive definite; composite rigid bodies."""
        if data is None:
            r = self._c_mass_matrix(q) if out is None else self._c_mass_matrix(q, out)
            if r is not None:
                return r
        o = np.empty((self.dof, self.dof)) if out is None else out
        try:
            if not (F.mass_matrix(self._h, q, o) if data is None else F.mass_matrix_nogil(
                    data._h if data._mi is self._mi else self._ws_of(data), q, o)):
                return o
        except TypeError:
            pass
        if not self._has_inertia:
            self._need_inertia()
        q = self._vec(q, self.dof, "q")
        out = np.empty((self.dof, self.dof)) if out is None else self._out(out, (self.dof, self.dof))
        if E.mass_matrix(self._mf, self._mi, self._ws, q, out) if data is None else \
                E.mass_matrix_nogil(self._mf, self._mi, self._ws_of(data), q, out):
            self._status(1, "mass_matrix")
        return out

    def mass_matrix_batch(self, Q):
        """Mass matrices (N, dof, dof)."""
        self._need_inertia()
        Q = self._batch(Q, "Q")
        out = np.empty((Q.shape[0], self.dof, self.dof))
        self._batch_status(_LK.mass_matrix_batch_lanes(self._mf, self._mi, Q, out), "mass_matrix_batch", Q)
        return out

    def coriolis_torques(self, q, qd, *, out=None, data=None):
        """c(q, qd) = C(q, qd) qd: Coriolis and centripetal joint forces (RNEA with qdd = 0, g = 0)."""
        return self.inverse_dynamics(q, qd, self._zeros, _G_ZERO, out=out, data=data)

    def gravity_torques(self, q, gravity=GRAVITY_DEFAULT, *, out=None, data=None):
        """g(q): joint forces that hold the arm still against gravity (m/s^2, base frame)."""
        return self.inverse_dynamics(q, self._zeros, self._zeros, gravity, out=out, data=data)

    @property
    def _zeros(self):
        z = self.__dict__.get("_zeros_dof")
        if z is None:
            # writeable (the fast path's kernels take writeable arrays only); no kernel writes its inputs
            z = self.__dict__["_zeros_dof"] = np.zeros(self.dof)
        return z

    def coriolis_matrix(self, q, qd):
        """C(q, qd) from the Christoffel symbols of M: C_ij = sum_k Gamma_ijk qd_k, so that C qd = c and
        dM/dt - 2C is skew-symmetric. Column j is the symmetric bilinear form of c:
        C e_j = (c(qd + e_j) - c(qd) - c(e_j)) / 2 (exact; 2 dof + 1 RNEA calls)."""
        qd = self._vec(qd, self.dof, "qd")
        c0 = self.coriolis_torques(q, qd)
        C = np.empty((self.dof, self.dof))
        for j in range(self.dof):
            e = np.zeros(self.dof)
            e[j] = 1.0
            C[:, j] = 0.5 * (self.coriolis_torques(q, qd + e) - c0 - self.coriolis_torques(q, e))
        return C

    def forward_dynamics(self, q, qd, tau, gravity=GRAVITY_DEFAULT, f_tip=None, *, out=None, data=None):
        """qdd = M(q)^-1 (tau - c(q, qd) - g(q) - J_b^T f_tip) (rad/s^2 or m/s^2), Cholesky solve."""
        if gravity is GRAVITY_DEFAULT and f_tip is None:
            if data is None:
                r = self._c_forward_dynamics(q, qd, tau) if out is None else self._c_forward_dynamics(q, qd, tau, out)
                if r is not None:
                    return r
            o = np.empty(self.dof) if out is None else out
            try:
                if not (F.forward_dynamics(self._h, q, qd, tau, o) if data is None else F.forward_dynamics_nogil(
                        data._h if data._mi is self._mi else self._ws_of(data), q, qd, tau, o)):
                    return o
            except TypeError:
                pass
        if not self._has_inertia:
            self._need_inertia()
        q, qd, tau = self._vec3(q, qd, tau, _QVT)
        out = np.empty(self.dof) if out is None else self._out(out, (self.dof,))
        g = self._g_default if gravity is GRAVITY_DEFAULT else self._gravity(gravity)
        f = _EMPTY if f_tip is None else self._ftip(f_tip)
        st = E.forward_dynamics(self._mf, self._mi, self._ws, q, qd, tau, g, f, out) if data is None else \
            E.forward_dynamics_nogil(self._mf, self._mi, self._ws_of(data), q, qd, tau, g, f, out)
        if st:
            self._status(st, "forward_dynamics")
        return out

    def forward_dynamics_batch(self, Q, QD, TAU, gravity=GRAVITY_DEFAULT, f_tip=None):
        """Joint accelerations (N, dof) for N states; numba, parallel over N."""
        self._need_inertia()
        Q, QD, TAU = self._batch(Q, "Q"), self._batch(QD, "QD"), self._batch(TAU, "TAU")
        if not Q.shape == QD.shape == TAU.shape:
            raise InputError(f"Q, QD, TAU must have the same shape, got {Q.shape}, {QD.shape}, {TAU.shape}")
        out = np.empty_like(Q)
        g, f = self._gravity(gravity), self._ftip(f_tip)
        if not (np.all(np.abs(g) <= K.INPUT_BOUND) and np.all(np.abs(f) <= K.INPUT_BOUND)):
            raise InputError(f"forward_dynamics_batch: gravity or f_tip holds NaN, inf or a magnitude above "
                             f"{K.INPUT_BOUND:g}")
        self._batch_status(_LK.forward_dynamics_batch_lanes(self._mf, self._mi, Q, QD, TAU, g, f, out),
                           "forward_dynamics_batch", Q, QD, TAU)
        return out

    # --------------------------------------------------------------------------- dynamics derivatives
    # Analytic (Carpentier & Mansard, RSS 2018); see manip_core.dynamics_derivatives. out: optional tuple of
    # caller-owned (dof, dof) float64 C-contiguous arrays, filled and returned (no allocation).
    def rnea_derivatives(self, q, qd, qdd, gravity=GRAVITY_DEFAULT, f_tip=None, *, out=None, data=None):
        """(dtau/dq, dtau/dqd, dtau/dqdd = M(q)) of inverse_dynamics at (q, qd, qdd), each (dof, dof)."""
        if gravity is GRAVITY_DEFAULT and f_tip is None and (out is None or out.__class__ is tuple and len(out) == 3):
            if data is None:  # manip_core._cpython: a new tuple of new arrays, or the caller's out filled
                r = self._c_rnea_derivatives(q, qd, qdd) if out is None else self._c_rnea_derivatives(q, qd, qdd, *out)
                if r is not None:
                    return out if out is not None else r
            n = self.dof
            o = (np.empty((n, n)), np.empty((n, n)), np.empty((n, n))) if out is None else out
            try:
                if not (F.rnea_derivatives(self._h, q, qd, qdd, *o) if data is None else F.rnea_derivatives_nogil(
                        data._h if data._mi is self._mi else self._ws_of(data), q, qd, qdd, *o)):
                    return o
            except TypeError:
                pass
        return _deriv.rnea_derivatives(self, q, qd, qdd, gravity, f_tip, out, data)

    def rnea_derivatives_batch(self, Q, QD, QDD, gravity=GRAVITY_DEFAULT, f_tip=None):
        """rnea_derivatives for N states: three (N, dof, dof) arrays; numba, parallel over N."""
        return _deriv.rnea_derivatives_batch(self, Q, QD, QDD, gravity, f_tip)

    def forward_dynamics_derivatives(self, q, qd, tau, gravity=GRAVITY_DEFAULT, f_tip=None, *, out=None,
                                     data=None):
        """(dqdd/dq, dqdd/dqd, dqdd/dtau = M(q)^-1) of forward_dynamics at (q, qd, tau), each (dof, dof)."""
        if gravity is GRAVITY_DEFAULT and f_tip is None and (out is None or out.__class__ is tuple and len(out) == 3):
            if data is None:  # manip_core._cpython: a new tuple of new arrays, or the caller's out filled
                r = self._c_forward_dynamics_derivatives(q, qd, tau) if out is None else \
                    self._c_forward_dynamics_derivatives(q, qd, tau, *out)
                if r is not None:
                    return out if out is not None else r
            n = self.dof
            o = (np.empty((n, n)), np.empty((n, n)), np.empty((n, n))) if out is None else out
            try:
                if not (F.forward_dynamics_derivatives(self._h, q, qd, tau, *o) if data is None else
                        F.forward_dynamics_derivatives_nogil(data._h if data._mi is self._mi else self._ws_of(data),
                                                             q, qd, tau, *o)):
                    return o
            except TypeError:
                pass
        return _deriv.forward_dynamics_derivatives(self, q, qd, tau, gravity, f_tip, out, data)

    def forward_dynamics_derivatives_batch(self, Q, QD, TAU, gravity=GRAVITY_DEFAULT, f_tip=None):
        """forward_dynamics_derivatives for N states: three (N, dof, dof) arrays; numba, parallel over N."""
        return _deriv.forward_dynamics_derivatives_batch(self, Q, QD, TAU, gravity, f_tip)

    def jacobian_time_derivative(self, q, qd, frame="space", *, out=None, data=None):
        """dJ/dt (6, dof) of jacobian_space (frame "space") or jacobian_body ("body") at joint speeds qd, so
        that the tip's spatial acceleration is J qdd + dJ/dt qd ([omega; v] rows, same frame as J)."""
        if frame == "space" or frame == "body":
            if data is None:
                f = self._c_jacobian_dot_space if frame == "space" else self._c_jacobian_dot_body
                r = f(q, qd) if out is None else f(q, qd, out)
                if r is not None:
                    return r
            o = np.empty((6, self.dof)) if out is None else out
            try:
                if data is None:
                    st = (F.jacobian_dot_space if frame == "space" else F.jacobian_dot_body)(self._h, q, qd, o)
                else:
                    st = (F.jacobian_dot_space_nogil if frame == "space" else F.jacobian_dot_body_nogil)(
                        data._h if data._mi is self._mi else self._ws_of(data), q, qd, o)
                if not st:
                    return o
            except TypeError:
                pass
        return _deriv.jacobian_time_derivative(self, q, qd, frame, out, data)

    # ------------------------------------------------------------------------------------- analysis
    # part: "full" = the 6 x dof body Jacobian J_b (singular values equal to those of [R 0; 0 R] J_b, whose axes
    # are in the base frame); "position" = the 3 x dof Jacobian of the tip origin's linear velocity in the base
    # frame (R J_b[3:6]); "orientation" = the 3 x dof angular rows in the base frame (R J_b[0:3]).
    # See manip_core.analysis.manipulability.
    def _measure1(self, q, part, key):
        from .analysis.manipulability import measures_batch
        q = self._vec(q, self.dof, "q")
        return float(measures_batch(self, q[None, :], part)[key][0])

    def _measureN(self, Q, part, key):
        from .analysis.manipulability import measures_batch
        return measures_batch(self, self._batch(Q, "Q"), part)[key]

    def manipulability(self, q, part="full"):
        """Yoshikawa manipulability sqrt(det(J J^T)) = product of the singular values of J at q.

        part "full": J = the 6 x dof body Jacobian; "position": the 3 x dof Jacobian of the tip origin's linear
        velocity in the base frame; "orientation": the 3 x dof angular rows (base frame). With fewer joints than
        rows (a planar 2R's position part) it is sqrt(det(J^T J)), the product of the dof singular values."""
        return self._measure1(q, part, "manipulability")

    def manipulability_batch(self, Q, part="full"):
        """Yoshikawa manipulability (N,) at Q (N, dof); part as in manipulability()."""
        return self._measureN(Q, part, "manipulability")

    def min_singular_value(self, q, part="full"):
        """Smallest singular value of J (m/s or rad/s per unit joint speed; 0 at a singularity); J as in
        manipulability(): "full" body Jacobian, "position" tip-origin linear rows, "orientation" angular rows."""
        return self._measure1(q, part, "min_singular_value")

    def min_singular_value_batch(self, Q, part="full"):
        """Smallest singular values (N,) at Q (N, dof); part as in manipulability()."""
        return self._measureN(Q, part, "min_singular_value")

    def condition_number(self, q, part="full"):
        """sigma_max / sigma_min of J (>= 1, inf at a singularity); part as in manipulability()."""
        return self._measure1(q, part, "condition_number")

    def condition_number_batch(self, Q, part="full"):
        """Condition numbers (N,) at Q (N, dof); part as in manipulability()."""
        return self._measureN(Q, part, "condition_number")

    def isotropy(self, q, part="full"):
        """Isotropy index sigma_min / sigma_max of J in [0, 1] (1: isotropic); part as in manipulability()."""
        return self._measure1(q, part, "isotropy")

    def isotropy_batch(self, Q, part="full"):
        """Isotropy indices (N,) at Q (N, dof)."""
        return self._measureN(Q, part, "isotropy")

    def velocity_ellipsoid(self, q, part="full"):
        """Ellipsoid {J qd : |qd| <= 1}: .axes (m, m) unit columns in the base frame, .lengths (m,) the
        singular values, largest first; J as in manipulability() (for "full": [omega; v] at the tip origin)."""
        return self._ellipsoid1(q, part, "velocity")

    def velocity_ellipsoid_batch(self, Q, part="full"):
        """Velocity ellipsoids at Q (N, dof): .axes (N, m, m), .lengths (N, m)."""
        from .analysis.manipulability import ellipsoid_batch
        return ellipsoid_batch(self, self._batch(Q, "Q"), part, "velocity")

    def force_ellipsoid(self, q, part="full"):
        """Ellipsoid {F : |J^T F| <= 1} of tip wrenches ([moment; force] for "full", base axes) per unit joint
        force: the velocity ellipsoid's axes with lengths 1 / sigma_i (inf along singular directions), smallest
        first."""
        return self._ellipsoid1(q, part, "force")

    def force_ellipsoid_batch(self, Q, part="full"):
        """Force ellipsoids at Q (N, dof): .axes (N, m, m), .lengths (N, m)."""
        from .analysis.manipulability import ellipsoid_batch
        return ellipsoid_batch(self, self._batch(Q, "Q"), part, "force")

    def _ellipsoid1(self, q, part, kind):
        from .analysis.manipulability import Ellipsoid, ellipsoid_batch
        q = self._vec(q, self.dof, "q")
        e = ellipsoid_batch(self, q[None, :], part, kind)
        return Ellipsoid(e.axes[0], e.lengths[0], part, kind)

    def describe(self):
        """A plain dict of the model (joints, limits, screw axes, masses) for printing or JSON."""
        def num(x):
            return None if not math.isfinite(x) else float(x)
        return {
            "name": self.name, "source": str(self.source), "base_link": self.base_link,
            "tip_link": self.tip_link, "dof": self.dof,
            "joints": [{"name": n, "type": t, "lower": num(lo), "upper": num(hi), "velocity_limit": num(v),
                        "effort_limit": num(e), "screw_axis_space": [float(x) for x in s], "moving_mass_kg": m}
                       for n, t, lo, hi, v, e, s, m in zip(
                           self.joint_names, self.joint_types, self.joint_lower, self.joint_upper,
                           self.velocity_limits, self.effort_limits, np.array(self.screw_axes_space).T,
                           [float(x) for x in self.link_masses][:self.dof])],
            "home": np.array(self.home).tolist(),
        }

