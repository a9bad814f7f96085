"""Files gptools creates are owner-only (``gptools._private_files``), under any umask."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from gptools._private_files import PRIVATE_FILE_MODE, create_private, open_private


@pytest.fixture
def loose_umask() -> Iterator[None]:
    """A umask (022) that would leave a plain ``open`` world-readable."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_open_private_creates_owner_only(tmp_path: Path, loose_umask: None) -> None:
    with open_private(tmp_path / "a.csv", "w", encoding="utf-8") as fh:
        fh.write("x\n")
    assert mode_of(tmp_path / "a.csv") == PRIVATE_FILE_MODE
    with open_private(tmp_path / "b.bin", "wb") as fb:
        fb.write(b"x")
    assert mode_of(tmp_path / "b.bin") == PRIVATE_FILE_MODE
    # A plain open under the same umask is what the helper replaces.
    (tmp_path / "plain").write_text("x")
    assert mode_of(tmp_path / "plain") == 0o644


def test_create_private_and_an_option(tmp_path: Path, loose_umask: None) -> None:
    assert mode_of(create_private(tmp_path / "s.sqlite3")) == PRIVATE_FILE_MODE
    assert mode_of(create_private(tmp_path / "shared", file_mode=0o640)) == 0o640


def test_stricter_umask_wins(tmp_path: Path) -> None:
    old = os.umask(0o277)
    try:
        assert mode_of(create_private(tmp_path / "s")) == 0o400
    finally:
        os.umask(old)


def test_existing_file_keeps_its_mode(tmp_path: Path, loose_umask: None) -> None:
    path = tmp_path / "kept"
    path.write_text("old")
    path.chmod(0o644)
    with open_private(path, "w") as fh:
        fh.write("new")
    assert mode_of(path) == 0o644
    assert path.read_text() == "new"


def test_stores_journals_exports_and_rejects_are_private(tmp_path: Path, loose_umask: None) -> None:
    from gptools.participants._journal import Identity, Journal
    from gptools.participants._summary import write_rejects
    from gptools.webhooks import export_log, open_store

    store_path = tmp_path / "store.sqlite3"
    store = open_store(f"sqlite:///{store_path}")
    store.connect().close()
    jsonl = export_log(store, tmp_path / "log.jsonl", format="jsonl").path
    parquet = export_log(store, tmp_path / "log.parquet", format="parquet").path
    journal_path = tmp_path / "journal.sqlite3"
    Journal.open(journal_path, Identity("http://h", "CMP-1", 201, "f" * 64)).close()
    rejects = write_rejects(journal_path, tmp_path / "rejects.csv")
    created = [store_path, jsonl, parquet, journal_path, rejects]
    created += [p for p in tmp_path.iterdir() if p.name.endswith(("-wal", "-shm", ".lock"))]
    assert len(created) >= 6  # the sidecars were made too
    assert {p.name: mode_of(p) for p in created} == {p.name: 0o600 for p in created}


def test_the_spark_log_goes_to_a_private_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gptools.deliverylog import _readers_spark

    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    monkeypatch.setattr(_readers_spark, "_spark_log", None)
    # Another account's trap at the old fixed path: a symlink to a file of the victim's.
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (tmp_path / "gptools-spark.log").symlink_to(victim)
    log = _readers_spark.spark_log()
    assert log.parent.parent == tmp_path and log.parent.name.startswith("gptools-spark-")
    assert stat.S_IMODE(log.parent.stat().st_mode) == 0o700
    assert _readers_spark.spark_log() == log  # one per process
    with _readers_spark._jvm_stderr_to(log):
        os.write(2, b"a JVM notice\n")
    assert log.read_text() == "a JVM notice\n" and mode_of(log) == 0o600
    assert victim.read_text() == "keep"


def test_an_export_option_says_otherwise(tmp_path: Path, loose_umask: None) -> None:
    from gptools.webhooks import export_log, open_store

    store = open_store(f"sqlite:///{tmp_path / 'store.sqlite3'}")
    for fmt in ("jsonl", "parquet"):
        out = export_log(store, tmp_path / f"shared.{fmt}", format=fmt, file_mode=0o640).path
        assert mode_of(out) == 0o640


def test_creating_never_opens_an_existing_database(tmp_path: Path) -> None:
    """Closing any descriptor of a file drops this process's POSIX locks on it, SQLite's
    included: ``create_private`` on an open store must leave another connection's write
    lock in place (a second process still finds the database locked)."""
    import sqlite3
    import subprocess
    import sys

    path = create_private(tmp_path / "store.sqlite3")
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("CREATE TABLE t (x)")
        holder.execute("BEGIN IMMEDIATE")  # the write lock, held by this process
        create_private(path)  # what every new store connection does first
        probe = (
            "import sqlite3, sys\n"
            "db = sqlite3.connect(sys.argv[1], timeout=0, isolation_level=None)\n"
            "try:\n    db.execute('BEGIN IMMEDIATE')\nexcept sqlite3.OperationalError as e:\n"
            "    print(e)\nelse:\n    print('acquired')\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", probe, str(path)], capture_output=True, text=True, check=True
        ).stdout.strip()
        assert out == "database is locked"
    finally:
        holder.close()


def test_an_output_link_put_in_place_after_the_check_is_still_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``open_output`` holds its rule as it opens (``O_NOFOLLOW``, ``O_EXCL``), not only
    in the check before: a link or a file that appears in between is refused too."""
    from gptools import _private_files

    target = tmp_path / "target.txt"
    target.write_text("precious\n")
    link = tmp_path / "out.csv"
    link.symlink_to(target)
    monkeypatch.setattr(_private_files, "check_output", lambda path, **_: Path(path))
    with pytest.raises(OSError) as caught:
        _private_files.open_output(link, force=True)
    assert caught.value.errno == errno.ELOOP
    with pytest.raises(FileExistsError):
        _private_files.open_output(target)
    assert target.read_text() == "precious\n"
