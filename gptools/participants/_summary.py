"""The result of a load: counts that add up, per-row outcomes, the rejects file."""

from __future__ import annotations

import csv
import html
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from gptools._private_files import OutputRefusedError, check_output, open_output
from gptools.participants._journal import read_outcomes
from gptools.participants._sources import REJECTS_COLUMNS, PlayerListError, spreadsheet_safe

if TYPE_CHECKING:
    import pandas as pd


class Outcome(StrEnum):
    """The outcomes a row can end in; every row ends in exactly one (a member equals its
    text)."""

    LOADED = "loaded"
    REJECTED = "rejected"
    DUPLICATE = "duplicate"
    NOT_ATTEMPTED = "not_attempted"


#: The outcomes in :class:`Outcome`'s order.
OUTCOMES: Final = tuple(Outcome)


_FRAME_COLUMNS: Final = ("line", "raw", "player_id", "outcome", "reason_code", "detail")

#: The row counts of :meth:`LoadSummary.counts`, in the order they are shown.
_LOAD_COUNTS: Final = (
    "rows",
    "loaded",
    "loaded_this_run",
    "rejected",
    "duplicate",
    "not_attempted",
)


@dataclass(frozen=True, repr=False)
class LoadSummary:
    """What a load did, read back from its journal when it ended.

    Row accounting: ``rows == loaded + rejected + duplicate + not_attempted`` (see
    :attr:`balanced`). ``not_attempted`` counts ids not yet acknowledged by the server
    (never sent, or sent without an answer); running the same load again sends them.
    Counts cover the whole load, earlier runs included; ``loaded_this_run`` and the
    request counters cover this run only.
    """

    campaign_id: str
    brand: int | None
    source: str
    journal: Path
    rows: int
    loaded: int
    rejected: int
    duplicate: int
    not_attempted: int
    rejected_by_reason: Mapping[str, int] = field(default_factory=dict)
    source_details: Mapping[str, str] = field(default_factory=dict)
    rejects_file: Path | None = None
    loaded_this_run: int = 0
    resumed: bool = False
    unknown_resent: int = 0
    chunk_size: int = 0
    endpoint: str = "single"
    chunks: int = 0
    chunks_acknowledged: int = 0
    requests: int = 0
    retries: int = 0
    rate_limited: int = 0
    bisections: int = 0
    failed_chunks: int = 0
    last_error: str | None = None
    interrupted: bool = False
    elapsed_s: float = 0.0
    #: Why the rejects file could not be written (the load's result stands), else None.
    rejects_error: str | None = None
    #: Where a journal of this load made against another server was moved, else None.
    set_aside: Path | None = None
    #: Why the load could not be recorded in the campaign register (the load stands:
    #: running it again records it), else None.
    register_error: str | None = None

    @property
    def balanced(self) -> bool:
        """Whether the four outcomes add up to the rows read (they always should)."""
        return self.rows == self.loaded + self.rejected + self.duplicate + self.not_attempted

    @property
    def complete(self) -> bool:
        """Whether every row has its final outcome (nothing left to send)."""
        return self.not_attempted == 0

    @property
    def rows_per_s(self) -> float:
        """Rows accounted for per second of this run."""
        return self.rows / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def counts(self) -> dict[str, int]:
        """The load's row counts by name (``rows``, ``loaded``, ``loaded_this_run``,
        ``rejected``, ``duplicate``, ``not_attempted``): what ``campaigns apply`` shows per
        campaign."""
        return {name: getattr(self, name) for name in _LOAD_COUNTS}

    def to_dict(self) -> dict[str, Any]:
        """The summary as plain JSON-ready values (the CLI's ``--json`` document)."""
        data = asdict(self)
        data["journal"] = str(self.journal)
        data["rejects_file"] = str(self.rejects_file) if self.rejects_file else None
        data["set_aside"] = str(self.set_aside) if self.set_aside else None
        data["rejected_by_reason"] = dict(self.rejected_by_reason)
        data["source_details"] = dict(self.source_details)
        data["balanced"] = self.balanced
        data["complete"] = self.complete
        data["elapsed_s"] = round(self.elapsed_s, 3)
        return data

    # -- per-row outcomes ---------------------------------------------------------------

    def to_frame(self) -> pd.DataFrame:
        """One row per input row: ``line``, ``raw`` (as read), ``player_id`` (trimmed,
        when valid), ``outcome`` (one of :data:`OUTCOMES`), ``reason_code`` and ``detail``
        (the rejection reason, or which line a duplicate repeats). Read from the journal."""
        return self._frame("")

    def rejects(self) -> pd.DataFrame:
        """The rejected rows (the :meth:`to_frame` columns), in line order."""
        return self._frame("WHERE outcome = 'rejected'")

    def _frame(self, where: str) -> pd.DataFrame:
        import pandas as pd  # here: loading players does not need pandas, only this view

        # An empty list leaves no journal file: no rows to read.
        records = list(read_outcomes(self.journal, where)) if self.rows else []
        frame = pd.DataFrame.from_records(records, columns=list(_FRAME_COLUMNS))
        frame["outcome"] = pd.Categorical(frame["outcome"], categories=list(OUTCOMES))
        return frame

    def write_rejects(self, path: str | Path) -> Path:
        """Write the rejected rows to ``path`` as CSV (:data:`REJECTS_COLUMNS`), UTF-8.

        Fix the ``playerId`` values and load the file again: its ``playerId`` column is
        found by name. Written even when nothing was rejected (then only the header).
        """
        return write_rejects(self.journal, path)

    # -- display ------------------------------------------------------------------------

    def _lines(self) -> list[tuple[str, str]]:
        reasons = ", ".join(f"{k} {v}" for k, v in self.rejected_by_reason.items()) or "none"
        out = [
            ("rows read", f"{self.rows:,}"),
            ("loaded", f"{self.loaded:,} ({self.loaded_this_run:,} in this run)"),
            ("rejected", f"{self.rejected:,} ({reasons})"),
            ("duplicate", f"{self.duplicate:,}"),
            ("not attempted", f"{self.not_attempted:,}"),
            ("adds up", "yes" if self.balanced else "NO"),
            (
                "requests",
                f"{self.requests:,} ({self.retries} retried by the client, "
                f"{self.rate_limited} rate-limited, {self.bisections} split)",
            ),
            (
                "chunks",
                f"{self.chunks_acknowledged:,} of {self.chunks:,} acknowledged "
                f"(size {self.chunk_size:,})",
            ),
        ]
        if self.rows == 0:
            out.insert(0, ("warning", "the list holds no player rows: nothing to load"))
        if self.resumed:
            out.append(
                (
                    "resumed",
                    f"yes; {self.unknown_resent} chunk(s) had no recorded answer "
                    "and were sent again",
                )
            )
        if self.failed_chunks:
            out.append(("failed", f"{self.failed_chunks} chunk(s) gave up: {self.last_error}"))
        if self.interrupted:
            out.append(("interrupted", "yes: run the same load again to resume"))
        out.append(("time", f"elapsed {self.elapsed_s:.2f} s, {self.rows_per_s:,.0f} rows/s"))
        if self.rows:  # an empty list leaves no journal
            out.append(("journal", str(self.journal)))
        if self.rejects_file is not None:
            out.append(("rejects file", str(self.rejects_file)))
        if self.rejects_error is not None:
            out.append(("rejects file", f"NOT WRITTEN: {self.rejects_error}"))
        if self.set_aside is not None:
            out.append(("set aside", f"{self.set_aside} (made against another server)"))
        return out

    def __repr__(self) -> str:
        return (
            f"<LoadSummary campaign={self.campaign_id} rows={self.rows} "
            f"loaded={self.loaded} rejected={self.rejected} duplicate={self.duplicate} "
            f"not_attempted={self.not_attempted}>"
        )

    def __str__(self) -> str:
        head = f"Participants for campaign {self.campaign_id}"
        if self.brand is not None:
            head += f" (brand {self.brand})"
        width = max(len(k) for k, _ in self._lines())
        body = "\n".join(f"  {k.ljust(width)}  {v}" for k, v in self._lines())
        return f"{head} from {self.source}\n{body}"

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
            f"<td style='text-align:left'>{html.escape(v)}</td></tr>"
            for k, v in self._lines()
        )
        title = html.escape(f"Participants for campaign {self.campaign_id} from {self.source}")
        return f"<table><caption>{title}</caption>{rows}</table>"


