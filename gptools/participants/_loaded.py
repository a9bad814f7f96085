"""Who the loader's journals say is in a campaign: the acknowledged player ids, per campaign.

Read-only: each journal file of the journal folder is opened read-only, its identity read
from ``meta`` (server, campaign), its ids from ``ids``. A file that is not a journal is
skipped, as the folder is the user's.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from gptools.participants._journal import LOADED, PENDING, REJECTED, SENT
from gptools.participants._loader import default_journal_dir


def _journals(directory: Path) -> Iterator[tuple[str, str, sqlite3.Connection]]:
    """(server, campaign id, read-only connection) of every journal under ``directory``."""
    for path in sorted(directory.glob("*.sqlite")):
        try:
            db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        except sqlite3.Error:
            continue
        with contextlib.closing(db):
            try:
                meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
            except sqlite3.DatabaseError:
                continue  # not a journal
            if "campaign_id" in meta:
                yield str(meta.get("server", "")), str(meta["campaign_id"]), db


def loaded_players(
    campaign_id: str, *, server: str | None = None, journal_dir: str | Path | None = None
) -> list[str]:
    """The player ids the server acknowledged for ``campaign_id`` in every journal of
    ``journal_dir`` (default: :func:`default_journal_dir`), of ``server`` when given;
    each id once, in load order."""
    directory = Path(journal_dir) if journal_dir is not None else default_journal_dir()
    found: dict[str, None] = {}
    for srv, cid, db in _journals(directory):
        if cid == campaign_id and (server is None or srv == server):
            rows = db.execute("SELECT player_id FROM ids WHERE status = ? ORDER BY seq", (LOADED,))
            found.update(dict.fromkeys(r[0] for r in rows))
    return list(found)


def participant_counts(
    *, server: str | None = None, journal_dir: str | Path | None = None
) -> dict[str, dict[str, int]]:
    """Campaign id -> ``loaded``, ``rejected`` (by the server) and ``pending`` (not yet
    acknowledged) distinct ids over every journal (of ``server`` when given)."""
    directory = Path(journal_dir) if journal_dir is not None else default_journal_dir()
    out: dict[str, dict[str, int]] = {}
    for srv, cid, db in _journals(directory):
        if server is not None and srv != server:
            continue
        counts = dict(db.execute("SELECT status, count(*) FROM ids GROUP BY status").fetchall())
        row = out.setdefault(cid, {"loaded": 0, "rejected": 0, "pending": 0})
        row["loaded"] += int(counts.get(LOADED, 0))
        row["rejected"] += int(counts.get(REJECTED, 0))
        row["pending"] += int(counts.get(PENDING, 0)) + int(counts.get(SENT, 0))
    return out
