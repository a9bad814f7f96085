"""What the commands share: connecting, resolving the brand, reading ``--now``, and the
bad-input errors of the library's capabilities (the output/exit contract is in ``_main``)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

import click

from gptools.cli._main import NotRecorded, cli_text, client_options, fail
from gptools.cli._main import cli_errors as _contract_errors
from gptools.errors import GameNotFoundError

if TYPE_CHECKING:
    from gptools.wallet import LedgerMapping

_F = TypeVar("_F", bound=Callable[..., Any])

#: How a receiver authenticates deliveries (``webhooks serve``, ``sandbox deliver``).
AUTH_CHOICE = click.Choice(["bearer", "basic", "none"], case_sensitive=False)

#: ``--progress/--no-progress`` of every long-running command (one rule for all of them:
#: :func:`gptools._progress.progress`, which the command's library call uses).
PROGRESS_OPTION = click.option(
    "--progress/--no-progress",
    default=None,
    help="Show a progress bar, or nothing [default: a bar on a terminal, otherwise a "
    "plain line every 10 s].",
)

#: The ``--now`` help every command shows (one rule for all of them).
NOW_HELP = (
    "Treat this time as now: ISO 8601 with an offset or Z for UTC, e.g. "
    "2030-01-01T00:00:00Z (default: the current time)."
)


def ledger_options(command: _F) -> _F:
    """Add ``--ledger-format``, ``--ledger-table`` and ``--ledger-column FIELD=NAME``
    (repeatable) to a command that reads a wallet ledger, with the same help everywhere;
    :func:`ledger_mapping` reads ``--ledger-column`` (``ledger_columns``)."""
    for option in reversed(
        (
            click.option(
                "--ledger-format",
                default="auto",
                show_default=True,
                help="Ledger format: csv, jsonl, parquet, sqlite or postgres; auto picks by "
                "content and name.",
            ),
            click.option(
                "--ledger-table",
                default="wallet_ledger",
                show_default=True,
                help="The ledger's table in a database (sqlite:///PATH, postgresql://...).",
            ),
            click.option(
                "--ledger-column",
                "ledger_columns",
                multiple=True,
                help="A ledger's column: FIELD=NAME, FIELD one of spec.WALLET_LEDGER_COLUMNS "
                "(repeat).",
            ),
        )
    ):
        command = option(command)
    return command


def ledger_mapping(ledger_columns: tuple[str, ...]) -> LedgerMapping:
    """The ledger layout ``--ledger-column FIELD=NAME`` names: the assumed
    ``spec.WALLET_LEDGER_COLUMNS`` with those fields' columns renamed. A value that is not
    FIELD=NAME, an unknown field or a field given twice is bad input: exit 2 and one line
    naming the option, the same from every command (the fields are the wallet's, known
    only once its extra is imported, so no click type checks them at parse time). Needs
    the analysis extra (``MissingExtraError`` otherwise)."""
    from gptools.wallet import DEFAULT_LEDGER_MAPPING

    columns: dict[str, str] = {}
    for value in ledger_columns:
        field, sep, column = (part.strip() for part in value.partition("="))
        if not sep or not field or not column:
            fail(f"--ledger-column: {value!r} is not FIELD=NAME", bad_input=True)
        if columns.get(field, column) != column:
            fail(
                f"--ledger-column: {field} given twice ({columns[field]!r} and {column!r})",
                bad_input=True,
            )
        columns[field] = column
    try:
        return DEFAULT_LEDGER_MAPPING.with_columns(columns)
    except ValueError as exc:
        fail(f"--ledger-column: {exc}", bad_input=True)


@contextlib.contextmanager
def cli_errors(*bad_input: type[BaseException]) -> Iterator[None]:
    """The CLI's error contract plus the bad-input errors of costs and campaign plans (and
    the caller's ``bad_input`` types); work done at the server that the campaign register
    could not record is exit 4."""
    from gptools.campaigns import NotRecordedError, PlanFileError, PlanInvalidError
    from gptools.costs import StoredTableError, UnknownCurrencyError

    with _contract_errors(
        UnknownCurrencyError,
        GameNotFoundError,
        PlanFileError,
        PlanInvalidError,
        StoredTableError,
        *bad_input,
    ):
        try:
            yield
        except NotRecordedError as exc:
            raise NotRecorded(cli_text(str(exc))) from None


def connect_client(**options: Any) -> Any:
    """The session client, with the top-level command's ``--max-retries`` and ``--timeout``
    (:func:`~gptools.cli._main.client_options`); ``options`` override them.

    Without ``GP_BASE_URL`` the embedded sandbox starts from the state the previous command
    left (see :mod:`gptools.sandbox`), so a campaign created by one command exists for the
    next. Its one-line notice goes to stderr so that ``--json`` output stays one document.
    """
    from gptools.sandbox import SandboxStateError, default_state_dir
    from gptools.session import connect, real_service_configured, start_embedded_sandbox

    with contextlib.redirect_stdout(sys.stderr):
        if not real_service_configured():
            try:
                start_embedded_sandbox(state_dir=default_state_dir())
            except SandboxStateError as exc:
                fail(str(exc))
        return connect(**{**client_options(), **options})


def resolve_brand(client: Any, brand: int | None) -> int | None:
    """``brand`` if given; else none for an INDIVIDUAL account (its brand is implicit), the
    only allowed brand of another account, or a bad-input error listing the choices."""
    if brand is not None:
        return brand
    try:
        chosen: int | None = client.self().default_brand()
    except ValueError as exc:
        fail(f"{exc}; name one with --brand", bad_input=True)
    return chosen


def parse_now(value: str | None) -> datetime | None:
    """A ``--now`` value as an aware time, ``None`` when not given; a time without an offset
    (or ``Z``) is bad input, in every command: guessing its zone would shift results."""
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        fail(f"--now {value!r} is not an ISO 8601 time like 2030-01-01T00:00:00Z", bad_input=True)
    if moment.tzinfo is None:
        fail(
            f"--now {value!r} needs an offset or Z for UTC, e.g. 2030-01-01T00:00:00Z",
            bad_input=True,
        )
    return moment
