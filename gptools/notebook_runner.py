"""The main job: execute every notebook against the embedded sandbox and render HTML.

One sandbox, started by ``gptools run-notebooks``, serves the whole run; each notebook runs
in its own kernel with ``GP_BASE_URL`` emptied and ``GPTOOLS_SANDBOX_URL`` naming that
sandbox, so :func:`gptools.session.connect` inside it uses the run's sandbox whatever the
user's environment says. The sandbox is reset before each notebook, so every notebook meets
a provider as fresh as under nbval. Rendered pages go to ``out_dir``; a failing notebook is
still rendered up to the failing cell, and reported.

What a notebook writes stays out of the user's files: its kernel gets a temporary folder
of its own for the campaign register (``GPTOOLS_REGISTER``), the loader's journals
(``GPTOOLS_JOURNAL_DIR``), an embedded sandbox's state (``GPTOOLS_SANDBOX_STATE_DIR``) and
temporary files (``TMPDIR``), deleted when the notebook ends: campaigns of a throwaway
sandbox never enter the user's register.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from gptools._register_file import ENV_REGISTER
from gptools.notebook_html import write_html
from gptools.participants._constants import ENV_JOURNAL_DIR
from gptools.sandbox._persist import STATE_DIR_ENV
from gptools.session import SANDBOX_URL_ENV


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


def run_notebook(
    path: Path, out_dir: Path, *, timeout_s: int = 600, sandbox_url: str | None = None
) -> NotebookRun:
    """Execute one notebook in a fresh kernel (sandbox forced) and write its HTML.

    ``sandbox_url`` is a sandbox served by this process for the kernel to use; without
    it the kernel starts its own.
    """
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
    scratch = Path(tempfile.mkdtemp(prefix="gptools-notebook-"))
    # The kernel inherits this process's environment when it starts.
    overrides = {"GP_BASE_URL": "", SANDBOX_URL_ENV: sandbox_url, **_scratch_environment(scratch)}
    saved = {name: os.environ.get(name) for name in overrides}
    _set_env(overrides)
    try:
        client.execute()
    except CellExecutionError as exc:
        error = str(exc).strip().splitlines()[-1] if str(exc).strip() else repr(exc)
    finally:
        _set_env(saved)
        shutil.rmtree(scratch, ignore_errors=True)
    html = write_html(nb, out_dir, path.stem)
    return NotebookRun(path, html, time.monotonic() - started, error)


def _scratch_environment(folder: Path) -> dict[str, str | None]:
    """The variables that keep a notebook's files in ``folder``: the campaign register,
    the loader's journals, an embedded sandbox's state and temporary files."""
    (folder / "tmp").mkdir(parents=True, exist_ok=True)
    return {
        ENV_REGISTER: str(folder / "campaigns.sqlite"),
        ENV_JOURNAL_DIR: str(folder / "journals"),
        STATE_DIR_ENV: str(folder / "sandbox"),
        "TMPDIR": str(folder / "tmp"),
    }


def _set_env(values: dict[str, str | None]) -> None:
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


__all__ = [
    "NotebookRun",
    "find_notebooks",
    "run_notebook",
]
