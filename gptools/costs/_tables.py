"""The tidy feature-cost table, built from each of the three sources the document allows.

Every source gives the same columns (:data:`COLUMNS`), one row per available feature cost:

=====================  ==========================================================
``game_id``            the game
``currency``           ISO 4217 code
``buy_feature_type``   the buy feature (NA when the source does not say)
``base_bet``           Decimal base bet (NA when the source does not say)
``price_multiplier``   Decimal multiplier of the base bet (NA when not said)
``feature_cost``       Decimal total cost, the ``bet`` of an AWARDED_FEATURE campaign
=====================  ==========================================================

All columns are ``object`` columns holding ``str``/``Decimal``/``pd.NA``: never a float.

The awarded-feature-configurations endpoint (the recommended source) returns only
``gameId``, ``bet`` and ``currencyCode``, so its rows have NA buy feature type, base bet and
multiplier. The game endpoint and the stored file give the full breakdown.

Stored file format (``data/stored_bet_sizes.csv``): UTF-8 CSV with the header
``game_id,currency,buy_feature_type,base_bet,price_multiplier``, one row per game, currency,
buy feature and base bet. Decimals are plain text with a dot (``0.20``, ``1500``), never
rounded through a spreadsheet. Lines starting with ``#`` are comments. The cost is not
stored: it is recomputed as base bet × multiplier, so a stale multiplier shows up as one.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from pathlib import Path
from typing import Any

import pandas as pd

from gptools.costs._money import UnknownCurrencyError, currency_exponent, feature_cost
from gptools.errors import GptoolsError
from gptools.models import AwardedFeatureConfigurations, Game

COLUMNS: tuple[str, ...] = (
    "game_id",
    "currency",
    "buy_feature_type",
    "base_bet",
    "price_multiplier",
    "feature_cost",
)
#: The columns of the stored file, in order (the cost is recomputed, never stored).
STORED_COLUMNS: tuple[str, ...] = COLUMNS[:5]


class CostSource(StrEnum):
    """Where a cost table came from, as its ``attrs["source"]`` names it (a member equals
    its text): the configurations endpoint, the game endpoint, a stored file."""

    CONFIGURATIONS = "awarded-feature-configurations"
    GAME = "game"
    STORED = "stored"


@dataclass(frozen=True, slots=True)
class CostRow:
    """One available feature cost; ``None`` where the source does not say."""

    game_id: str
    currency: str
    buy_feature_type: str | None
    base_bet: Decimal | None
    price_multiplier: Decimal | None
    feature_cost: Decimal

    def sort_key(self) -> tuple[str, str, str, Decimal, Decimal]:
        """Game, currency, feature type, base bet, cost: the table's row order."""
        return (
            self.game_id,
            self.currency,
            self.buy_feature_type or "",
            self.base_bet if self.base_bet is not None else Decimal(0),
            self.feature_cost,
        )

    def to_dict(self) -> dict[str, str | None]:
        """JSON-ready, by the table's column names, each amount as its exact digits
        (``"0.150"``, never a float): a row of ``gptools costs preview --json``."""
        return {
            "game_id": self.game_id,
            "currency": self.currency,
            "buy_feature_type": self.buy_feature_type,
            "base_bet": _digits(self.base_bet),
            "price_multiplier": _digits(self.price_multiplier),
            "feature_cost": f"{self.feature_cost:f}",
        }


def _digits(amount: Decimal | None) -> str | None:
    return None if amount is None else f"{amount:f}"


class StoredTableError(GptoolsError, ValueError):
    """The stored cost file is malformed; the message names the file, line, column and reason."""


def cost_table(rows: Iterable[CostRow], *, source: str) -> pd.DataFrame:
    """Build the tidy table from rows (sorted; object columns; NA where a source is silent).

    ``source`` is kept in ``DataFrame.attrs["source"]`` and names the side in a cross-check.
    """
    ordered = sorted(rows, key=CostRow.sort_key)
    data = [[pd.NA if v is None else v for v in _values(r)] for r in ordered]
    frame = pd.DataFrame(data, columns=list(COLUMNS), dtype=object)
    frame.attrs["source"] = source
    return frame


