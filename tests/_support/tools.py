"""Programs some tests drive (a browser, promtool): found on PATH, or installed by the
project's own script in ``scripts/`` when missing, as ``make test`` does."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def installed(program: str, script: str) -> str:
    """The path of ``program``, running ``scripts/SCRIPT`` first if it is not on PATH."""
    if shutil.which(program) is None:
        subprocess.run(["bash", str(ROOT / "scripts" / script)], check=True)
    path = shutil.which(program)
    assert path, f"no {program}: run scripts/{script}"
    return path
