"""Pictures and point clouds of the analyses: PNG slices and a 3-D view (matplotlib, Agg), PLY export, and a
text progress bar for long runs (stderr)."""
from __future__ import annotations

import sys
import time

import numpy as np


class ProgressBar:
    """callable(done, total): a one-line bar on ``stream`` (stderr), redrawn at most 10 times a second."""

    def __init__(self, label, stream=None, width=30):
        self.label, self.stream, self.width = label, stream or sys.stderr, width
        self._last = 0.0
        self._t0 = time.perf_counter()

    def __call__(self, done, total):
        now = time.perf_counter()
        if done < total and now - self._last < 0.1:
            return
        self._last = now
        f = done / total if total else 1.0
        n = int(round(f * self.width))
        self.stream.write(f"\r{self.label} [{'#' * n}{'.' * (self.width - n)}] {100 * f:5.1f}% "
                          f"{done}/{total} {now - self._t0:.1f} s")
        if done >= total:
            self.stream.write("\n")
        self.stream.flush()


def write_ply(path, points, values=None):
    """Binary little-endian PLY of points (n, 3) (m, base frame), with a float property ``value`` and a
    viridis colour when values (n,) are given."""
    from matplotlib import colormaps
    points = np.asarray(points, dtype=float)
    n = len(points)
    fields = [("x", "<f4"), ("y", "<f4"), ("z", "<f4")]
    if values is not None:
        fields += [("value", "<f4"), ("red", "u1"), ("green", "u1"), ("blue", "u1")]
    data = np.empty(n, dtype=fields)
    data["x"], data["y"], data["z"] = points[:, 0], points[:, 1], points[:, 2]
    header = ["ply", "format binary_little_endian 1.0", f"element vertex {n}", "property float x",
              "property float y", "property float z"]
    if values is not None:
        v = np.asarray(values, dtype=float)
        fin = np.isfinite(v)
        lo, hi = (float(v[fin].min()), float(v[fin].max())) if fin.any() else (0.0, 1.0)
        rgb = (colormaps["viridis"]((np.where(fin, v, lo) - lo) / max(hi - lo, 1e-300))[:, :3] * 255).astype(np.uint8)
        data["value"], data["red"], data["green"], data["blue"] = v, rgb[:, 0], rgb[:, 1], rgb[:, 2]
        header += ["property float value", "property uchar red", "property uchar green", "property uchar blue"]
    header.append("end_header")
    with open(path, "wb") as f:
        f.write(("\n".join(header) + "\n").encode("ascii"))
        f.write(data.tobytes())
    return n


def _figure(ncols, size=4.2):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt, plt.figure(figsize=(size * ncols, size))


def workspace_png(est, path, max_points=20000):
    """Slices of the reachable workspace through the grid centre (coloured by dexterity index) and a 3-D view
    of its boundary voxels; for a planar arm, the workspace in its plane."""
    plt, fig = _figure(4 if est.dimension == 3 else 1)
    occ = est.occupancy.astype(bool)
    pts, dex = est.to_points("occupied")
    title = (f"{est.robot}: {est.measure:.4g} ± {est.uncertainty:.2g} m^{est.dimension}, {est.samples:,} samples, "
             f"voxel {1000 * est.voxel_m:.1f} mm")
    if est.dimension == 3:
        idx = np.argwhere(occ)
        names = "xyz"
        for k, (a, b, c) in enumerate(((0, 1, 2), (0, 2, 1), (1, 2, 0))):
            ax = fig.add_subplot(1, 4, k + 1)
            mid = occ.shape[c] // 2
            sel = idx[:, c] == mid
            img = np.full((occ.shape[a], occ.shape[b]), np.nan)
            img[idx[sel, a], idx[sel, b]] = dex[sel]
            ext = [est.origin[a], est.origin[a] + occ.shape[a] * est.voxel_m,
                   est.origin[b], est.origin[b] + occ.shape[b] * est.voxel_m]
            im = ax.imshow(img.T, origin="lower", extent=ext, vmin=0, vmax=1, cmap="viridis")
            ax.set_xlabel(f"{names[a]} (m)")
            ax.set_ylabel(f"{names[b]} (m)")
            ax.set_title(f"slice {names[c]} = {est.origin[c] + (mid + 0.5) * est.voxel_m:.3f} m", fontsize=9)
        fig.colorbar(im, ax=ax, label="dexterity index")
        ax3 = fig.add_subplot(1, 4, 4, projection="3d")
        bp, bd = est.to_points("boundary")
        if len(bp) > max_points:
            keep = np.random.default_rng(0).choice(len(bp), max_points, replace=False)
            bp, bd = bp[keep], bd[keep]
        ax3.scatter(bp[:, 0], bp[:, 1], bp[:, 2], c=bd, s=1, cmap="viridis", vmin=0, vmax=1)
        ax3.set_title("boundary voxels", fontsize=9)
    else:
        ax = fig.add_subplot(1, 1, 1)
        loc = (pts - est.base_point) @ est.basis.T
        ax.scatter(loc[:, 0], loc[:, 1] if est.dimension > 1 else np.zeros(len(loc)), s=1, c="tab:blue")
        ax.set_aspect("equal")
        ax.set_xlabel("plane axis 1 (m)")
        ax.set_ylabel("plane axis 2 (m)")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def singularity_map_png(m, path):
    """The map coloured by the minimum singular value (leaf cells), the threshold contour, and the refinement
    level of each cell."""
    plt, fig = _figure(2, 5.0)
    ext = [m.u_range[0], m.u_range[1], m.v_range[0], m.v_range[1]]
    ax = fig.add_subplot(1, 2, 1)
    im = ax.imshow(m.cell_values.T, origin="lower", extent=ext, cmap="magma")
    fig.colorbar(im, ax=ax, label=f"min singular value ({m.part})")
    ax.contour(m.cell_values.T, levels=[m.threshold], colors="cyan", linewidths=0.7, extent=ext, origin="lower")
    ax.set_title(f"{m.robot}: best min singular value, threshold {m.threshold:.3g} (cyan)", fontsize=9)
    ax2 = fig.add_subplot(1, 2, 2)
    im2 = ax2.imshow(m.cell_level.T, origin="lower", extent=ext, cmap="Blues", vmin=0, vmax=max(m.levels, 1))
    fig.colorbar(im2, ax=ax2, label="refinement level")
    ax2.set_title(f"{m.points_evaluated} of {m.node_values.size} nodes evaluated, {m.time_s:.2f} s", fontsize=9)
    for a in (ax, ax2):
        a.set_xlabel(f"u (m) along {np.round(m.axis_u, 3).tolist()}")
        a.set_ylabel(f"v (m) along {np.round(m.axis_v, 3).tolist()}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
