"""manip_core.ros.node_main in a process of its own (signal handlers and rclpy are per process)."""
import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent("""
    import os, signal, sys
    from manip_core.ros.node_main import run_node, install_stop_handlers

    def make_node():
        # what a lazily imported module does when the signal arrives inside a class body: CPython wraps the
        # handler's StartupInterrupted in RuntimeError (__set_name__)
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(10 ** 7):
                pass
        except BaseException as e:
            raise RuntimeError("Error calling __set_name__ on 'cached_property' instance") from e
        raise AssertionError("the signal did not interrupt the construction")

    install_stop_handlers()
    sys.exit(run_node(None, "probe", make_node, make_executor=None))
""")


def test_a_signal_that_surfaces_as_another_error_during_construction_is_a_clean_stop():
    p = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "Traceback" not in p.stderr, p.stderr
    assert "stopped during start-up (RuntimeError" in p.stderr + p.stdout
