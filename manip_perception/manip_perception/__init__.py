"""Camera and stereo perception of the manip stack: depth, point clouds, object clustering."""


def stereo_obstacles_main(args=None):
    """Console script ``stereo_obstacles``.

    Loading the node module (OpenCV, scikit-learn, rclpy) takes about a second. A SIGINT/SIGTERM at any
    time, that second included, ends the process quietly with exit code 0: these handlers stay installed,
    rclpy's own handlers (installed by rclpy.init) shut the context down first and then chain to them.
    """
    import signal
    import sys

    received = []

    def quiet(signum, frame):
        received.append(signum)
        sys.exit(0)

    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, quiet)
    from .stereo_obstacles_node import main
    if received:  # a library swallowed the SystemExit of a signal during the imports
        return 0
    return main(args)
