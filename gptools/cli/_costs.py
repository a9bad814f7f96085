"""``gptools costs preview``: every available feature cost of games in currencies."""

from __future__ import annotations

import contextlib
import difflib
import sys
from collections.abc import Iterator
from typing import Any

import click

from gptools import spec
from gptools.cli._main import cli_errors as _main_cli_errors
from gptools.cli._main import client_options, costs, emit, fail
from gptools.errors import (
    GameNotFoundError,
)


@contextlib.contextmanager
def cli_errors() -> Iterator[None]:
    """The CLI's error contract plus the bad-input errors of costs and campaign plans."""
    from gptools.campaigns import PlanFileError, PlanInvalidError
    from gptools.costs import StoredTableError, UnknownCurrencyError

    with _main_cli_errors(UnknownCurrencyError, GameNotFoundError, PlanFileError,
                          PlanInvalidError, StoredTableError):
        yield


def connect_client() -> Any:
    """The session client. Without ``GP_BASE_URL`` the embedded sandbox starts from the
    state the previous command left (see :mod:`gptools.sandbox._persist`), so a campaign
    created by one command exists for the next. Its one-line notice goes to stderr so that
    ``--json`` output stays one document."""
    from gptools.sandbox._persist import SandboxStateError, default_state_dir
    from gptools.session import connect, real_service_configured, start_embedded_sandbox

    with contextlib.redirect_stdout(sys.stderr):
        if not real_service_configured():
            try:
                start_embedded_sandbox(state_dir=default_state_dir())
            except SandboxStateError as exc:
                fail(str(exc))
        return connect(**client_options())


def resolve_brand(client: Any, brand: int | None) -> int | None:
    """``brand`` if given; else none for an INDIVIDUAL account (its brand is implicit), the
    only allowed brand of another account, or a bad-input error listing the choices."""
    if brand is not None:
        return brand
    info = client.self()
    if info.principal_type in spec.IMPLICIT_ALLOWED_PRINCIPALS:
        return None
    ids: list[int] = sorted(info.brand_ids)
    if len(ids) == 1:
        return ids[0]
    fail(f"the account ({info.principal_type}) may act on brands {ids}; name one with --brand",
         bad_input=True)


#: ISO 4217 codes of metals, funds and tests: never what a mistyped --currency meant.
_NOT_MONEY = frozenset({"XAG", "XAU", "XBA", "XBB", "XBC", "XBD", "XDR", "XPD", "XPT", "XSU",
                        "XTS", "XUA", "XXX"})


def cli_currency(text: str) -> str:
    """A ``--currency`` value as an upper-case ISO 4217 code, or a bad-input error that
    suggests codes the command takes (the CLI has no way to give a currency's exponent)."""
    from babel.numbers import list_currencies

    from gptools.costs import UnknownCurrencyError, currency_exponent

    code = text.strip().upper()
    try:
        currency_exponent(code)
    except UnknownCurrencyError:
        # A typo keeps the first letter far more often than not; other matches mislead.
        money = sorted(c for c in list_currencies()
                       if c not in _NOT_MONEY and c[:1] == code[:1])
        close = difflib.get_close_matches(code, money, n=3, cutoff=0.6)
        hint = (f"did you mean {' or '.join(close)}?" if close
                else "use an ISO 4217 code such as EUR, USD, GBP or JPY")
        fail(f"--currency {text}: not an ISO 4217 currency code; {hint}", bad_input=True)
    return code


def _money_rows(table: Any) -> list[dict[str, Any]]:
    from gptools.costs import rows_of

    return [
        {
            "game_id": r.game_id,
            "currency": r.currency,
            "buy_feature_type": r.buy_feature_type,
            "base_bet": None if r.base_bet is None else f"{r.base_bet:f}",
            "price_multiplier": None if r.price_multiplier is None else f"{r.price_multiplier:f}",
            "feature_cost": f"{r.feature_cost:f}",
        }
        for r in rows_of(table)
    ]


@costs.command("preview")
@click.option("--game", "games", multiple=True, required=True, help="Game id (repeatable).")
@click.option("--currency", "currencies", multiple=True, required=True,
              help="Currency code (repeatable).")
@click.option("--source", type=click.Choice(["configurations", "game"]),
              default="configurations", show_default=True,
              help="configurations: the costs the awarded-feature-configurations endpoint "
                   "lists (the document's recommended source); game: breakdown by feature "
                   "and base bet.")
@click.option("--brand", type=int, default=None, help="Brand id (default: the only one).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def preview_command(games: tuple[str, ...], currencies: tuple[str, ...], source: str,
                    brand: int | None, as_json: bool) -> None:
    """Every available awarded-feature cost of GAME in CURRENCY (decimals as text in JSON)."""
    from gptools.costs import CostBook

    currencies = tuple(cli_currency(c) for c in currencies)
    with cli_errors():
        client = connect_client()
        try:
            book = CostBook(client, brand=resolve_brand(client, brand))
            table = book.table(list(games), list(currencies),
                               source="game" if source == "game" else "configurations")
        finally:
            client.close()
    rows = _money_rows(table)
    document = {"source": table.attrs["source"], "games": list(games),
                "currencies": list(currencies), "rows": rows}

    def human() -> str:
        if not rows:
            return "no awarded-feature costs for these games and currencies"
        return str(table.to_string(index=False, na_rep="-"))

    emit(document, as_json=as_json, human=human)
