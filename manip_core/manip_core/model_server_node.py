"""model_server: publishes robot_description and serves the robot model, FK, IK and dynamics.

Parameters: urdf_path (file, start-up only) | robot_description (URDF or kinematic.json text, never a path),
base_link, tip_link (see ros.model_source for the contract).
Topics: robot_description (std_msgs/String, transient local). Services: get_robot_model, compute_fk,
compute_ik (with each solution's distance to singularity: minimum singular value and manipulability),
compute_dynamics (manip_msgs). Bad requests get an ErrorCode and a message; the node keeps serving.
A new robot_description parameter value is parsed first and rejected (with the reason) unless it is description
text that parses; the same robot again is a no-op.
"""
import math
import sys

import numpy as np
from manip_msgs.msg import ErrorCode, RobotModel as RobotModelMsg
from manip_msgs.srv import ComputeDynamics, ComputeFK, ComputeIK, GetRobotModel
from rcl_interfaces.msg import SetParametersResult
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import String

from .analysis.manipulability import solution_measures
from .errors import InputError, ModelError
from .ros.conversions import matrix_to_pose, pose_to_matrix
from .ros.model_source import DESCRIPTION_QOS, RobotModelSource
from .spatial import pose_error


def _err(response, code, message):
    response.success = False
    response.error_code = ErrorCode(val=code)
    response.message = message
    return response


