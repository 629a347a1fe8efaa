"""The single calls' fastest path: manip_core._fast's kernels behind CPython builtin functions (METH_FASTCALL).

Where the rest of a call's time went (bench/results/overhead-latest.md): numba's dispatcher costs ~300-500 ns a
call before the kernel runs (an argument tuple, a type code per argument, the overload lookup, unboxing). Here
each kernel sits behind a numba ``cfunc`` with CPython's METH_FASTCALL signature, made a builtin function with
``PyCFunction_NewEx`` (bound to a small int64 array, its ``self``), so that ``robot.fk(q)`` costs a Python
call of a C function (~30 ns) and these checks, read from the array objects' C structs:

- the exact type numpy.ndarray (no subclass), numpy's float64 dtype object, C-contiguous and aligned (outputs
  also writeable), the number of dimensions and the shape of the model (dof);

anything else (lists, float32, read-only outputs, wrong shapes, Fortran order, subclasses) and any kernel
status other than 0 (NaN / inf / bound, singular mass matrix) returns None, and RobotModel then takes its
checked path, which converts what it can or raises the project's errors: results and errors are the same.
Without ``out`` the function allocates the output (PyArray_New from numpy's C API table; rnea_derivatives: a
new tuple of three new arrays, PyTuple_New). The kernels run holding the GIL, on the model's own workspace (as
manip_core._fast's ``<name>``).

The struct offsets (PyArrayObject: ob_type 8, data 16, nd 24, dimensions 32, descr 56, flags 64; the same in
numpy 1.x and 2.x on 64-bit CPython) are checked on real arrays at import; where any differs (another ABI, a
free-threaded build) ``AVAILABLE`` is False and bind() gives None: RobotModel then calls manip_core._fast.

``self`` of every function (per model): int64 [handle (manip_core._fast), address of numpy.ndarray, of the
float64 dtype, of None, of PyArray_New, of Py_IncRef, of Py_DecRef, dof, NPY_DOUBLE, then the shapes (4, 4),
(6, dof), (dof, dof), (dof,), then the address of PyTuple_New]; it points at the model's arrays, which the model
keeps alive.
"""
from __future__ import annotations

import ctypes
import sys

import numpy as np
from llvmlite import ir
from numba import cfunc, njit, types
from numba.extending import intrinsic

from . import _derivative_kernels as _DK, _fast as F
from ._fast import _view_f64, _view_i64
from ._views import view2_f64 as _view2_f64

C_H, C_ARR, C_F64, C_NONE, C_NEW, C_INCREF, C_DECREF, C_N, C_TYPENUM, C_S44, C_S6N, C_SNN, C_SN, C_TUPLE = (
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 13, 15, 17)
C_SIZE = 18
T_ITEM = 3  # PyTupleObject: ob_item[0] at word 3 (after refcount, type, size)
# PyArrayObject word offsets (8 bytes) and flag bits (numpy's ndarraytypes.h)
A_TYPE, A_DATA, A_ND, A_DIMS, A_DESCR, A_FLAGS = 1, 2, 3, 4, 7, 8
NPY_C_CONTIGUOUS, NPY_ALIGNED, NPY_WRITEABLE = 0x1, 0x100, 0x400
_IN = NPY_C_CONTIGUOUS | NPY_ALIGNED
_OUT = _IN | NPY_WRITEABLE


@intrinsic
def _call_new(typingctx, fn, subtype, nd, dims, typenum):
    """PyArray_New(subtype, nd, dims, typenum, NULL, NULL, 0, 0, NULL) through its address: a new C-contiguous
    array (new reference) or 0 with a Python exception set."""
    sig = types.int64(types.int64, types.int64, types.int64, types.int64, types.int64)

    def codegen(context, builder, signature, args):
        p8, i32, i64 = ir.IntType(8).as_pointer(), ir.IntType(32), ir.IntType(64)
        fnty = ir.FunctionType(p8, [p8, i32, i64.as_pointer(), i32, i64.as_pointer(), p8, i32, i32, p8])
        f = builder.inttoptr(args[0], fnty.as_pointer())
        null8, null64 = ir.Constant(p8, None), ir.Constant(i64.as_pointer(), None)
        r = builder.call(f, [builder.inttoptr(args[1], p8), builder.trunc(args[2], i32),
                             builder.inttoptr(args[3], i64.as_pointer()), builder.trunc(args[4], i32), null64,
                             null8, ir.Constant(i32, 0), ir.Constant(i32, 0), null8])
        return builder.ptrtoint(r, i64)
    return sig, codegen


