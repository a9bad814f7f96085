"""The on-disk journal of a load (SQLite), which makes it resumable.

A journal holds one load, named by its identity: the server, the campaign, the brand and
the input's fingerprint. The server is the client's ``server_identity`` (a sandbox's state
identity, or the provider's normalised base URL): a journal is trusted only for the server
it was made against, because only that server holds the participants it records. One of
the same load made against another server is set aside (marked, renamed
``<name>.set-aside-<time>.sqlite``) and a new one starts; it is never used to skip
sending. It keeps every input row with its outcome, so the journal is also where the
summary's per-row outcomes come from. Tables:

``rows``    every input row: line, raw value (null when it equals the trimmed id),
            trimmed id or the local rejection.
``ids``     each distinct valid id once, numbered (``seq``) in order of first appearance,
            with its status: ``pending``, ``loaded`` or ``rejected`` (refused by the server).
``chunks``  consecutive ``seq`` ranges of ``chunk_size`` ids, the unit that is sent:
            ``pending`` (never sent), ``sent`` (sent, answer not yet recorded),
            ``acknowledged`` (every id in it has its final status).

The rows are written in one transaction (a load killed while reading starts over), and
each answer from the server is committed in its own transaction before the next step
depends on it. Because chunks are cut from the numbered ids, the same input always gives
the same chunks, so a resumed load skips exactly what was acknowledged.

A chunk found ``sent`` when a journal is opened was sent by a process that died before it
recorded the answer: whether the server added those players is unknown, so the chunk is
sent again (adding a player who is already a participant is the one case where an id can
be sent twice; an acknowledged chunk is never sent again).

One run at a time: :meth:`Journal.open` takes an exclusive ``flock`` on a sidecar file
(``<journal>.lock``, holding the pid of its owner) for as long as the journal is open, so a
second run of the same load (a cron overlap, a second notebook) stops at once with
:class:`JournalBusyError` instead of sending the same chunks with a second rate limiter and
overwriting the first run's acknowledgements. Answers are committed with
``synchronous=FULL``: an acknowledged chunk survives a power loss, not only a killed process.
Marking a chunk ``sent`` needs no such care (a chunk that lost its mark is pending, and sent
again, exactly as an unknown one), so those commits skip the sync.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, TypedDict

from gptools._private_files import PRIVATE_FILE_MODE, create_private, sqlite_read_uri
from gptools.participants._sources import PlayerListError, PlayerRow
from gptools.participants._validate import REFUSED_BY_SERVER, Rejection

PENDING: Final = "pending"
SENT: Final = "sent"
ACKNOWLEDGED: Final = "acknowledged"
LOADED: Final = "loaded"
REJECTED: Final = "rejected"

_SCHEMA_VERSION: Final = "1"
_BATCH: Final = 20_000

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rows (
    line INTEGER PRIMARY KEY,
    raw TEXT,
    player_id TEXT,
    reason_code TEXT,
    reason TEXT
);
CREATE TABLE IF NOT EXISTS ids (
    seq INTEGER PRIMARY KEY,
    player_id TEXT NOT NULL,
    first_line INTEGER NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending',
    reason TEXT,
    updated_at TEXT
);
CREATE TABLE IF NOT EXISTS chunks (
    chunk_no INTEGER PRIMARY KEY,
    first_seq INTEGER NOT NULL,
    last_seq INTEGER NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending',
    sends INTEGER NOT NULL DEFAULT 0,
    acknowledged_at TEXT
);
"""

Checker = Callable[[str | None], "str | Rejection"]


class JournalMismatchError(PlayerListError):
    """The journal file belongs to another load (server, campaign, brand or input)."""


class JournalBusyError(PlayerListError):
    """Another run of the same load holds the journal; ``pid`` is its process id (``None``
    when it could not be read)."""

    def __init__(self, path: Path, pid: int | None) -> None:
        who = f"pid {pid}" if pid is not None else "pid unknown"
        super().__init__(
            f"a load of this campaign is already running ({who}): its journal {path} is in "
            "use; wait for that run to finish (or stop it), then run this load again"
        )
        self.path = path
        self.pid = pid


