"""The stored notebooks read well (nbval checks that a run reproduces these outputs):
numbered titles, no bare tuples, tables with text left-aligned, no NaN or <NA> shown,
seconds to 0.001 and milliseconds to 0.1."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import nbformat
import pytest

from gptools.display import MISSING, _column_decimals

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9]*.ipynb"))
NUMBER = re.compile(r"^[-+]?[\d,]*\.?\d+(e[-+]?\d+)?$")
MISSING_SHOWN = ("NaN", "<NA>", "NaT", "None", "nan")


class _Tables(HTMLParser):
    """Every table cell of an HTML output: (header of its column, text, style)."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: list[tuple[str, str, str]] = []
        self._headers: list[str] = []
        self._row: list[tuple[str, str, str]] = []
        self._cell: tuple[str, str] | None = None  # tag, style
        self._text = ""
        self._in_head = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self._headers = []
        elif tag == "thead":
            self._in_head = True
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = (tag, dict(attrs).get("style") or "")
            self._text = ""

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._text += data

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self._row.append((self._cell[0], self._text.strip(), self._cell[1]))
            self._cell = None
        elif tag == "tr":
            if self._in_head:
                self._headers = [text for _, text, _ in self._row]
            else:
                body = [c for c in self._row if c[0] == "td"]
                heads = self._headers[-len(body) :] if body else []
                self.cells += [
                    (h, text, style) for h, (_, text, style) in zip(heads, body, strict=False)
                ]
        elif tag == "thead":
            self._in_head = False


def _outputs(path: Path) -> list[tuple[int, Any]]:
    nb = nbformat.read(path, as_version=4)
    return [
        (i, o) for i, cell in enumerate(nb.cells) if cell.cell_type == "code" for o in cell.outputs
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_title_is_numbered(path: Path) -> None:
    first = nbformat.read(path, as_version=4).cells[0]
    assert first.cell_type == "markdown"
    assert first.source.startswith(f"# {path.name[:2]} · "), first.source.splitlines()[0]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_bare_tuple_is_a_cell_output(path: Path) -> None:
    for i, out in _outputs(path):
        data = out.get("data", {})
        if out.output_type == "execute_result" and set(data) == {"text/plain"}:
            text = data["text/plain"].strip()
            assert not (text.startswith("(") and text.endswith(")")), f"cell {i}: {text}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_tables_align_text_left_show_no_nan_and_round_by_unit(path: Path) -> None:
    for i, out in _outputs(path):
        page = out.get("data", {}).get("text/html")
        if not page:
            continue
        tables = _Tables()
        tables.feed(page)
        for header, text, style in tables.cells:
            where = f"cell {i}, column {header!r}: {text!r}"
            assert text not in MISSING_SHOWN, where
            if text and text != MISSING and not NUMBER.match(text):
                assert "text-align:left" in style.replace(" ", ""), where
            places = _column_decimals(header)
            if places is not None and NUMBER.match(text) and "." in text:
                assert len(text.split(".")[1]) <= places, where
