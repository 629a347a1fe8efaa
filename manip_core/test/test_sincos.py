"""manip_core._sincos.sincos (one reduction, fdlibm polynomials, no branch on the quadrant) against mpmath at
200 bits and against libm (numpy): angles a robot's joints take, the quadrant boundaries and the points
where sin or cos is zero (where a reduction loses most), up to the bound beyond which libm takes over, and
NaN, inf, zero and subnormals."""
import mpmath
import numpy as np
import pytest
from numba import njit

from manip_core._simd import W, vload, vstore
from manip_core._sincos import FAST_BOUND_RAD, sincos, sincos_lanes

ABS_TOL = 2.3e-16      # absolute error of sin and cos, both at most 1: about one unit in the last place of 1.0


@njit(cache=False)
def _many(x, s, c):
    for i in range(x.size):
        s[i], c[i] = sincos(x[i])


def _eval(x):
    x = np.ascontiguousarray(x, dtype=np.float64)
    s, c = np.empty_like(x), np.empty_like(x)
    _many(x, s, c)
    return s, c


def _angles():
    rng = np.random.default_rng(7)
    k = np.arange(-40, 41)
    quarter = k * (np.pi / 2)
    near = np.concatenate([quarter, np.nextafter(quarter, np.inf), np.nextafter(quarter, -np.inf),
                           quarter + 1e-9, quarter - 1e-9, (k + 0.5) * (np.pi / 2)])
    return np.concatenate([rng.uniform(-2 * np.pi, 2 * np.pi, 3000), rng.uniform(-200.0, 200.0, 1000),
                           rng.uniform(-FAST_BOUND_RAD, FAST_BOUND_RAD, 300), near,
                           [0.0, -0.0, 5e-324, -5e-324, 1e-300, 1e-8, np.pi, -np.pi,
                            FAST_BOUND_RAD, -FAST_BOUND_RAD, np.nextafter(FAST_BOUND_RAD, 0.0)]])


def test_against_mpmath():
    x = _angles()
    s, c = _eval(x)
    mpmath.mp.prec = 200
    err_s = max(abs(float(mpmath.sin(mpmath.mpf(float(v))) - mpmath.mpf(float(a)))) for v, a in zip(x, s))
    err_c = max(abs(float(mpmath.cos(mpmath.mpf(float(v))) - mpmath.mpf(float(a)))) for v, a in zip(x, c))
    assert err_s <= ABS_TOL and err_c <= ABS_TOL, (err_s, err_c)
    # and relative to the value where it is not tiny: the polynomials are fdlibm's (< 1 ulp on |r| <= pi/4)
    ref_s = np.sin(x)
    big = np.abs(ref_s) > 0.5
    assert np.all(np.abs(s[big] - ref_s[big]) <= 2 * np.spacing(np.abs(ref_s[big])))


def test_against_libm_and_identities():
    x = _angles()
    s, c = _eval(x)
    assert np.abs(s - np.sin(x)).max() <= ABS_TOL
    assert np.abs(c - np.cos(x)).max() <= ABS_TOL
    assert np.abs(s * s + c * c - 1.0).max() <= 4.5e-16
    # odd and even, exactly: the reduction and both polynomials are symmetric in x
    s_neg, c_neg = _eval(-x)
    np.testing.assert_array_equal(s_neg, -s)
    np.testing.assert_array_equal(c_neg, c)


@pytest.mark.parametrize("x", [0.0, -0.0, 5e-324, 1e-300])
def test_tiny_angles(x):
    # sin x = x below 1e-8 rad; sin(-0.0) comes out as +0.0 (x - 0 * pi/2), which no kinematics can see
    s, c = sincos(x)
    assert s == x and c == 1.0


@pytest.mark.parametrize("x", [np.nextafter(FAST_BOUND_RAD, np.inf), -3e5, 1e17, -1e300, np.inf, -np.inf, np.nan])
def test_beyond_the_bound_is_libm(x):
    s, c = sincos(x)
    with np.errstate(invalid="ignore"):     # numpy warns for sin(inf); sincos returns NaN as it does
        np.testing.assert_array_equal([s, c], [np.sin(x), np.cos(x)])


@njit(cache=False)
def _lanes(x, s, c):
    for g in range(x.shape[0]):
        sv, cv = sincos_lanes(vload(x, (g,)))
        vstore(s, (g,), sv)
        vstore(c, (g,), cv)


def test_lanes_give_the_same_bits_as_one_at_a_time():
    x = _angles()
    x = x[np.abs(x) <= FAST_BOUND_RAD]
    x = x[:x.size - x.size % W].reshape(-1, W)
    s, c = np.empty_like(x), np.empty_like(x)
    _lanes(x, s, c)
    s1, c1 = _eval(x.ravel())
    np.testing.assert_array_equal(s.ravel(), s1)
    np.testing.assert_array_equal(c.ravel(), c1)
