"""Monte Carlo workspace samples: a joint vector drawn from a counter-based generator and the tip point it
reaches. One scalar Python function, :func:`tip_sample`, is compiled twice, by numba for the CPU (parallel over
samples) and by numba.cuda as a device function, so that both give the same numbers for the same (seed, k).

Generator: joint j of sample k is lo_j + span_j * u with u = (h + 0.5) / 2^32, h a 32-bit hash of (seed, k, j)
(MurmurHash3's fmix32 finaliser applied twice, Appleby 2011); every product stays below 2^64 so the same
unsigned arithmetic runs on the CPU, the GPU and the CUDA simulator. Samples are independent of the chunking:
sample k is the same whether it is drawn alone or in a batch of millions.

Output per sample: the tip origin (m, base frame) and the index (0..63) of the equal-area direction bin of the
tip frame's approach axis (8 bands of equal height in z times 8 sectors of azimuth), for the dexterous
workspace.
"""
import math

import numpy as np
from numba import njit, prange

from .._layout import BODY_STRIDE, JOINT_PRISMATIC, MI_HEADER, MI_STRIDE, O_AX, O_R

_MASK = np.uint64(0xFFFFFFFF)
_C1 = np.uint64(0x85EBCA6B)
_C2 = np.uint64(0xC2B2AE35)
_G1 = np.uint64(0x9E3779B1)
_G2 = np.uint64(0x7FEB352D)
_S16 = np.uint64(16)
_S13 = np.uint64(13)
_TWO_PI = 2.0 * math.pi
N_DIRECTION_BINS = 64


