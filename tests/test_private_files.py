"""Files gptools creates are owner-only (``gptools._private_files``), under any umask."""

from __future__ import annotations

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
