"""Per-currency previews: feature costs fetched through the client, cached per session."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Literal, Protocol

import pandas as pd

from gptools.costs._tables import (
    CostSource,
    combine,
    rows_of,
    table_from_configurations,
    table_from_game,
)
from gptools.errors import import_extra
from gptools.models import AwardedFeatureConfigurations, Game

if TYPE_CHECKING:  # matplotlib is the [notebooks] extra: imported only to draw
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

Source = Literal["game", "configurations"]

#: Requests in flight at once. The client keeps every rate tier itself; this only caps
#: how many threads wait on it (the GET tiers allow 60 per second per user).
DEFAULT_MAX_WORKERS = 8


class CatalogueClient(Protocol):
    """What a preview needs: :class:`gptools.client.Client` (or ``client.brand(ID)``).
    ``brand=None`` means the client's own brand, if it has one."""

    def game(self, game_id: str, *, brand: int | None = None) -> Game:
        """``GET /api/v1/game``."""

    def awarded_feature_configurations(
        self, game_id: str, currency_code: str, *, brand: int | None = None
    ) -> AwardedFeatureConfigurations:
        """``GET /api/v1/awarded-feature-configurations``."""


class CostBook:
    """Feature costs fetched through ``client`` and cached for the life of this object.

    Each game answer and each (game, currency) configuration answer is fetched once;
    fetches run on up to ``max_workers`` threads while the client keeps the rate limits.
    ``brand`` is passed to every call (``None``: the client's own brand, if any).
    ``requests`` counts the answers fetched (not served from the cache).
    """

    def __init__(
        self,
        client: CatalogueClient,
        *,
        brand: int | None = None,
        max_workers: int = DEFAULT_MAX_WORKERS,
        exponents: Mapping[str, int] | None = None,
    ) -> None:
        if max_workers < 1:
            raise ValueError(f"max_workers must be at least 1, got {max_workers}")
        self.client = client
        self.brand = brand
        self.max_workers = max_workers
        self.exponents = dict(exponents or {})
        self.requests = 0
        self._games: dict[str, Game] = {}
        self._configs: dict[tuple[str, str], AwardedFeatureConfigurations] = {}
        self._lock = threading.Lock()

    def _fetch_game(self, game_id: str) -> Game:
        return self.client.game(game_id, brand=self.brand)

    def _fetch_configs(self, key: tuple[str, str]) -> AwardedFeatureConfigurations:
        return self.client.awarded_feature_configurations(key[0], key[1], brand=self.brand)

    def _fill(self, cache: dict[Any, Any], keys: Sequence[Any], fetch: Any) -> None:
        with self._lock:
            missing = list(dict.fromkeys(k for k in keys if k not in cache))
        if not missing:
            return
        workers = min(self.max_workers, len(missing))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gptools-costs") as pool:
            answers = list(pool.map(fetch, missing))
        with self._lock:
            cache.update(zip(missing, answers, strict=True))
            self.requests += len(missing)

    def games(self, game_ids: Sequence[str]) -> dict[str, Game]:
        """The game answers of ``game_ids`` (fetched once each)."""
        self._fill(self._games, game_ids, self._fetch_game)
        return {g: self._games[g] for g in game_ids}

    def table(
        self,
        game_ids: Sequence[str],
        currencies: Sequence[str] | None = None,
        *,
        source: Source = "configurations",
    ) -> pd.DataFrame:
        """The tidy cost table of ``game_ids`` × ``currencies`` from one source.

        ``source="configurations"`` (the default: the document's recommended source of the
        ``bet`` value) gives costs only, one request per game and currency, and needs
        ``currencies``; ``"game"`` gives the full breakdown (feature type, base bet,
        multiplier) with one request per game, and ``currencies=None`` there means every
        currency the game offers.
        """
        if source == "game":
            games = self.games(game_ids)
            return combine(
                (
                    table_from_game(g, game_id=gid, currencies=currencies, exponents=self.exponents)
                    for gid, g in games.items()
                ),
                source=CostSource.GAME,
            )
        if source == "configurations":
            if currencies is None:
                raise ValueError(
                    "source='configurations' (the default) needs the currencies to "
                    "ask for; source='game' gives every currency of the game"
                )
            keys = [(g, c) for g in game_ids for c in currencies]
            self._fill(self._configs, keys, self._fetch_configs)
            return table_from_configurations(self._configs[k] for k in keys)
        raise ValueError(f"source must be 'game' or 'configurations', got {source!r}")

    def clear(self) -> None:
        """Forget every cached answer (the next table fetches again)."""
        with self._lock:
            self._games.clear()
            self._configs.clear()


