"""Reachable and dexterous workspace by Monte Carlo sampling of joint space.

Method: draw N joint vectors uniformly within the joint limits (continuous joints: [-pi, pi]) from a
counter-based generator (sample k is fixed by (seed, k), see _sample_kernels), compute the tip origin of each
(numba, parallel on the CPU, or a numba.cuda kernel with the same numbers), and mark the voxels (edge h) that
samples fall in. Of the occupied voxels, the *boundary* ones have at least one empty face neighbour; the others
are *interior*. The reachable volume is estimated as

    V = (interior + boundary / 2) h^3,   uncertainty U = (boundary / 2) h^3 + |V(N) - V(N/2)|,

i.e. the workspace is taken to fill the interior voxels and to cut the boundary layer in half, with half that
layer as the error bound (the true volume lies between the interior and the occupied volume when every voxel
inside is sampled), plus the change from half the samples as a convergence term. h is chosen from the samples
so that an occupied voxel receives ``samples_per_voxel`` samples on average: h = (V0 rho / N)^(1/d), V0 from a
pilot run; so U shrinks as N grows (about as N^(-1/3)). The estimate is repeated for N/16, N/8, ... N
(the same samples, nested) and reported as ``convergence``.

Planar (or linear) workspaces, e.g. a planar 2R, are detected from the pilot samples (principal axes of the
tip points) and measured in their plane: ``dimension`` 2 and ``measure`` in m^2 (``volume_m3`` is then 0).

Dexterous workspace: a coarser grid (edge ``dexterity_factor`` h) records which of 64 equal-area bins of the
tip's approach axis (tip frame x, y or z) the samples reach in each voxel; the dexterity index of a voxel is
the fraction of bins reached, and the dexterous volume is the reachable volume (counted as above on the fine
grid) in dexterity voxels whose index is at least ``dexterity_threshold`` (a resolution-limited figure, no
uncertainty claimed).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError
from . import _sample_kernels as SK

_AXES = {"x": 0, "y": 1, "z": 2}


@dataclass
class WorkspaceEstimate:
    """Result of estimate_workspace. Lengths m, volumes m^3 (areas m^2 when dimension is 2), times s."""

    robot: str
    dimension: int                 # 3: volume, 2: planar workspace (area), 1: a curve (length)
    measure: float                 # m^dimension
    uncertainty: float             # m^dimension, see the module docstring
    samples: int
    voxel_m: float
    occupied_voxels: int
    boundary_voxels: int
    samples_outside_grid: int
    convergence: list              # [{samples, voxel_m, measure, uncertainty}] for N/16 ... N
    dexterous_measure: float       # m^dimension
    dexterity_voxel_m: float
    dexterity_threshold: float
    approach_axis: str
    device: str
    time_s: float                  # whole estimate
    kernel_time_s: float           # sampling + FK only
    origin: np.ndarray = field(repr=False)    # grid corner (m) in grid coordinates
    basis: np.ndarray = field(repr=False)     # (3, 3) rows: grid axes in the base frame (orthonormal)
    base_point: np.ndarray = field(repr=False)  # base-frame point of grid coordinate 0
    occupancy: np.ndarray = field(repr=False)   # (nx, ny, nz) uint8
    dexterity: np.ndarray = field(repr=False)   # (mx, my, mz) float, fraction of direction bins reached

    @property
    def volume_m3(self):
        return self.measure if self.dimension == 3 else 0.0

    @property
    def volume_uncertainty_m3(self):
        return self.uncertainty if self.dimension == 3 else 0.0

    @property
    def samples_per_s(self):
        """End-to-end rate (sampling, FK, voxels, boundary), samples per second."""
        return self.samples / self.time_s if self.time_s > 0 else math.inf

    @property
    def kernel_samples_per_s(self):
        """Rate of the sampling + FK kernel alone."""
        return self.samples / self.kernel_time_s if self.kernel_time_s > 0 else math.inf

    def to_points(self, which="occupied"):
        """Base-frame centres (n, 3) of the occupied (or "boundary") voxels, and their dexterity index (n,)."""
        occ = self.occupancy.astype(bool)
        if which == "boundary":
            occ &= ~_interior(occ, self.dimension)
        idx = np.argwhere(occ)
        local = self.origin + (idx + 0.5) * self.voxel_m
        pts = self.base_point + local @ self.basis
        f = self.dexterity.shape[0] and max(1, int(round(self.dexterity_voxel_m / self.voxel_m)))
        if f:
            step = np.array([f if a < self.dimension else 1 for a in range(3)])
            di = np.minimum(idx // step, np.array(self.dexterity.shape) - 1)
            dex = self.dexterity[di[:, 0], di[:, 1], di[:, 2]]
        else:
            dex = np.zeros(len(idx))
        return pts, dex

    def summary(self):
        """A JSON-ready dict (volume_m3, volume_uncertainty_m3, samples, samples_per_s, ...)."""
        unit = {3: "m3", 2: "m2", 1: "m"}[self.dimension]
        return {
            "robot": self.robot, "dimension": self.dimension, "volume_m3": self.volume_m3,
            "volume_uncertainty_m3": self.volume_uncertainty_m3, f"measure_{unit}": self.measure,
            f"uncertainty_{unit}": self.uncertainty, "samples": self.samples, "samples_per_s": self.samples_per_s,
            "kernel_samples_per_s": self.kernel_samples_per_s, "voxel_m": self.voxel_m,
            "occupied_voxels": self.occupied_voxels, "boundary_voxels": self.boundary_voxels,
            "samples_outside_grid": self.samples_outside_grid,
            f"dexterous_{unit}": self.dexterous_measure, "dexterity_voxel_m": self.dexterity_voxel_m,
            "dexterity_threshold": self.dexterity_threshold, "approach_axis": self.approach_axis,
            "device": self.device, "time_s": self.time_s, "kernel_time_s": self.kernel_time_s,
            "convergence": self.convergence,
        }


def joint_ranges(robot):
    """(lo, span) of the sampled joint values: the limits, [-pi, pi] where a limit is infinite (continuous
    joints). A prismatic joint without finite limits cannot be sampled (InputError)."""
    lo = np.array(robot.joint_lower, dtype=float)
    hi = np.array(robot.joint_upper, dtype=float)
    for j, t in enumerate(robot.joint_types):
        if not (np.isfinite(lo[j]) and np.isfinite(hi[j])) and t == "prismatic":
            raise InputError(f"joint '{robot.joint_names[j]}' is prismatic without finite limits: its workspace "
                             f"is unbounded")
    lo = np.where(np.isfinite(lo), lo, -math.pi)
    hi = np.where(np.isfinite(hi), hi, math.pi)
    return np.ascontiguousarray(lo), np.ascontiguousarray(hi - lo)


class TipSampler:
    """Tip points (and approach-direction bins) of samples k0 .. k0 + n - 1 on the CPU or with numba.cuda."""

    def __init__(self, robot, seed=0, approach_axis="z", device="cpu"):
        if approach_axis not in _AXES:
            raise InputError(f"approach_axis must be x, y or z, got {approach_axis!r}")
        if device not in ("cpu", "cuda"):
            raise InputError(f"device must be 'cpu' or 'cuda', got {device!r}")
        if robot.dof > 63:
            raise InputError(f"{robot.name}: at most 63 joints can be sampled, got {robot.dof}")
        self.robot, self.seed, self.device = robot, int(seed) & 0xFFFFFFFF, device
        self.approach = _AXES[approach_axis]
        self.lo, self.span = joint_ranges(robot)

    def __call__(self, k0, n):
        pos = np.empty((n, 3))
        dbin = np.empty(n, np.uint8)
        f = SK.samples_cuda if self.device == "cuda" else SK.samples_cpu
        f(self.robot._mf, self.robot._mi, self.lo, self.span, self.seed, int(k0), self.approach, pos, dbin)
        return pos, dbin

    def joints(self, k0, n):
        """The joint vectors (n, dof) behind samples k0 .. k0 + n - 1."""
        Q = np.empty((n, self.robot.dof))
        SK.joint_samples(self.lo, self.span, self.seed, int(k0), Q)
        return Q


def reach_bound(robot):
    """An upper bound (m) of the tip's distance from the base origin: the sum of the joint offsets along the
    tip's path, the tip offset, and the largest |value| of each prismatic joint."""
    from .._layout import BODY_STRIDE, MI_HEADER, MI_STRIDE, O_P
    mf, mi = robot._mf, robot._mi
    nb = int(mi[0])
    o_path = MI_HEADER + nb * MI_STRIDE
    r = float(np.linalg.norm(mf[nb * BODY_STRIDE + 9:nb * BODY_STRIDE + 12]))
    for kk in range(int(mi[o_path])):
        i = int(mi[o_path + 1 + kk])
        r += float(np.linalg.norm(mf[i * BODY_STRIDE + O_P:i * BODY_STRIDE + O_P + 3]))
    lo, span = joint_ranges(robot)
    for j, t in enumerate(robot.joint_types):
        if t == "prismatic":
            r += max(abs(lo[j]), abs(lo[j] + span[j]))
    return r