def tip_sample(mf, mi, lo, span, seed, k, approach, pos, dbin, t):
    """Sample k: joint values from (seed, k), tip origin into pos[t, :], approach-axis bin into dbin[t].

    approach: 0, 1, 2: the tip frame's x, y or z axis is the approach direction.
    """
    nb = mi[0]
    dof = mi[1]
    has_map = mi[3]
    o_path = MI_HEADER + nb * MI_STRIDE
    o_map = nb * BODY_STRIDE + 12
    ku = np.uint64(k) & _MASK
    sd = np.uint64(seed) & _MASK
    r00, r01, r02, r10, r11, r12, r20, r21, r22 = 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0
    p0, p1, p2 = 0.0, 0.0, 0.0
    for kk in range(mi[o_path]):
        i = mi[o_path + 1 + kk]
        b = i * BODY_STRIDE
        # joint value of physical joint i: q_i itself, or b_i + sum_j A_ij q_j with mimic joints
        if has_map == 0:
            j0 = i
            j1 = i + 1
            qi = 0.0
        else:
            j0 = 0
            j1 = dof
            qi = mf[o_map + nb * dof + i]
        for j in range(j0, j1):
            a = 1.0 if has_map == 0 else mf[o_map + i * dof + j]
            if a != 0.0:
                h = (ku * _G1 + sd) & _MASK
                h = h ^ (h >> _S16)
                h = (h * _C1) & _MASK
                h = h ^ (h >> _S13)
                h = (h * _C2) & _MASK
                h = h ^ (h >> _S16)
                h = (h + ((np.uint64(j) + np.uint64(1)) * _G2 & _MASK)) & _MASK
                h = h ^ (h >> _S16)
                h = (h * _C1) & _MASK
                h = h ^ (h >> _S13)
                h = (h * _C2) & _MASK
                h = h ^ (h >> _S16)
                u = (np.float64(h) + 0.5) * 2.3283064365386963e-10
                qi += a * (lo[j] + span[j] * u)
        x0 = mf[b + O_R]
        x1 = mf[b + O_R + 1]
        x2 = mf[b + O_R + 2]
        x3 = mf[b + O_R + 3]
        x4 = mf[b + O_R + 4]
        x5 = mf[b + O_R + 5]
        x6 = mf[b + O_R + 6]
        x7 = mf[b + O_R + 7]
        x8 = mf[b + O_R + 8]
        px, py, pz = mf[b + O_R + 9], mf[b + O_R + 10], mf[b + O_R + 11]
        p0 += r00 * px + r01 * py + r02 * pz
        p1 += r10 * px + r11 * py + r12 * pz
        p2 += r20 * px + r21 * py + r22 * pz
        b00 = r00 * x0 + r01 * x3 + r02 * x6
        b01 = r00 * x1 + r01 * x4 + r02 * x7
        b02 = r00 * x2 + r01 * x5 + r02 * x8
        b10 = r10 * x0 + r11 * x3 + r12 * x6
        b11 = r10 * x1 + r11 * x4 + r12 * x7
        b12 = r10 * x2 + r11 * x5 + r12 * x8
        b20 = r20 * x0 + r21 * x3 + r22 * x6
        b21 = r20 * x1 + r21 * x4 + r22 * x7
        b22 = r20 * x2 + r21 * x5 + r22 * x8
        ax, ay, az = mf[b + O_AX], mf[b + O_AX + 1], mf[b + O_AX + 2]
        if mi[MI_HEADER + i * MI_STRIDE + 1] == JOINT_PRISMATIC:
            p0 += (b00 * ax + b01 * ay + b02 * az) * qi
            p1 += (b10 * ax + b11 * ay + b12 * az) * qi
            p2 += (b20 * ax + b21 * ay + b22 * az) * qi
            r00, r01, r02, r10, r11, r12, r20, r21, r22 = b00, b01, b02, b10, b11, b12, b20, b21, b22
            continue
        c = math.cos(qi)
        s = math.sin(qi)
        kind = mi[MI_HEADER + i * MI_STRIDE + 2]
        if kind == 2:
            r00, r01, r02 = c * b00 + s * b01, -s * b00 + c * b01, b02
            r10, r11, r12 = c * b10 + s * b11, -s * b10 + c * b11, b12
            r20, r21, r22 = c * b20 + s * b21, -s * b20 + c * b21, b22
        elif kind == 1:
            r00, r01, r02 = -s * b02 + c * b00, b01, c * b02 + s * b00
            r10, r11, r12 = -s * b12 + c * b10, b11, c * b12 + s * b10
            r20, r21, r22 = -s * b22 + c * b20, b21, c * b22 + s * b20
        elif kind == 0:
            r00, r01, r02 = b00, c * b01 + s * b02, -s * b01 + c * b02
            r10, r11, r12 = b10, c * b11 + s * b12, -s * b11 + c * b12
            r20, r21, r22 = b20, c * b21 + s * b22, -s * b21 + c * b22
        else:
            tt = 1.0 - c
            j00, j01, j02 = c + tt * ax * ax, tt * ax * ay - s * az, tt * ax * az + s * ay
            j10, j11, j12 = tt * ax * ay + s * az, c + tt * ay * ay, tt * ay * az - s * ax
            j20, j21, j22 = tt * ax * az - s * ay, tt * ay * az + s * ax, c + tt * az * az
            r00, r01, r02 = (b00 * j00 + b01 * j10 + b02 * j20, b00 * j01 + b01 * j11 + b02 * j21,
                             b00 * j02 + b01 * j12 + b02 * j22)
            r10, r11, r12 = (b10 * j00 + b11 * j10 + b12 * j20, b10 * j01 + b11 * j11 + b12 * j21,
                             b10 * j02 + b11 * j12 + b12 * j22)
            r20, r21, r22 = (b20 * j00 + b21 * j10 + b22 * j20, b20 * j01 + b21 * j11 + b22 * j21,
                             b20 * j02 + b21 * j12 + b22 * j22)
    o = nb * BODY_STRIDE
    pos[t, 0] = p0 + r00 * mf[o + 9] + r01 * mf[o + 10] + r02 * mf[o + 11]
    pos[t, 1] = p1 + r10 * mf[o + 9] + r11 * mf[o + 10] + r12 * mf[o + 11]
    pos[t, 2] = p2 + r20 * mf[o + 9] + r21 * mf[o + 10] + r22 * mf[o + 11]
    # approach axis = column ``approach`` of R_tip = R R_off
    ex, ey, ez = mf[o + approach], mf[o + 3 + approach], mf[o + 6 + approach]
    dx = r00 * ex + r01 * ey + r02 * ez
    dy = r10 * ex + r11 * ey + r12 * ez
    dz = r20 * ex + r21 * ey + r22 * ez
    band = int((dz + 1.0) * 4.0)
    band = 7 if band > 7 else (0 if band < 0 else band)
    sector = int((math.atan2(dy, dx) + math.pi) * (8.0 / _TWO_PI))
    sector = 7 if sector > 7 else (0 if sector < 0 else sector)
    dbin[t] = band * 8 + sector


