"""``gptools costs preview``: every available feature cost of games in currencies."""

from __future__ import annotations

import contextlib
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
    """The session client; the embedded sandbox's one-line notice goes to stderr so that
    ``--json`` output stays one document."""
    from gptools.session import connect

    with contextlib.redirect_stdout(sys.stderr):
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
    from gptools.costs import CostBook, currency_exponent

    with cli_errors():
        for currency in currencies:
            currency_exponent(currency)
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
