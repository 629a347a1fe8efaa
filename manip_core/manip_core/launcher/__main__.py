"""``python -m manip_core.launcher FILE [name:=value ...]`` (same as ``manip-launch``)."""
import sys

from . import main

sys.exit(main())
