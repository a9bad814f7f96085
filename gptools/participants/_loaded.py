"""Who the loader's journals say is in a campaign: the acknowledged player ids.

The journals are those :func:`~gptools.participants.journal_summaries` lists (set-aside
and unreadable ones apart: they record no load of this server); each is opened read-only.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from gptools._private_files import sqlite_read_uri
from gptools.participants._journal import LOADED
from gptools.participants._journals import COMPLETE, PENDING, journal_summaries


def loaded_players(
    campaign_id: str, *, server: str | None = None, journal_dir: str | Path | None = None
) -> list[str]:
    """The player ids the server acknowledged for ``campaign_id`` in the journals of
    ``journal_dir`` (default: :func:`~gptools.participants.default_journal_dir`), of
    ``server`` (a client's ``server_identity``) when given; each id once, oldest load
    first."""
    found: dict[str, None] = {}
    summaries = journal_summaries(journal_dir, campaign_id=campaign_id)
    for summary in reversed(summaries):
        if summary.state not in (COMPLETE, PENDING):
            continue
        if server is not None and summary.server != server:
            continue
        with contextlib.closing(sqlite3.connect(sqlite_read_uri(summary.path), uri=True)) as db:
            rows = db.execute("SELECT player_id FROM ids WHERE status = ? ORDER BY seq", (LOADED,))
            found.update(dict.fromkeys(r[0] for r in rows))
    return list(found)
