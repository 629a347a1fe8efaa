"""Root pytest configuration.

pytest's importlib import mode names test modules after their folders (``manip_core/test/...``) and can
insert a stub module for the outer folder that shadows the installed package of the same name; importing
the packages here first makes every test see the real ones.
"""
import manip_control  # noqa: F401
import manip_core  # noqa: F401
import manip_design  # noqa: F401
import manip_perception  # noqa: F401
import manip_planning  # noqa: F401
import manip_sim  # noqa: F401
import manip_view  # noqa: F401
