"""sin and cos of one angle together, for the kernels: one Cody-Waite reduction and two short polynomials.

libm's sin and cos are two opaque calls, each with its own range reduction; in the dynamics kernels they took
about a third of a batched RNEA. Here the angle x (rad) is reduced once, x = n pi/2 + r with |r| <= pi/4, pi/2
split in three parts (33 + 33 + 53 bits, fdlibm's pio2_1, pio2_2, pio2_3) so that n * part is exact for
|n| < 2^20, and sin r, cos r come from fdlibm's kernel polynomials (k_sin.c, k_cos.c: error below 1 ulp on
|r| <= pi/4). Beyond |x| = 1e5 rad (and for NaN or inf) libm is called instead. The result differs from
libm's by at most about one unit in the last place (test_sincos.py checks it against numpy and mpmath).

The constants are fdlibm's: Copyright (C) 1993 by Sun Microsystems, Inc. All rights reserved. Developed at
SunSoft, a Sun Microsystems, Inc. business. Permission to use, copy, modify, and distribute this software is
freely granted, provided that this notice is preserved.
"""
import numpy as np
from numba import njit

from ._simd import vfloor, vrint, vselect_gt, vsplat

FAST_BOUND_RAD = 1.0e5     # |x| up to this: the reduction here; beyond it (or NaN, inf): libm

_INVPIO2 = 6.36619772367581382433e-01
_PIO2_1 = 1.57079632673412561417e+00   # first 33 bits of pi/2
_PIO2_2 = 6.07710050630396597660e-11   # next 33 bits
_PIO2_3 = 2.02226624871116645580e-21   # next 53 bits
_S1, _S2, _S3 = -1.66666666666666324348e-01, 8.33333333332248946124e-03, -1.98412698298579493134e-04
_S4, _S5, _S6 = 2.75573137070700676789e-06, -2.50507602534068634195e-08, 1.58969099521155010221e-10
_C1, _C2, _C3 = 4.16666666666666019037e-02, -1.38888888888741095749e-03, 2.48015872894767294178e-05
_C4, _C5, _C6 = -2.75573143513906633035e-07, 2.08757232129817482790e-09, -1.13596475577881948265e-11


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _reduced(x, fn):
    """sin r, cos r of r = x - fn pi/2 (fn = rint(x 2/pi)): x a float or a _simd vector, the same operations."""
    r = ((x - fn * _PIO2_1) - fn * _PIO2_2) - fn * _PIO2_3
    z = r * r
    w = z * z
    # fdlibm __kernel_sin(r, 0, 0) and __kernel_cos(r, 0)
    v = z * r
    s = r + v * (_S1 + z * (_S2 + z * (_S3 + z * (_S4 + z * (_S5 + z * _S6)))))
    q = z * (_C1 + z * (_C2 + z * _C3)) + w * w * (_C4 + z * (_C5 + z * _C6))
    hz = 0.5 * z
    t = 1.0 - hz
    return s, t + (((1.0 - t) - hz) + z * q)


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def sincos(x):
    """(sin x, cos x) of x in rad."""
    if not abs(x) <= FAST_BOUND_RAD:
        return np.sin(x), np.cos(x)
    fn = np.rint(x * _INVPIO2)
    s, c = _reduced(x, fn)
    # quadrant n mod 4: (sin, cos) = (s, c), (c, -s), (-s, -c), (-c, s), by selects and exact sign products:
    # n is random from one call to the next in a batch, and branches on it were a third slower there
    n = np.int64(fn)
    swap = (n & 1) != 0
    a = c if swap else s
    b = s if swap else c
    return float(1 - (n & 2)) * a, float(1 - ((n + 1) & 2)) * b


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def sincos_lanes(x):
    """sincos of every lane of x (a _simd vector), the same bits as sincos lane by lane for |x| <= FAST_BOUND_RAD;
    the caller recomputes lanes beyond it (or NaN, inf) with libm."""
    fn = vrint(x * _INVPIO2)
    s, c = _reduced(x, fn)
    # the quadrant in floats (fn is an integer below 2^17 in magnitude: every step exact): n4 = fn mod 4,
    # swap = n4 mod 2, sin's sign -1 for n4 in {2, 3}, cos's for n4 in {1, 2}
    n4 = fn - 4.0 * vfloor(fn * 0.25)
    half = vfloor(n4 * 0.5)
    swap = n4 - 2.0 * half
    m4 = n4 + 1.0 - 4.0 * vfloor((n4 + 1.0) * 0.25)
    a = vselect_gt(swap, vsplat(0.5), c, s)
    b = vselect_gt(swap, vsplat(0.5), s, c)
    return (1.0 - 2.0 * half) * a, (1.0 - 2.0 * vfloor(m4 * 0.5)) * b
