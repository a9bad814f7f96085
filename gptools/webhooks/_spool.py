"""The outage spool: the log rows of the 503s a worker answers while the store cannot take
them, kept in local files until the store is back (``_outage.py`` replays them).

One spool per worker process, so the hot path takes no lock another process holds: a
row is one ``write`` of one JSON line, appended to the worker's current file under a lock
of this process only (the event loop and the writer thread both keep rows). The worker
holds an ``flock`` on its lock file while it lives; the kernel drops it when the process
dies, however it dies, so a live worker can tell the files of a dead one and take them
over (:meth:`Spool.adopt`).

A spool's folder, one per store (:func:`spool_directory`)::

    STORE                     the store's address (never a password), for people
    OWNER.lock                held (flock) by the worker OWNER (pid-uuid) while it lives
    OWNER.SEQ.spool           rows as JSON lines, appended; sealed once replay begins

Folder ``0700``, files ``0600`` (``gptools._private_files``). A row survives the worker's
crash or SIGKILL (it is in the kernel's page cache), not a power loss: the spool loop
syncs the current file about once a second, off the event loop.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from gptools._private_files import make_private_dir, open_private, private_opener
from gptools.webhooks._constants import SPOOL_LOG_EVERY_S
from gptools.webhooks._file_locks import lock_now
from gptools.webhooks._records import LogEntry, format_utc, parse_utc
from gptools.webhooks._store import PostgresStore, SQLiteStore, Store

logger = logging.getLogger("gptools.webhooks")

#: The folder (under the state folder) that holds one spool per store.
SPOOL_FOLDER = "webhook-spool"
#: The file in a spool that names its store, for people.
STORE_FILE = "STORE"
_LOCK = ".lock"
_SEGMENT = ".spool"


def default_spool_root(store: Store) -> Path:
    """Where spools live unless told: under systemd's ``$STATE_DIRECTORY`` (the unit's
    ``StateDirectory=``), else next to a SQLite store's file, else (a PostgreSQL store has
    no local folder) under ``$XDG_STATE_HOME/gptools`` (``~/.local/state/gptools``)."""
    state = os.environ.get("STATE_DIRECTORY", "").split(":")[0]
    if state:
        base = Path(state)
    elif isinstance(store, SQLiteStore):
        base = store.path.resolve().parent
    else:
        xdg = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
        base = Path(xdg) / "gptools"
    return base / SPOOL_FOLDER


def store_identity(store: Store) -> tuple[str, str]:
    """The kind of ``store`` and what tells it from every other store (never a password):
    a SQLite file's absolute path, a PostgreSQL address with its schema."""
    if isinstance(store, SQLiteStore):
        return "sqlite", f"sqlite:///{store.path.resolve()}"
    if isinstance(store, PostgresStore):
        return "postgresql", f"{store.url}?schema={store.schema or 'public'}"
    return "store", store.url


def spool_directory(store: Store, root: str | os.PathLike[str] | None = None) -> Path:
    """The spool folder of ``store`` under ``root`` (default :func:`default_spool_root`):
    one folder per store, so receivers of two stores never replay into the wrong one."""
    kind, identity = store_identity(store)
    digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
    base = Path(root) if root is not None else default_spool_root(store)
    return base / f"{kind}-{digest}"


def unavailable_row(entry: LogEntry, seconds: float) -> LogEntry:
    """``entry`` as the row of its 503 "store unavailable" answer, sent ``seconds`` after
    it arrived: the row the store would have been given had it been up."""
    meant = f" (it was to be answered {entry.status})" if entry.status else ""
    entry.error = f"unavailable: the store could not be written{meant}"
    entry.status = 503
    entry.latency_ms = round(seconds * 1000.0, 3)
    entry.duplicate = False
    return entry


def encode(entry: LogEntry) -> bytes:
    """One row as its spool line (JSON, ASCII, ending with a newline)."""
    record = {
        "received_at": format_utc(entry.received_at),
        "status": entry.status,
        "latency_ms": entry.latency_ms,
        "body": entry.body,
        "action_id": entry.action_id,
        "auth_ok": entry.auth_ok,
        "error": entry.error,
        "remote_addr": entry.remote_addr,
    }
    return json.dumps(record, separators=(",", ":")).encode() + b"\n"


