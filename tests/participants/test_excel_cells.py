"""Issue 35 item 8: an Excel cell gives the id a person sees in it, never a converted value.

Its displayed text under its number format (``000042`` stays ``000042``), or a
``cell_type`` rejection naming the cell, its sheet and what it holds (a date, a boolean,
a fraction, a number past 15 significant digits, an error, a formula without a calculated
value). The workbooks are built here with openpyxl, loaded into the sandbox, and the ids
the server received are compared.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import zipfile
from pathlib import Path

import openpyxl
import pytest
from click.testing import CliRunner

from gptools.cli import cli
from gptools.participants import PlayerListError
from gptools.participants._excel_cells import format_integer
from gptools.participants._sources import open_source
from gptools.sandbox import RunningSandbox
from tests.participants.conftest import BRAND, participant_requests

#: (cell value, number format or None, what the server must receive or the rejection's
#: words), one row each below the header of the sheet ``Players``.
CELLS: list[tuple[object, str | None, str]] = [
    ("p-1", None, "p-1"),
    (42, "000000", "000042"),
    (7, None, "7"),
    (123456, '"P-"000000', "P-123456"),
    (123456789012345, None, "123456789012345"),
    (99.0, "0", "99"),
    (dt.datetime(2030, 1, 2, 3, 4, 5), None, "holds a date (2030-01-02 03:04:05)"),
    (True, None, "holds a boolean (TRUE)"),
    (12.5, None, "holds a fraction (12.5)"),
    (
        1.234567890123457e19,
        None,
        "holds a number of 20 digits (1.234567890123457e+19; a spreadsheet keeps 15 "
        "significant digits, so its last ones are not in the file)",
    ),
    (1234, "#,##0", "holds a number (1234) shown with the number format '#,##0'"),
    ("#N/A", None, "holds an error value (#N/A)"),
    ('=CONCAT("p-","8")', None, 'holds a formula without a calculated value (=CONCAT("p-","8"))'),
    ('=CONCAT("p-","9")', None, "p-9"),  # its calculated value is written in below
]

#: The line of the formula whose calculated value the test writes into the file.
CACHED_LINE = len(CELLS) + 1


def _workbook(path: Path) -> Path:
    """A workbook whose first sheet has no player-id column and whose sheet ``Players``
    holds :data:`CELLS`; the last formula gets the calculated value ``p-9`` (openpyxl
    writes formulas without one, as a program that does not calculate does)."""
    book = openpyxl.Workbook()
    summary = book.active
    assert summary is not None
    summary.title = "Summary"
    summary.append(["total", "region"])
    summary.append([13, "EU"])
    sheet = book.create_sheet("Players")
    sheet.append(["playerId", "name"])
    for line, (value, number_format, _) in enumerate(CELLS, start=2):
        cell = sheet.cell(line, 1)
        cell.value = value
        if number_format is not None:
            cell.number_format = number_format
        sheet.cell(line, 2).value = f"name {line}"
    book.save(path)
    _write_calculated_value(path, f"A{CACHED_LINE}", "p-9")
    return path


def _write_calculated_value(path: Path, ref: str, value: str) -> None:
    with zipfile.ZipFile(path) as old:
        items = {name: old.read(name) for name in old.namelist()}
    name = "xl/worksheets/sheet2.xml"
    xml = items[name].decode("utf-8")
    start = xml.index(f'<c r="{ref}"')
    end = xml.index("</c>", start)
    cell = xml[start:end].replace("<v />", f"<v>{value}</v>").replace(">", ' t="str">', 1)
    items[name] = (xml[:start] + cell + xml[end:]).encode("utf-8")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as new:
        for item, data in items.items():
            new.writestr(item, data)


def _load(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["participants", "load", *args, "--no-progress"], env=env)
    return result.exit_code, result.stdout, result.stderr


def test_the_server_receives_what_the_cells_show_and_the_rest_is_rejected(
    env: dict[str, str], campaign: str, fresh_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    path = _workbook(tmp_path / "players.xlsx")
    rejects = tmp_path / "rejects.csv"
    code, out, err = _load(
        env, str(path), "--campaign", campaign, "--brand", str(BRAND), "--sheet", "Players",
        "--rejects", str(rejects), "--json",
    )  # fmt: skip
    assert code == 0, err
    sent = [expected for value, _, expected in CELLS if "holds" not in expected]
    refused = [(line, e) for line, (_, _, e) in enumerate(CELLS, start=2) if "holds" in e]
    assert fresh_sandbox.state.participants(campaign) == dict.fromkeys(sent, 1)
    doc = json.loads(out)
    assert (doc["rows"], doc["loaded"], doc["rejected"]) == (len(CELLS), len(sent), len(refused))
    assert doc["rejected_by_reason"] == {"cell_type": len(refused)}
    with rejects.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh))[1:]
    assert [(int(r[0]), r[2]) for r in rows] == [(line, "cell_type") for line, _ in refused]
    raws = {int(r[0]): r[1] for r in rows}
    assert (raws[8], raws[9], raws[10], raws[14]) == (
        "2030-01-02 03:04:05", "TRUE", "12.5", "'=CONCAT(\"p-\",\"8\")",
    )  # fmt: skip
    for (line, words), row in zip(refused, rows, strict=True):
        assert row[3].startswith(f"cell A{line} of sheet 'Players' {words}, not a player id")


def test_a_first_sheet_without_an_id_column_suggests_the_sheet_too(
    env: dict[str, str], campaign: str, fresh_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    path = _workbook(tmp_path / "players.xlsx")
    with pytest.raises(PlayerListError, match=r"or choose the sheet with sheet=\.\.\."):
        open_source(path)
    code, out, err = _load(env, str(path), "--campaign", campaign, "--brand", str(BRAND))
    assert (code, out) == (2, "")
    assert err.strip() == (
        f"Error: {path} (sheet 'Summary'), row 1: no player-id column in the header row "
        "['total', 'region']; known names are ['playerId', 'externalPlayerId', 'playerIds', "
        "'player', 'players', 'externalId', 'customerId', 'userId', 'accountId', 'memberId', "
        "'id'] (any case); name it with --column, or choose the sheet with --sheet (the "
        "workbook has ['Summary', 'Players'])"
    )
    assert participant_requests(fresh_sandbox) == []


def test_a_headerless_sheet_reads_displayed_text_in_the_sample_too(tmp_path: Path) -> None:
    path = tmp_path / "ids.xlsx"
    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    for value in (1, 2, 3):
        sheet.append([value])
        sheet.cell(sheet.max_row, 1).number_format = "0000"
    book.save(path)
    src = open_source(path)
    assert [r.raw for r in src.rows()] == ["0001", "0002", "0003"]


@pytest.mark.parametrize(
    ("number", "number_format", "shown"),
    [
        (42, "General", "42"),
        (42, "@", "42"),
        (42, "000000", "000042"),
        (1234567, "000", "1234567"),
        (123456, "000-000", "123-456"),
        (42, '"ID"\\-0000', "ID-0042"),
        (0, "#", ""),
        (0, "0", "0"),
        (-42, "0000", "-0042"),
        (-42, "0;(0)", "(42)"),
        (0, '0;-0;"none"', None),  # a zero shown as text only: no id in it
        (1234, "#,##0", None),
        (1234, "0.00", None),
        (7, "[Red]0", None),
        (45000, "yyyy-mm-dd", None),
    ],
)
def test_number_formats(number: int, number_format: str, shown: str | None) -> None:
    assert format_integer(number, number_format) == shown
