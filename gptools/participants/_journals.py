"""The journals in a directory: what each holds (:func:`journal_summaries`) and the
clean-up of those that are no longer needed (:func:`prune_journals`).

A journal is one load's record (see :mod:`gptools.participants._journal`). Once a load is
complete its journal only lets a re-run of the same load skip sending, and a journal set
aside (made against another server or sandbox state) is kept only to be looked at: both
can go. Who was loaded lives in the campaign register, where each load records itself;
pruning records a journal there before deleting it (a journal older than that record is
migrated so), so no count of ``campaigns list/show/results`` changes.
``gptools participants status`` and ``gptools participants journals --prune`` are thin
front ends over these functions.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from gptools._private_files import sqlite_read_uri
from gptools._register_file import check_writable
from gptools.participants._journal import (
    SET_ASIDE_AT,
    SET_ASIDE_REASON,
    Identity,
    JournalBusyError,
    lock_journal,
    read_counts,
    remove_journal,
)
from gptools.participants._loader import default_journal_dir
from gptools.participants._recorded import record_journal_file, register_path

if TYPE_CHECKING:
    from gptools.campaigns import CampaignRegister

#: The states :attr:`JournalSummary.state` takes.
COMPLETE: Final = "complete"
PENDING: Final = "pending"
SET_ASIDE: Final = "set aside"
UNREADABLE: Final = "unreadable"
JOURNAL_STATES: Final = (PENDING, COMPLETE, SET_ASIDE, UNREADABLE)

#: The file names of the journals a directory holds (default journals and set-aside ones).
JOURNAL_GLOB: Final = "participants-*.sqlite"


@dataclass(frozen=True, slots=True)
class JournalSummary:
    """One journal file: the load it records and where that load stands.

    ``state``: ``pending`` (ids left to send, or the rows never finished staging),
    ``complete`` (every row has its final outcome), ``set aside`` (made against another
    server or sandbox state; never used to skip sending: ``note`` says why) or
    ``unreadable`` (not a journal; ``note`` says what failed). ``updated_at`` is the last
    write to the file. Counts are rows of the input: ``loaded + rejected + duplicate +
    pending == rows``.
    """

    path: Path
    state: str
    campaign_id: str = ""
    brand: int | None = None
    server: str = ""
    source: str = ""
    rows: int = 0
    loaded: int = 0
    rejected: int = 0
    duplicate: int = 0
    pending: int = 0
    created_at: datetime | None = None
    updated_at: datetime | None = None
    size_bytes: int = 0
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready values (the CLI's ``--json`` rows)."""
        return {
            "path": str(self.path),
            "state": self.state,
            "campaign_id": self.campaign_id,
            "brand": self.brand,
            "server": self.server,
            "source": self.source,
            "rows": self.rows,
            "loaded": self.loaded,
            "rejected": self.rejected,
            "duplicate": self.duplicate,
            "pending": self.pending,
            "created_at": _iso(self.created_at),
            "updated_at": _iso(self.updated_at),
            "size_bytes": self.size_bytes,
            "note": self.note,
        }


def journal_summaries(
    directory: str | os.PathLike[str] | None = None, *, campaign_id: str | None = None
) -> list[JournalSummary]:
    """Every journal in ``directory`` (default :func:`default_journal_dir`), or only
    those of ``campaign_id``, newest first. Files are read, never locked or changed: a
    load running meanwhile shows as ``pending`` with what it has committed so far."""
    found = [journal_summary(path) for path in _journal_files(directory)]
    if campaign_id is not None:
        found = [s for s in found if s.campaign_id == campaign_id]
    return sorted(found, key=lambda s: (s.updated_at or _EPOCH, str(s.path)), reverse=True)


