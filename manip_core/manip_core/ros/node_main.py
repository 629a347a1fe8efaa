"""Start-up and shutdown of every manip node: a quiet, prompt exit 0 on SIGINT/SIGTERM at any moment.

How ``ros2 launch`` stops a graph: a Ctrl-C of the terminal reaches every node (the process group), launch
forwards its own SIGINT too (so a node gets two), then SIGTERM after 5 s, then SIGKILL. A node must end with
status 0 and no traceback whichever of these arrive, and whenever: while Python loads the node's modules,
inside ``rclpy.init``, while the node is built, while it waits for the robot description, while it spins,
and while it shuts down.

* :func:`entry` is the console script of a node (``controller = manip_control:controller_main`` calls
  ``entry("manip_control.controller_node")``). It installs the handlers before the node's module is imported
  (rclpy, NumPy, numba, OpenCV: a second, tens of seconds with a cold numba cache on a loaded machine); a
  signal interrupts the imports (StartupInterrupted) and the process exits 0. Once the node runs, the
  handlers only set the stop event. When the
  node's main returns, the signals are ignored for the rest of the exit (see ignore_stop_signals). While the
  node object is built, a signal interrupts the construction (interruptible_startup).
  Left: the interpreter's own start before the entry point's first line (here ~50-100 ms, the venv's
  ``.pth`` files and the ROS wheels' re-exec; seconds on a loaded machine): a SIGINT there is Python's
  KeyboardInterrupt, a SIGTERM ends the process with -15.
* :func:`init_rclpy` starts rclpy WITHOUT rclpy's own signal handlers (they invalidate the context at once,
  so a signal between ``rclpy.init`` and the executor's wait set gave ``failed to initialize wait set: the
  given context is not valid``, and a second SIGINT raised KeyboardInterrupt inside the clean-up).
* :func:`run_node` is the main loop: spin until a signal, ``on_stop(node)`` while the context is still
  valid (a controller commands a hold, servers report their goals), then destroy the node and shut down.

The handlers only set :func:`stop_event` (and start a watchdog: a node still running STOP_GRACE_S = 10 s after
the first signal prints its threads' stacks and exits); they are installed once per process and stay until it
exits.
"""
import contextlib
import faulthandler
import importlib
import os
import signal
import sys
import threading
import time

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
# s after the first stop signal before a node that is still running exits anyway, before ros2 launch's
# SIGKILL (15 s: SIGTERM at 5 s, which cannot help a main thread that is stuck): see _watchdog
STOP_GRACE_S = 10.0
_stop = threading.Event()
_received = []
_interrupt_startup = [False]


class StartupInterrupted(BaseException):
    """A stop signal while the node object was being built (see :func:`interruptible_startup`)."""


def _watchdog():
    """A stop that does not finish (a main thread stuck in a call, or the interpreter's exit waiting for a
    thread) must not leave the node for SIGKILL: after STOP_GRACE_S the process says where its threads are
    (faulthandler) and exits at once."""
    time.sleep(STOP_GRACE_S)
    sys.stderr.write(f"[node_main] WARNING: still running {STOP_GRACE_S:g} s after the stop signal; exiting now. "
                     "Threads:\n")
    sys.stderr.flush()
    faulthandler.dump_traceback(all_threads=True)
    os._exit(0)


# Python code that C calls back and whose exceptions C does not propagate: Python prints "Exception ignored ...
# Traceback" and the C caller goes on. numba's compiler (llvmlite's object-cache ctypes callbacks) is such code, and
# it runs while a node with a cold numba cache starts (a colcon install's first run); so are __del__ methods and
# weakref callbacks such as importlib's module-lock clean-up (_get_module_lock.<locals>.cb), which runs while a node
# imports its modules.
_CALLBACK_DIRS = (os.sep + "llvmlite" + os.sep,)
_CALLBACK_CODES = (("importlib._bootstrap", "cb"), ("", "__del__"))  # (file name part, function name)
DEFER_S = 0.02  # s between retries of a start-up interruption that arrived inside such a callback
_pending = [None]


def _in_callback(frame):
    while frame is not None:
        code = frame.f_code
        if any(d in code.co_filename for d in _CALLBACK_DIRS) or any(
                f in code.co_filename and n == code.co_name for f, n in _CALLBACK_CODES):
            return True
        frame = frame.f_back
    return False


def _interrupt(name, frame):
    """Raise StartupInterrupted in the main thread, or, inside a C callback where it would be lost with a
    traceback, DEFER_S later (SIGALRM) until the main thread is back in plain Python code."""
    if not _interrupt_startup[0]:
        return
    if _in_callback(frame):
        _pending[0] = name
        signal.signal(signal.SIGALRM, _retry)
        signal.setitimer(signal.ITIMER_REAL, DEFER_S)
        return
    _interrupt_startup[0] = False  # once
    if _pending[0] is not None:  # a deferral's timer may still be armed (a second signal came first): disarm it,
        signal.setitimer(signal.ITIMER_REAL, 0.0)  # else it fires at exit, when SIGALRM is default again (-14)
        _pending[0] = None
    raise StartupInterrupted(name)


def _retry(signum, frame):
    if _pending[0] is not None:
        _interrupt(_pending[0], frame)


