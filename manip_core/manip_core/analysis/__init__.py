"""Analysis of a RobotModel: manipulability measures and ellipsoids, Monte Carlo workspace, singularity maps.

One module per job: ``manipulability`` (Yoshikawa measure, singular values, ellipsoids), ``workspace``
(reachable and dexterous volume by Monte Carlo sampling, CPU and numba.cuda), ``singularity_map`` (minimum
singular value over a grid with refinement near a threshold), ``path_singularity`` (the minimum singular value
along a joint path, for planners: check_path / require_nonsingular), ``pictures`` (PNG and PLY output). No rclpy.
"""
