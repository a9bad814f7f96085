"""The files the commands write where the user says (``--lost-out``, ``--unreached-out``,
``--rejects``, an export's OUT): one rule for all of them, that of
:func:`gptools.webhooks.open_output`. An existing file is refused without ``--force``, a
symbolic link always (never written through), both before the command does its work (exit
2); the file is created owner-only. The capability is imported when a command runs, as
every command imports its capabilities.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from gptools.cli._main import fail

_F = TypeVar("_F", bound=Callable[..., Any])


def force_option(what: str) -> Callable[[_F], _F]:
    """The ``--force`` flag of a command that writes ``what`` (an option's name)."""
    return click.option(
        "--force",
        is_flag=True,
        help=f"Overwrite an existing {what} file (never through a symbolic link).",
    )


def check_output_option(option: str, path: Path | None, *, force: bool) -> None:
    """Stop with bad input (exit 2) when ``path``, given with ``option``, may not be
    written: a symbolic link, a directory, or an existing file without ``--force``."""
    from gptools.webhooks import OutputRefusedError, check_output

    if path is None:
        return
    try:
        check_output(path, force=force)
    except OutputRefusedError as exc:
        fail(f"{option} {exc.strerror}", bad_input=True)


def write_csv_output(
    option: str,
    path: Path,
    header: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    force: bool,
) -> None:
    """Write ``header`` and ``rows`` as CSV to ``path`` (given with ``option``) under the
    rule; a file that cannot be written is one line and exit 1."""
    from gptools.webhooks import OutputRefusedError, open_output

    try:
        with open_output(path, "w", force=force, encoding="utf-8", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(header)
            writer.writerows(rows)
    except OutputRefusedError as exc:
        fail(f"{option} {exc.strerror}", bad_input=True)
    except OSError as exc:
        fail(f"{option} {path}: cannot write: {exc.strerror or exc}")