@dataclass(frozen=True, slots=True)
class Identity:
    """What makes two loads the same load: the server, campaign, brand and input."""

    server: str
    campaign_id: str
    brand: int | None
    fingerprint: str

    @property
    def key(self) -> str:
        """The load's name whatever the server: campaign, brand and input, hashed (its
        default journal file's name, and its key in the campaign register)."""
        text = "\n".join((self.campaign_id, "" if self.brand is None else str(self.brand),
                          self.fingerprint))  # fmt: skip
        return hashlib.sha256(text.encode()).hexdigest()[:20]

    @classmethod
    def of_meta(cls, meta: Mapping[str, str]) -> Identity:
        """The identity a journal's ``meta`` rows hold."""
        brand = meta.get("brand", "")
        return cls(
            meta.get("server", ""),
            meta.get("campaign_id", ""),
            int(brand) if brand.lstrip("-").isdigit() else None,
            meta.get("fingerprint", ""),
        )

    def as_meta(self) -> dict[str, str]:
        """The identity as ``meta`` rows."""
        return {
            "server": self.server,
            "campaign_id": self.campaign_id,
            "brand": "" if self.brand is None else str(self.brand),
            "fingerprint": self.fingerprint,
        }


@dataclass(frozen=True, slots=True)
class Counts:
    """Where every row and chunk of a load stands, read from the journal."""

    rows: int
    rejected_local: dict[str, int]
    duplicate: int
    loaded: int
    refused_by_server: int
    not_attempted: int
    chunks: int
    chunks_acknowledged: int
    chunks_unknown: int

    @property
    def rejected(self) -> int:
        """Rows rejected, locally or by the server."""
        return sum(self.rejected_local.values()) + self.refused_by_server

    @property
    def rejected_by_reason(self) -> dict[str, int]:
        """Rejected rows per reason code (only reasons that occurred)."""
        out = {k: v for k, v in self.rejected_local.items() if v}
        if self.refused_by_server:
            out[REFUSED_BY_SERVER] = self.refused_by_server
        return out

    def totals(self) -> Totals:
        """The load's rows as the register and the list of journals show them."""
        return Totals(
            rows=self.rows,
            loaded=self.loaded,
            rejected=self.rejected,
            duplicate=self.duplicate,
            pending=self.not_attempted,
        )


class Totals(TypedDict):
    """A load's rows: ``rows == loaded + rejected + duplicate + pending``, where the
    ``pending`` ones were not acknowledged yet (the journal's ``not_attempted``)."""

    rows: int
    loaded: int
    rejected: int
    duplicate: int
    pending: int


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _storable(raw: str | None) -> str | None:
    # SQLite stores UTF-8; an unpaired surrogate is kept visibly escaped instead.
    if raw is None:
        return None
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:
        return raw.encode("utf-8", "backslashreplace").decode("ascii", "replace")
    return raw