def _values(row: CostRow) -> tuple[Any, ...]:
    return (
        row.game_id,
        row.currency,
        row.buy_feature_type,
        row.base_bet,
        row.price_multiplier,
        row.feature_cost,
    )


def rows_of(table: pd.DataFrame) -> list[CostRow]:
    """The rows of a tidy table, NA turned back into ``None``."""
    missing = [c for c in COLUMNS if c not in table.columns]
    if missing:
        raise ValueError(f"not a feature-cost table: columns {missing} are missing")
    out = []
    for i, rec in enumerate(table[list(COLUMNS)].itertuples(index=False, name=None)):
        game_id, currency, feature, base, mult, cost = (
            None if v is None or v is pd.NA else v for v in rec
        )
        if game_id is None or currency is None or cost is None:
            raise ValueError(f"row {i}: game_id, currency and feature_cost must all be given")
        out.append(CostRow(game_id, currency, feature, base, mult, cost))
    return out


def table_from_configurations(
    configurations: AwardedFeatureConfigurations | Iterable[AwardedFeatureConfigurations],
) -> pd.DataFrame:
    """Source (a), the recommended one: the ``bet`` values of the configurations endpoint.

    The endpoint returns only ``gameId``, ``bet`` and ``currencyCode``; the buy feature
    type, base bet and multiplier columns are NA. Each ``bet`` is used exactly as sent.
    """
    answers = (
        [configurations]
        if isinstance(configurations, AwardedFeatureConfigurations)
        else list(configurations)
    )
    rows = {
        (c.game_id, c.currency_code, c.bet): CostRow(
            c.game_id, c.currency_code, None, None, None, c.bet
        )
        for answer in answers
        for c in answer.content
    }
    return cost_table(rows.values(), source=CostSource.CONFIGURATIONS)


def table_from_game(
    game: Game,
    *,
    game_id: str | None = None,
    currencies: Sequence[str] | None = None,
    exponents: Mapping[str, int] | None = None,
) -> pd.DataFrame:
    """Source (b): every buy feature × every base bet of ``betSizes``, multiplied exactly.

    ``game_id`` names the game when the answer does not carry it (the field is not
    documented). ``currencies`` keeps only those currencies (all when ``None``).
    """
    gid = game_id or game.game_id
    if not gid:
        raise ValueError("the game answer carries no gameId: pass game_id=")
    return cost_table(_game_rows(gid, game, currencies, exponents), source=CostSource.GAME)


def _game_rows(
    gid: str,
    game: Game,
    currencies: Sequence[str] | None,
    exponents: Mapping[str, int] | None,
) -> Iterable[CostRow]:
    wanted = set(currencies) if currencies is not None else None
    for currency, base_bets in game.bet_sizes.items():
        if wanted is not None and currency not in wanted:
            continue
        for feature in game.buy_features:
            for base in base_bets:
                cost = feature_cost(base, feature.price_multiplier, currency, overrides=exponents)
                yield CostRow(
                    gid, currency, feature.buy_feature_type, base, feature.price_multiplier, cost
                )


def combine(tables: Iterable[pd.DataFrame], *, source: str) -> pd.DataFrame:
    """One table from several of the same source (sorted, duplicates dropped)."""
    rows = {r: None for t in tables for r in rows_of(t)}
    return cost_table(rows, source=source)


