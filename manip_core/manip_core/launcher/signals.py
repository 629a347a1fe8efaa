"""Stop requests (SIGINT, SIGTERM, SIGHUP) of manip-launch, recorded from its first line of Python.

``manip-launch`` installs a :class:`StopSignals` before it parses anything, and the runner keeps using
the same object, so a signal is never lost between "Python is up" and "the nodes are supervised":

* Before ``StopSignals.install`` runs, the interpreter is starting (the ``ros-wheels-bootstrapper``
  ``.pth`` re-executes it once with ``LD_LIBRARY_PATH`` set; same pid, ``execve`` keeps the signal
  dispositions). With the default disposition a signal there ends the process at once (nothing has been
  started yet); with SIGINT inherited as ignored (a background job of a non-interactive shell) the kernel
  drops it. That window is only the interpreter start: ``manip_core.launcher`` imports no NumPy/numba.
* ``install`` catches the three signals even when they were inherited as ignored (like ``ros2 launch``,
  which restores SIGINT's default first thing): a launcher started with ``cmd &`` from a script still
  stops on ``kill -INT``.
* The handler only counts and wakes the supervisor; it never raises (so it cannot interrupt a
  ``Popen`` half-way and lose a child).
"""
from __future__ import annotations

import signal
import threading
from typing import Dict, Optional

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class StopSignals:
    """Counts stop signals; ``count``, ``first`` (the first signal number) and ``wake`` (an Event set on
    every signal)."""

    def __init__(self) -> None:
        self.count = 0
        self.first: Optional[int] = None
        self.wake = threading.Event()
        self._old: Dict[int, object] = {}

    def _handler(self, signum, frame) -> None:
        self.count += 1
        if self.first is None:
            self.first = signum
        self.wake.set()

    @property
    def name(self) -> str:
        return signal.Signals(self.first).name if self.first else ''

    @property
    def exit_status(self) -> int:
        """128 + the first signal's number (the shell's convention for "ended by a signal")."""
        return 128 + int(self.first or 0)

    @property
    def installed(self) -> bool:
        return bool(self._old)

    def install(self) -> 'StopSignals':
        """Catch the stop signals (main thread only; elsewhere a no-op). Idempotent."""
        if self._old or threading.current_thread() is not threading.main_thread():
            return self
        for sig in STOP_SIGNALS:
            self._old[sig] = signal.signal(sig, self._handler)
        return self

    def restore(self) -> None:
        """Put back the handlers found by ``install`` (for callers that run the launcher in-process)."""
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old.clear()