def _interior(occ, d):
    """Occupied voxels whose 2d face neighbours (within the used dimensions) are all occupied."""
    inner = occ.copy()
    for ax in range(d):
        for shift in (1, -1):
            nb = np.zeros_like(occ)
            src = [slice(None)] * 3
            dst = [slice(None)] * 3
            if shift == 1:
                src[ax], dst[ax] = slice(1, None), slice(None, -1)
            else:
                src[ax], dst[ax] = slice(None, -1), slice(1, None)
            nb[tuple(dst)] = occ[tuple(src)]
            inner &= nb
    return inner


class _Grid:
    """One voxel grid (edge h) over the square/cube of half-width ``half`` around the grid-coordinate origin."""

    def __init__(self, n_samples, h, half, d, dex_factor):
        self.n, self.h, self.d = n_samples, h, d
        size = int(math.ceil(2 * half / h)) + 2
        self.dims = np.array([size if a < d else 1 for a in range(3)], dtype=np.int64)
        if int(np.prod(self.dims)) > 400_000_000:
            raise InputError(f"voxel grid of {self.dims.tolist()} cells is too large; use fewer samples or a "
                             f"larger samples_per_voxel")
        self.origin = np.array([-half - h if a < d else -0.5 * h for a in range(3)])
        self.occ = np.zeros(int(np.prod(self.dims)), np.uint8)
        self.outside = 0
        if dex_factor:
            self.hd = h * dex_factor
            self.dims_d = np.array([int(math.ceil(s / dex_factor)) if a < d else 1
                                    for a, s in enumerate(self.dims)], dtype=np.int64)
            self.mask = np.zeros(int(np.prod(self.dims_d)), np.uint64)
        else:
            self.hd, self.dims_d, self.mask = h, np.ones(3, np.int64), np.zeros(0, np.uint64)

    def add(self, P, dbin):
        self.outside += SK.voxelize(P, dbin, self.origin, 1.0 / self.h, self.dims, self.occ, 1.0 / self.hd,
                                    self.dims_d, self.mask)

    def result(self):
        occ = self.occ.reshape(tuple(self.dims)).astype(bool)
        inner = _interior(occ, self.d)
        n_occ, n_in = int(occ.sum()), int(inner.sum())
        cell = self.h ** self.d
        return n_occ, n_occ - n_in, (n_in + 0.5 * (n_occ - n_in)) * cell, 0.5 * (n_occ - n_in) * cell


