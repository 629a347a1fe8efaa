"""Root pytest configuration.

pytest's importlib import mode names test modules after their folders (``manip_core/test/...``) and can
insert a stub ``manip_core`` module that shadows the installed package; importing the packages here first
makes every test see the real ones.
"""
import manip_core  # noqa: F401
