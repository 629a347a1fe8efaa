import importlib


def test_import():
    module = importlib.import_module('manip_control')
    assert module.__name__ == 'manip_control'
