"""RobotData: the preallocated scratch memory of the numba kernels of one RobotModel, owned by one caller.

The split follows Pinocchio's Model / Data: a RobotModel's arrays (joints, inertias, limits) never change after
construction; everything a kernel writes while it computes lives in a RobotData. A RobotModel holds one for
the calls that pass no ``data=``; ``robot.create_data()`` gives a caller (a thread, an MPC solver, a worker of
a pool) its own. Called without data=, the single-call kernels hold the GIL, so the model's own workspace is never
used by two threads at once; called with data=, they release it (manip_core._entry's *_nogil entry points), so
threads that each own a RobotData compute at the same time. Never share one RobotData between threads.

With ``out=`` arrays and a RobotData, a steady-state call allocates nothing (checked with tracemalloc in
manip_core/test/test_robot_data.py).
"""
from __future__ import annotations

from . import _derivative_kernels as _DK, _fast as F, _kernels as K


class RobotData:
    """Scratch of the kernels of one RobotModel. Create with ``robot.create_data()``.

    ws: scratch of kinematics / RNEA / CRBA / forward dynamics; dws: scratch of the dynamics derivatives and of
    the Jacobian's time derivative (float64 arrays sized for the model's bodies and joints).
    """

    __slots__ = ("_ws", "_dws", "_mi", "_mf", "_g", "_name", "_hdr", "_h")

    def __init__(self, model):
        self._mi = model._mi  # identity tells which model this data belongs to
        self._name = model.name
        self._ws = K.new_ws(model._mi)
        self._dws = _DK.new_dws(model._mi)
        # the handle (manip_core._fast) points at these arrays: the references keep them alive with this data
        self._mf, self._g = model._mf, model._g_default
        self._hdr, self._h = F.make_handle(model._mf, model._mi, self._ws, self._dws, model._g_default,
                                           model._has_inertia)

    # read-only: the kernels' compiled entry points (manip_core._entry) trust these arrays' type and size
    @property
    def ws(self):
        return self._ws

    @property
    def dws(self):
        return self._dws

    def __repr__(self):
        return f"RobotData(for {self._name!r}, {self.ws.size + self.dws.size} floats)"