@intrinsic
def _call_int(typingctx, fn, x):
    """fn(x) for a C function PyObject *fn(Py_ssize_t) given by address (PyTuple_New): the result's address."""
    sig = types.int64(types.int64, types.int64)

    def codegen(context, builder, signature, args):
        p8, i64 = ir.IntType(8).as_pointer(), ir.IntType(64)
        fnty = ir.FunctionType(p8, [i64])
        return builder.ptrtoint(builder.call(builder.inttoptr(args[0], fnty.as_pointer()), [args[1]]), i64)
    return sig, codegen


@intrinsic
def _call_obj(typingctx, fn, obj):
    """fn(obj) for a C function void fn(PyObject *) given by address (Py_IncRef, Py_DecRef)."""
    sig = types.int64(types.int64, types.int64)

    def codegen(context, builder, signature, args):
        p8 = ir.IntType(8).as_pointer()
        fnty = ir.FunctionType(ir.VoidType(), [p8])
        builder.call(builder.inttoptr(args[0], fnty.as_pointer()), [builder.inttoptr(args[1], p8)])
        return context.get_constant(types.int64, 0)
    return sig, codegen


@njit(inline="always", cache=True, _nrt=False)
def _data(c, obj, nd, d0, d1, need):
    """Address of obj's data when obj is an ndarray of numpy's float64 dtype with these flags, nd dimensions
    and shape (d0,) or (d0, d1); else 0."""
    w = _view_i64(obj, 9)
    if w[A_TYPE] != c[C_ARR] or w[A_DESCR] != c[C_F64] or (w[A_FLAGS] & need) != need \
            or (w[A_ND] & 0xFFFFFFFF) != nd:
        return 0
    dims = _view_i64(w[A_DIMS], nd)
    if dims[0] != d0 or (nd == 2 and dims[1] != d1):
        return 0
    return w[A_DATA]


@njit(inline="always", cache=True, _nrt=False)
def _none(c):
    _call_obj(c[C_INCREF], c[C_NONE])
    return c[C_NONE]


@njit(inline="always", cache=True, _nrt=False)
def _out(c, caddr, args, nargs, k, nd, shape):
    """(object, data address) of the output: args[k] when given (0, 0 when it does not fit), else a new array
    (0, 0 when PyArray_New failed: its exception stays set)."""
    if nargs > k:
        return args[k], _data(c, args[k], nd, c[shape], c[shape + 1], _OUT)
    o = _call_new(c[C_NEW], c[C_ARR], nd, caddr + 8 * shape, c[C_TYPENUM])
    if o == 0:
        return 0, -1
    return o, _view_i64(o, 3)[A_DATA]


@njit(inline="always", cache=True, _nrt=False)
def _done(c, args, nargs, k, o, st):
    """The return value: o (a new reference) when the kernel's status st is 0, else None (o released when the
    function made it)."""
    if st == 0:
        if nargs > k:
            _call_obj(c[C_INCREF], o)
        return o
    if nargs <= k:
        _call_obj(c[C_DECREF], o)
    return _none(c)


_SIG = types.int64(types.int64, types.CPointer(types.int64), types.int64)
_CF = dict(cache=True, error_model="numpy")


@njit(inline="always", cache=True, _nrt=False)
def _c(self_):
    """(the self array's values, its address)"""
    caddr = _view_i64(self_, 3)[A_DATA]
    return _view_i64(caddr, C_SIZE), caddr


def _one_input(kernel, shape):
    """cfunc body for f(q[, out]) with kernel(h, q, out), out 2-D of the shape at c[shape:shape + 2]."""
    @njit(inline="always", cache=True, _nrt=False)
    def body(self_, args, nargs):
        c, caddr = _c(self_)
        n = c[C_N]
        if nargs < 1 or nargs > 2:
            return _none(c)
        q = _data(c, args[0], 1, n, 0, _IN)
        if q == 0:
            return _none(c)
        o, od = _out(c, caddr, args, nargs, 1, 2, shape)
        if od == -1:
            return 0
        if od == 0:
            return _none(c)
        st = kernel(c[C_H], _view_f64(q, n), _view2_f64(od, c[shape], c[shape + 1]))
        return _done(c, args, nargs, 1, o, st)
    return body


