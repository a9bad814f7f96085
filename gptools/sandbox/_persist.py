"""The embedded sandbox's state kept on disk, so consecutive CLI commands share it.

Without ``GP_BASE_URL`` each ``gptools`` command serves its own sandbox in process. To let
``gptools campaigns apply`` and a later ``gptools participants load --campaign CMP-000001``
see the same provider, the command loads the state from a file when its sandbox starts
and writes it back when the sandbox stops. The directory is ``$GPTOOLS_SANDBOX_STATE_DIR``,
else ``$XDG_CACHE_HOME/gptools/sandbox``, else ``~/.cache/gptools/sandbox``. A command holds
an exclusive ``flock`` on ``state.lock`` from load to save, so two commands at once take
turns instead of losing each other's changes. ``gptools sandbox reset`` deletes the file.
"""

from __future__ import annotations

import fcntl
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from gptools.errors import GptoolsError
from gptools.models import dumps_wire, loads_wire
from gptools.sandbox._state import SandboxState

#: Environment variable naming the directory of the persisted sandbox state.
STATE_DIR_ENV = "GPTOOLS_SANDBOX_STATE_DIR"
STATE_FILE = "state.json"
LOCK_FILE = "state.lock"
_FORMAT_VERSION = 1


class SandboxStateError(GptoolsError, ValueError):
    """The persisted state file cannot be read; names the file and the way out."""


def default_state_dir() -> Path:
    """Where the embedded sandbox keeps its state between commands (see the module)."""
    override = os.environ.get(STATE_DIR_ENV)
    if override:
        return Path(override).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "gptools" / "sandbox"


@contextmanager
def _locked(directory: Path) -> Iterator[IO[str]]:
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / LOCK_FILE).open("a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(
                f"waiting for another gptools command that uses the sandbox state in "
                f"{directory} ...",
                file=sys.stderr,
            )
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield lock
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def load_state(state: SandboxState, path: Path) -> None:
    """Restore ``state`` from ``path`` (nothing to do when the file does not exist)."""
    try:
        data = loads_wire(path.read_bytes())
    except FileNotFoundError:
        return
    except (OSError, ValueError) as exc:
        raise SandboxStateError(
            f"{path}: cannot read the sandbox state ({exc}); `gptools sandbox reset` starts afresh"
        ) from None
    if not isinstance(data, dict) or data.get("version") != _FORMAT_VERSION:
        raise SandboxStateError(
            f"{path}: not a sandbox state of this gptools version; "
            "`gptools sandbox reset` starts afresh"
        )
    state.restore(data)


def save_state(state: SandboxState, path: Path) -> None:
    """Write ``state`` to ``path`` atomically (a reader sees the old or the new file),
    readable by the user only: webhook subscriptions hold their secrets."""
    body = dumps_wire({"version": _FORMAT_VERSION, **state.snapshot()})
    fd, tmp = tempfile.mkstemp(prefix=".state-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(body)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextmanager
def persisted(state: SandboxState, directory: Path) -> Iterator[Path]:
    """Hold the state directory's lock, load ``state`` from it, and save it back on exit.

    Yields the state file's path. Meant to wrap the life of one process's sandbox.
    """
    path = directory / STATE_FILE
    with _locked(directory):
        load_state(state, path)
        try:
            yield path
        finally:
            save_state(state, path)


def reset_state(directory: Path) -> bool:
    """Delete the persisted state (waiting for a command that holds it); True if there was
    one."""
    if not directory.exists():
        return False
    with _locked(directory):
        path = directory / STATE_FILE
        existed = path.exists()
        path.unlink(missing_ok=True)
        return existed
