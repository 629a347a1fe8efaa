"""Make manip_sim and manip_core importable from the source tree when they are not installed in the venv
(the root conftest may already have imported an empty namespace package for them: drop it)."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _ensure_importable():
    for name in ("manip_core", "manip_sim"):
        mod = sys.modules.get(name)
        if mod is not None and getattr(mod, "__file__", None):
            continue
        path = str(ROOT / name)
        if path not in sys.path:
            sys.path.insert(0, path)
        if mod is not None:       # a namespace package or pytest's stub for the source folder
            del sys.modules[name]


_ensure_importable()