def write_rejects(journal: Path, path: str | Path) -> Path:
    """Write the rejected rows of the load in ``journal`` to ``path`` (see
    :meth:`LoadSummary.write_rejects`). Text cells that a spreadsheet would take for a
    formula get a ``'`` in front (:func:`spreadsheet_safe`); the loader removes it when
    the file is read back."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Replaced when it exists (a re-run of the load), never written through a link.
    with open_output(target, "w", force=True, encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(REJECTS_COLUMNS)
        for line, raw, _pid, _outcome, code, detail in read_outcomes(
            journal, "WHERE outcome = 'rejected'"
        ):
            safe_raw = spreadsheet_safe("" if raw is None else raw)
            writer.writerow((line, safe_raw, code, spreadsheet_safe(detail or "")))
    return target


def check_writable(path: Path, what: str) -> None:
    """Raise :class:`PlayerListError` (one line) unless ``path`` can be written: not a
    symbolic link or a directory, its folder exists (or can be made) and a file can be
    created there, or the file itself is writable. Nothing is left behind."""
    try:
        check_output(path, force=True)  # a directory or a symbolic link: refused
        if path.exists():
            with path.open("a"):
                pass
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".gptools-check-"):
            pass
    except OutputRefusedError as exc:
        raise PlayerListError(
            f"cannot write the {what}: {exc.strerror}; nothing was sent"
        ) from None
    except OSError as exc:
        raise PlayerListError(
            f"cannot write the {what} {path}: {exc.strerror or exc}; nothing was sent"
        ) from None


#: The first line of a rejects file, as :func:`write_rejects` writes it.
_REJECTS_HEADER = ",".join(REJECTS_COLUMNS)


def check_rejects_file(path: Path, *, overwrite: bool) -> None:
    """Raise :class:`PlayerListError` unless the rejects file may be written at ``path``
    (:func:`check_writable`): an existing file is replaced only when it is a rejects file
    (a re-run of a load replaces its own), an empty file, or ``overwrite`` says so, so a
    mistyped name never clobbers the player list or another file."""
    if not overwrite and path.is_file() and not path.is_symlink() and not _replaceable(path):
        raise PlayerListError(
            f"cannot write the rejects file: {path} exists and is not a rejects file (its "
            f"first line is not {_REJECTS_HEADER}); name another file, or overwrite_rejects=True "
            "replaces it; nothing was sent"
        )
    check_writable(path, "rejects file")


def _replaceable(path: Path) -> bool:
    """Whether ``path`` is empty or a rejects file (its first line is the header)."""
    try:
        with path.open("rb") as fh:
            head = fh.read(len(_REJECTS_HEADER) + 2)
    except OSError:
        return True  # unreadable: check_writable says why it cannot be written
    first = head.split(b"\n", 1)[0].rstrip(b"\r")
    return not head or first == _REJECTS_HEADER.encode("ascii")
