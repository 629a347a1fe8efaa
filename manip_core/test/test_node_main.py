"""manip_core.ros.node_main in a process of its own (signal handlers and rclpy are per process)."""
import subprocess
import sys
import textwrap

import pytest

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


HUNG = textwrap.dedent("""
    import os, signal, time
    from manip_core.ros import node_main
    node_main.STOP_GRACE_S = 1.5
    node_main.install_stop_handlers()
    os.kill(os.getpid(), signal.SIGINT)
    while True:   # a main thread that never returns to the spin loop
        time.sleep(0.05)
""")


def test_a_node_stuck_after_the_stop_signal_exits_after_the_grace_period_and_says_where():
    t0 = __import__("time").monotonic()
    p = subprocess.run([sys.executable, "-c", HUNG], capture_output=True, text=True, timeout=60)
    elapsed = __import__("time").monotonic() - t0
    assert p.returncode == 0, p.stderr
    assert "still running 1.5 s after the stop signal" in p.stderr
    assert 'File "<string>", line 8' in p.stderr  # the stack of the stuck main thread
    assert elapsed >= 1.5


IN_CALLBACK = textwrap.dedent("""
    import os, signal, sys, time, weakref
    import llvmlite
    from manip_core.ros import node_main
    node_main.install_stop_handlers()
    # Python code that C calls and whose exceptions C does not propagate: the signal arrives there; raising would
    # print "Exception ignored ... Traceback" and be lost. KIND llvmlite: llvmlite's object-cache callback while
    # numba compiles; weakref: importlib's module-lock clean-up (_get_module_lock.<locals>.cb, a weakref callback)
    # while a node imports its modules; del: a __del__ method
    BODY = "os.kill(os.getpid(), signal.SIGTERM)\\nfor _ in range(2000):\\n    time.sleep(0.0001)\\n"
    kind = sys.argv[1]
    if kind == "llvmlite":
        code = compile(BODY, os.path.join(os.path.dirname(llvmlite.__file__), "binding", "executionengine.py"),
                       "exec")
    elif kind == "weakref":
        exec(compile("def cb(ref):\\n" + BODY.replace("\\n", "\\n    ").join(["    ", ""]),
                     "<frozen importlib._bootstrap>", "exec"), globals())
    class Obj:
        if kind == "del":
            def __del__(self):
                os.kill(os.getpid(), signal.SIGTERM)
                for _ in range(2000):
                    time.sleep(0.0001)
    t0 = time.monotonic()
    try:
        with node_main.interruptible_startup():
            if kind == "llvmlite":
                exec(code, globals())
            else:
                o = Obj()
                r = weakref.ref(o, cb) if kind == "weakref" else None
                del o   # C calls the weakref callback or __del__ here
            print("callback returned", flush=True)   # returns normally: the interruption is deferred
            if len(sys.argv) > 2:   # a second signal (ros2 launch forwards its own SIGINT) before the deferral's
                os.kill(os.getpid(), signal.SIGTERM)    # timer: it interrupts at once, and no timer stays armed
            while time.monotonic() - t0 < 5:
                time.sleep(0.001)
            print("not interrupted", flush=True)
    except node_main.StartupInterrupted as e:
        print(f"interrupted after the callback: {e}; timer {signal.getitimer(signal.ITIMER_REAL)}", flush=True)
        sys.exit(0)
    sys.exit(3)
""")


@pytest.mark.parametrize("kind", ["llvmlite", "weakref", "del", "llvmlite twice"])
def test_a_signal_inside_a_c_callback_interrupts_the_start_up_once_the_callback_returned(kind):
    p = subprocess.run([sys.executable, "-c", IN_CALLBACK, *kind.split()], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "callback returned" in p.stdout and "interrupted after the callback: SIGTERM" in p.stdout, p.stdout
    assert "timer (0.0, 0.0)" in p.stdout, p.stdout   # none left to fire at exit
    assert "Traceback" not in p.stderr and "Exception ignored" not in p.stderr, p.stderr
