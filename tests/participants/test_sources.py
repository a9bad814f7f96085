"""Sources: every file format, encoding, delimiter and in-memory kind reads the same rows."""

from __future__ import annotations

import codecs
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import openpyxl
import pandas as pd
import pytest

from gptools.participants import PlayerListError
from gptools.participants._sources import PlayerRow, open_source

IDS = ["p-1", "jöhn-7", "€uro-9", "p-4"]


def _rows(src: object, **kw: object) -> list[PlayerRow]:
    source = open_source(src, **kw)  # type: ignore[arg-type]
    try:
        return list(source.rows())
    finally:
        source.close()


@pytest.mark.parametrize(
    ("encoding", "prefix", "detected"),
    [
        ("utf-8", b"", "utf-8"),
        ("utf-8", codecs.BOM_UTF8, "utf-8-sig"),
        ("utf-16-le", codecs.BOM_UTF16_LE, "utf-16"),
        ("utf-16-be", codecs.BOM_UTF16_BE, "utf-16"),
        ("utf-16-le", b"", "utf-16-le"),
        ("utf-16-be", b"", "utf-16-be"),
        ("cp1252", b"", "cp1252"),
    ],
)
def test_encodings_are_detected(
    tmp_path: Path, encoding: str, prefix: bytes, detected: str
) -> None:
    path = tmp_path / "players.csv"
    text = "name,playerId\r\n" + "".join(f"n{i},{pid}\r\n" for i, pid in enumerate(IDS))
    path.write_bytes(prefix + text.encode(encoding))
    source = open_source(path)
    assert source.details["encoding"] == detected
    assert [r.raw for r in source.rows()] == IDS
    assert [r.line for r in source.rows()] == [2, 3, 4, 5]


def test_bytes_undefined_in_cp1252_are_read_as_latin1_only_when_named(tmp_path: Path) -> None:
    path = tmp_path / "odd.csv"
    path.write_bytes(b"playerId\nab\x81c\n" + b"".join(b"p-%d\n" % i for i in range(9)))
    with pytest.raises(PlayerListError, match="not a text file"):
        open_source(path)
    source = open_source(path, encoding="latin-1")
    assert source.details["encoding"] == "latin-1"
    assert next(r.raw for r in source.rows()) == "ab\x81c"


@pytest.mark.parametrize(
    ("delimiter", "suffix"),
    [(",", ".csv"), ("\t", ".tsv"), ("\t", ".txt"), (";", ".csv"), ("|", ".csv")],
)
def test_delimiters_are_detected(tmp_path: Path, delimiter: str, suffix: str) -> None:
    path = tmp_path / f"players{suffix}"
    lines = [["country", "playerId", "segment"]] + [["MT", pid, "vip"] for pid in IDS]
    path.write_text("\n".join(delimiter.join(cells) for cells in lines) + "\n", encoding="utf-8")
    source = open_source(path)
    assert source.details["delimiter"] == delimiter
    assert source.details["column"] == "playerId"
    assert [r.raw for r in source.rows()] == IDS


def test_quoted_fields_crlf_and_line_numbers(tmp_path: Path) -> None:
    path = tmp_path / "quoted.csv"
    path.write_bytes(
        b"name,playerId,note\r\n"
        b'"Smith, John","p-1","says ""hi"""\r\n'
        b'"Anna\r\nMarie",p-2,x\r\n'
        b'Bob,"p,3",y\r\n'
        b"Short\r\n"
        b"\r\n"
        b"Eve,p-5,z\r\n"
    )
    assert _rows(path) == [
        PlayerRow(2, "p-1"),
        PlayerRow(3, "p-2"),  # the record starts on line 3 and ends on line 4
        PlayerRow(5, "p,3"),
        PlayerRow(6, None),  # no field in the playerId column
        PlayerRow(7, ""),  # a blank line
        PlayerRow(8, "p-5"),
    ]


def test_headerless_single_column_keeps_commas(tmp_path: Path) -> None:
    path = tmp_path / "ids.txt"
    path.write_bytes(b'p-1\nweird,id\n"quoted"\nsemi;colon\n')
    source = open_source(path)
    assert source.details["header"] == "no"
    assert [r.raw for r in source.rows()] == ["p-1", "weird,id", "quoted", "semi;colon"]


def test_single_column_with_header(tmp_path: Path) -> None:
    path = tmp_path / "ids.csv"
    path.write_text("PLAYER_ID\np-1\np-2\n", encoding="utf-8")
    assert _rows(path) == [PlayerRow(2, "p-1"), PlayerRow(3, "p-2")]


@pytest.mark.parametrize(
    "header",
    [
        "playerId",
        "PLAYERID",
        "player_id",
        "Player ID",
        "external-player-id",
        "externalPlayerId",
        "customer_id",
    ],
)
def test_header_names_are_case_and_separator_insensitive(tmp_path: Path, header: str) -> None:
    path = tmp_path / "h.csv"
    path.write_text(f"name,{header},x\nA,p-1,1\n", encoding="utf-8")
    assert _rows(path) == [PlayerRow(2, "p-1")]


def test_the_more_specific_header_wins(tmp_path: Path) -> None:
    path = tmp_path / "h.csv"
    path.write_text("id,name,playerId\n7,A,p-1\n", encoding="utf-8")
    assert _rows(path) == [PlayerRow(2, "p-1")]


