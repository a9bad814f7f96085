"""Binary and other non-text files are refused before anything is sent (issue 11, item 1)."""

from __future__ import annotations

import gzip
import io
import random
import struct
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

import openpyxl
import pytest
from click.testing import CliRunner

from gptools.cli import cli
from gptools.client import Client
from gptools.participants import PlayerListError, load_participants
from gptools.participants._sources import open_source
from gptools.sandbox import RunningSandbox
from tests.participants.conftest import BRAND, cli_env, participant_requests

VALID_CSV = b"playerId,name\np-1,Ann\np-2,Bob\np-3,Cy\n"


def _random_bytes() -> bytes:
    return random.Random(20261124).randbytes(2000)


def _png() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    pixels = zlib.compress(b"".join(b"\x00" + b"\xff\x00\x00" * 4 for _ in range(4)))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", 4, 4, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", pixels)
        + chunk(b"IEND", b"")
    )


def _zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("players.csv", VALID_CSV)
    return buffer.getvalue()


def _gzip() -> bytes:
    return gzip.compress(VALID_CSV, mtime=0)


def _controls() -> bytes:
    # Valid UTF-8 without a NUL, but hardly any printable character: not a list of ids.
    rng = random.Random(5)
    return bytes(rng.choice(b"\x01\x02\x03\x04\x05\x06\x07\x08\x0b\x0e\x1b,\n") for _ in range(800))


def _latin1_only() -> bytes:
    # Not UTF-8, and 0x81/0x9D are undefined in Windows-1252: only Latin-1 decodes it.
    return b"playerId\nab\x81c\nd\x9de\n" + b"".join(b"p-%d\n" % i for i in range(10))


NOT_TEXT: dict[str, tuple[Callable[[], bytes], str]] = {
    "random.csv": (_random_bytes, "NUL bytes"),
    "image.csv": (_png, "a PNG image"),
    "archive.csv": (_zip, "a ZIP archive"),
    "players.csv.gz": (_gzip, "gzip-compressed"),
    "controls.csv": (_controls, "control characters"),
    "latin1.csv": (_latin1_only, "neither UTF-8, UTF-16 nor Windows-1252"),
}


@pytest.mark.parametrize("name", sorted(NOT_TEXT))
def test_open_source_refuses_non_text(tmp_path: Path, name: str) -> None:
    make, why = NOT_TEXT[name]
    path = tmp_path / name
    path.write_bytes(make())
    with pytest.raises(PlayerListError) as caught:
        open_source(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: not a text file")
    assert why in message and "\n" not in message


@pytest.mark.parametrize("name", sorted(NOT_TEXT))
def test_python_api_sends_nothing(
    fresh_sandbox: RunningSandbox, client: Client, campaign: str, tmp_path: Path, name: str
) -> None:
    path = tmp_path / name
    path.write_bytes(NOT_TEXT[name][0]())
    with pytest.raises(PlayerListError, match="not a text file"):
        load_participants(
            client, campaign, path, brand=BRAND, journal=tmp_path / "j.sqlite", progress=False
        )
    assert participant_requests(fresh_sandbox) == []
    assert fresh_sandbox.state.participants(campaign) == {}


@pytest.mark.parametrize("name", sorted(NOT_TEXT))
def test_cli_exits_2_with_one_line(
    fresh_sandbox: RunningSandbox,
    client: Client,
    campaign: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
) -> None:
    path = tmp_path / name
    path.write_bytes(NOT_TEXT[name][0]())
    monkeypatch.chdir(tmp_path)
    env = {**cli_env(fresh_sandbox), "GPTOOLS_JOURNAL_DIR": str(tmp_path / "journals")}
    result = CliRunner().invoke(
        cli,
        [
            "participants",
            "load",
            str(path),
            "--campaign",
            campaign,
            "--brand",
            str(BRAND),
            "--no-progress",
        ],
        env=env,
    )
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and "not a text file" in lines[0]
    assert "encoding=" not in lines[0]
    assert participant_requests(fresh_sandbox) == []
    assert not (tmp_path / f"{path.stem}.rejects.csv").exists()


def test_latin1_is_read_when_named(tmp_path: Path) -> None:
    path = tmp_path / "latin1.csv"
    path.write_bytes(_latin1_only())
    source = open_source(path, encoding="latin-1")
    assert [r.raw for r in source.rows()][:2] == ["ab\x81c", "d\x9de"]


def test_a_few_control_characters_are_rows_not_a_refusal(tmp_path: Path) -> None:
    path = tmp_path / "ids.csv"
    path.write_bytes(b"playerId\n" + b"".join(b"p-%d\n" % i for i in range(40)) + b"bad\x07id\n")
    assert open_source(path).details["encoding"] == "utf-8"


def test_excel_keeps_working(
    fresh_sandbox: RunningSandbox, client: Client, campaign: str, tmp_path: Path
) -> None:
    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    for row in (["playerId", "name"], ["x-1", "Ann"], ["x-2", "Bob"]):
        sheet.append(row)
    path = tmp_path / "players.xlsx"
    book.save(path)
    summary = load_participants(
        client, campaign, path, brand=BRAND, journal=tmp_path / "j.sqlite", progress=False
    )
    assert (summary.rows, summary.loaded) == (2, 2)
    assert fresh_sandbox.state.participants(campaign) == {"x-1": 1, "x-2": 1}
