"""A vector of W float64 lanes for numba kernels: LLVM's <W x double>, with + - * / and unary minus, loads and
stores of a contiguous row of W lanes, a broadcast, sqrt, rint, floor and a select.

numba compiles a loop over W lanes with W a constant by unrolling it; its SLP vectorizer, the pass that would
pack the unrolled lanes into vector instructions, is off (numba issue 8705), so such loops run one double at a
time. Written with this type, the same arithmetic is one vector instruction per operation (AVX-512: one
register of 8 doubles; AVX2: two of 4). Every operation is the IEEE one, lane by lane, with no contraction
into fused multiply-adds: a kernel written with it gives the same bits as the same kernel written on scalars.
"""
import operator

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, models, overload, register_model

W = 8  # lanes: one AVX-512 register, two AVX2 ones


class F64Vec(types.Type):
    """W float64 lanes in one LLVM vector value."""

    def __init__(self):
        super().__init__(name=f"f64x{W}")


f64v = F64Vec()


@register_model(F64Vec)
class _F64VecModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, ir.VectorType(ir.DoubleType(), W))


def _vec_ptr(context, builder, aryty, ary, idx_vals, idx_tys):
    """Pointer (as <W x double>*) to ary[idx..., 0]: the row of W contiguous lanes."""
    arr = context.make_array(aryty)(context, builder, ary)
    shapes = cgutils.unpack_tuple(builder, arr.shape, aryty.ndim)
    strides = cgutils.unpack_tuple(builder, arr.strides, aryty.ndim)
    inds = [context.cast(builder, v, t, types.intp) for v, t in zip(idx_vals, idx_tys)]
    inds.append(context.get_constant(types.intp, 0))
    ptr = cgutils.get_item_pointer2(context, builder, arr.data, shapes, strides, aryty.layout, inds,
                                    wraparound=False)
    return builder.bitcast(ptr, ir.PointerType(ir.VectorType(ir.DoubleType(), W)))


def _row_array(a, idx):
    return (isinstance(a, types.Array) and a.dtype == types.float64 and a.ndim == len(idx) + 1
            and all(isinstance(t, types.Integer) for t in idx))


@intrinsic
def vload(typingctx, a, idx):
    """a[idx..., 0:W] (a: float64 array whose last axis holds W contiguous lanes; idx a tuple of ints)."""
    if not (isinstance(idx, types.BaseTuple) and _row_array(a, idx.types)):
        return None

    def codegen(context, builder, sig, args):
        ary, tup = args
        vals = cgutils.unpack_tuple(builder, tup, len(idx.types))
        ptr = _vec_ptr(context, builder, a, ary, vals, idx.types)
        return builder.load(ptr, align=8)
    return f64v(a, idx), codegen


@intrinsic
def vstore(typingctx, a, idx, v):
    """a[idx..., 0:W] = v."""
    if not (isinstance(idx, types.BaseTuple) and _row_array(a, idx.types) and v == f64v):
        return None

    def codegen(context, builder, sig, args):
        ary, tup, val = args
        vals = cgutils.unpack_tuple(builder, tup, len(idx.types))
        ptr = _vec_ptr(context, builder, a, ary, vals, idx.types)
        builder.store(val, ptr, align=8)
        return context.get_dummy_value()
    return types.none(a, idx, v), codegen


@intrinsic
def vsplat(typingctx, x):
    """x in every lane."""
    if not isinstance(x, (types.Float, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        d = context.cast(builder, args[0], x, types.float64)
        vty = ir.VectorType(ir.DoubleType(), W)
        v = builder.insert_element(ir.Constant(vty, ir.Undefined), d, ir.Constant(ir.IntType(32), 0))
        return builder.shuffle_vector(v, ir.Constant(vty, ir.Undefined),
                                      ir.Constant(ir.VectorType(ir.IntType(32), W), [0] * W))
    return f64v(x), codegen


@intrinsic
def vget(typingctx, v, lane):
    """Lane `lane` of v, as a float."""
    if not (v == f64v and isinstance(lane, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        return builder.extract_element(args[0], args[1])
    return types.float64(v, lane), codegen


def _binary(op_name):
    @intrinsic
    def impl(typingctx, a, b):
        if not (a == f64v and b == f64v):
            return None

        def codegen(context, builder, sig, args):
            return getattr(builder, op_name)(args[0], args[1])
        return f64v(a, b), codegen
    return impl


_vadd, _vsub, _vmul, _vdiv = _binary("fadd"), _binary("fsub"), _binary("fmul"), _binary("fdiv")


def _unary_intrinsic(name):
    @intrinsic
    def impl(typingctx, a):
        if a != f64v:
            return None

        def codegen(context, builder, sig, args):
            vty = ir.VectorType(ir.DoubleType(), W)
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vty, [vty]), f"llvm.{name}.v{W}f64")
            return builder.call(fn, [args[0]])
        return f64v(a), codegen
    return impl


vsqrt, vrint, vfloor, vabs = (_unary_intrinsic("sqrt"), _unary_intrinsic("rint"), _unary_intrinsic("floor"),
                              _unary_intrinsic("fabs"))


@intrinsic
def _vneg(typingctx, a):
    if a != f64v:
        return None

    def codegen(context, builder, sig, args):
        return builder.fneg(args[0])
    return f64v(a), codegen


@intrinsic
def vselect_gt(typingctx, a, b, x, y):
    """Lane by lane: x where a > b, else y."""
    if not (a == f64v and b == f64v and x == f64v and y == f64v):
        return None

    def codegen(context, builder, sig, args):
        return builder.select(builder.fcmp_ordered(">", args[0], args[1]), args[2], args[3])
    return f64v(a, b, x, y), codegen


def _coerce(x):
    """Typing-time: how an operand becomes a vector (itself, or a broadcast scalar)."""
    if x == f64v:
        return "v"
    if isinstance(x, (types.Float, types.Integer)):
        return "s"
    return None


def _overload_binary(op, vfn):
    @overload(op, inline="always")
    def ov(a, b):
        ka, kb = _coerce(a), _coerce(b)
        if ka is None or kb is None or (ka == "s" and kb == "s"):
            return None
        if ka == "v" and kb == "v":
            return lambda a, b: vfn(a, b)
        if ka == "v":
            return lambda a, b: vfn(a, vsplat(b))
        return lambda a, b: vfn(vsplat(a), b)


for _op, _fn in ((operator.add, _vadd), (operator.sub, _vsub), (operator.mul, _vmul), (operator.truediv, _vdiv)):
    _overload_binary(_op, _fn)


@overload(operator.neg, inline="always")
def _ov_neg(a):
    if a == f64v:
        return lambda a: _vneg(a)