_BOOKS: weakref.WeakKeyDictionary[Any, dict[int | None, CostBook]] = weakref.WeakKeyDictionary()
_BOOKS_LOCK = threading.Lock()


def cost_book(client: CatalogueClient, *, brand: int | None = None) -> CostBook:
    """The session's :class:`CostBook` of ``client`` and ``brand`` (one per client)."""
    with _BOOKS_LOCK:
        books = _BOOKS.setdefault(client, {})
        if brand not in books:
            books[brand] = CostBook(client, brand=brand)
        return books[brand]


def preview(
    client: CatalogueClient,
    game_ids: Sequence[str],
    currencies: Sequence[str] | None = None,
    *,
    source: Source = "configurations",
    brand: int | None = None,
) -> pd.DataFrame:
    """Every available feature cost of ``game_ids`` in ``currencies``, cached per client.

    The default source is the configurations endpoint, the one the document recommends;
    ``source="game"`` gives the breakdown by feature and base bet. See
    :meth:`CostBook.table` for the sources. Repeated calls in one session reuse the
    answers already fetched.
    """
    return cost_book(client, brand=brand).table(game_ids, currencies, source=source)


def chart_frame(
    table: pd.DataFrame,
    *,
    rates: Mapping[str, Decimal] | None = None,
) -> pd.DataFrame:
    """The table with a float ``chart_value`` column (for plotting only, never for money).

    With ``rates`` (units of a reporting currency per unit of each currency) the value is
    converted, so every currency shares one axis; the conversion is exact until the float.
    """
    out = table.copy()
    values = []
    for r in rows_of(table):
        amount = r.feature_cost
        if rates is not None:
            if r.currency not in rates:
                raise ValueError(f"no exchange rate for {r.currency}; rates has {sorted(rates)}")
            amount = amount * rates[r.currency]
        values.append(float(amount))
    out["chart_value"] = values
    return out


def cost_chart(
    table: pd.DataFrame,
    *,
    rates: Mapping[str, Decimal] | None = None,
    reporting_currency: str | None = None,
    ax: Axes | None = None,
    figsize: tuple[float, float] = (10.0, 5.0),
) -> Figure:
    """Feature costs per currency, one colour per game: every cost a dot, its range a bar.

    Without ``rates`` the y axis is logarithmic so JPY and KWD fit one chart; with
    ``rates`` every cost is converted to ``reporting_currency``. Draws on ``ax`` when given
    (e.g. from ``plt.subplots``), else on a new :class:`~matplotlib.figure.Figure` that is
    not registered with pyplot.
    """
    figure_class: type[Figure] = import_extra(
        "matplotlib.figure", "notebooks", "The cost chart"
    ).Figure
    frame = chart_frame(table, rates=rates)
    if ax is None:
        fig = figure_class(figsize=figsize, layout="constrained")
        ax = fig.add_subplot()
    else:
        root = ax.get_figure(root=True)
        if not isinstance(root, figure_class):
            raise ValueError("ax is not part of a figure")
        fig = root
    currencies = sorted(frame["currency"].unique())
    games = sorted(frame["game_id"].unique())
    width = 0.8 / max(len(games), 1)
    for gi, game in enumerate(games):
        color = f"C{gi % 10}"
        label: str | None = game
        for ci, currency in enumerate(currencies):
            values = frame.loc[
                (frame["game_id"] == game) & (frame["currency"] == currency), "chart_value"
            ]
            if values.empty:
                continue
            x = ci - 0.4 + width * (gi + 0.5)
            ax.vlines(x, values.min(), values.max(), color=color, linewidth=2, alpha=0.5)
            ax.scatter([x] * len(values), values, color=color, s=14, label=label)
            label = None  # one legend entry per game
    ax.set_xticks(range(len(currencies)), currencies)
    title = "Available awarded-feature costs per currency"
    if rates is None:
        ax.set_yscale("log")
        ax.set_ylabel("feature cost (own currency, log scale)")
    else:
        target = reporting_currency or "the reporting currency"
        ax.set_ylabel(f"feature cost in {target}")
        title += f", converted to {target} at the given rates"
    ax.set_xlabel("currency")
    ax.set_title(title)
    ax.legend(title="game", fontsize="small", loc="center left", bbox_to_anchor=(1.0, 0.5))
    return fig
