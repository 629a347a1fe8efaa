import importlib


def test_import():
    module = importlib.import_module('manip_planning')
    assert module.__name__ == 'manip_planning'
