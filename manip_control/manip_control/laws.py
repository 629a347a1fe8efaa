"""The control laws by name: one registration line per law (no rclpy).

Each law class has ``name``, ``PARAMETERS`` (its own parameters, declared by the node as ``<name>.<param>``,
see control_laws.Param) and ``from_params(model, kp, kd, period_s, params)``.
"""
from __future__ import annotations

from .adaptive import SlotineLi
from .control_laws import CONTROL_LAWS, PD, ComputedTorque
from .osc import OperationalSpace
from .pid import PID
from .robust import SlidingMode

LAWS = {
    "pd": PD,
    "pid": PID,
    "computed_torque": ComputedTorque,
    "robust": SlidingMode,
    "adaptive": SlotineLi,
    "osc": OperationalSpace,
}
assert tuple(LAWS) == CONTROL_LAWS

__all__ = ["LAWS", "CONTROL_LAWS", "law_class", "make_law"]


def law_class(name):
    """The class of a law by name; ValueError naming the choices for another name."""
    try:
        return LAWS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown control law '{name}' (choose from {', '.join(LAWS)})") from None


def make_law(name, model, kp=None, kd=None, period_s=0.004, params=None):
    """The law ``name`` for ``model`` (ValueError for an unknown name or bad parameters)."""
    cls = law_class(name)
    params = dict(params or {})
    cls.check_params(params)
    return cls.from_params(model, kp, kd, period_s, params)