def read_stored_table(
    path: str | Path, *, exponents: Mapping[str, int] | None = None
) -> pd.DataFrame:
    """Source (c): a stored table of bet sizes and multipliers (format in the module doc).

    Every problem in the file is reported at once, each with its line and column; the
    costs are recomputed from base bet × multiplier.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise StoredTableError(f"{path}: cannot read: {exc}") from None
    numbered = [
        (n, line)
        for n, line in enumerate(text.splitlines(), start=1)
        if line.strip() and not line.lstrip().startswith("#")
    ]
    if not numbered:
        raise StoredTableError(f"{path}: empty; expected the header {','.join(STORED_COLUMNS)}")
    records = list(csv.reader(line for _, line in numbered))
    header = [h.strip() for h in records[0]]
    if header != list(STORED_COLUMNS):
        raise StoredTableError(
            f"{path}:{numbered[0][0]}: header is {','.join(header)}; "
            f"expected {','.join(STORED_COLUMNS)}"
        )
    problems: list[str] = []
    rows: dict[tuple[str, str, str, Decimal], CostRow] = {}
    for (line_no, _), fields in zip(numbered[1:], records[1:], strict=True):
        row = _stored_row(fields, exponents, problems, f"{path}:{line_no}")
        if row is None:
            continue
        assert row.buy_feature_type is not None and row.base_bet is not None
        key = (row.game_id, row.currency, row.buy_feature_type, row.base_bet)
        if key in rows:
            problems.append(f"{path}:{line_no}: duplicate row for {key[:3]} base bet {key[3]}")
            continue
        rows[key] = row
    if problems:
        raise StoredTableError(
            f"{len(problems)} problem(s) in the stored cost table:\n" + "\n".join(problems)
        )
    return cost_table(rows.values(), source=CostSource.STORED)


def _stored_row(
    fields: list[str],
    exponents: Mapping[str, int] | None,
    problems: list[str],
    where: str,
) -> CostRow | None:
    if len(fields) != len(STORED_COLUMNS):
        problems.append(f"{where}: {len(fields)} fields; expected {len(STORED_COLUMNS)}")
        return None
    game_id, currency, feature, base_text, mult_text = (f.strip() for f in fields)
    before = len(problems)
    for column, value in (("game_id", game_id), ("buy_feature_type", feature)):
        if not value:
            problems.append(f"{where}: column {column} is empty")
    try:
        currency_exponent(currency, overrides=exponents)
    except UnknownCurrencyError as exc:
        problems.append(f"{where}: column currency: {exc}")
    numbers: list[Decimal] = []
    for column, text in (("base_bet", base_text), ("price_multiplier", mult_text)):
        number: Decimal | None
        try:
            number = Decimal(text) if text else None
        except ArithmeticError:
            number = None
        if number is None or not number.is_finite() or number <= 0:
            problems.append(f"{where}: column {column}: {text!r} is not a positive decimal")
        else:
            numbers.append(number)
    if len(problems) > before:
        return None
    base, mult = numbers
    cost = feature_cost(base, mult, currency, overrides=exponents)
    return CostRow(game_id, currency, feature, base, mult, cost)


def write_stored_table(table: pd.DataFrame, path: str | Path) -> None:
    """Write the breakdown of a tidy table in the stored file format (NA rows refused)."""
    path = Path(path)
    rows = rows_of(table)
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(STORED_COLUMNS)
        for r in rows:
            if r.buy_feature_type is None or r.base_bet is None or r.price_multiplier is None:
                raise ValueError(
                    f"row {r.game_id}/{r.currency} cost {r.feature_cost} has no breakdown; "
                    "only game-endpoint or stored tables can be written"
                )
            writer.writerow(
                [
                    r.game_id,
                    r.currency,
                    r.buy_feature_type,
                    f"{r.base_bet:f}",
                    f"{r.price_multiplier:f}",
                ]
            )


def available_costs(table: pd.DataFrame, game_id: str, currency: str) -> list[Decimal]:
    """The distinct feature costs of one game in one currency, ascending."""
    return sorted(
        {r.feature_cost for r in rows_of(table) if r.game_id == game_id and r.currency == currency}
    )
