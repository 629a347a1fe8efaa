"""geometry_msgs <-> numpy. ROS quaternions are (x, y, z, w); manip_core.spatial uses (w, x, y, z)."""
import numpy as np
from geometry_msgs.msg import Point, Pose, Quaternion

from ..spatial import matrix_to_quat_wxyz, quat_wxyz_to_matrix, transform


def pose_to_matrix(pose):
    """(4, 4) transform of a geometry_msgs/Pose; ValueError for NaN/inf or a zero quaternion."""
    p, o = pose.position, pose.orientation
    vals = np.array([p.x, p.y, p.z, o.x, o.y, o.z, o.w], dtype=float)
    if not np.all(np.isfinite(vals)):
        raise ValueError("pose holds NaN or inf")
    q = vals[3:]
    n = np.linalg.norm(q)
    if n < 1e-9:
        raise ValueError("pose orientation is a zero quaternion")
    if abs(n - 1.0) > 1e-3:
        raise ValueError(f"pose orientation is not a unit quaternion (norm {n:.4f})")
    return transform(quat_wxyz_to_matrix([q[3], q[0], q[1], q[2]]), vals[:3])


def matrix_to_pose(T):
    """geometry_msgs/Pose of a (4, 4) transform."""
    w, x, y, z = matrix_to_quat_wxyz(np.asarray(T)[:3, :3])
    return Pose(position=Point(x=float(T[0, 3]), y=float(T[1, 3]), z=float(T[2, 3])),
                orientation=Quaternion(x=float(x), y=float(y), z=float(z), w=float(w)))
