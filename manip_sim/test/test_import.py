import importlib


def test_import():
    module = importlib.import_module('manip_sim')
    assert module.__name__ == 'manip_sim'
