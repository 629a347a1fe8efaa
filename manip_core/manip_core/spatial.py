"""Rotations and rigid transforms in numpy (not the hot path: the numba kernels have their own).

Conventions (Modern Robotics, Lynch & Park 2017): a twist or screw axis is [omega; v] (rad/s; m/s), a wrench
[m; f]; T is a (4, 4) homogeneous transform; rpy is URDF's fixed-axis roll-pitch-yaw, R = Rz(yaw) Ry(pitch)
Rx(roll); quaternions are (w, x, y, z) unless a name says xyzw.
"""
import numpy as np


def skew(w):
    """[w] with [w] p = w x p."""
    return np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])


def rpy_to_matrix(rpy):
    """R = Rz(yaw) Ry(pitch) Rx(roll), angles in rad (URDF <origin rpy>)."""
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])


def matrix_to_rpy(R):
    """Inverse of rpy_to_matrix: (roll, pitch, yaw) in rad; at pitch = +-pi/2 roll is set to 0."""
    sp = -R[2, 0]
    if abs(sp) > 1.0 - 1e-12:
        pitch = np.copysign(np.pi / 2, sp)
        return np.array([0.0, pitch, np.arctan2(-R[0, 1], R[1, 1])])
    return np.array([np.arctan2(R[2, 1], R[2, 2]), np.arcsin(sp), np.arctan2(R[1, 0], R[0, 0])])


def quat_wxyz_to_matrix(q):
    """Rotation matrix of a quaternion (w, x, y, z); normalised first."""
    w, x, y, z = np.asarray(q, dtype=float) / np.linalg.norm(q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def matrix_to_quat_wxyz(R):
    """Quaternion (w, x, y, z), w >= 0, of a rotation matrix (Shepperd's method)."""
    t = np.trace(R)
    if t > 0:
        s = 2.0 * np.sqrt(t + 1.0)
        q = [0.25 * s, (R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s, (R[1, 0] - R[0, 1]) / s]
    elif R[0, 0] > R[1, 1] and R[0, 0] > R[2, 2]:
        s = 2.0 * np.sqrt(1.0 + R[0, 0] - R[1, 1] - R[2, 2])
        q = [(R[2, 1] - R[1, 2]) / s, 0.25 * s, (R[0, 1] + R[1, 0]) / s, (R[0, 2] + R[2, 0]) / s]
    elif R[1, 1] > R[2, 2]:
        s = 2.0 * np.sqrt(1.0 + R[1, 1] - R[0, 0] - R[2, 2])
        q = [(R[0, 2] - R[2, 0]) / s, (R[0, 1] + R[1, 0]) / s, 0.25 * s, (R[1, 2] + R[2, 1]) / s]
    else:
        s = 2.0 * np.sqrt(1.0 + R[2, 2] - R[0, 0] - R[1, 1])
        q = [(R[1, 0] - R[0, 1]) / s, (R[0, 2] + R[2, 0]) / s, (R[1, 2] + R[2, 1]) / s, 0.25 * s]
    q = np.array(q)
    return q if q[0] >= 0 else -q


def axis_angle_to_matrix(axis, angle_rad):
    """Rodrigues: R = I + sin(a)[w] + (1 - cos(a))[w]^2 for the unit axis w."""
    w = np.asarray(axis, dtype=float)
    w = w / np.linalg.norm(w)
    K = skew(w)
    return np.eye(3) + np.sin(angle_rad) * K + (1.0 - np.cos(angle_rad)) * (K @ K)


def transform(R=None, p=None):
    """(4, 4) transform from a rotation matrix and a translation (m)."""
    T = np.eye(4)
    if R is not None:
        T[:3, :3] = R
    if p is not None:
        T[:3, 3] = p
    return T


def inv_transform(T):
    """T^-1 = [R^T, -R^T p; 0, 1]."""
    R, p = T[:3, :3], T[:3, 3]
    return transform(R.T, -R.T @ p)


def adjoint(T):
    """[Ad_T] (6, 6) for twists [omega; v]: [[R, 0], [[p] R, R]] (MR eq. 3.83)."""
    R, p = T[:3, :3], T[:3, 3]
    Ad = np.zeros((6, 6))
    Ad[:3, :3] = R
    Ad[3:, 3:] = R
    Ad[3:, :3] = skew(p) @ R
    return Ad


def exp6(screw, theta):
    """e^([S] theta) for a screw axis S = [omega; v] (MR eq. 3.88; pure translation when omega = 0)."""
    S = np.asarray(screw, dtype=float)
    w, v = S[:3], S[3:]
    T = np.eye(4)
    if np.linalg.norm(w) < 1e-12:
        T[:3, 3] = v * theta
        return T
    K = skew(w)
    R = np.eye(3) + np.sin(theta) * K + (1.0 - np.cos(theta)) * (K @ K)
    G = np.eye(3) * theta + (1.0 - np.cos(theta)) * K + (theta - np.sin(theta)) * (K @ K)
    T[:3, :3] = R
    T[:3, 3] = G @ v
    return T


def log3(R):
    """omega * theta (rad) with R = e^([omega] theta), theta in [0, pi] (MR algorithm 3.2)."""
    c = (np.trace(R) - 1.0) / 2.0
    c = min(1.0, max(-1.0, c))
    theta = np.arccos(c)
    if theta < 1e-9:
        return 0.5 * np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
    if np.pi - theta < 1e-6:
        # Near pi: take the axis from the largest diagonal of (R + I) / 2 = w w^T.
        B = (R + np.eye(3)) / 2.0
        i = int(np.argmax(np.diag(B)))
        w = B[:, i] / np.sqrt(B[i, i])
        return w * theta
    return theta / (2.0 * np.sin(theta)) * np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])


def pose_error(T_actual, T_target):
    """(position error in m, rotation error in rad) between two transforms."""
    dp = float(np.linalg.norm(T_target[:3, 3] - T_actual[:3, 3]))
    dr = float(np.linalg.norm(log3(T_actual[:3, :3].T @ T_target[:3, :3])))
    return dp, dr
