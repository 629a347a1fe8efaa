"""manip-launch: run ROS 2 XML launch files (the subset manip uses) without ros2 launch.

``main`` is the ``manip-launch`` console script; ``xml_frontend.load_launch_file`` parses a file into
resolved node descriptions; ``runner.Runner`` runs them. No rclpy import anywhere in this package.

``main`` installs the stop-signal handlers (``signals.StopSignals``) before it imports anything else
of the launcher, so that a Ctrl-C that arrives while the launcher loads is acted on (see signals.py).
"""


def main(argv=None):
    from .signals import StopSignals
    signals = StopSignals().install()
    try:
        from .cli import main as cli_main
        return cli_main(argv, signals)
    finally:
        signals.restore()


__all__ = ['main']
