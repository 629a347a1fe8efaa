"""PNG picture of a mechanism in a configuration (matplotlib, Agg): links as lines between consecutive frame
origins, joints as dots (actuated in red, passive in blue), welds of Merge as black rings, the end effector
as a green star. Axes in m, ground frame."""
from __future__ import annotations

import numpy as np


def plot_mechanism(mech, q=None, path="structure.png", title=None, targets=None):
    """Write the picture to path (PNG) and return the path."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    q = mech.q_home if q is None else np.asarray(q, float)
    Tf = mech.frames(q)
    P = Tf[:, :3, 3]
    fig = plt.figure(figsize=(6, 6))
    ax = fig.add_subplot(111, projection="3d")
    for e in range(len(mech.ep)):
        a, b = P[mech.ep[e]], P[e + 1]
        if np.linalg.norm(a - b) > 1e-12 and mech.ep[e] != 0:
            ax.plot(*zip(a, b), color="0.3", lw=2.5)
        elif mech.ep[e] == 0:
            ax.plot(*zip(a, b), color="0.7", lw=1, ls=":")
    act = set(int(i) for i in mech.actuated)
    for v in range(mech.nv):
        p = P[mech.ev_elem[v] + 1]
        ax.scatter(*p, color="tab:red" if v in act else "tab:blue", s=30 if v in act else 14, depthshade=False)
    for a, b in mech.welds:
        ax.scatter(*P[a], facecolors="none", edgecolors="k", s=80, depthshade=False)
    ax.scatter(*P[mech.ee], color="tab:green", marker="*", s=160, depthshade=False)
    if targets is not None:
        t = np.asarray(targets).reshape(-1, 3)
        ax.scatter(t[:, 0], t[:, 1], t[:, 2], color="tab:orange", marker="x", s=60, depthshade=False)
    lo, hi = P.min(axis=0), P.max(axis=0)
    c, r = 0.5 * (lo + hi), 0.55 * max(float((hi - lo).max()), 0.1)
    ax.set_xlim(c[0] - r, c[0] + r)
    ax.set_ylim(c[1] - r, c[1] + r)
    ax.set_zlim(c[2] - r, c[2] + r)
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    ax.set_zlabel("z (m)")
    ax.set_title(title or str(mech.source).rsplit("/", 1)[-1])
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
