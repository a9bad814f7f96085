"""A SQLite store is read through an escaped read-only ``file:`` URI, whatever its name:
``?``/``&`` in a name cannot add URI options (``mode=rwc`` would open it writable, or
create another file) and ``%41`` is not decoded to ``A``."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from gptools._private_files import sqlite_read_uri
from gptools.deliverylog import read_delivery_log
from tests.deliverylog.conftest import random_log

NAMES = ["st?mode=rwc&x=1.sqlite3", "%41.sqlite3", "a#b.sqlite3"]


@pytest.mark.parametrize("name", NAMES)
def test_the_analyser_reads_a_store_of_any_name(tmp_path: Path, name: str) -> None:
    log = random_log(7, n_actions=20)
    path = log.write_sqlite(tmp_path / name)
    with read_delivery_log(path, format="sqlite") as opened:
        count = opened.execute(opened.raw.count())
    assert count == len(log.store_rows())
    # Nothing else was created next to it (mode=rwc would have made a file named "st").
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


@pytest.mark.parametrize("name", NAMES)
def test_the_uri_opens_that_file_read_only(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE t (x)")
    db.close()
    ro = sqlite3.connect(sqlite_read_uri(path), uri=True)
    try:
        assert ro.execute("SELECT name FROM sqlite_master").fetchall() == [("t",)]
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            ro.execute("CREATE TABLE u (x)")
    finally:
        ro.close()
