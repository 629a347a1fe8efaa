"""Array views without an NRT meminfo, for numba kernels: ``view_f64(address, n)`` / ``view_i64(address, n)``, and
``view2_f64(address, rows, cols)`` (C order), and ``unowned(a)``: an array as it is, without its meminfo.

Slicing an array that carries a meminfo costs an (atomic) reference count increment and decrement per slice; the
kernels slice their model and workspace arrays many times per call, and in a parallel batch every thread
counts on the same model array. A view made here has no meminfo: its slices count nothing. The owner of the
memory must keep it alive while the view is used (the caller's arrays stay referenced for the whole call).
"""
from numba import types
from numba.extending import intrinsic
from numba.np.arrayobj import populate_array


def _view_intrinsic(dtype, itemsize):
    arrty = types.Array(dtype, 1, "C")

    @intrinsic
    def view(typingctx, addr, n):
        """A 1-D C-contiguous array of n items at address addr (no meminfo: the owner keeps the memory)."""
        sig = arrty(types.int64, types.int64)

        def codegen(context, builder, signature, args):
            ary = context.make_array(arrty)(context, builder)
            data = builder.inttoptr(args[0], context.get_data_type(dtype).as_pointer())
            size = context.get_constant(types.intp, itemsize)
            populate_array(ary, data=data, shape=[args[1]], strides=[size], itemsize=size, meminfo=None)
            return ary._getvalue()
        return sig, codegen
    return view


view_f64 = _view_intrinsic(types.float64, 8)
view_i64 = _view_intrinsic(types.int64, 8)


def _view2_intrinsic():
    arrty = types.Array(types.float64, 2, "C")

    @intrinsic
    def view(typingctx, addr, r, c):
        """An (r, c) C-contiguous float64 array at address addr (no meminfo: the owner keeps the memory)."""
        sig = arrty(types.int64, types.int64, types.int64)

        def codegen(context, builder, signature, args):
            ary = context.make_array(arrty)(context, builder)
            data = builder.inttoptr(args[0], context.get_data_type(types.float64).as_pointer())
            eight = context.get_constant(types.intp, 8)
            populate_array(ary, data=data, shape=[args[1], args[2]], strides=[builder.mul(args[2], eight), eight],
                           itemsize=eight, meminfo=None)
            return ary._getvalue()
        return sig, codegen
    return view


view2_f64 = _view2_intrinsic()


@intrinsic
def unowned(typingctx, a):
    """The array a (any dimensions and layout) without its meminfo: the same data, shape and strides, whose
    slices count no references (for the rows a parallel batch hands to its per-configuration kernel; the
    caller keeps a alive)."""
    if not isinstance(a, types.Array):
        return None

    def codegen(context, builder, signature, args):
        src = context.make_array(a)(context, builder, args[0])
        ary = context.make_array(a)(context, builder)
        populate_array(ary, data=src.data, shape=src.shape, strides=src.strides, itemsize=src.itemsize,
                       meminfo=None)
        return ary._getvalue()
    return a(a), codegen