_tip_sample_cpu = njit(cache=True, nogil=True, error_model="numpy")(tip_sample)


@njit(cache=True, parallel=True, error_model="numpy")
def samples_cpu(mf, mi, lo, span, seed, k0, approach, pos, dbin):
    """Samples k0 .. k0 + len(pos) - 1 into pos (n, 3) and dbin (n,), parallel over samples."""
    for t in prange(pos.shape[0]):
        _tip_sample_cpu(mf, mi, lo, span, seed, k0 + t, approach, pos, dbin, t)


@njit(cache=True, parallel=True, error_model="numpy")
def joint_samples(lo, span, seed, k0, Q):
    """The joint vectors (actuated joints) of samples k0 .. k0 + len(Q) - 1 into Q (n, dof): the same numbers
    tip_sample draws (the hash is repeated here; tests check that fk of these equals the sampled tips)."""
    sd = np.uint64(seed) & _MASK
    for t in prange(Q.shape[0]):
        ku = np.uint64(k0 + t) & _MASK
        for j in range(Q.shape[1]):
            h = (ku * _G1 + sd) & _MASK
            h = h ^ (h >> _S16)
            h = (h * _C1) & _MASK
            h = h ^ (h >> _S13)
            h = (h * _C2) & _MASK
            h = h ^ (h >> _S16)
            h = (h + ((np.uint64(j) + np.uint64(1)) * _G2 & _MASK)) & _MASK
            h = h ^ (h >> _S16)
            h = (h * _C1) & _MASK
            h = h ^ (h >> _S13)
            h = (h * _C2) & _MASK
            h = h ^ (h >> _S16)
            Q[t, j] = lo[j] + span[j] * ((np.float64(h) + 0.5) * 2.3283064365386963e-10)


def samples_cuda(mf, mi, lo, span, seed, k0, approach, pos, dbin, threads=256):
    """Same as samples_cpu with the numba.cuda kernel of _sample_cuda (on the GPU, or the CUDA simulator under
    NUMBA_ENABLE_CUDASIM=1); host arrays in and out. numba.cuda is imported on first use only."""
    from . import _sample_cuda
    _sample_cuda.run(mf, mi, lo, span, seed, k0, approach, pos, dbin, threads)


@njit(cache=True, error_model="numpy")
def voxelize(P, dbin, origin, inv_h, dims, occ, inv_hd, dims_d, mask):
    """Mark the voxel of each point (P (n, 3) in grid coordinates, m) in occ (flat uint8, C order over dims),
    and OR the point's direction bit into mask (flat uint64) of the coarser dexterity grid. Returns the number
    of points outside the grid."""
    outside = 0
    one = np.uint64(1)
    for t in range(P.shape[0]):
        x = (P[t, 0] - origin[0]) * inv_h
        y = (P[t, 1] - origin[1]) * inv_h
        z = (P[t, 2] - origin[2]) * inv_h
        ix, iy, iz = int(math.floor(x)), int(math.floor(y)), int(math.floor(z))
        if ix < 0 or iy < 0 or iz < 0 or ix >= dims[0] or iy >= dims[1] or iz >= dims[2]:
            outside += 1
            continue
        occ[(ix * dims[1] + iy) * dims[2] + iz] = 1
        if mask.shape[0] > 0:
            jx = min(int(math.floor((P[t, 0] - origin[0]) * inv_hd)), dims_d[0] - 1)
            jy = min(int(math.floor((P[t, 1] - origin[1]) * inv_hd)), dims_d[1] - 1)
            jz = min(int(math.floor((P[t, 2] - origin[2]) * inv_hd)), dims_d[2] - 1)
            mask[(jx * dims_d[1] + jy) * dims_d[2] + jz] |= one << np.uint64(dbin[t])
    return outside