class ModelServer(Node):
    def __init__(self):
        super().__init__("model_server")
        self._pub = self.create_publisher(String, "robot_description", DESCRIPTION_QOS)
        self._source = RobotModelSource(self, on_model=self._publish, subscribe=False)
        if self._source.model is None:
            self.get_logger().error("no valid robot model: set urdf_path or robot_description; services answer "
                                    "NOT_READY until then")
        self.add_on_set_parameters_callback(self._on_parameters)
        # the model services in their own group: a parameter change that parses a description (the node's
        # default group) never holds them up (main() spins two threads)
        group = ReentrantCallbackGroup()
        self.create_service(GetRobotModel, "get_robot_model", self._get_model, callback_group=group)
        self.create_service(ComputeFK, "compute_fk", self._compute_fk, callback_group=group)
        self.create_service(ComputeIK, "compute_ik", self._compute_ik, callback_group=group)
        self.create_service(ComputeDynamics, "compute_dynamics", self._compute_dynamics, callback_group=group)

    # ------------------------------------------------------------------------------------------ model
    def _publish(self, model, urdf_text):
        self._pub.publish(String(data=urdf_text))

    def _on_parameters(self, params):
        """A new robot_description must be description TEXT that parses (never a path: urdf_path is read-only,
        read at start-up); it is parsed here, in the parameter services' callback group, while the model
        services keep answering from theirs. The same robot again changes nothing."""
        for p in params:
            if p.name == "robot_description":
                try:
                    self._source.load(p.value, source="robot_description parameter")
                except ModelError as e:
                    self.get_logger().error(f"rejected new robot_description: {e}")
                    return SetParametersResult(successful=False, reason=str(e))
        return SetParametersResult(successful=True)

    @property
    def model(self):
        return self._source.model

    def _not_ready(self, response):
        return _err(response, ErrorCode.NOT_READY, "no robot model loaded (see the model_server log)")

    # --------------------------------------------------------------------------------------- services
    def _get_model(self, request, response):
        m = self.model
        if m is None:
            response.success = False
            response.message = "no robot model loaded"
            return response
        msg = RobotModelMsg()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.header.frame_id = m.base_link
        msg.name, msg.base_link, msg.tip_link = m.name, m.base_link, m.tip_link
        msg.joint_names = list(m.joint_names)
        msg.joint_types = list(m.joint_types)
        msg.lower_limits = [float(x) for x in m.joint_lower]
        msg.upper_limits = [float(x) for x in m.joint_upper]
        msg.velocity_limits = [float(x) for x in m.velocity_limits]
        msg.effort_limits = [float(x) for x in m.effort_limits]
        msg.screw_axes_space = [float(x) for x in np.asarray(m.screw_axes_space).T.ravel()]
        msg.home_pose = matrix_to_pose(m.home)
        msg.link_masses = [float(x) for x in m.link_masses[:m.dof]]
        response.model = msg
        response.success = True
        response.message = ""
        return response

    def _joint_vector(self, names, values):
        """Values in model order from (names, values); InputError / KeyError-free reasons as ValueError."""
        m = self.model
        values = np.asarray(values, dtype=float)
        if not names:
            if values.shape != (m.dof,):
                raise InputError(f"expected {m.dof} positions ({', '.join(m.joint_names)}), got {values.size}")
            return values
        if len(names) != len(values):
            raise InputError(f"{len(names)} joint names but {len(values)} positions")
        unknown = [n for n in names if n not in m.joint_names]
        if unknown:
            raise LookupError(f"unknown joints {unknown} (model joints: {', '.join(m.joint_names)})")
        missing = [n for n in m.joint_names if n not in names]
        if missing:
            raise InputError(f"missing joints {missing}")
        index = {n: i for i, n in enumerate(names)}
        return np.array([values[index[n]] for n in m.joint_names])

    def _compute_fk(self, request, response):
        m = self.model
        if m is None:
            return self._not_ready(response)
        try:
            q = self._joint_vector(list(request.joint_names), request.positions)
            T = m.fk(q, link=request.link or None)
        except LookupError as e:
            return _err(response, ErrorCode.UNKNOWN_JOINT, str(e))
        except InputError as e:
            code = ErrorCode.UNKNOWN_LINK if "link" in str(e) and request.link else ErrorCode.INVALID_INPUT
            return _err(response, code, str(e))
        response.pose.header.frame_id = m.base_link
        response.pose.header.stamp = self.get_clock().now().to_msg()
        response.pose.pose = matrix_to_pose(T)
        response.success = True
        response.error_code = ErrorCode(val=ErrorCode.SUCCESS)
        response.message = ""
        return response

    def _compute_ik(self, request, response):
        m = self.model
        if m is None:
            return self._not_ready(response)
        frame = request.target.header.frame_id
        if frame not in ("", m.base_link):
            return _err(response, ErrorCode.UNKNOWN_LINK,
                        f"target frame '{frame}' is not the base link '{m.base_link}' (no tf here)")
        try:
            T = pose_to_matrix(request.target.pose)
            seed = np.asarray(request.seed, dtype=float) if len(request.seed) else None
            if seed is not None and (seed.shape != (m.dof,) or not np.all(np.isfinite(seed))):
                raise InputError(f"seed must hold {m.dof} finite values")
            tol_p = request.tolerance_position or 1e-6
            tol_r = request.tolerance_rotation or 1e-6
            if not (np.isfinite(tol_p) and np.isfinite(tol_r) and tol_p > 0 and tol_r > 0):
                raise InputError("tolerances must be positive and finite")
        except (ValueError, InputError) as e:
            return _err(response, ErrorCode.INVALID_INPUT, str(e))
        position_only = bool(request.position_only) or m.dof < 6
        solutions = []
        solver = m.analytic_ik() if request.all_solutions else None
        if solver is not None and (position_only or not solver.position_only):
            sols, reason = solver.solve(T)
            if not sols:
                return _err(response, ErrorCode.NO_IK_SOLUTION, reason)
            ref = seed if seed is not None else np.zeros(m.dof)
            solutions = sorted(sols, key=lambda q: float(np.linalg.norm(q - ref)))
        else:
            try:   # (a target beyond the kernels' input bound, 1e100, is refused there: not a crash of the node)
                r = m.ik(T, q_seed=seed, tol_position_m=tol_p, tol_rotation_rad=tol_r, position_only=position_only)
            except InputError as e:
                return _err(response, ErrorCode.INVALID_INPUT, str(e))
            if not r.success:
                return _err(response, ErrorCode.NO_IK_SOLUTION, r.message)
            solutions = [r.q]
        dp, dr = pose_error(m.fk(solutions[0]), T)
        part, smin, w = solution_measures(m, np.array(solutions), position_only)
        response.measure_part = part
        response.min_singular_values = [float(x) for x in smin]
        response.manipulabilities = [float(x) for x in w]
        response.solutions = [JointState(name=list(m.joint_names), position=[float(x) for x in q])
                              for q in solutions]
        response.position_error = dp
        response.rotation_error = dr
        response.success = True
        response.error_code = ErrorCode(val=ErrorCode.SUCCESS)
        response.message = f"{len(solutions)} solution(s)"
        return response

    def _compute_dynamics(self, request, response):
        m = self.model
        if m is None:
            return self._not_ready(response)
        try:
            q, qd, qdd = (self._joint_vector([], v) for v in (request.positions, request.velocities,
                                                             request.accelerations))
            g = request.gravity
            gravity = (g.x, g.y, g.z) if request.use_custom_gravity else (0.0, 0.0, -9.81)
            w = request.tip_wrench
            f_tip = np.array([w.torque.x, w.torque.y, w.torque.z, w.force.x, w.force.y, w.force.z])
            response.efforts = [float(x) for x in m.inverse_dynamics(q, qd, qdd, gravity=gravity, f_tip=f_tip)]
            response.mass_matrix = [float(x) for x in m.mass_matrix(q).ravel()]
            response.coriolis = [float(x) for x in m.coriolis_torques(q, qd)]
            response.gravity_torques = [float(x) for x in m.gravity_torques(q, gravity=gravity)]
            if not all(math.isfinite(x) for x in (*response.efforts, *response.mass_matrix, *response.coriolis)):
                # finite but huge input (|qd| ~ 1e154 and more) overflows: never a NaN in a success
                raise InputError("positions/velocities/accelerations too large: the dynamics overflow (NaN/inf)")
        except (InputError, ValueError) as e:
            return _err(response, ErrorCode.INVALID_INPUT, str(e))
        except ModelError as e:
            return _err(response, ErrorCode.NOT_READY, str(e))
        response.success = True
        response.error_code = ErrorCode(val=ErrorCode.SUCCESS)
        response.message = ""
        return response


def main(argv=None):
    """SIGINT/SIGTERM at any moment: exit 0, no traceback (manip_core.ros.node_main)."""
    from rclpy.executors import MultiThreadedExecutor
    from .ros.node_main import run_node
    return run_node(argv, "model_server", ModelServer, lambda: MultiThreadedExecutor(num_threads=2))


if __name__ == "__main__":
    sys.exit(main())