def _three_inputs(kernel):
    """cfunc body for f(q, qd, x[, out]) with kernel(h, q, qd, x, out), out (dof,)."""
    @njit(inline="always", cache=True, _nrt=False)
    def body(self_, args, nargs):
        c, caddr = _c(self_)
        n = c[C_N]
        if nargs < 3 or nargs > 4:
            return _none(c)
        a = _data(c, args[0], 1, n, 0, _IN)
        b = _data(c, args[1], 1, n, 0, _IN)
        x = _data(c, args[2], 1, n, 0, _IN)
        if a == 0 or b == 0 or x == 0:
            return _none(c)
        o, od = _out(c, caddr, args, nargs, 3, 1, C_SN)
        if od == -1:
            return 0
        if od == 0:
            return _none(c)
        st = kernel(c[C_H], _view_f64(a, n), _view_f64(b, n), _view_f64(x, n), _view_f64(od, n))
        return _done(c, args, nargs, 3, o, st)
    return body


# numba's cache is keyed by module and function name: one named cfunc each
_fk_b = _one_input(F._fk, C_S44)
_jacobian_space_b = _one_input(F._jacobian_space, C_S6N)
_jacobian_body_b = _one_input(F._jacobian_body, C_S6N)
_mass_matrix_b = _one_input(F._mass_matrix, C_SNN)
_rnea_b = _three_inputs(F._rnea)
_forward_dynamics_b = _three_inputs(F._forward_dynamics)


def _derivatives(kernel):
    """cfunc body for f(q, qd, x[, o1, o2, o3]) with kernel(h, q, qd, x, o1, o2, o3), o* (dof, dof): with the
    caller's three outputs (all positional) it returns the first one (a new reference) when done; without them
    a new tuple of three new arrays (or 0 with a Python exception set: no memory); else None."""
    @njit(inline="always", cache=True, _nrt=False)
    def new_outputs(c, caddr, args):
        n = c[C_N]
        a = _data(c, args[0], 1, n, 0, _IN)
        b = _data(c, args[1], 1, n, 0, _IN)
        x = _data(c, args[2], 1, n, 0, _IN)
        if a == 0 or b == 0 or x == 0:
            return _none(c)
        dims = caddr + 8 * C_SNN
        o1 = _call_new(c[C_NEW], c[C_ARR], 2, dims, c[C_TYPENUM])
        o2 = 0 if o1 == 0 else _call_new(c[C_NEW], c[C_ARR], 2, dims, c[C_TYPENUM])
        o3 = 0 if o2 == 0 else _call_new(c[C_NEW], c[C_ARR], 2, dims, c[C_TYPENUM])
        t = 0 if o3 == 0 else _call_int(c[C_TUPLE], 3)
        if t == 0:  # out of memory: release what was made, the exception stays set
            for o in (o1, o2, o3):
                if o != 0:
                    _call_obj(c[C_DECREF], o)
            return 0
        # the tuple takes the three references (PyTuple_SET_ITEM); releasing it releases them
        items = _view_i64(t, T_ITEM + 3)
        items[T_ITEM], items[T_ITEM + 1], items[T_ITEM + 2] = o1, o2, o3
        st = kernel(c[C_H], _view_f64(a, n), _view_f64(b, n), _view_f64(x, n),
                    _view2_f64(_view_i64(o1, 3)[A_DATA], n, n), _view2_f64(_view_i64(o2, 3)[A_DATA], n, n),
                    _view2_f64(_view_i64(o3, 3)[A_DATA], n, n))
        if st == 0:
            return t
        _call_obj(c[C_DECREF], t)
        return _none(c)

    @njit(inline="always", cache=True, _nrt=False)
    def body(self_, args, nargs):
        c, caddr = _c(self_)
        n = c[C_N]
        if nargs == 3:
            return new_outputs(c, caddr, args)
        if nargs != 6:
            return _none(c)
        a = _data(c, args[0], 1, n, 0, _IN)
        b = _data(c, args[1], 1, n, 0, _IN)
        x = _data(c, args[2], 1, n, 0, _IN)
        o1 = _data(c, args[3], 2, n, n, _OUT)
        o2 = _data(c, args[4], 2, n, n, _OUT)
        o3 = _data(c, args[5], 2, n, n, _OUT)
        if a == 0 or b == 0 or x == 0 or o1 == 0 or o2 == 0 or o3 == 0:
            return _none(c)
        st = kernel(c[C_H], _view_f64(a, n), _view_f64(b, n), _view_f64(x, n), _view2_f64(o1, n, n),
                    _view2_f64(o2, n, n), _view2_f64(o3, n, n))
        return _done(c, args, nargs, 3, args[3], st)
    return body