def test_user_named_column_by_name_and_position(tmp_path: Path) -> None:
    path = tmp_path / "h.csv"
    path.write_text("login,name\nu-1,A\nu-2,B\n", encoding="utf-8")
    assert [r.raw for r in _rows(path, column="LOGIN")] == ["u-1", "u-2"]
    assert [r.raw for r in _rows(path, column=1)] == ["name", "A", "B"]
    with pytest.raises(PlayerListError, match=r"h\.csv: no column named 'email'.*'login'"):
        open_source(path, column="email")


def test_unknown_header_in_a_multi_column_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "h.csv"
    path.write_text("handle,name\nu-1,A\n", encoding="utf-8")
    with pytest.raises(
        PlayerListError, match=r"h\.csv, line 1: no player-id column.*column=\.\.\."
    ):
        open_source(path)


def test_explicit_encoding_and_delimiter(tmp_path: Path) -> None:
    path = tmp_path / "h.csv"
    path.write_bytes("playerId;x\nj\xf6hn;1\n".encode("latin-1"))
    assert [r.raw for r in _rows(path, encoding="latin-1", delimiter=";")] == ["jöhn"]
    with pytest.raises(PlayerListError, match="unknown encoding 'nope'"):
        open_source(path, encoding="nope")
    with pytest.raises(PlayerListError, match=r"not valid utf-8.*encoding="):
        _rows(path, encoding="utf-8", delimiter=";")


def test_bad_paths(tmp_path: Path) -> None:
    with pytest.raises(PlayerListError, match="no such file"):
        open_source(tmp_path / "missing.csv")
    with pytest.raises(PlayerListError, match="is a directory"):
        open_source(tmp_path)
    old = tmp_path / "old.xls"
    old.write_bytes(b"\xd0\xcf\x11\xe0")
    with pytest.raises(PlayerListError, match=r"\.xls workbooks are not supported"):
        open_source(old)
    broken = tmp_path / "broken.xlsx"
    broken.write_bytes(b"not a zip")
    with pytest.raises(PlayerListError, match="cannot open as an Excel workbook"):
        open_source(broken)


def test_excel_streams_rows_with_numbers_as_text(tmp_path: Path) -> None:
    path = tmp_path / "players.xlsx"
    book = openpyxl.Workbook()
    first = book.active
    first.title = "Summary"
    first.append(["nothing here"])
    sheet = book.create_sheet("Players")
    sheet.append(["Name", "Player Id"])
    sheet.append(["A", 12345])
    sheet.append(["B", "p-2"])
    sheet.append(["C", None])
    sheet.append(["D", 7.0])
    book.save(path)
    source = open_source(path, sheet="Players")
    assert source.details == {
        "kind": "excel",
        "sheet": "Players",
        "column": "Player Id",
        "header": "yes",
    }
    assert list(source.rows()) == [
        PlayerRow(2, "12345"),
        PlayerRow(3, "p-2"),
        PlayerRow(4, ""),
        PlayerRow(5, "7"),
    ]
    assert [r.raw for r in _rows(path, sheet=1)] == ["12345", "p-2", "", "7"]
    assert [r.raw for r in _rows(path)] == ["nothing here"]
    with pytest.raises(PlayerListError, match=r"no sheet 'Nope'.*'Summary', 'Players'"):
        open_source(path, sheet="Nope")


def test_dataframe_series_and_iterables() -> None:
    frame = pd.DataFrame({"name": ["A", "B", "C"], "externalPlayerId": [101, None, 103]})
    assert [r.raw for r in _rows(frame)] == ["101", "", "103"]
    assert [r.raw for r in _rows(pd.Series(["a", None, 3]))] == ["a", "", "3"]
    assert _rows(["x", " y "]) == [PlayerRow(1, "x"), PlayerRow(2, " y ")]
    assert [r.raw for r in _rows(("a", 2))] == ["a", "2"]
    assert [r.raw for r in _rows({"b", "a", "c"})] == ["a", "b", "c"]
    with pytest.raises(PlayerListError, match="no player-id column among"):
        open_source(pd.DataFrame({"a": [1], "b": [2]}))
    assert [r.raw for r in _rows(pd.DataFrame({"whatever": ["z"]}))] == ["z"]


def test_a_one_shot_iterator_is_spooled_and_cleaned_up() -> None:
    def gen() -> Iterator[str]:
        yield from ("g-1", "g-2")

    source = open_source(gen())
    assert [r.raw for r in source.rows()] == ["g-1", "g-2"]
    assert [r.raw for r in source.rows()] == ["g-1", "g-2"]  # a second pass works
    assert source.fingerprint == open_source(["g-1", "g-2"]).fingerprint
    spool = source.spool  # type: ignore[attr-defined]
    assert spool.exists()
    source.close()
    assert not spool.exists()


def test_fingerprint_follows_content_and_options(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text("playerId\np-1\n", encoding="utf-8")
    one = open_source(path).fingerprint
    assert open_source(path).fingerprint == one
    assert open_source(path, column="playerId").fingerprint != one
    path.write_text("playerId\np-2\n", encoding="utf-8")
    assert open_source(path).fingerprint != one


def test_reading_a_large_file_keeps_memory_flat(tmp_path: Path) -> None:
    path = tmp_path / "big.csv"
    with path.open("w", encoding="utf-8") as fh:
        fh.write("playerId,name\n")
        for i in range(300_000):
            fh.write(f"player-{i:08d},Name {i}\n")
    assert path.stat().st_size > 7_000_000
    source = open_source(path)
    tracemalloc.start()
    try:
        count = sum(1 for _ in source.rows())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 300_000
    assert peak < 2_000_000, f"reading used {peak} bytes at its peak"
