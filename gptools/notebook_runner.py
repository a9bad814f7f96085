"""The main job: execute every notebook against the embedded sandbox and render HTML.

Each notebook runs in its own kernel with ``GP_BASE_URL`` emptied, so
:func:`gptools.session.connect` inside it starts the embedded sandbox whatever the user's
environment says. Rendered pages go to ``out_dir``; a failing notebook is still rendered up
to the failing cell, and reported.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from gptools.notebook_html import write_html


@dataclass(frozen=True)
class NotebookRun:
    """The outcome of one notebook: where its HTML is, how long it took, the error if any."""

    notebook: Path
    html: Path
    seconds: float
    error: str | None

    @property
    def ok(self) -> bool:
        """True when every cell ran without an error."""
        return self.error is None


def find_notebooks(folder: Path) -> list[Path]:
    """The notebooks of ``folder`` in name order (``01_...`` before ``02_...``)."""
    return sorted(p for p in folder.glob("*.ipynb") if not p.name.startswith("."))


def run_notebook(path: Path, out_dir: Path, *, timeout_s: int = 600) -> NotebookRun:
    """Execute one notebook in a fresh kernel (sandbox forced) and write its HTML."""
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=timeout_s,
        # The kernel is local on loopback; its start-up warning about unencrypted TCP is noise
        # here, and cell errors still reach us through the notebook itself.
        extra_arguments=["--IPKernelApp.log_level=ERROR"],
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    started = time.monotonic()
    error: str | None = None
    saved = os.environ.get("GP_BASE_URL")
    os.environ["GP_BASE_URL"] = ""
    try:
        client.execute()
    except CellExecutionError as exc:
        error = str(exc).strip().splitlines()[-1] if str(exc).strip() else repr(exc)
    finally:
        if saved is None:
            os.environ.pop("GP_BASE_URL", None)
        else:
            os.environ["GP_BASE_URL"] = saved
    html = write_html(nb, out_dir, path.stem)
    return NotebookRun(path, html, time.monotonic() - started, error)


def run_notebooks(folder: Path, out_dir: Path) -> list[NotebookRun]:
    """Execute every notebook of ``folder`` and render each to ``out_dir``."""
    return [run_notebook(p, out_dir) for p in find_notebooks(folder)]