def _two_inputs(kernel):
    """cfunc body for f(q, qd[, out]) with kernel(h, q, qd, out), out (6, dof)."""
    @njit(inline="always", cache=True, _nrt=False)
    def body(self_, args, nargs):
        c, caddr = _c(self_)
        n = c[C_N]
        if nargs < 2 or nargs > 3:
            return _none(c)
        a = _data(c, args[0], 1, n, 0, _IN)
        b = _data(c, args[1], 1, n, 0, _IN)
        if a == 0 or b == 0:
            return _none(c)
        o, od = _out(c, caddr, args, nargs, 2, 2, C_S6N)
        if od == -1:
            return 0
        if od == 0:
            return _none(c)
        st = kernel(c[C_H], _view_f64(a, n), _view_f64(b, n), _view2_f64(od, 6, n))
        return _done(c, args, nargs, 2, o, st)
    return body


# the derivative kernels on the model's handle (as manip_core._fast's functions; status 3: wrong size or a
# model without inertias)
@njit(inline="always", cache=True, _nrt=False)
def _fd_derivatives_k(h, q, qd, tau, dq, dv, minv):
    hd, mf, mi, ws, g = F._model(h)
    if not hd[F.H_DYN]:
        return 3
    dws = _view_f64(hd[F.H_DWS], hd[F.H_DWS_N])
    return _DK.forward_dynamics_derivatives(mf, mi, ws, dws, q, qd, tau, g, g[:0], dq, dv, minv)


@njit(inline="always", cache=True, _nrt=False)
def _jacobian_dot_space_k(h, q, qd, out):
    hd, mf, mi, ws, g = F._model(h)
    return _DK.jacobian_dot(mf, mi, ws, _view_f64(hd[F.H_DWS], hd[F.H_DWS_N]), q, qd, False, out)


@njit(inline="always", cache=True, _nrt=False)
def _jacobian_dot_body_k(h, q, qd, out):
    hd, mf, mi, ws, g = F._model(h)
    return _DK.jacobian_dot(mf, mi, ws, _view_f64(hd[F.H_DWS], hd[F.H_DWS_N]), q, qd, True, out)


_rnea_derivatives_b = _derivatives(F._rnea_derivatives)
_forward_dynamics_derivatives_b = _derivatives(_fd_derivatives_k)
_jacobian_dot_space_b = _two_inputs(_jacobian_dot_space_k)
_jacobian_dot_body_b = _two_inputs(_jacobian_dot_body_k)


def _fk(self_, args, nargs):
    return _fk_b(self_, args, nargs)


def _jacobian_space(self_, args, nargs):
    return _jacobian_space_b(self_, args, nargs)


def _jacobian_body(self_, args, nargs):
    return _jacobian_body_b(self_, args, nargs)


def _mass_matrix(self_, args, nargs):
    return _mass_matrix_b(self_, args, nargs)


def _rnea(self_, args, nargs):
    return _rnea_b(self_, args, nargs)


def _forward_dynamics(self_, args, nargs):
    return _forward_dynamics_b(self_, args, nargs)


def _rnea_derivatives(self_, args, nargs):
    return _rnea_derivatives_b(self_, args, nargs)


def _forward_dynamics_derivatives(self_, args, nargs):
    return _forward_dynamics_derivatives_b(self_, args, nargs)


def _jacobian_dot_space(self_, args, nargs):
    return _jacobian_dot_space_b(self_, args, nargs)


def _jacobian_dot_body(self_, args, nargs):
    return _jacobian_dot_body_b(self_, args, nargs)


NAMES = ("fk", "jacobian_space", "jacobian_body", "mass_matrix", "rnea", "forward_dynamics", "rnea_derivatives",
         "forward_dynamics_derivatives", "jacobian_dot_space", "jacobian_dot_body")


class _PyMethodDef(ctypes.Structure):
    _fields_ = [("ml_name", ctypes.c_char_p), ("ml_meth", ctypes.c_void_p), ("ml_flags", ctypes.c_int),
                ("ml_doc", ctypes.c_char_p)]


METH_FASTCALL = 0x0080
_METHODS = {}     # name -> PyMethodDef (alive as long as the module: the functions point at them)
_ADDR = {}        # C functions' addresses: PyArray_New, Py_IncRef, Py_DecRef


def _read(addr, ctype):
    return ctype.from_address(addr).value


