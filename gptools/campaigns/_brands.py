"""A plan over several brands: one promotion, one campaign per brand and currency.

A PARTNER or THIRD_PARTY account acts on several brands with one set of credentials. A
:class:`BrandsPlan` is an ordinary :class:`~gptools.campaigns.Plan` (its ``base``: name,
type, games, currencies, bet, window, ...) run on ``brands`` (a list of ids, or ``"all"``:
every brand of ``GET /self``), with per-brand overrides (:class:`BrandOverride`: currencies,
bet, games, players, window, and the brand's display options, which the operator switches
per brand and the plan only notes) and the players in files (one per brand, or one file
with a ``brand`` column).

:func:`expand_brands` turns it into one single-brand :class:`Plan` per brand, so every rule
of a single-brand plan (validation, budget, requests and their requestIds) applies to each
brand unchanged; what is new is named per brand: a brand the account does not cover, an
override or a player of a brand the plan does not run on, a players file that cannot be
read. The plan-file keys this module adds are ``brands``, ``per_brand`` and
``players_file``; every other key is the base plan's.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from gptools.campaigns._plan import (
    Plan,
    PlanFileError,
    _exact,
    plan_from_dict,
    read_plan_document,
)
from gptools.campaigns._validate import Problem
from gptools.models import DisplayOptions

#: ``brands: all``: every brand of the account (``GET /self``'s ``allowedBrands``).
ALL_BRANDS: Literal["all"] = "all"
#: The keys a multi-brand plan adds to a plan file (every other key is the base plan's).
BRANDS_KEYS: tuple[str, ...] = ("brands", "per_brand", "players_file")
#: The largest players file read while planning (bytes), and its most rows.
PLAYERS_FILE_MAX_BYTES = 64 * 1024 * 1024
PLAYERS_FILE_MAX_ROWS = 1_000_000
#: The column names a players file may give its player ids, brand and currency under.
PLAYER_COLUMNS: tuple[str, ...] = ("player_id", "playerId", "player")
BRAND_COLUMN = "brand"
CURRENCY_COLUMN = "currency"


class BrandOverride(BaseModel):
    """What one brand of a multi-brand plan does differently; every field is optional.

    ``currencies``: a list keeps those of the base plan's lines; a mapping gives the brand
    exactly those currencies, each line the base plan's (if any) with the fields given
    (``bet``, ``players``, ``player_ids``; a currency the base plan lacks needs ``bet`` and
    ``players``). ``bet`` and ``players``: one value for every currency of the brand, or a
    mapping currency -> value. ``players_file``: a file of this brand's player ids (a
    ``player_id`` column, and ``currency`` when the brand has several). ``display_options``:
    the brand's pop-up options as the operator switched them (a planning note: they are
    not sent, the player view shows them).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    currencies: tuple[str, ...] | dict[str, dict[str, Any]] | None = None
    bet: Decimal | dict[str, Decimal] | None = None
    players: int | dict[str, int] | None = None
    game_ids: tuple[str, ...] | None = None
    start: datetime | None = None
    end: datetime | None = None
    time_zone: str | None = None
    players_file: str | None = None
    display_options: DisplayOptions | None = None

    @field_validator("bet", mode="before")
    @classmethod
    def _bet_exact(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            return {k: _exact(v) for k, v in value.items()}
        return _exact(value)


class BrandsPlan(BaseModel):
    """A campaign plan run on several brands: ``base`` on each of ``brands``.

    Built from a plan file's mapping: the keys of :data:`BRANDS_KEYS` are this model's, every
    other key goes to ``base`` (whose ``brand`` must stay unset). ``per_brand`` maps a brand
    id to its :class:`BrandOverride`; ``players_file`` is one file of player ids with a
    ``brand`` column (and ``currency`` where a brand has several).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    base: Plan
    brands: tuple[int, ...] | Literal["all"]
    per_brand: dict[int, BrandOverride] = {}
    players_file: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _split(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "base" not in data:
            own = {k: v for k, v in data.items() if k in BRANDS_KEYS}
            return {**own, "base": {k: v for k, v in data.items() if k not in BRANDS_KEYS}}
        return data

    @property
    def name(self) -> str:
        """The promotion's name (the base plan's), which names its group in the register."""
        return self.base.name


def is_brands_document(data: Any) -> bool:
    """Whether a decoded plan file is a multi-brand plan (it has a ``brands`` key)."""
    return isinstance(data, Mapping) and "brands" in data


def brands_plan_from_dict(
    data: Any, *, where: str = "plan", root: Path | None = None
) -> BrandsPlan:
    """Build a :class:`BrandsPlan` from decoded JSON/YAML, every type problem named at once;
    relative ``players_file`` paths are taken from ``root`` (the plan file's folder)."""
    if not isinstance(data, Mapping):
        plan_from_dict(data, where=where)  # the same refusal as a single-brand plan's
    assert isinstance(data, Mapping)
    if "brand" in data:
        raise PlanFileError(
            f"{where}: field brand: a multi-brand plan names its brands in 'brands' "
            f"(got brand={data['brand']!r} beside brands={data.get('brands')!r})"
        )
    try:
        plan = BrandsPlan.model_validate(dict(data))
    except ValidationError as exc:
        lines = []
        for err in exc.errors(include_url=False):
            loc = [str(p) for p in err["loc"]]
            if loc[:1] == ["base"]:
                loc = loc[1:]
            lines.append(
                f"{where}: field {'.'.join(loc) or '(top)'}: {err['msg']}"
                f" (got {err.get('input')!r})"
            )
        raise PlanFileError(f"{len(lines)} problem(s) in the plan:\n" + "\n".join(lines)) from None
    return _rooted(plan, root) if root is not None else plan


def _rooted(plan: BrandsPlan, root: Path) -> BrandsPlan:
    def at(name: str | None) -> str | None:
        return None if name is None or Path(name).is_absolute() else str(root / name)

    per_brand = {
        b: o.model_copy(update={"players_file": at(o.players_file) or o.players_file})
        for b, o in plan.per_brand.items()
    }
    return plan.model_copy(
        update={"per_brand": per_brand, "players_file": at(plan.players_file) or plan.players_file}
    )


def load_any_plan(path: str | Path) -> Plan | BrandsPlan:
    """Read a plan file: a :class:`BrandsPlan` when it has ``brands``, else a :class:`Plan`."""
    data = read_plan_document(path)
    if is_brands_document(data):
        return brands_plan_from_dict(data, where=str(path), root=Path(path).parent)
    return plan_from_dict(data, where=str(path))


# -- players files -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PlayerRows:
    """The player ids a players file gives, per brand and currency (``None``: the file has
    no currency column), each id once in file order, and the problems met reading it."""

    ids: Mapping[int | None, Mapping[str | None, tuple[str, ...]]]
    problems: tuple[Problem, ...] = ()


def read_players_file(
    path: str | Path,
    *,
    field: str,
    brand: int | None = None,
    max_bytes: int = PLAYERS_FILE_MAX_BYTES,
    max_rows: int = PLAYERS_FILE_MAX_ROWS,
) -> PlayerRows:
    """Read a CSV of player ids (a header naming one of :data:`PLAYER_COLUMNS`, and
    ``brand`` when ``brand`` is ``None``, optionally ``currency``). A file it cannot use is
    one problem on ``field`` (the plan field naming the file), never an exception: too
    large (``max_bytes``, ``max_rows``), unreadable, without the columns, a brand that is
    no integer."""
    path = Path(path)

    def refused(why: str) -> PlayerRows:
        return PlayerRows({}, (Problem(field, str(path), "a readable players file", why),))

    try:
        size = path.stat().st_size
        if size > max_bytes:
            return refused(f"is {size} bytes; a players file may have {max_bytes}")
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        return refused(f"cannot be read: {exc}")
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = reader.fieldnames or []
    id_column = next((c for c in PLAYER_COLUMNS if c in header), None)
    if id_column is None:
        return refused(f"has no player id column (one of {', '.join(PLAYER_COLUMNS)})")
    if brand is None and BRAND_COLUMN not in header:
        return refused("has no 'brand' column (one file for several brands needs one)")
    ids: dict[int | None, dict[str | None, dict[str, None]]] = {}
    for number, row in enumerate(reader, start=2):
        if number - 1 > max_rows:
            return refused(f"has more than {max_rows} rows")
        pid = (row.get(id_column) or "").strip()
        if not pid:
            continue
        owner: int | None = brand
        if brand is None:
            raw = (row.get(BRAND_COLUMN) or "").strip()
            if not raw.isdigit():
                return refused(f"line {number}: brand {raw!r} is not a brand id")
            owner = int(raw)
        currency = (row.get(CURRENCY_COLUMN) or "").strip() or None
        ids.setdefault(owner, {}).setdefault(currency, {})[pid] = None
    return PlayerRows({b: {c: tuple(p) for c, p in by.items()} for b, by in ids.items()})


# -- expansion -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Expansion:
    """A multi-brand plan made into one single-brand :class:`Plan` per brand (in the order
    of ``brands``), with the problems only the whole plan shows (each names its brand in
    its field: ``brands``, ``per_brand.ID``, ``brands.ID...``, ``players_file``), and the
    brands' display options as planning notes."""

    plan: BrandsPlan
    plans: Mapping[int, Plan]
    problems: tuple[Problem, ...] = ()
    notes: Mapping[int, DisplayOptions] = field(default_factory=dict)

    @property
    def brand_ids(self) -> tuple[int, ...]:
        """The brands the plan runs on, in order."""
        return tuple(self.plans)


def resolve_brands(
    plan: BrandsPlan, allowed: Collection[int] | None
) -> tuple[tuple[int, ...], list[Problem]]:
    """The brands ``plan`` runs on and the problems of its ``brands``: ``all`` without
    ``allowed`` (the account's brands, from ``GET /self``), a brand listed twice, a brand
    the account does not cover (the server would answer 403 BRAND_NOT_ALLOWED)."""
    problems: list[Problem] = []
    if plan.brands == ALL_BRANDS:
        if allowed is None:
            problems.append(
                Problem("brands", ALL_BRANDS, "the account's brands (GET /self)",
                        "'all' needs the account's brands: check the plan against the server")
            )  # fmt: skip
            return (), problems
        return tuple(sorted(allowed)), problems
    if not plan.brands:
        problems.append(Problem("brands", [], "at least 1 brand", "name the brands to run on"))
    chosen: list[int] = []
    for i, brand in enumerate(plan.brands):
        if brand in chosen:
            problems.append(Problem(f"brands[{i}]", brand, "each brand once", "is listed twice"))
            continue
        chosen.append(brand)
        if allowed is not None and brand not in allowed:
            problems.append(
                Problem(f"brands[{i}]", brand, f"one of the account's {len(allowed)} brands",
                        f"brand {brand} is not covered by the account (BRAND_NOT_ALLOWED); "
                        f"it may act on {_few(sorted(allowed))}")
            )  # fmt: skip
    return tuple(chosen), problems


def _few(values: list[int]) -> str:
    shown = ", ".join(str(v) for v in values[:10])
    return shown + (f" and {len(values) - 10} more" if len(values) > 10 else "")


def _lines(
    base: Plan, override: BrandOverride, where: str
) -> Iterator[Problem | tuple[str, dict[str, Any]]]:
    """The brand's currency lines (as dicts) and the problems of its currency overrides."""
    given = override.currencies
    if given is None:
        chosen: dict[str, dict[str, Any]] = {c: {} for c in base.currencies}
    elif isinstance(given, tuple):
        chosen = {}
        for c in given:
            if c not in base.currencies:
                yield Problem(f"{where}.currencies", c, f"one of {sorted(base.currencies)}",
                              "a list keeps the plan's currencies; give a mapping with bet "
                              "and players to add one")  # fmt: skip
            else:
                chosen[c] = {}
    else:
        chosen = dict(given)
    for currency, changes in chosen.items():
        line = base.currencies[currency].model_dump() if currency in base.currencies else {}
        line.update(changes)
        for name, value in (("bet", override.bet), ("players", override.players)):
            if isinstance(value, Mapping):
                if currency in value:
                    line[name] = value[currency]
            elif value is not None:
                line[name] = value
        missing = [k for k in ("bet", "players") if k not in line]
        if missing:
            yield Problem(f"{where}.currencies.{currency}", currency, "bet and players",
                          f"a currency the plan lacks needs {' and '.join(missing)}")  # fmt: skip
            continue
        yield currency, line
    for name, value in (("bet", override.bet), ("players", override.players)):
        if isinstance(value, Mapping):
            for currency in value:
                if currency not in chosen:
                    yield Problem(f"{where}.{name}.{currency}", currency,
                                  f"one of the brand's currencies {sorted(chosen)}",
                                  "names a currency the brand does not run")  # fmt: skip


def expand_brands(
    plan: BrandsPlan,
    *,
    allowed: Collection[int] | None = None,
    players: Mapping[int | None, Mapping[str | None, tuple[str, ...]]] | None = None,
) -> Expansion:
    """One single-brand :class:`Plan` per brand of ``plan``, with every problem of the
    whole plan named with its brand.

    ``allowed`` are the account's brands (``GET /self``): ``brands: all`` means them, and a
    brand outside them is a problem; ``None`` (offline) checks no coverage. The player ids
    of the plan's files are read here (:func:`read_players_file`), or taken from
    ``players`` (brand -> currency -> ids); ids of a currency line are added to its own,
    once each, and its ``players`` count becomes the number of ids when that is larger.
    """
    brands, problems = resolve_brands(plan, allowed)
    for brand in plan.per_brand:
        if brand not in brands:
            problems.append(
                Problem(f"per_brand.{brand}", brand, "one of the plan's brands",
                        f"overrides brand {brand}, which the plan does not run on")
            )  # fmt: skip
    ids: dict[int | None, dict[str | None, tuple[str, ...]]] = {}
    if players is not None:
        ids = {b: dict(by) for b, by in players.items()}
    else:
        if plan.players_file is not None:
            rows = read_players_file(plan.players_file, field="players_file")
            problems.extend(rows.problems)
            ids.update({b: dict(by) for b, by in rows.ids.items()})
        for brand, override in plan.per_brand.items():
            if override.players_file is not None:
                rows = read_players_file(
                    override.players_file, field=f"per_brand.{brand}.players_file", brand=brand
                )
                problems.extend(rows.problems)
                for currency, pids in rows.ids.get(brand, {}).items():
                    mine = ids.setdefault(brand, {})
                    mine[currency] = tuple(dict.fromkeys((*mine.get(currency, ()), *pids)))
    for listed in ids:
        if listed is not None and listed not in brands:
            problems.append(
                Problem("players_file", listed, "one of the plan's brands",
                        f"lists players of brand {listed}, which the plan does not run on")
            )  # fmt: skip
    base = plan.base.model_dump()
    plans: dict[int, Plan] = {}
    notes: dict[int, DisplayOptions] = {}
    for brand in brands:
        override = plan.per_brand.get(brand, BrandOverride())
        where = f"brands.{brand}"
        lines: dict[str, dict[str, Any]] = {}
        for item in _lines(plan.base, override, f"per_brand.{brand}"):
            if isinstance(item, Problem):
                problems.append(item)
            else:
                lines[item[0]] = item[1]
        for currency, pids in ids.get(brand, {}).items():
            target = currency
            if target is None:
                if len(lines) != 1:
                    problems.append(
                        Problem(f"{where}.players_file", f"{len(pids)} ids",
                                "a currency column", f"brand {brand} runs {sorted(lines)}: "
                                "say which currency each player plays in")
                    )  # fmt: skip
                    continue
                target = next(iter(lines))
            if target not in lines:
                problems.append(
                    Problem(f"{where}.players_file", target,
                            f"one of the brand's currencies {sorted(lines)}",
                            f"{len(pids)} player(s) in a currency brand {brand} does not run")
                )  # fmt: skip
                continue
            line = lines[target]
            merged = tuple(dict.fromkeys((*line.get("player_ids", ()), *pids)))
            line["player_ids"] = merged
            line["players"] = max(int(line.get("players", 0)), len(merged))
        changes: dict[str, Any] = {"brand": brand, "currencies": lines}
        for name in ("game_ids", "start", "end", "time_zone"):
            value = getattr(override, name)
            if value is not None:
                changes[name] = value
        if override.display_options is not None:
            changes["display_options"] = override.display_options
        try:
            plans[brand] = Plan.model_validate({**base, **changes})
        except ValidationError as exc:
            for err in exc.errors(include_url=False):
                loc = ".".join(str(p) for p in err["loc"])
                problems.append(Problem(f"{where}.{loc}", err.get("input"), "a valid value",
                                        err["msg"]))  # fmt: skip
            continue
        notes[brand] = plans[brand].display_options
    return Expansion(plan, plans, tuple(problems), notes)
