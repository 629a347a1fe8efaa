"""Camera and stereo perception of the manip stack: depth, point clouds, object clustering."""


def stereo_obstacles_main(args=None):
    """Console script ``stereo_obstacles``.

    Loading the node module (OpenCV, scikit-learn, rclpy) takes about a second. A SIGINT/SIGTERM at any
    time, that second included, ends the process quietly with exit code 0: the handlers installed here stay
    (rclpy's own, installed by rclpy.init, shut the context down first and then chain to them).
    """
    import signal
    import sys

    state = {'importing': True, 'received': False}

    def quiet(signum, frame):
        state['received'] = True
        if not state['importing']:  # raising inside an extension module's import would be an ImportError
            sys.exit(0)

    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, quiet)
    from .stereo_obstacles_node import main
    state['importing'] = False
    if state['received']:
        return 0
    return main(args)