def _layout_ok():
    """True when this interpreter and numpy have the struct layout the cfuncs read (checked on real arrays)."""
    if sys.implementation.name != "cpython" or ctypes.sizeof(ctypes.c_void_p) != 8 or sys.byteorder != "little" \
            or not getattr(sys, "_is_gil_enabled", lambda: True)():
        return False
    f64 = np.dtype(np.float64)
    for a, nd, flags in ((np.zeros((3, 5)), 2, _OUT), (np.zeros(7)[::2], 1, NPY_ALIGNED | NPY_WRITEABLE),
                         (np.asfortranarray(np.zeros((2, 3))), 2, NPY_ALIGNED | NPY_WRITEABLE)):
        base = id(a)
        w = [_read(base + 8 * k, ctypes.c_int64) for k in range(9)]
        dims = [_read(w[A_DIMS] + 8 * k, ctypes.c_int64) for k in range(nd)]
        if (w[A_TYPE] != id(np.ndarray) or w[A_DATA] != a.ctypes.data or (w[A_ND] & 0xFFFFFFFF) != nd
                or dims != list(a.shape) or w[A_DESCR] != id(a.dtype) or a.dtype is not f64
                or (w[A_FLAGS] & _OUT) != flags):
            return False
    ro = np.zeros(3)
    ro.setflags(write=False)
    return (_read(id(ro) + 8 * A_FLAGS, ctypes.c_int64) & NPY_WRITEABLE) == 0


def _init():
    global AVAILABLE
    try:
        if not _layout_ok():
            return
        multiarray = np._core.multiarray if hasattr(np, "_core") else np.core.multiarray
        get = ctypes.pythonapi.PyCapsule_GetPointer
        get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
        table = get(multiarray._ARRAY_API, None)
        _ADDR["new"] = _read(table + 8 * 93, ctypes.c_void_p)   # PyArray_New (numpy's C API, index 93)
        _ADDR["incref"] = ctypes.cast(ctypes.pythonapi.Py_IncRef, ctypes.c_void_p).value
        _ADDR["decref"] = ctypes.cast(ctypes.pythonapi.Py_DecRef, ctypes.c_void_p).value
        _ADDR["tuple_new"] = ctypes.cast(ctypes.pythonapi.PyTuple_New, ctypes.c_void_p).value
        t = (np, sys)
        if _read(id(t) + 8 * T_ITEM, ctypes.c_int64) != id(np) or _read(id(t) + 8 * (T_ITEM + 1), ctypes.c_int64) \
                != id(sys):
            return
        new = ctypes.pythonapi.PyCFunction_NewEx
        new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.py_object, ctypes.c_void_p]
        _ADDR["cfunction_new"] = new
        AVAILABLE = True
    except (AttributeError, OSError, ValueError):
        AVAILABLE = False


AVAILABLE = False
_init()


def _method(name):
    md = _METHODS.get(name)
    if md is None:
        f = cfunc(_SIG, **_CF)(globals()[f"_{name}"])
        md = _METHODS[name] = (_PyMethodDef(name.encode(), f.address, METH_FASTCALL, None), f)
    return md[0]


def make_self(hdr_handle, dof):
    """The ``self`` array of the builtin functions of the model whose manip_core._fast handle is hdr_handle, or None
    when this interpreter's layout is not the one checked (then the caller uses manip_core._fast). It points at
    the model's arrays (through the handle): the model must keep them alive as long as a function bound to it."""
    if not AVAILABLE:
        return None
    c = np.zeros(C_SIZE, dtype=np.int64)
    c[[C_H, C_ARR, C_F64, C_NONE, C_NEW, C_INCREF, C_DECREF, C_N, C_TYPENUM, C_TUPLE]] = [
        hdr_handle, id(np.ndarray), id(np.dtype(np.float64)), id(None), _ADDR["new"], _ADDR["incref"],
        _ADDR["decref"], dof, np.dtype(np.float64).num, _ADDR["tuple_new"]]
    c[C_S44:C_S44 + 2] = 4, 4
    c[C_S6N:C_S6N + 2] = 6, dof
    c[C_SNN:C_SNN + 2] = dof, dof
    c[C_SN:C_SN + 2] = dof, 0
    c.setflags(write=False)
    return c


def function(name, c):
    """The builtin function ``name`` (one of NAMES) bound to the self array c of make_self (compiles its cfunc, or
    loads it from numba's cache, on the first use in the process). The function holds a reference to c."""
    return _ADDR["cfunction_new"](ctypes.addressof(_method(name)), c, None)


def bind(hdr_handle, dof):
    """{name: builtin function} for every name of NAMES (make_self and function), or None (not AVAILABLE)."""
    c = make_self(hdr_handle, dof)
    return None if c is None else {name: function(name, c) for name in NAMES}