def decode(line: bytes) -> LogEntry:
    """A spool line as its row (ValueError, KeyError or TypeError when it is not one)."""
    record: dict[str, Any] = json.loads(line)
    return LogEntry(
        received_at=parse_utc(record["received_at"]),
        status=int(record["status"]),
        body=str(record["body"]),
        action_id=_text(record["action_id"]),
        auth_ok=bool(record["auth_ok"]),
        error=_text(record["error"]),
        remote_addr=_text(record["remote_addr"]),
        latency_ms=float(record["latency_ms"]),
    )


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _pending_at(entry: LogEntry) -> datetime | None:
    """When ``entry`` makes its action one answered only 5xx (an authenticated request
    naming an action), else None."""
    return entry.received_at if entry.auth_ok and entry.action_id else None


@dataclass(eq=False, slots=True)
class Segment:
    """One spool file: its rows and bytes, how many of them the store has, and the oldest
    ``received_at`` among them of an authenticated request naming an action."""

    path: Path
    rows: int = 0
    size: int = 0
    replayed: int = 0
    oldest: datetime | None = None

    @property
    def name(self) -> str:
        """The file's name without its suffix: unique, and the key of its replay mark."""
        return self.path.name.removesuffix(_SEGMENT)

    @property
    def owner(self) -> str:
        """The worker that wrote it."""
        return self.name.rsplit(".", 1)[0]

    def note(self, entry: LogEntry, size: int) -> None:
        """Count one row of ``size`` bytes."""
        self.rows += 1
        self.size += size
        at = _pending_at(entry)
        if at is not None and (self.oldest is None or at < self.oldest):
            self.oldest = at


