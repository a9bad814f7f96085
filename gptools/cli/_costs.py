"""``gptools costs preview``: every available feature cost of games in currencies."""

from __future__ import annotations

import click

from gptools.cli._common import cli_errors, connect_client, resolve_brand
from gptools.cli._main import costs, emit, fail
from gptools.cli._params import BRAND_ID


def cli_currency(text: str) -> str:
    """A ``--currency`` value as an upper-case ISO 4217 code, or a bad-input error that
    suggests codes the command takes (the CLI has no way to give a currency's exponent)."""
    from gptools.costs import UnknownCurrencyError, currency_exponent, currency_suggestions

    code = text.strip().upper()
    try:
        currency_exponent(code)
    except UnknownCurrencyError:
        close = currency_suggestions(code)
        hint = (
            f"did you mean {' or '.join(close)}?"
            if close
            else "use an ISO 4217 code such as EUR, USD, GBP or JPY"
        )
        fail(f"--currency {text}: not an ISO 4217 currency code; {hint}", bad_input=True)
    return code


@costs.command("preview")
@click.option("--game", "games", multiple=True, required=True, help="Game id (repeatable).")
@click.option(
    "--currency", "currencies", multiple=True, required=True, help="Currency code (repeatable)."
)
@click.option(
    "--source",
    type=click.Choice(["configurations", "game"]),
    default="configurations",
    show_default=True,
    help="configurations: the costs the awarded-feature-configurations endpoint "
    "lists (the document's recommended source); game: breakdown by feature "
    "and base bet.",
)
@click.option("--brand", type=BRAND_ID, default=None, help="Brand id (default: the only one).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def preview_command(
    games: tuple[str, ...],
    currencies: tuple[str, ...],
    source: str,
    brand: int | None,
    as_json: bool,
) -> None:
    """Every available awarded-feature cost of GAME in CURRENCY (decimals as text in JSON)."""
    from gptools.costs import CostBook, rows_of
    from gptools.display import readable

    currencies = tuple(cli_currency(c) for c in currencies)
    with cli_errors(), connect_client() as client:
        book = CostBook(client, brand=resolve_brand(client, brand))
        table = book.table(
            list(games), list(currencies), source="game" if source == "game" else "configurations"
        )
    rows = [r.to_dict() for r in rows_of(table)]
    document = {
        "source": table.attrs["source"],
        "games": list(games),
        "currencies": list(currencies),
        "rows": rows,
    }

    def human() -> str:
        if not rows:
            return "no awarded-feature costs for these games and currencies"
        # The configurations source knows costs only: its empty breakdown columns go.
        return str(readable(table.dropna(axis="columns", how="all")))

    emit(document, as_json=as_json, human=human)