def prune_journals(
    directory: str | os.PathLike[str] | None = None,
    *,
    campaign_id: str | None = None,
    older_than: timedelta = timedelta(0),
    register: CampaignRegister | str | os.PathLike[str] | Literal[False] | None = None,
) -> list[JournalSummary]:
    """Delete the complete and set-aside journals in ``directory`` (default
    :func:`default_journal_dir`; only ``campaign_id``'s when given) last written more than
    ``older_than`` ago; return what was deleted.

    Each is recorded in the campaign ``register`` first (``None``: the default file;
    ``False``: not recorded), under the server it was made against: a load the register
    already holds is written again unchanged, one from before loads were recorded is
    added. A register that cannot be written raises
    :class:`~gptools.campaigns.RegisterError` before anything is deleted.

    A journal in use by a running load is left alone (its lock is taken before deleting).
    A complete load run again after its journal is pruned sends its ids again, which adds
    no one twice (``spec.PARTICIPANT_ADDITION_IDEMPOTENT``, assumed). Pending and
    unreadable journals are never deleted here.
    """
    cutoff = datetime.now(UTC) - older_than
    record_in = register_path(register)
    if record_in is not None:
        check_writable(record_in, "no journal was deleted")
    removed = []
    for summary in journal_summaries(directory, campaign_id=campaign_id):
        if summary.state not in (COMPLETE, SET_ASIDE):
            continue
        if summary.updated_at is not None and summary.updated_at > cutoff:
            continue
        try:
            lock = lock_journal(summary.path)
        except (JournalBusyError, OSError):
            continue  # a load has it open (or its lock cannot be had): left alone
        try:
            if record_in is not None:
                record_journal_file(record_in, summary.path)
            remove_journal(summary.path)
        finally:
            os.close(lock)
        if summary.state == SET_ASIDE:
            # A set-aside file's name is never opened again by a load: its lock can go.
            summary.path.with_name(summary.path.name + ".lock").unlink(missing_ok=True)
        removed.append(summary)
    return removed


_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat().replace("+00:00", "Z")


def _journal_files(directory: str | os.PathLike[str] | None) -> list[Path]:
    where = Path(directory) if directory is not None else default_journal_dir()
    if not where.is_dir():
        return []
    return sorted(p for p in where.glob(JOURNAL_GLOB) if p.is_file())


def journal_summary(path: str | os.PathLike[str]) -> JournalSummary:
    """What the journal file at ``path`` holds (see :class:`JournalSummary`); read, never
    locked or changed. A file that is not a journal is ``unreadable``."""
    path = Path(path)
    try:
        stat = path.stat()
        db = sqlite3.connect(sqlite_read_uri(path), uri=True)
        try:
            meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
            counts = read_counts(db)
        finally:
            db.close()
    except (OSError, sqlite3.Error) as exc:
        return JournalSummary(path, UNREADABLE, note=f"not a readable journal: {exc}")
    if meta.get(SET_ASIDE_AT):
        state, note = SET_ASIDE, meta.get(SET_ASIDE_REASON)
    elif meta.get("staged") == "1" and counts.not_attempted == 0:
        state, note = COMPLETE, None
    else:
        state = PENDING
        note = None if meta.get("staged") == "1" else "the rows were never fully read"
    identity = Identity.of_meta(meta)
    return JournalSummary(
        path=path,
        state=state,
        campaign_id=identity.campaign_id,
        brand=identity.brand,
        server=identity.server,
        source=meta.get("source", ""),
        **counts.totals(),
        created_at=_parse_time(meta.get("created_at")),
        updated_at=datetime.fromtimestamp(_last_write(path, stat.st_mtime), UTC),
        size_bytes=stat.st_size + _size(path.with_name(path.name + "-wal")),
        note=note,
    )


def _last_write(path: Path, mtime: float) -> float:
    # Commits land in the WAL until a checkpoint folds them into the file. An empty WAL
    # holds no write: a reader makes one where none was left (reading is not writing).
    with contextlib.suppress(OSError):
        wal = path.with_name(path.name + "-wal").stat()
        if wal.st_size > 0:
            return max(mtime, wal.st_mtime)
    return mtime


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
