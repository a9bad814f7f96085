"""Tables a person reads: alignment, rounding by unit, missing values, escaping."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from html.parser import HTMLParser

import numpy as np
import pandas as pd

from gptools.display import MISSING, cell_text, html_table, readable


class _Cells(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.cells: list[tuple[str, str]] = []
        self._align: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("th", "td"):
            self._align = dict(attrs).get("style") or ""

    def handle_data(self, data: str) -> None:
        if self._align is not None:
            self.cells.append((data, self._align))
            self._align = None


FRAME = pd.DataFrame(
    {
        "game_id": ["golden-pharaoh", None, "<b>x</b>"],
        "n": [1, 2, 3],
        "median_s": [30.016045, 60.050038, np.nan],
        "p99_ms": [558.9123, 1.04, 3.0],
        "bet_total": [Decimal("12.50"), Decimal("1800"), pd.NA],
        "first_at": [
            datetime(2026, 3, 6, 1, 23, 4, 195572, tzinfo=UTC),
            pd.NaT,
            datetime(2026, 3, 6, 1, 23, 5, tzinfo=UTC),
        ],
    }
)


def test_cells_rounded_by_unit_and_missing_as_a_dash() -> None:
    shown = readable(FRAME).columns()
    by_name = {name: (numeric, cells) for name, numeric, cells in shown}
    assert by_name["median_s"] == (True, ["30.016", "60.050", MISSING])
    assert by_name["p99_ms"] == (True, ["558.9", "1.0", "3.0"])
    assert by_name["bet_total"] == (True, ["12.50", "1800", MISSING])
    assert by_name["game_id"] == (False, ["golden-pharaoh", MISSING, "<b>x</b>"])
    assert by_name["first_at"][1] == [
        "2026-03-06 01:23:04.196 UTC",
        MISSING,
        "2026-03-06 01:23:05 UTC",
    ]
    assert cell_text(0.0061) == "0.0061" and cell_text(float("nan")) == MISSING
    # The frame itself keeps its raw values.
    assert FRAME.at[0, "median_s"] == 30.016045


def test_text_left_numbers_right_in_html_and_text() -> None:
    parser = _Cells()
    parser.feed(html_table(FRAME))
    cells = dict(parser.cells)
    assert "left" in cells["game_id"] and "left" in cells["golden-pharaoh"]
    assert "right" in cells["median_s"] and "right" in cells["30.016"]
    assert "&lt;b&gt;" in html_table(FRAME) and "<b>x" not in html_table(FRAME)
    lines = str(readable(FRAME[["game_id", "n"]])).splitlines()
    assert lines[0] == "game_id         n"
    assert lines[1] == "golden-pharaoh  1"
    assert lines[2] == "–               2"
    assert "NaN" not in str(readable(FRAME)) and "<NA>" not in str(readable(FRAME))


def test_empty_frame_says_so() -> None:
    empty = pd.DataFrame({"action_id": [], "time_left_s": []})
    assert str(readable(empty)).splitlines() == ["action_id  time_left_s", "(no rows)"]
    assert "<th" in readable(empty)._repr_html_()


def test_the_package_tables_use_the_same_rules() -> None:
    from gptools.campaigns import budget
    from tests.campaigns.conftest import make_plan

    parser = _Cells()
    parser.feed(budget(make_plan())._repr_html_())
    cells = dict(parser.cells)
    assert "left" in cells["currency"] and "left" in cells["KWD"]
    assert "right" in cells["max_exposure"] and "right" in cells["5000.000"]


def test_a_long_id_may_break_anywhere_so_the_table_fits_the_page() -> None:
    """Issue 23, item 18: a 140-character id (notebook 03's rejects table) wraps inside its
    cell instead of stretching the table; text with spaces wraps by itself."""
    import json
    import re
    from pathlib import Path

    from gptools.display import html_table

    long_id = "p-" + "x" * 138
    sentence = " ".join(["word"] * 40)
    table = html_table(pd.DataFrame({"raw": [long_id, sentence, "p-1"]}))
    cells = re.findall(r"<td style='([^']*)'>([^<]*)</td>", table)
    assert cells == [
        ("text-align:left;overflow-wrap:anywhere", long_id),
        ("text-align:left", sentence),
        ("text-align:left", "p-1"),
    ]
    notebook = Path(__file__).resolve().parents[1] / "notebooks" / "03_bulk_participants.ipynb"
    shown = json.dumps(json.loads(notebook.read_text(encoding="utf-8")))
    assert "overflow-wrap:anywhere'>p-xxxxxxxx" in shown
