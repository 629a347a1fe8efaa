"""Summary numbers and plots of a pick-and-place run (no rclpy): what `make demo` prints and draws.

Inputs are plain arrays recorded by the demo client: controller states (desired/actual joint positions over
sim time), tool positions, joint positions, the obstacle boxes and the final object position.
"""
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


@dataclass
class Recording:
    """Recorded during the run; times in s of sim time, positions in rad or m (base frame)."""

    joint_names: list = field(default_factory=list)
    t_state: list = field(default_factory=list)          # controller_state stamps
    desired: list = field(default_factory=list)          # desired joint positions
    actual: list = field(default_factory=list)           # measured joint positions
    tracking: list = field(default_factory=list)         # True while the controller follows a trajectory
    t_joints: list = field(default_factory=list)         # joint_states stamps
    joints: list = field(default_factory=list)           # joint positions
    control_law: str = ""                                # controller_state.control_law


def point_box_distance(P, center, size):
    """Euclidean distance (m) from points P (N, 3) to an axis-aligned box (0 inside)."""
    d = np.abs(np.asarray(P) - center) - 0.5 * np.asarray(size)
    return np.linalg.norm(np.maximum(d, 0.0), axis=-1)


def segment_points(A, B, step=0.01):
    """Points every ``step`` m along the segments A[i] -> B[i] (both (N, 3))."""
    out = []
    for a, b in zip(A, B):
        n = max(2, int(np.ceil(np.linalg.norm(b - a) / step)) + 1)
        out.append(a + np.linspace(0.0, 1.0, n)[:, None] * (b - a))
    return np.vstack(out)


def arm_clearance(link_positions, boxes):
    """Closest approach (m) of the arm's link-to-link segments to any box, and where it happened.

    link_positions: (T, L, 3) origins of the chain's links over time; boxes: list of (center, size).
    Returns (distance m, time index) — the distance from the segments' axes; the links' own radius is not
    subtracted (say so when reporting).
    """
    best, best_k = np.inf, -1
    for k, links in enumerate(link_positions):
        P = segment_points(links[:-1], links[1:])
        for c, s in boxes:
            d = float(point_box_distance(P, c, s).min())
            if d < best:
                best, best_k = d, k
    return best, best_k


def tracking_rms(rec):
    """RMS over time of the joint position error norm while tracking (rad), and the max (rad)."""
    if not rec.desired:
        return float("nan"), float("nan")
    D, A = np.asarray(rec.desired), np.asarray(rec.actual)
    mask = np.asarray(rec.tracking, dtype=bool)
    if not mask.any():
        mask = np.ones(len(D), dtype=bool)
    E = np.linalg.norm(D[mask] - A[mask], axis=1)
    return float(np.sqrt(np.mean(E ** 2))), float(E.max())


def plot_tracking(rec, path):
    """One subplot per joint: desired and actual position over sim time."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    t = np.asarray(rec.t_state)
    D, A = np.asarray(rec.desired), np.asarray(rec.actual)
    n = D.shape[1]
    fig, axes = plt.subplots(n, 1, figsize=(9, 1.6 * n + 1), sharex=True)
    for i, ax in enumerate(np.atleast_1d(axes)):
        ax.plot(t, D[:, i], "k--", lw=1.0, label="desired")
        ax.plot(t, A[:, i], "C0", lw=1.2, label="actual")
        ax.set_ylabel(f"{rec.joint_names[i]}\n[rad]", fontsize=8)
        ax.grid(alpha=0.3)
    np.atleast_1d(axes)[0].legend(loc="upper right", fontsize=8)
    np.atleast_1d(axes)[-1].set_xlabel("sim time [s]")
    fig.suptitle(f"Joint tracking ({rec.control_law or 'unknown'} control law)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_tool_path(tool_xyz, boxes, pick_xyz, place_xyz, final_xyz, path):
    """Top (x-y) and side (y-z) views of the tool path with the obstacle boxes, pick, place and result."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.patches as patches
    import matplotlib.pyplot as plt
    P = np.asarray(tool_xyz)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.8))
    for ax, (i, j), title in ((ax1, (0, 1), "top view (x-y)"), (ax2, (1, 2), "side view (y-z)")):
        ax.plot(P[:, i], P[:, j], "C0", lw=1.5, label="tool0 path")
        for c, s in boxes:
            ax.add_patch(patches.Rectangle((c[i] - s[i] / 2, c[j] - s[j] / 2), s[i], s[j], color="C3", alpha=0.4,
                                           label="obstacle"))
        ax.plot(pick_xyz[i], pick_xyz[j], "g^", ms=9, label="pick")
        ax.plot(place_xyz[i], place_xyz[j], "bs", ms=9, mfc="none", label="place target")
        ax.plot(final_xyz[i], final_xyz[j], "bx", ms=9, label="object at the end")
        ax.set_xlabel("xyz"[i] + " [m]")
        ax.set_ylabel("xyz"[j] + " [m]")
        ax.set_aspect("equal", adjustable="datalim")
        ax.grid(alpha=0.3)
        ax.set_title(title)
    handles, labels = ax1.get_legend_handles_labels()
    uniq = dict(zip(labels, handles))
    ax1.legend(uniq.values(), uniq.keys(), fontsize=8, loc="best")
    fig.suptitle("End-effector path around the obstacle (base frame)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_summary(lines, path):
    Path(path).write_text("\n".join(lines) + "\n")
