"""The one way the receiver asks whether a process is alive by its lock file: a process
holds an ``flock`` on a file of its own while it lives (``serve`` on its pid file, a
worker on its spool's lock file) and the kernel lets it go when the process ends, however
it ends. Another process takes the lock without waiting (:func:`lock_now`) or only looks
(:func:`is_held`)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


def lock_now(fd: int, *, shared: bool = False) -> bool:
    """Take the ``flock`` of the open file ``fd`` (exclusive, or ``shared``) unless
    another process holds it; whether it was taken (it is held until ``fd`` closes)."""
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def is_held(path: Path) -> bool:
    """Whether a process holds the ``flock`` of the file ``path`` (False when there is no
    such file). It looks with a shared lock let go at once, which disturbs no holder and
    no other process looking at the same time."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        return not lock_now(fd, shared=True)
    finally:
        os.close(fd)