def estimate_workspace(robot, samples=2_000_000, *, seed=0, samples_per_voxel=20.0, device="cpu",
                       approach_axis="z", dexterity_factor=4, dexterity_threshold=0.5, chunk=1 << 20,
                       levels=5, progress=None):
    """Monte Carlo estimate of the reachable workspace of ``robot`` (see the module docstring).

    samples: N joint vectors (>= 4096); seed: generator seed (repeatable); samples_per_voxel: rho, the mean
    number of samples per occupied voxel that sets the voxel edge; device "cpu" (numba, parallel) or "cuda"
    (numba.cuda; the CUDA simulator under NUMBA_ENABLE_CUDASIM=1); approach_axis: tip frame axis whose direction
    the dexterity grid records; dexterity_factor: dexterity voxel edge in voxel edges (0: no dexterity grid);
    levels: how many nested sample counts (N, N/2, N/4, ...) the convergence table holds (>= 2);
    progress: callable(done, total) called after each chunk.
    """
    t_start = time.perf_counter()
    samples = int(samples)
    if samples < 4096:
        raise InputError(f"samples must be at least 4096, got {samples}")
    if samples_per_voxel <= 0 or not 0.0 <= dexterity_threshold <= 1.0 or levels < 2:
        raise InputError("samples_per_voxel must be > 0, dexterity_threshold in [0, 1] and levels >= 2")
    sampler = TipSampler(robot, seed, approach_axis, device)
    kernel_time = 0.0

    # pilot: dimension, plane and a first volume that sets the voxel edge
    n_pilot = min(samples, 65536)
    t0 = time.perf_counter()
    P0, _ = sampler(0, n_pilot)
    kernel_time += time.perf_counter() - t0
    centre = P0.mean(axis=0)
    X = P0 - centre
    ev, vec = np.linalg.eigh(X.T @ X / n_pilot)  # principal axes of the tip points, ascending
    sv, Vt = np.sqrt(np.maximum(ev[::-1], 0.0)), vec[:, ::-1].T
    d = int(np.sum(sv > 1e-7 * sv[0])) if sv[0] > 1e-9 else 0
    if d == 0:
        raise InputError(f"{robot.name}: the tip does not move (no joint moves it within the limits)")
    if d == 3:
        basis, base_point = np.eye(3), np.zeros(3)
    else:  # in-plane (or on-line) coordinates measured from the base origin's projection
        basis, base_point = Vt, Vt[d:].T @ (Vt[d:] @ centre)
    half = reach_bound(robot) * 1.0001 + 1e-9

    def local(P):
        return P if d == 3 else np.ascontiguousarray((P - base_point) @ basis.T)

    L0 = local(P0)
    h0 = (2 * half) / max(8.0, (n_pilot / samples_per_voxel) ** (1.0 / d) * 2.0)
    pilot = _Grid(n_pilot, h0, half, d, 0)
    pilot.add(L0, np.zeros(n_pilot, np.uint8))
    v0 = max(pilot.result()[2], 1e-300)

    counts = sorted({max(n_pilot, samples >> k) for k in range(levels)})
    grids = []
    for n in counts:
        h = (v0 * samples_per_voxel / n) ** (1.0 / d)
        grids.append(_Grid(n, h, half, d, dexterity_factor if n == samples else 0))
    done = 0
    while done < samples:
        n = min(chunk, samples - done)
        t0 = time.perf_counter()
        P, dbin = sampler(done, n)
        kernel_time += time.perf_counter() - t0
        L = local(P)
        for g in grids:
            if g.n > done:
                m = min(n, g.n - done)
                g.add(L[:m], dbin[:m])
        done += n
        if progress is not None:
            progress(done, samples)

    convergence = []
    for g in grids:
        n_occ, n_b, v, u = g.result()
        convergence.append({"samples": g.n, "voxel_m": g.h, "measure": v, "boundary_half_layer": u})
    final = grids[-1]
    n_occ, n_b, v, u_layer = final.result()
    change = abs(convergence[-1]["measure"] - convergence[-2]["measure"]) if len(convergence) > 1 else 0.0
    for c, prev in zip(convergence[1:], convergence[:-1]):
        c["uncertainty"] = c["boundary_half_layer"] + abs(c["measure"] - prev["measure"])
    convergence[0]["uncertainty"] = None  # no smaller run to compare with

    dex = np.zeros((0, 0, 0))
    dex_measure = 0.0
    if dexterity_factor:
        dex = (np.bitwise_count(final.mask) / SK.N_DIRECTION_BINS).reshape(tuple(final.dims_d))
        # on the fine grid: occupied voxels whose dexterity voxel qualifies, weighted like the reachable volume
        occ = final.occ.reshape(tuple(final.dims)).astype(bool)
        inner = _interior(occ, d)
        idx = np.argwhere(occ)
        di = np.minimum(idx // dexterity_factor if d == 3 else idx // np.array(
            [dexterity_factor if a < d else 1 for a in range(3)]), final.dims_d - 1)
        ok = dex[di[:, 0], di[:, 1], di[:, 2]] >= max(dexterity_threshold, 1e-12)
        w = np.where(inner[idx[:, 0], idx[:, 1], idx[:, 2]], 1.0, 0.5)
        dex_measure = float(np.sum(w[ok])) * final.h ** d
    return WorkspaceEstimate(
        robot=robot.name, dimension=d, measure=v, uncertainty=u_layer + change, samples=samples,
        voxel_m=final.h, occupied_voxels=n_occ, boundary_voxels=n_b, samples_outside_grid=int(final.outside),
        convergence=convergence, dexterous_measure=dex_measure, dexterity_voxel_m=final.hd,
        dexterity_threshold=dexterity_threshold, approach_axis=approach_axis, device=device,
        time_s=time.perf_counter() - t_start, kernel_time_s=kernel_time, origin=final.origin, basis=basis,
        base_point=base_point, occupancy=final.occ.reshape(tuple(final.dims)), dexterity=dex)


