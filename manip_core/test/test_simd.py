"""manip_core._simd (W float64 lanes as one LLVM vector) against numpy lane by lane: every operation gives the
same bits as the scalar one, loads and stores address the right row of 2-D and 3-D arrays, and the compiled
arithmetic is packed (vector) instructions on x86-64."""
import platform

import numpy as np
import pytest
from numba import njit

from manip_core._simd import W, vabs, vfloor, vget, vload, vrint, vselect_gt, vsplat, vsqrt, vstore


@njit(cache=False)
def _ops(a, out):
    x = vload(a, (0,))
    y = vload(a, (1,))
    vstore(out, (0,), x + y)
    vstore(out, (1,), x - y)
    vstore(out, (2,), x * y)
    vstore(out, (3,), x / y)
    vstore(out, (4,), -x)
    vstore(out, (5,), 2.5 * x - y / 3.0 + 1)
    vstore(out, (6,), vsqrt(vabs(y)))
    vstore(out, (7,), vrint(x))
    vstore(out, (8,), vfloor(x))
    vstore(out, (9,), vselect_gt(x, y, x, y))
    vstore(out, (10,), vsplat(a[0, 3]))
    return vget(x * y, 5)


@njit(cache=False)
def _rows3(a, i, k):
    v = vload(a, (i, k))
    vstore(a, (i + 1, k - 1), v * 2.0)


def test_operations_equal_numpy_bit_for_bit():
    rng = np.random.default_rng(3)
    a = rng.normal(0.0, 10.0, (2, W))
    a[0, :3] = [0.5, -2.5, 1e300]          # rint's ties to even; an overflowing product
    out = np.full((11, W), np.nan)
    lane5 = _ops(a, out)
    x, y = a
    expect = [x + y, x - y, x * y, x / y, -x, 2.5 * x - y / 3.0 + 1, np.sqrt(np.abs(y)), np.rint(x), np.floor(x),
              np.where(x > y, x, y), np.full(W, x[3])]
    for row, (got, ref) in enumerate(zip(out, expect)):
        np.testing.assert_array_equal(got, ref, err_msg=f"row {row}")
    assert lane5 == x[5] * y[5]


def test_rows_of_a_3d_array():
    a = np.arange(4 * 3 * W, dtype=np.float64).reshape(4, 3, W)
    ref = a.copy()
    ref[2, 0] = 2.0 * a[1, 1]
    _rows3(a, 1, 1)
    np.testing.assert_array_equal(a, ref)


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="checks x86-64 instructions")
def test_arithmetic_compiles_to_packed_instructions():
    a = np.ones((2, W))
    _ops(a, np.empty((11, W)))
    asm = _ops.inspect_asm(_ops.signatures[0])
    packed = [ln for ln in asm.splitlines() if ln.strip().startswith(("vmulpd", "vaddpd", "vsubpd", "vdivpd",
                                                                      "mulpd", "addpd", "subpd", "divpd"))]
    assert len(packed) >= 6, "no packed double arithmetic in the compiled code"
