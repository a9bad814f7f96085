"""Issue 35 item 6: the loader's header rules.

An explicit ``--header``/``--no-header`` always wins; a header name below rows of ids is
that row's ``header_row`` rejection, never a stop; a line break inside a properly closed
quoted field is that row's problem (``control_character``), while a quote that runs to the
end of the file or swallows rows with delimiters stops the load.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gptools.cli import cli
from gptools.participants import PlayerListError, load_participants
from gptools.participants._sources import MAX_TITLE_ROWS, open_source
from gptools.sandbox import RunningSandbox
from tests.participants.conftest import BRAND, make_client, source_rows


def _load(env: dict[str, str], path: Path, campaign: str, *more: str) -> dict[str, object]:
    args = [
        "participants", "load", str(path), "--campaign", campaign, "--brand", str(BRAND),
        "--no-progress", "--json", *more,
    ]  # fmt: skip
    result = CliRunner().invoke(cli, args, env=env)
    assert result.exit_code == 0, result.stderr
    doc: dict[str, object] = json.loads(result.stdout)
    return doc


def _rejects(path: Path) -> list[list[str]]:
    with path.open(encoding="utf-8", newline="") as fh:
        return list(csv.reader(fh))[1:]


# -- a header name below ids --------------------------------------------------------------


def test_a_header_name_below_ids_is_a_rejected_row_and_the_rest_loads(
    env: dict[str, str], campaign: str, fresh_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    path = tmp_path / "ids.csv"
    path.write_text("p-1\np-2\nplayers\np-3\np-4\n", encoding="utf-8")
    assert open_source(path).details["header"] == "no"
    doc = _load(env, path, campaign)
    assert (doc["rows"], doc["loaded"], doc["rejected"]) == (5, 4, 1)
    assert doc["rejected_by_reason"] == {"header_row": 1}
    assert fresh_sandbox.state.participants(campaign) == {f"p-{i}": 1 for i in range(1, 5)}
    [row] = _rejects(tmp_path / "ids.rejects.csv")
    assert row[:3] == ["3", "players", "header_row"]


@pytest.mark.parametrize(
    ("text", "options", "expected"),
    [
        # Several columns, the column given by position: the same rule.
        ("p-1,A\np-2,B\nplayerId,name\np-3,C\n", {"column": 0}, ["p-1", "p-2", "playerId", "p-3"]),
        # A user-name list with the header word on its third row.
        ("alice\nbob\nusers\ncarol\n", {}, ["alice", "bob", "users", "carol"]),
    ],
)
def test_a_header_name_below_ids_reads_as_a_row(
    tmp_path: Path, text: str, options: dict[str, object], expected: list[str]
) -> None:
    path = tmp_path / "ids.csv"
    path.write_text(text, encoding="utf-8")
    assert [raw for _, raw in source_rows(path, **options)] == expected


def test_titles_above_a_header_are_still_skipped_and_a_mix_still_asks(tmp_path: Path) -> None:
    titled = tmp_path / "titled.csv"
    titled.write_text("Player export 2026\ngenerated today\nplayerId\np-1\np-2\n", "utf-8")
    assert source_rows(titled) == [(4, "p-1"), (5, "p-2")]
    # A title and an id-like row above the header: neither reading is sure, so it asks.
    mixed = tmp_path / "mixed.csv"
    mixed.write_text("Export\n2026-03-01\nplayerId\np-1\np-2\n", "utf-8")
    with pytest.raises(PlayerListError, match="cannot tell whether"):
        open_source(mixed)


TITLES = ("Player export 2026", "generated today", "by the back office", "spring campaign",
          "all brands", "page one")  # fmt: skip


def test_at_most_five_title_rows_stand_above_a_header(tmp_path: Path) -> None:
    # Five title rows: the sixth row is the header, skipped with them.
    five = tmp_path / "five.csv"
    five.write_text("\n".join([*TITLES[:5], "playerId", "p-1", "p-2"]) + "\n", "utf-8")
    assert MAX_TITLE_ROWS == 5
    assert source_rows(five) == [(7, "p-1"), (8, "p-2")]
    # Six: no header is looked for on the seventh row; every row is a row of the list
    # (validation judges each one: none is skipped unseen).
    six = tmp_path / "six.csv"
    six.write_text("\n".join([*TITLES, "playerId", "p-1", "p-2"]) + "\n", "utf-8")
    assert open_source(six).details["header"] == "no"
    assert source_rows(six) == [(i + 1, t) for i, t in enumerate(TITLES)] + [
        (7, "playerId"), (8, "p-1"), (9, "p-2"),
    ]  # fmt: skip


# -- an explicit choice wins --------------------------------------------------------------


def test_no_header_makes_a_header_word_an_id(
    env: dict[str, str], campaign: str, fresh_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    path = tmp_path / "users.csv"
    path.write_text("user\nalice\nbob\nplayers\n", encoding="utf-8")
    doc = _load(env, path, campaign, "--no-header")
    assert (doc["rows"], doc["loaded"], doc["rejected"]) == (4, 4, 0)
    assert fresh_sandbox.state.participants(campaign) == {
        "user": 1, "alice": 1, "bob": 1, "players": 1,
    }  # fmt: skip


def test_header_takes_the_first_row_whatever_it_looks_like(
    client: object, campaign: str, fresh_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    path = tmp_path / "ids.csv"
    path.write_text("p-0\np-1\np-2\n", encoding="utf-8")
    assert source_rows(path, header=True) == [(2, "p-1"), (3, "p-2")]
    with make_client(fresh_sandbox) as c:
        summary = load_participants(
            c, campaign, path, brand=BRAND, header=True, journal=tmp_path / "j", progress=False
        )
    assert (summary.rows, summary.loaded) == (2, 2)
    assert fresh_sandbox.state.participants(campaign) == {"p-1": 1, "p-2": 1}


# -- line breaks inside quotes ------------------------------------------------------------


def test_a_closed_quoted_id_with_a_line_break_is_that_rows_rejection(
    env: dict[str, str], campaign: str, fresh_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    path = tmp_path / "q.csv"
    path.write_text('p-1\n"p-2\nx"\np-3\n', encoding="utf-8")
    assert source_rows(path) == [(1, "p-1"), (2, "p-2\nx"), (4, "p-3")]
    doc = _load(env, path, campaign)
    assert (doc["rows"], doc["loaded"], doc["rejected"]) == (3, 2, 1)
    assert doc["rejected_by_reason"] == {"control_character": 1}
    assert fresh_sandbox.state.participants(campaign) == {"p-1": 1, "p-3": 1}
    [row] = _rejects(tmp_path / "q.rejects.csv")
    assert row[:3] == ["2", "p-2\nx", "control_character"]
    assert "U+000A (LINE FEED)" in row[3]


def test_a_closed_quote_in_the_id_column_of_a_table_is_that_rows_rejection(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.csv"
    path.write_text(
        'playerId,name\n"p-\n1",A\np-2,"B\nb"\np-3,"say ""hi""\nnow"\np-4,C\n', encoding="utf-8"
    )
    assert source_rows(path) == [(2, "p-\n1"), (4, "p-2"), (6, "p-3"), (8, "p-4")]


# A quote that runs to the end of the file or swallows rows with delimiters still stops
# the load: test_wrong_data.py's test_an_unclosed_quote_names_its_line_and_sends_nothing.