def ypp3_volume_m3(a, b, elbow_max, shoulder_max=math.pi / 2):
    """Exact reachable volume (m^3) of a yaw-pitch-pitch arm: full yaw, shoulder pitch in
    [-shoulder_max, shoulder_max] about the vertical, elbow in [-elbow_max, elbow_max], links a, b (m), for
    shoulder_max + delta <= pi (delta the angle between the upper arm and the shoulder-to-tip line).

    At distance r from the shoulder, cos q3 = (r^2 - a^2 - b^2) / (2ab) and the tip direction reaches polar
    angles (from the vertical) up to theta(r) = shoulder_max + delta(r), with sin delta = b sin q3 / r; so
    V = int_{r_min}^{a+b} 2 pi r^2 (1 - cos theta(r)) dr. For shoulder_max = pi/2, 1 - cos theta = 1 + sin delta
    and with u = r^2, t = cos q3 the integral is closed:
    V = 2 pi [((a+b)^3 - r_min^3) / 3 + a b^2 int_{cos elbow_max}^{1} sqrt(1 - t^2) dt].
    Other shoulder ranges are integrated numerically (scipy.integrate.quad).
    """
    t0 = math.cos(elbow_max)
    r_min = math.sqrt(a * a + b * b + 2 * a * b * t0)
    R = a + b
    if abs(shoulder_max - math.pi / 2) < 1e-15:
        F = math.pi / 4 - 0.5 * (t0 * math.sqrt(1 - t0 * t0) + math.asin(t0))
        return 2 * math.pi * ((R ** 3 - r_min ** 3) / 3 + a * b * b * F)
    from scipy.integrate import quad

    def f(r):
        c = min(1.0, max(-1.0, (r * r - a * a - b * b) / (2 * a * b)))
        delta = math.asin(min(1.0, b * math.sqrt(1 - c * c) / r))
        return 2 * math.pi * r * r * (1 - math.cos(min(math.pi, shoulder_max + delta)))
    return quad(f, r_min, R, epsabs=1e-13, epsrel=1e-12)[0]