def _handler(signum, frame):
    _received.append(signum)
    if not _stop.is_set():
        threading.Thread(target=_watchdog, name="stop_watchdog", daemon=True).start()
    _stop.set()
    _interrupt(signal.Signals(signum).name, frame)


@contextlib.contextmanager
def interruptible_startup():
    """While the node object is built (seconds: PyBullet, numba kernels, a render process), a stop signal
    raises StartupInterrupted in the main thread instead of waiting for the end of the construction. Node
    constructors that start threads or processes clean up on any exception (sim_bridge's does); the
    caller catches StartupInterrupted and exits 0."""
    _interrupt_startup[0] = True
    try:
        yield
    finally:
        _interrupt_startup[0] = False
        if _pending[0] is not None and threading.current_thread() is threading.main_thread():
            signal.setitimer(signal.ITIMER_REAL, 0.0)
            _pending[0] = None


def install_stop_handlers():
    """Catch SIGINT and SIGTERM (main thread only) into :func:`stop_event`; returns the event."""
    if threading.current_thread() is threading.main_thread():
        for sig in STOP_SIGNALS:
            if signal.getsignal(sig) is not _handler:
                signal.signal(sig, _handler)
    return _stop


def stop_event():
    """Set by the first SIGINT/SIGTERM (once :func:`install_stop_handlers` ran)."""
    return _stop


def signals_received():
    """Numbers of the stop signals received so far (a copy)."""
    return list(_received)


def entry(module, args=None, attr="main"):
    """Console script of a node: handlers first, then import ``module`` and call its ``attr(args)``."""
    install_stop_handlers()
    try:
        # the imports can take tens of seconds on a loaded machine (numba compiling into an empty cache): a
        # stop signal interrupts them; whatever form the interruption takes on its way out of an import
        # (StartupInterrupted, or an ImportError/SystemError around it from an extension module), it is a stop
        try:
            with interruptible_startup():
                main = getattr(importlib.import_module(module), attr)
        except BaseException:
            if _stop.is_set():
                return 0
            raise
        return 0 if _stop.is_set() else main(args)
    finally:
        ignore_stop_signals()


def ignore_stop_signals():
    """From here on the process only exits: ignore SIGINT/SIGTERM. (At exit CPython puts SIG_DFL back for
    signals that have a Python handler, so a second Ctrl-C during the interpreter's clean-up would kill
    it with -2; an ignored signal stays ignored.)"""
    if threading.current_thread() is threading.main_thread():
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)


def init_rclpy(args=None):
    """``rclpy.init`` without rclpy's signal handlers (ours stay); the stop event."""
    import rclpy
    install_stop_handlers()
    try:
        from rclpy.signals import SignalHandlerOptions
        rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    except (ImportError, TypeError):  # pragma: no cover (an rclpy older than Humble)
        rclpy.init(args=args)
        install_stop_handlers()
    return _stop


def spin_until_stopped(executor, period_s=0.1):
    """Spin until a stop signal or until the context goes down (the signal is seen within period_s)."""
    import rclpy
    while not _stop.is_set() and rclpy.ok():
        executor.spin_once(timeout_sec=period_s)


def run_node(args, name, make_node, make_executor, on_stop=None, on_exit=None,
             config_errors=(ValueError,), config_status=2):
    """Main of a node: :func:`init_rclpy`, ``node = make_node()``, spin it on ``make_executor()`` until a stop
    signal, ``on_stop(node)`` (context still valid), ``on_exit(node)`` (always, also after an error), destroy,
    shut down. An exception of ``config_errors`` (a bad parameter) is logged as FATAL in one line: exit
    ``config_status``. Returns 0 otherwise; a signal at any moment gives 0 without a traceback."""
    import rclpy
    from rclpy.executors import ExternalShutdownException
    stop = init_rclpy(args)
    node = executor = None
    code = 0
    try:
        if not stop.is_set():
            with interruptible_startup():
                node = make_node()
        if node is not None and not stop.is_set():
            executor = make_executor()
            executor.add_node(node)
            spin_until_stopped(executor)
        if node is not None and on_stop is not None and rclpy.ok():
            on_stop(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except StartupInterrupted as e:
        rclpy.logging.get_logger(name).info(f"stopped by {e} while starting")
    except config_errors as e:
        if stop.is_set():  # a stop during start-up (an error it caused, e.g. a child that got the group's signal)
            rclpy.logging.get_logger(name).info(f"stopped during start-up ({type(e).__name__}: {e})")
        else:
            rclpy.logging.get_logger(name).fatal(f"{type(e).__name__}: {e}")
            code = config_status
    except Exception as e:
        if node is None and stop.is_set():
            # the signal interrupted the construction somewhere that wraps StartupInterrupted in another error
            # (e.g. a class body of a module imported lazily: RuntimeError from __set_name__): a stop
            rclpy.logging.get_logger(name).info(f"stopped during start-up ({type(e).__name__}: {e})")
        elif rclpy.ok():
            raise
        # else the context went down under a call (only an external rclpy.shutdown does that): a stop
    finally:
        if node is not None and on_exit is not None:
            on_exit(node)
        if executor is not None:
            executor.shutdown(timeout_sec=1.0)
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
    return code
