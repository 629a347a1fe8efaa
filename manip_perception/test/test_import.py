import importlib


def test_import():
    module = importlib.import_module('manip_perception')
    assert module.__name__ == 'manip_perception'