class Journal:
    """One load's journal file. Use :meth:`open`; every method runs in the opening thread."""

    def __init__(self, path: Path, db: sqlite3.Connection, lock_fd: int | None = None) -> None:
        self.path = path
        self._db = db
        self._lock_fd = lock_fd
        self._batch = False
        #: chunks found ``sent`` when the journal was opened: answer unknown, sent again.
        self.unknown_at_open = 0
        #: Where the journal found at this path was moved when it was set aside (made
        #: against another server: see :meth:`open`), else ``None``.
        self.set_aside: Path | None = None
        #: Why it was set aside (``made against X, not Y``).
        self.set_aside_reason: str | None = None

    # -- opening ------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | Path, identity: Identity, *, restart: bool = False) -> Journal:
        """Open (or create) the journal at ``path`` for the load ``identity``.

        A journal of the same load made against another server (another
        :attr:`Identity.server`: another provider address, or a sandbox state that was
        reset or never kept) proves nothing about this server: it is set aside (renamed,
        see :attr:`set_aside`) and a new journal starts. ``restart`` discards the journal
        at ``path`` whatever it holds, and starts the load over.

        Raises :class:`JournalMismatchError` when the file holds another load (campaign,
        brand or input) and :class:`JournalBusyError` while another run has it open.
        """
        path = Path(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            lock_fd = lock_journal(path)
        except OSError as exc:
            raise PlayerListError(
                f"cannot write the journal {path}: {exc.strerror or exc}; nothing was sent"
            ) from None
        try:
            db = _connect(path)
            set_aside: tuple[Path, str] | None = None
            try:
                old = _meta(db)
                if restart and old:
                    db.close()
                    remove_journal(path)
                    db = _connect(path)
                elif old.get("fingerprint") and _only_server_differs(old, identity):
                    set_aside = _set_aside(db, path, identity)
                    db = _connect(path)
                journal = cls(path, db, lock_fd)
                if set_aside is not None:
                    journal.set_aside, journal.set_aside_reason = set_aside
                journal._claim(identity)
                journal.unknown_at_open = journal._scalar(
                    "SELECT count(*) FROM chunks WHERE state = ?", SENT
                )
            except BaseException:
                db.close()
                raise
        except BaseException:
            os.close(lock_fd)
            raise
        return journal

    def _claim(self, identity: Identity) -> None:
        meta = self.meta()
        wanted = identity.as_meta()
        if "fingerprint" not in meta:
            with self._tx():
                self._set_meta({**wanted, "schema": _SCHEMA_VERSION, "created_at": _now()})
            return
        differ = [k for k, v in wanted.items() if meta.get(k) != v]
        if differ:
            theirs = ", ".join(f"{k}={meta.get(k)!r}" for k in differ)
            raise JournalMismatchError(
                f"{self.path} is the journal of another load ({theirs}); give another journal "
                "path, or --restart (restart=True) to discard it and start this load over"
            )

    def close(self) -> None:
        """Close the file (everything is already committed) and let another run have it."""
        self._db.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None

    def discard(self) -> None:
        """Close the journal and delete its file while its lock is still held (no other run
        can have opened it meanwhile): a load with nothing to resume leaves none behind."""
        self._db.close()
        try:
            remove_journal(self.path)
        finally:
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None

    # -- helpers ------------------------------------------------------------------------

    def _tx(self, *, durable: bool = True) -> contextlib.AbstractContextManager[None]:
        if self._batch:
            return contextlib.nullcontext()  # part of the batch's one transaction
        return _Transaction(self._db, durable=durable)

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Commit every answer recorded inside as one transaction: one sync of the log
        for several answers that arrived together. An interruption (Ctrl-C) commits what
        was recorded, as separate commits would have; any other error rolls it back."""
        with _Transaction(self._db, commit_on=(KeyboardInterrupt,)):
            self._batch = True
            try:
                yield
            finally:
                self._batch = False

    def _scalar(self, sql: str, *args: Any) -> int:
        row = self._db.execute(sql, args).fetchone()
        return int(row[0] or 0) if row else 0

    def _set_meta(self, values: dict[str, str]) -> None:
        self._db.executemany(
            "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", values.items()
        )

    def meta(self) -> dict[str, str]:
        """Every ``meta`` entry: identity, settings, detected source details."""
        return dict(self._db.execute("SELECT key, value FROM meta").fetchall())

    # -- staging ------------------------------------------------------------------------

    @property
    def staged(self) -> bool:
        """Whether the input rows are recorded (then the source need not be read again)."""
        return self.meta().get("staged") == "1"

    @property
    def chunk_size(self) -> int:
        """The chunk size the load was cut with (kept for the whole load)."""
        return int(self.meta()["chunk_size"])

    def stage(
        self,
        rows: Iterable[PlayerRow],
        check: Checker,
        *,
        chunk_size: int,
        settings: dict[str, str],
        progress: Callable[[int], object] | None = None,
    ) -> None:
        """Record every input row with its validation outcome, number the distinct valid
        ids, and cut them into chunks of ``chunk_size``: all in one transaction."""
        with self._tx():
            self._db.execute("DROP INDEX IF EXISTS ids_player")
            for table in ("rows", "ids", "chunks"):
                self._db.execute(f"DELETE FROM {table}")
            batch: list[tuple[int, str | None, str | None, str | None, str | None]] = []
            insert = "INSERT OR REPLACE INTO rows VALUES (?, ?, ?, ?, ?)"
            for row in rows:
                result = check(row.raw)
                if isinstance(result, Rejection):
                    batch.append((row.line, _storable(row.raw), None, result.code, result.message))
                else:
                    # The raw value is kept only where trimming changed it.
                    raw = None if row.raw == result else _storable(row.raw)
                    batch.append((row.line, raw, result, None, None))
                if len(batch) >= _BATCH:
                    self._db.executemany(insert, batch)
                    if progress is not None:
                        progress(len(batch))
                    batch.clear()
            self._db.executemany(insert, batch)
            if progress is not None and batch:
                progress(len(batch))
            self._db.execute(
                "INSERT INTO ids(seq, player_id, first_line) "
                "SELECT ROW_NUMBER() OVER (ORDER BY MIN(line)) - 1, player_id, MIN(line) "
                "FROM rows WHERE player_id IS NOT NULL GROUP BY player_id"
            )
            self._db.execute(
                "INSERT INTO chunks(chunk_no, first_seq, last_seq) "
                "SELECT seq / ?1, MIN(seq), MAX(seq) FROM ids GROUP BY seq / ?1",
                (chunk_size,),
            )
            # Built once after the bulk insert: far cheaper than keeping it up to date.
            self._db.execute("CREATE UNIQUE INDEX ids_player ON ids(player_id)")
            self._set_meta({**settings, "chunk_size": str(chunk_size), "staged": "1"})

    # -- sending ------------------------------------------------------------------------

    def open_chunks(self) -> list[tuple[int, int, int]]:
        """``(chunk_no, first_seq, last_seq)`` of every chunk not yet acknowledged."""
        return self._db.execute(
            "SELECT chunk_no, first_seq, last_seq FROM chunks WHERE state != ? ORDER BY chunk_no",
            (ACKNOWLEDGED,),
        ).fetchall()

    def pending_ids(self, first_seq: int, last_seq: int) -> list[tuple[int, str]]:
        """``(seq, player_id)`` of the ids in a range that have no final status yet."""
        return self._db.execute(
            "SELECT seq, player_id FROM ids WHERE seq BETWEEN ? AND ? AND status = ? ORDER BY seq",
            (first_seq, last_seq, PENDING),
        ).fetchall()

    def mark_sent(self, chunk_no: int) -> None:
        """Record that a chunk is about to be sent (committed before it is; not synced,
        see the module docstring)."""
        with self._tx(durable=False):
            self._db.execute(
                "UPDATE chunks SET state = ?, sends = sends + 1 WHERE chunk_no = ?",
                (SENT, chunk_no),
            )

    def record(
        self,
        chunk_no: int,
        *,
        loaded: Sequence[int] = (),
        rejected: Sequence[tuple[int, str]] = (),
    ) -> bool:
        """Commit the server's answer for some ids of a chunk: ``loaded`` seqs, and
        ``rejected`` ``(seq, server message)``. Returns whether the chunk is now
        acknowledged (no id in it left pending)."""
        now = _now()
        with self._tx():
            self._db.executemany(
                "UPDATE ids SET status = ?, updated_at = ? WHERE seq = ?",
                ((LOADED, now, seq) for seq in loaded),
            )
            self._db.executemany(
                "UPDATE ids SET status = ?, reason = ?, updated_at = ? WHERE seq = ?",
                ((REJECTED, reason, now, seq) for seq, reason in rejected),
            )
            first, last = self._db.execute(
                "SELECT first_seq, last_seq FROM chunks WHERE chunk_no = ?", (chunk_no,)
            ).fetchone()
            left = self._scalar(
                "SELECT count(*) FROM ids WHERE seq BETWEEN ? AND ? AND status = ?",
                first,
                last,
                PENDING,
            )
            if left == 0:
                self._db.execute(
                    "UPDATE chunks SET state = ?, acknowledged_at = ? WHERE chunk_no = ?",
                    (ACKNOWLEDGED, now, chunk_no),
                )
        return left == 0

    # -- reading ------------------------------------------------------------------------

    def loaded_ids(self) -> Iterator[str]:
        """The player ids the server acknowledged, in order of first appearance."""
        return loaded_ids(self._db)

    def counts(self) -> Counts:
        """Where every row and chunk stands now."""
        return read_counts(self._db)

    def settings(self) -> dict[str, Any]:
        """The source details and settings recorded when the rows were staged."""
        meta = self.meta()
        return json.loads(meta["source_details"]) if "source_details" in meta else {}


def loaded_ids(db: sqlite3.Connection) -> Iterator[str]:
    """The player ids the journal open in ``db`` says the server acknowledged, in order."""
    for (player_id,) in db.execute("SELECT player_id FROM ids WHERE status = ? ORDER BY seq",
                                   (LOADED,)):  # fmt: skip
        yield player_id


def read_counts(db: sqlite3.Connection) -> Counts:
    """Where every row and chunk of the journal open in ``db`` stands now."""

    def scalar(sql: str) -> int:
        row = db.execute(sql).fetchone()
        return int(row[0] or 0) if row else 0

    by_code = dict(
        db.execute(
            "SELECT reason_code, count(*) FROM rows WHERE reason_code IS NOT NULL "
            "GROUP BY reason_code"
        ).fetchall()
    )
    rows = scalar("SELECT count(*) FROM rows")
    status = dict(db.execute("SELECT status, count(*) FROM ids GROUP BY status"))
    unique = sum(status.values())
    chunk_states = dict(db.execute("SELECT state, count(*) FROM chunks GROUP BY state"))
    return Counts(
        rows=rows,
        rejected_local={k: int(v) for k, v in by_code.items()},
        duplicate=rows - sum(by_code.values()) - unique,
        loaded=int(status.get(LOADED, 0)),
        refused_by_server=int(status.get(REJECTED, 0)),
        not_attempted=int(status.get(PENDING, 0)),
        chunks=sum(chunk_states.values()),
        chunks_acknowledged=int(chunk_states.get(ACKNOWLEDGED, 0)),
        chunks_unknown=int(chunk_states.get(SENT, 0)),
    )


#: Per-row outcome of a load, read from a journal file: ``line, raw, player_id, outcome,
#: reason_code, detail``.
OUTCOME_SQL: Final = f"""
SELECT r.line, COALESCE(r.raw, r.player_id) AS raw, r.player_id,
  CASE
    WHEN r.reason_code IS NOT NULL THEN 'rejected'
    WHEN i.first_line != r.line THEN 'duplicate'
    WHEN i.status = '{LOADED}' THEN 'loaded'
    WHEN i.status = '{REJECTED}' THEN 'rejected'
    ELSE 'not_attempted'
  END AS outcome,
  CASE
    WHEN r.reason_code IS NOT NULL THEN r.reason_code
    WHEN i.first_line != r.line THEN NULL
    WHEN i.status = '{REJECTED}' THEN '{REFUSED_BY_SERVER}'
    ELSE NULL
  END AS reason_code,
  CASE
    WHEN r.reason_code IS NOT NULL THEN r.reason
    WHEN i.first_line != r.line THEN 'duplicate of line ' || i.first_line
    WHEN i.status = '{REJECTED}' THEN i.reason
    ELSE NULL
  END AS detail
FROM rows r LEFT JOIN ids i ON i.player_id = r.player_id
"""


def read_outcomes(path: Path, where: str = "") -> Iterator[tuple[Any, ...]]:
    """Stream the per-row outcomes of the journal at ``path`` (``where`` filters on
    ``outcome``/``reason_code``), in line order."""
    db = sqlite3.connect(sqlite_read_uri(path), uri=True)
    try:
        sql = f"SELECT * FROM ({OUTCOME_SQL}) {where} ORDER BY line"
        yield from db.execute(sql)
    finally:
        db.close()


def _connect(path: Path) -> sqlite3.Connection:
    """A connection to the journal at ``path`` (created with its tables when new)."""
    try:
        db = sqlite3.connect(create_private(path), isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(f"PRAGMA synchronous={_DURABLE}")
            # A larger page cache keeps staging a million rows fast; bounded (64 MiB).
            db.execute("PRAGMA cache_size=-65536")
            db.executescript(_SCHEMA)
        except BaseException:
            db.close()
            raise
    except (sqlite3.DatabaseError, OSError) as exc:
        raise PlayerListError(f"{path}: not a usable journal file ({exc})") from exc
    return db


def _meta(db: sqlite3.Connection) -> dict[str, str]:
    return dict(db.execute("SELECT key, value FROM meta").fetchall())


def _only_server_differs(meta: dict[str, str], identity: Identity) -> bool:
    differ = {k for k, v in identity.as_meta().items() if meta.get(k) != v}
    return differ == {"server"}


#: The meta keys a set-aside journal carries: when, and why.
SET_ASIDE_AT: Final = "set_aside_at"
SET_ASIDE_REASON: Final = "set_aside_reason"


def _set_aside(db: sqlite3.Connection, path: Path, identity: Identity) -> tuple[Path, str]:
    """Mark the journal open in ``db`` as set aside, close it and move it out of ``path``
    (under its lock); return where it went. The caller opens a new journal at ``path``."""
    server = _meta(db).get("server", "")
    now = datetime.now(UTC)
    reason = f"made against {server}, not {identity.server}"
    with _Transaction(db):
        db.executemany(
            "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
            ((SET_ASIDE_AT, _now()), (SET_ASIDE_REASON, reason)),
        )
    # One self-contained file before it is renamed: the WAL is folded in and dropped.
    db.execute("PRAGMA journal_mode=DELETE")
    db.close()
    target = path.with_name(f"{path.stem}.set-aside-{now:%Y%m%dT%H%M%S%fZ}{path.suffix}")
    os.replace(path, target)
    return target, reason


def remove_journal(path: Path) -> None:
    """Delete the journal file at ``path`` and its SQLite sidecars (not its lock file)."""
    for name in (path.name, f"{path.name}-wal", f"{path.name}-shm"):
        path.with_name(name).unlink(missing_ok=True)


def lock_journal(path: Path) -> int:
    """Take the exclusive lock of the journal at ``path`` (its ``.lock`` sidecar, which
    holds the owner's pid); return the open descriptor that holds it."""
    lock_path = path.with_name(path.name + ".lock")
    # The sidecar is never deleted: a run that unlinked it could let two later runs lock
    # two different files of the same name.
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, PRIVATE_FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        held = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        os.close(fd)
        raise JournalBusyError(path, int(held) if held.isdigit() else None) from None
    except BaseException:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


#: ``synchronous`` of commits that must survive a power loss (WAL: the log is synced at
#: each commit), and of those that need only survive a killed process.
_DURABLE: Final = "FULL"
_FAST: Final = "NORMAL"


class _Transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on error) on an autocommit connection.

    ``durable=False`` commits without syncing the log; a later durable commit syncs it,
    with everything before it, so the order of commits is kept either way. ``commit_on``:
    exceptions that still commit what was done.
    """

    def __init__(
        self,
        db: sqlite3.Connection,
        *,
        durable: bool = True,
        commit_on: tuple[type[BaseException], ...] = (),
    ) -> None:
        self._db = db
        self._durable = durable
        self._commit_on = commit_on

    def __enter__(self) -> None:
        if not self._durable:
            self._db.execute(f"PRAGMA synchronous={_FAST}")
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        try:
            commit = kind is None or (isinstance(kind, type) and issubclass(kind, self._commit_on))
            self._db.execute("COMMIT" if commit else "ROLLBACK")
        finally:
            if not self._durable:
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute(f"PRAGMA synchronous={_DURABLE}")
