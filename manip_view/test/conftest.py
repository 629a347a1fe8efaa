"""The headless Chromium of the browser tests (scripts/install_chromium.sh: Debian's package), shared by the files."""
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def chromium():
    p = subprocess.run([str(ROOT / "scripts" / "install_chromium.sh")], capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        pytest.skip(f"no headless Chromium: {p.stderr.strip().splitlines()[-1] if p.stderr.strip() else p.returncode}")
    return p.stdout.strip().splitlines()[-1]
