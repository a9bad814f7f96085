"""A SQLite store whose "disk" the test fills and frees."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from gptools.webhooks import SQLiteStore


class CappedSQLiteStore(SQLiteStore):
    """A SQLite store whose file cannot grow past ``max_pages`` pages: SQLite's own
    "database or disk is full" error, as on a full disk, without filling the machine's."""

    def __init__(self, path: str | Path, max_pages: int) -> None:
        super().__init__(path)
        self.max_pages = max_pages

    def _raw_connect(self, *, create: bool) -> sqlite3.Connection:
        raw = super()._raw_connect(create=create)
        raw.execute(f"PRAGMA max_page_count = {self.max_pages}")
        return raw