class Spool:
    """A worker's outage spool in ``directory``, holding at most ``max_rows`` rows and
    ``max_bytes`` bytes (the rows it took over from dead workers included); past either,
    a row is counted (:meth:`take_dropped`), not kept.

    :meth:`keep` is the hot path (event loop and writer thread); the spool loop calls
    :meth:`adopt`, :meth:`seal`, :meth:`read`, :meth:`finished` and :meth:`sync`. Nothing
    is created on disk before the first row.
    """

    def __init__(
        self, directory: Path, *, max_rows: int, max_bytes: int, store_url: str = ""
    ) -> None:
        if max_rows < 0 or max_bytes < 0:
            raise ValueError(
                f"the spool's bounds must be 0 or more, got {max_rows} rows, {max_bytes} bytes"
            )
        self.directory = directory
        self.max_rows = max_rows
        self.max_bytes = max_bytes
        self.store_url = store_url
        self.owner = f"{os.getpid()}-{uuid.uuid4().hex}"
        self._lock = threading.Lock()
        self._current: Segment | None = None
        self._fd: int | None = None
        self._dirty = False
        self._sequence = 0
        #: Sealed files waiting for the store, oldest first (ours and adopted ones).
        self._sealed: list[Segment] = []
        #: The lock-file descriptors this process holds, by owner (its own, adopted ones).
        self._owners: dict[str, int] = {}
        self._rows = 0
        self._bytes = 0
        self._dropped = 0
        self._unlogged_drops = 0
        self._last_drop_log = float("-inf")

    # -- the hot path -------------------------------------------------------------------

    def keep(self, entry: LogEntry) -> bool:
        """Append ``entry`` (a row in its final form); False when it was counted instead
        (the spool is full, or its disk failed)."""
        line = encode(entry)
        with self._lock:
            if self._rows >= self.max_rows or self._bytes + len(line) > self.max_bytes:
                problem = f"the spool is full ({self.max_rows} rows, {self.max_bytes} bytes)"
            else:
                try:
                    self._append(line, entry)
                except OSError as exc:
                    problem = f"cannot write to the spool {self.directory}: {exc}"
                else:
                    return True
            self._dropped += 1
            self._unlogged_drops += 1
            now = time.monotonic()
            if now - self._last_drop_log < SPOOL_LOG_EVERY_S:
                return False  # said at most once in a while: this may be a flood
            dropped, self._unlogged_drops = self._unlogged_drops, 0
            self._last_drop_log = now
        logger.warning(
            "log rows of 503 answers not kept: %d (%s); more are counted, not logged",
            dropped,
            problem,
            extra={"event": "spool_full"},
        )
        return False

    def keep_all(self, entries: list[LogEntry]) -> None:
        """:meth:`keep` each of ``entries``."""
        for entry in entries:
            self.keep(entry)

    def _append(self, line: bytes, entry: LogEntry) -> None:
        """Write ``line`` to the current file (opened first if need be); under the lock."""
        if self._fd is None or self._current is None:
            self._open_segment()
        assert self._fd is not None and self._current is not None
        written = os.write(self._fd, line)
        if written != len(line):
            # A full disk wrote part of the line: take it back, so every line stays whole.
            os.ftruncate(self._fd, self._current.size)
            raise OSError(f"wrote {written} of {len(line)} bytes")
        self._current.note(entry, written)
        self._rows += 1
        self._bytes += written
        self._dirty = True

    def _open_segment(self) -> None:
        if self.owner not in self._owners:
            make_private_dir(self.directory)
            store_file = self.directory / STORE_FILE
            if not store_file.exists():
                with open_private(store_file, "w", encoding="utf-8") as out:
                    out.write(self.store_url + "\n")
            self._owners[self.owner] = _held_lock(self.directory / f"{self.owner}{_LOCK}")
        self._sequence += 1
        path = self.directory / f"{self.owner}.{self._sequence:06d}{_SEGMENT}"
        self._fd = private_opener()(str(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND)
        self._current = Segment(path)

    # -- the spool loop ----------------------------------------------------------------

    def take_dropped(self) -> int:
        """Rows counted instead of kept since the last call."""
        with self._lock:
            dropped, self._dropped = self._dropped, 0
        return dropped

    @property
    def waiting(self) -> int:
        """Rows held that the store does not have yet."""
        with self._lock:
            current = self._current.rows if self._current is not None else 0
            return current + sum(s.rows - s.replayed for s in self._sealed)

    def oldest(self) -> datetime | None:
        """The oldest ``received_at`` held of an authenticated request naming an action."""
        with self._lock:
            segments = [*self._sealed, *([self._current] if self._current else [])]
        times = [s.oldest for s in segments if s.oldest is not None]
        return min(times) if times else None

    def sync(self) -> None:
        """Make the rows appended so far survive a power loss (``fdatasync``, from the
        spool loop, outside the lock: only that loop closes the file); an error is the
        disk's and is logged."""
        with self._lock:
            fd, self._dirty = (self._fd if self._dirty else None), False
        if fd is None:
            return
        try:
            os.fdatasync(fd)
        except OSError as exc:
            logger.warning(
                "cannot sync the outage spool: %s", exc, extra={"event": "spool_sync_failed"}
            )

    def seal(self) -> list[Segment]:
        """Close the current file (the next row opens a new one) and return every file
        waiting for the store, oldest first."""
        with self._lock:
            if self._fd is not None and self._current is not None:
                os.close(self._fd)
                self._fd = None
                self._dirty = False
                self._sealed.append(self._current)
                self._current = None
            return list(self._sealed)

    def adopt(self) -> int:
        """Take over the files of workers that died (their lock is free); return how many
        rows they hold."""
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return 0
        rows = 0
        for name in sorted(names):
            owner = name.removesuffix(_LOCK)
            if not name.endswith(_LOCK) or owner in self._owners:
                continue
            fd = _free_lock(self.directory / name)
            if fd is None:
                continue  # its worker lives
            rows += self._take_over(owner, fd)
        return rows

    def _take_over(self, owner: str, fd: int) -> int:
        # Listed again once the lock is held: the worker may have opened a file after
        # the first listing and died since.
        paths = sorted(
            self.directory / n
            for n in os.listdir(self.directory)
            if n.startswith(owner + ".") and n.endswith(_SEGMENT)
        )
        segments = [_measure(p) for p in paths]
        with self._lock:
            self._owners[owner] = fd
            self._sealed[:0] = segments  # older than anything of ours
            self._rows += sum(s.rows for s in segments)
            self._bytes += sum(s.size for s in segments)
        self._release_if_done(owner)
        rows = sum(s.rows for s in segments)
        if rows:
            logger.info(
                "took over the outage spool of worker %s (dead): %d rows",
                owner.split("-", 1)[0],
                rows,
                extra={"event": "spool_adopted"},
            )
        return rows

    def read(self, segment: Segment) -> tuple[list[LogEntry | None], int]:
        """The rows of a sealed file in order (None for a line that is not a row), and
        how many lines were not rows; a last line without its newline (cut by a power
        loss) is no row and takes no place."""
        data = segment.path.read_bytes()
        lines = data.split(b"\n")[:-1]  # what follows the last newline is not a line
        entries: list[LogEntry | None] = []
        bad = 0
        for line in lines:
            try:
                entries.append(decode(line))
            except (ValueError, KeyError, TypeError):
                entries.append(None)
                bad += 1
        return entries, bad

    def replayed(self, segment: Segment, rows: int) -> None:
        """The store has the first ``rows`` rows of ``segment``."""
        with self._lock:
            segment.replayed = rows

    def finished(self, segment: Segment) -> None:
        """The store has every row of ``segment``: delete its file (durably: a file that
        came back after a power loss would be replayed again once its mark is gone)."""
        segment.path.unlink(missing_ok=True)
        _sync_folder(self.directory)
        with self._lock:
            self._sealed.remove(segment)
            self._rows -= segment.rows
            self._bytes -= segment.size
        self._release_if_done(segment.owner)

    def _release_if_done(self, owner: str) -> None:
        """Give back a dead worker's lock once none of its files is left."""
        if owner == self.owner:
            return
        with self._lock:
            if any(s.owner == owner for s in self._sealed):
                return
            fd = self._owners.pop(owner, None)
        if fd is not None:
            (self.directory / f"{owner}{_LOCK}").unlink(missing_ok=True)
            os.close(fd)

    def close(self) -> None:
        """Close every file; the rows the store does not have stay on disk, for the next
        worker (the lock files are released, so a live worker takes them over)."""
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            current, self._current = self._current, None
            if current is not None:
                self._sealed.append(current)
            owners, self._owners = self._owners, {}
            left = {s.owner for s in self._sealed}
            self._sealed = []
            self._rows = self._bytes = 0
        for owner, fd in owners.items():
            if owner not in left:
                (self.directory / f"{owner}{_LOCK}").unlink(missing_ok=True)
            os.close(fd)


def _held_lock(path: Path) -> int:
    """Create the lock file ``path`` and hold its ``flock`` (until the process ends)."""
    fd = private_opener()(str(path), os.O_RDWR | os.O_CREAT)
    if not lock_now(fd):  # the owner's name is its pid and a uuid: nobody else has it
        os.close(fd)
        raise BlockingIOError(f"the spool's lock file {path} is held by another process")
    return fd


def _free_lock(path: Path) -> int | None:
    """The lock file ``path`` with its ``flock`` held, or None while its worker lives
    (or when it is gone: another worker took over and finished)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    if lock_now(fd):
        return fd
    os.close(fd)
    return None


def _measure(path: Path) -> Segment:
    """A dead worker's file as a :class:`Segment` (its rows counted once, when taken)."""
    segment = Segment(path)
    with path.open("rb") as src:
        for line in src:
            if not line.endswith(b"\n"):
                break
            try:
                segment.note(decode(line), len(line))
            except (ValueError, KeyError, TypeError):
                segment.rows += 1
                segment.size += len(line)
    return segment


def _sync_folder(folder: Path) -> None:
    """Make a deletion in ``folder`` durable."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
