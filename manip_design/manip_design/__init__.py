"""manip_design: robot structures (.mrs language), mobility check, closed-chain kinematics, synthesis, codegen.

    from manip_design import load
    mech = load("delta.mrs").compile()          # Structure -> Mechanism
    mech.fk([0.1, 0.2, 0.3]).pose               # 4x4, ground frame, m
    mech.ik([0, 0, -0.3]).actuated              # {joint name: rad or m}
"""
from .errors import DesignError
from .language import parse_file, parse_text


def load(path):
    """Structure of an .mrs file (DesignError with file:line:col on a bad file)."""
    return parse_file(path)


__all__ = ["DesignError", "load", "parse_file", "parse_text"]
