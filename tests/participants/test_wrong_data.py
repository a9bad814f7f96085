"""Issue 23 items 3-7: wrong data never passes as success.

Header and title rows are detected or the load stops and asks; an unclosed quote is an
error naming its line; a column past the last is bad input; outputs are checked before
anything is sent; rejects files are safe to open in a spreadsheet.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import openpyxl
import pytest
from click.testing import CliRunner

from gptools.cli import cli
from gptools.participants import PlayerListError, load_participants
from gptools.participants._sources import open_source
from gptools.sandbox import RunningSandbox
from tests.participants.conftest import BRAND, make_client, participant_requests, source_rows

#: What OWASP names as the first characters of a cell a spreadsheet may run.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _xlsx(path: Path, rows: list[list[object]]) -> Path:
    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    for row in rows:
        sheet.append(row)
    book.save(path)
    return path


def _load(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["participants", "load", *args, "--no-progress"], env=env)
    return result.exit_code, result.stdout, result.stderr


# -- item 3: header and title rows ------------------------------------------------------


def test_a_login_header_is_not_a_player(tmp_path: Path) -> None:
    path = tmp_path / "login.csv"
    path.write_text("login\nu-1\nu-2\n", encoding="utf-8")
    assert source_rows(path) == [(2, "u-1"), (3, "u-2")]
    assert open_source(path).details["header"] == "yes"


@pytest.mark.parametrize(
    "name", ["Spieler", "joueur", "USUARIO", "Nome utente", "用户名", "Логин", "External ID", "uid"]
)
def test_header_names_in_common_languages(tmp_path: Path, name: str) -> None:
    path = tmp_path / "h.csv"
    path.write_text(f"{name}\np-1\np-2\n", encoding="utf-8")
    assert source_rows(path) == [(2, "p-1"), (3, "p-2")]


def test_a_first_row_unlike_the_rest_stops_and_asks(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("Player export 2026\np-1\np-2\np-3\n", encoding="utf-8")
    with pytest.raises(PlayerListError, match=r"header=True or header=False.*skip_rows=N"):
        open_source(path)
    assert source_rows(path, skip_rows=1) == [(2, "p-1"), (3, "p-2"), (4, "p-3")]
    assert source_rows(path, header=True) == [(2, "p-1"), (3, "p-2"), (4, "p-3")]
    assert source_rows(path, header=False)[0] == (1, "Player export 2026")


def test_a_generic_name_above_ids_like_it_is_ambiguous(tmp_path: Path) -> None:
    path = tmp_path / "users.csv"
    path.write_text("user\nalice\nbob\n", encoding="utf-8")
    with pytest.raises(PlayerListError, match="cannot tell whether"):
        open_source(path)
    assert source_rows(path, header=True) == [(2, "alice"), (3, "bob")]
    # Ids like each other, with no header name: read as they are.
    plain = tmp_path / "plain.csv"
    plain.write_text("alice\nbob\ncarol\n", encoding="utf-8")
    assert source_rows(plain) == [(1, "alice"), (2, "bob"), (3, "carol")]


def test_excel_title_rows_above_a_header_are_skipped(tmp_path: Path) -> None:
    path = _xlsx(
        tmp_path / "t.xlsx",
        [["Player export 2026"], ["generated 2026-03-01 10:00"], ["playerId", "name"]]
        + [[f"p-{i}", f"N {i}"] for i in range(1, 4)],
    )
    src = open_source(path)
    assert (src.details["header"], src.details["skipped_rows"]) == ("yes", "2")
    assert source_rows(path) == [(4, "p-1"), (5, "p-2"), (6, "p-3")]


def test_excel_titles_without_a_header_stop_before_sending(tmp_path: Path) -> None:
    path = _xlsx(tmp_path / "r.xlsx", [["Report"], ["generated today"], ["p-1"], ["p-2"]])
    with pytest.raises(PlayerListError, match=r"'Report', 'generated today'"):
        open_source(path)
    assert source_rows(path, skip_rows=2, header=False) == [(3, "p-1"), (4, "p-2")]


def test_cli_asks_for_header_options_and_sends_nothing(
    env: dict[str, str], campaign: str, fresh_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    path = _xlsx(tmp_path / "r.xlsx", [["Report"], ["generated today"], ["p-1"], ["p-2"]])
    code, out, err = _load(env, str(path), "--campaign", campaign, "--brand", str(BRAND))
    assert (code, out) == (2, "")
    assert "--header or --no-header" in err and "--skip-rows N" in err
    assert "header=" not in err and "Traceback" not in err
    assert participant_requests(fresh_sandbox) == []
    assert not list((tmp_path / "journals").glob("*.sqlite"))
    code, out, err = _load(
        env, str(path), "--campaign", campaign, "--brand", str(BRAND), "--skip-rows", "2",
        "--no-header", "--json",
    )  # fmt: skip
    assert code == 0, err
    assert fresh_sandbox.state.participants(campaign) == {"p-1": 1, "p-2": 1}


# -- item 4: an unclosed quote ----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ('p-1\n"p-2,B\np-3\np-4\n', 2),
        ('playerId,note\np-1,x\np-2,"abc\np-3,y\np-4,z\n', 3),
        # Closed, but the rows it swallowed hold delimiters: they were rows.
        ('playerId,note\np-1,"abc\np-2,y\np-3,"done"\np-4,z\n', 2),
        # Open at the end of the file, in a list of one column.
        ('p-1\n"p-2\np-3\np-4\n', 2),
        # Open at the end of the file after a doubled quote, which is a quote inside one.
        ('playerId\np-1\n"p-2 ""a""\np-3\n', 3),
        # Open at the end of the file, without a final line break.
        ('playerId\np-1\n"p-2\np-3', 3),
    ],
)
def test_an_unclosed_quote_names_its_line_and_sends_nothing(
    client: object,
    campaign: str,
    fresh_sandbox: RunningSandbox,
    tmp_path: Path,
    text: str,
    line: int,
) -> None:
    path = tmp_path / "q.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(PlayerListError, match=rf"q\.csv, line {line}: a quote opened on this line"):
        source_rows(path)
    with make_client(fresh_sandbox) as c, pytest.raises(PlayerListError):
        load_participants(c, campaign, path, brand=BRAND, journal=tmp_path / "j", progress=False)
    assert participant_requests(fresh_sandbox) == []
    assert not (tmp_path / "j").exists()


def test_a_name_on_two_lines_is_still_one_row(tmp_path: Path) -> None:
    path = tmp_path / "n.csv"
    path.write_text('name,playerId\n"Anna\nMarie",p-1\nBo,p-2\n', encoding="utf-8")
    assert source_rows(path) == [(2, "p-1"), (4, "p-2")]


# -- item 5: a column past the last -----------------------------------------------------


def test_a_column_past_the_last_is_bad_input(
    env: dict[str, str], campaign: str, fresh_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    path = tmp_path / "two.csv"
    path.write_text("playerId,name\np-1,A\np-2,B\n", encoding="utf-8")
    with pytest.raises(PlayerListError, match="there is no column 7: the rows have 2 column"):
        open_source(path, column=7)
    code, out, err = _load(
        env, str(path), "--campaign", campaign, "--brand", str(BRAND), "--column", "7"
    )
    assert (code, out) == (2, "") and "no column 7" in err
    assert participant_requests(fresh_sandbox) == []
    xlsx = _xlsx(tmp_path / "two.xlsx", [["playerId", "name"], ["p-1", "A"]])
    with pytest.raises(PlayerListError, match="there is no column 2"):
        open_source(xlsx, column=2)


# -- item 6: outputs --------------------------------------------------------------------


def test_no_rejects_no_rejects_file(env: dict[str, str], campaign: str, tmp_path: Path) -> None:
    path = tmp_path / "clean.csv"
    path.write_text("playerId\np-1\np-2\n", encoding="utf-8")
    code, out, _ = _load(env, str(path), "--campaign", campaign, "--brand", str(BRAND), "--json")
    assert code == 0
    assert json.loads(out)["rejects_file"] is None
    assert not (tmp_path / "clean.rejects.csv").exists()


def test_an_unwritable_rejects_file_stops_before_sending(
    env: dict[str, str], campaign: str, fresh_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    path = tmp_path / "semi.csv"
    path.write_text("playerId\np-1\n\n", encoding="utf-8")
    blocker = tmp_path / "a-file"
    blocker.write_text("x", encoding="utf-8")
    code, out, err = _load(
        env, str(path), "--campaign", campaign, "--brand", str(BRAND),
        "--rejects", str(blocker / "semi.rejects.csv"),
    )  # fmt: skip
    assert (code, out) == (2, "")
    assert "cannot write the rejects file" in err and "nothing was sent" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert participant_requests(fresh_sandbox) == []


def test_a_rejects_file_that_fails_to_write_leaves_the_result_standing(
    env: dict[str, str], campaign: str, fresh_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    path = tmp_path / "semi.csv"
    path.write_text("playerId\np-1\n\n", encoding="utf-8")
    # Writable when checked, full when written: the failure comes after the load.
    code, out, err = _load(
        env, str(path), "--campaign", campaign, "--brand", str(BRAND),
        "--rejects", "/dev/full", "--json",
    )  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["loaded"], doc["rejected"], doc["rejects_file"]) == (1, 1, None)
    assert "/dev/full" in doc["rejects_error"]
    assert "cannot write the rejects file /dev/full" in err and "Traceback" not in err
    assert fresh_sandbox.state.participants(campaign) == {"p-1": 1}


# -- item 7: spreadsheet-safe rejects ---------------------------------------------------


def test_rejects_are_safe_in_a_spreadsheet_and_load_back(
    client: object, campaign: str, fresh_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    long = "x" * 300
    raws = [f"{start}{long}" for start in ("=", "+", "-", "@")] + ["\t=1+1\x07", "\r@p\x07"]
    rejects = tmp_path / "bad.rejects.csv"
    with make_client(fresh_sandbox) as c:
        summary = load_participants(
            c,
            campaign,
            [*raws, "plain\x07", "p-1"],
            brand=BRAND,
            journal=tmp_path / "j",
            rejects=rejects,
            progress=False,
        )
    assert summary.rejected == len(raws) + 1
    with rejects.open(encoding="utf-8", newline="") as fh:
        cells = [row[1] for row in list(csv.reader(fh))[1:]]
    assert cells[:-1] == ["'" + raw for raw in raws]
    assert cells[-1] == "plain\x07"  # nothing a spreadsheet runs: written as it is
    assert all(not c.startswith(FORMULA_STARTS) for c in cells)
    # Fed back to the loader, the ids are read as they were.
    assert [raw for _, raw in source_rows(rejects)] == [*raws, "plain\x07"]
