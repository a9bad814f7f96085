"""The local register of the campaigns gptools created: one SQLite file, owner-only.

The provider's document shows no endpoint that lists campaigns, so what :func:`apply_plan
<gptools.campaigns.apply_plan>` created (or found again by its requestId) is written here:
campaign id, requestId, brand, server, the plan (content and hash), currency, bet, games,
betNumber, window with its zone, the players it sent, and when. Several processes may
write at once: the file is in WAL mode, every write is one ``BEGIN IMMEDIATE`` transaction
and waits up to :data:`BUSY_TIMEOUT_S` for another writer, so nothing is lost.

Where: ``$GPTOOLS_REGISTER`` (a file), else ``$XDG_DATA_HOME/gptools/campaigns.sqlite``,
else ``~/.local/share/gptools/campaigns.sqlite``; the folder is made owner-only (0700) and
the file 0600 (SQLite gives its WAL files the database file's permissions).
"""

from __future__ import annotations

import contextlib
import hashlib
import html
import json
import os
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, Final, Literal, Protocol
from zoneinfo import ZoneInfo

import pandas as pd

from gptools._private_files import create_private
from gptools.campaigns._plan import Plan
from gptools.display import html_table
from gptools.errors import GptoolsError


class _Created(Protocol):
    """One created campaign of an applied plan (``AppliedCampaign``)."""

    @property
    def currency(self) -> str: ...
    @property
    def request_id(self) -> str: ...
    @property
    def campaign_id(self) -> str: ...
    @property
    def participants_sent(self) -> int: ...


class _Applied(Protocol):
    """An applied plan (``ApplyResult``); a protocol, as ``_apply`` imports this module."""

    @property
    def campaigns(self) -> Sequence[_Created]: ...


#: The environment variable naming the register file.
ENV_REGISTER: Final = "GPTOOLS_REGISTER"
#: How long a write waits for another process's write to finish.
BUSY_TIMEOUT_S: Final = 30.0
#: A campaign's state by its window at a moment.
CampaignState = Literal["scheduled", "running", "ended"]
#: Outcomes of a participant load shown per campaign.
PARTICIPANT_COUNTS: Final = ("loaded", "rejected", "pending")

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS campaigns (
    server TEXT NOT NULL,
    campaign_id TEXT NOT NULL,
    request_id TEXT NOT NULL,
    brand INTEGER,
    plan_name TEXT NOT NULL,
    plan_hash TEXT NOT NULL,
    plan_json TEXT NOT NULL,
    campaign_type TEXT NOT NULL,
    currency TEXT NOT NULL,
    bet TEXT NOT NULL,
    bet_number INTEGER NOT NULL,
    game_ids TEXT NOT NULL,
    start_local TEXT NOT NULL,
    end_local TEXT NOT NULL,
    time_zone TEXT NOT NULL,
    players_sent INTEGER NOT NULL DEFAULT 0,
    recorded_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (server, campaign_id)
);
"""


class RegisterError(GptoolsError, LookupError):
    """The register cannot answer: no such campaign, or the file cannot be opened."""


def default_register_path() -> Path:
    """``$GPTOOLS_REGISTER``, else ``$XDG_DATA_HOME/gptools/campaigns.sqlite``, else
    ``~/.local/share/gptools/campaigns.sqlite``."""
    if os.environ.get(ENV_REGISTER):
        return Path(os.environ[ENV_REGISTER])
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "gptools" / "campaigns.sqlite"


def plan_hash(plan: Plan) -> str:
    """The SHA-256 of the plan's canonical JSON (sorted keys, money as written)."""
    return hashlib.sha256(_plan_json(plan).encode()).hexdigest()


def _plan_json(plan: Plan) -> str:
    return json.dumps(plan.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class ParticipantCounts:
    """Where a campaign's players stand: loaded (acknowledged by the server), rejected,
    pending (staged or sent, not acknowledged yet)."""

    loaded: int = 0
    rejected: int = 0
    pending: int = 0

    def __add__(self, other: ParticipantCounts) -> ParticipantCounts:
        return ParticipantCounts(
            self.loaded + other.loaded, self.rejected + other.rejected, self.pending + other.pending
        )


@dataclass(frozen=True, slots=True)
class CampaignRecord:
    """One campaign gptools created, as the register holds it.

    ``start``/``end`` are wall-clock times in ``time_zone`` (as the plan says);
    :attr:`start_utc`/:attr:`end_utc` are the instants. ``players`` are the player ids
    apply sent with the plan (a participant load's players are in its journal).
    ``bet`` is the campaign's bet (AWARDED_FEATURE: the feature cost).
    """

    campaign_id: str
    request_id: str
    server: str
    brand: int | None
    plan_name: str
    plan_hash: str
    plan: Mapping[str, Any] = field(repr=False)
    campaign_type: str
    currency: str
    bet: Decimal
    bet_number: int
    game_ids: tuple[str, ...]
    start: datetime
    end: datetime
    time_zone: str
    players_sent: int
    recorded_at: datetime
    updated_at: datetime
    players: tuple[str, ...] = field(default=(), repr=False)

    @property
    def start_utc(self) -> datetime:
        """The window's start as an aware UTC instant."""
        return self.start.replace(tzinfo=ZoneInfo(self.time_zone)).astimezone(UTC)

    @property
    def end_utc(self) -> datetime:
        """The window's end as an aware UTC instant."""
        return self.end.replace(tzinfo=ZoneInfo(self.time_zone)).astimezone(UTC)

    @property
    def budget(self) -> Decimal:
        """The plan's maximum exposure for this currency: players × betNumber × bet."""
        players = int(self.plan.get("currencies", {}).get(self.currency, {}).get("players", 0))
        return self.bet * self.bet_number * players

    def state(self, now: datetime | None = None) -> CampaignState:
        """``scheduled`` before its start, ``running`` inside its window, ``ended`` after."""
        moment = (now or datetime.now(UTC)).astimezone(UTC)
        if moment < self.start_utc:
            return "scheduled"
        return "running" if moment < self.end_utc else "ended"

    def to_dict(
        self, *, now: datetime | None = None, participants: ParticipantCounts | None = None
    ) -> dict[str, Any]:
        """A JSON-ready dict (money as a string, times ISO 8601), with the state at ``now``
        and, when given, the participant counts."""
        out: dict[str, Any] = {
            "campaignId": self.campaign_id,
            "requestId": self.request_id,
            "server": self.server,
            "brand": self.brand,
            "plan": self.plan_name,
            "planHash": self.plan_hash,
            "type": self.campaign_type,
            "currency": self.currency,
            "bet": str(self.bet),
            "betNumber": self.bet_number,
            "gameIds": list(self.game_ids),
            "start": self.start.isoformat(),
            "end": self.end.isoformat(),
            "timeZone": self.time_zone,
            "state": self.state(now),
            "playersSent": self.players_sent,
            "budget": str(self.budget),
            "recordedAt": _iso(self.recorded_at),
            "updatedAt": _iso(self.updated_at),
        }
        if participants is not None:
            out["participants"] = {k: getattr(participants, k) for k in PARTICIPANT_COUNTS}
        return out


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _record(row: sqlite3.Row) -> CampaignRecord:
    plan = json.loads(row["plan_json"])
    line = plan.get("currencies", {}).get(row["currency"], {})
    players = tuple(line.get("player_ids", ())) if row["players_sent"] else ()
    return CampaignRecord(
        campaign_id=row["campaign_id"],
        request_id=row["request_id"],
        server=row["server"],
        brand=row["brand"],
        plan_name=row["plan_name"],
        plan_hash=row["plan_hash"],
        plan=plan,
        campaign_type=row["campaign_type"],
        currency=row["currency"],
        bet=Decimal(row["bet"]),
        bet_number=int(row["bet_number"]),
        game_ids=tuple(json.loads(row["game_ids"])),
        start=datetime.fromisoformat(row["start_local"]),
        end=datetime.fromisoformat(row["end_local"]),
        time_zone=row["time_zone"],
        players_sent=int(row["players_sent"]),
        recorded_at=datetime.fromisoformat(row["recorded_at"]),
        updated_at=datetime.fromisoformat(row["updated_at"]),
        players=players,
    )


def _set_up(db: sqlite3.Connection) -> None:
    """WAL and the schema, on a file another process may be setting up at this moment.
    Switching a new file to WAL can answer "database is locked" at once, without waiting
    for the busy timeout (SQLite does not call the busy handler there), so the set-up is
    tried again, with backoff, until the busy timeout has passed."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    attempt = 0
    while True:
        try:
            db.execute("PRAGMA journal_mode = WAL")
            db.executescript(_SCHEMA)
            return
        except sqlite3.OperationalError as exc:
            attempt += 1
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            if time.monotonic() >= deadline:
                raise
            time.sleep(min(0.01 * 2**attempt, 0.5))


class CampaignRegister:
    """The register file at ``path`` (default :func:`default_register_path`); created,
    owner-only, on first use. Each method opens, works and closes, so one object may be
    shared and many processes may use the same file."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else default_register_path()

    def __repr__(self) -> str:
        return f"CampaignRegister({str(self.path)!r})"

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            # Created owner-only before SQLite opens it; SQLite copies the mode to -wal/-shm.
            create_private(self.path)
            db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise RegisterError(f"{self.path}: cannot open the campaign register: {exc}") from None
        try:
            db.row_factory = sqlite3.Row
            db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            _set_up(db)
            yield db
        except sqlite3.DatabaseError as exc:
            raise RegisterError(f"{self.path}: {exc}") from None
        finally:
            db.close()

    def record(
        self,
        plan: Plan,
        result: _Applied,
        *,
        server: str,
        now: datetime | None = None,
    ) -> list[CampaignRecord]:
        """Record the campaigns of an applied ``plan`` on ``server`` (one transaction).

        A campaign already recorded (the same plan applied again) keeps its first
        ``recorded_at``; its ``updated_at`` and the number of players sent are updated."""
        moment = _iso((now or datetime.now(UTC)).astimezone(UTC))
        content, digest = _plan_json(plan), plan_hash(plan)
        rows = [
            (
                server, c.campaign_id, c.request_id, plan.brand, plan.name, digest, content,
                plan.campaign_type, c.currency, str(plan.currencies[c.currency].bet),
                plan.bet_number, json.dumps(list(plan.game_ids)),
                plan.start.replace(tzinfo=None).isoformat(),
                plan.end.replace(tzinfo=None).isoformat(), plan.time_zone,
                c.participants_sent, moment, moment,
            )
            for c in result.campaigns
        ]  # fmt: skip
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                db.executemany(
                    "INSERT INTO campaigns VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) "
                    "ON CONFLICT (server, campaign_id) DO UPDATE SET "
                    "players_sent = max(players_sent, excluded.players_sent), "
                    "updated_at = excluded.updated_at",
                    rows,
                )
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        ids = [c.campaign_id for c in result.campaigns]
        return [r for r in self.campaigns(server=server) if r.campaign_id in ids]

    def campaigns(self, *, server: str | None = None) -> list[CampaignRecord]:
        """Every recorded campaign (of one ``server`` when given), oldest first."""
        where, args = ("WHERE server = ?", (server,)) if server is not None else ("", ())
        with self._connect() as db:
            rows = db.execute(
                f"SELECT * FROM campaigns {where} ORDER BY recorded_at, campaign_id", args
            ).fetchall()
        return [_record(r) for r in rows]

    def get(self, campaign_id: str, *, server: str | None = None) -> CampaignRecord:
        """The campaign ``campaign_id`` (of ``server`` when given; else the one most
        recently updated); :class:`RegisterError` when it is not recorded."""
        found = [r for r in self.campaigns(server=server) if r.campaign_id == campaign_id]
        if not found:
            raise RegisterError(
                f"campaign {campaign_id!r} is not in the register {self.path} (only campaigns "
                "created by gptools campaigns apply / apply_plan are recorded)"
            )
        return max(found, key=lambda r: r.updated_at)

    def frame(
        self,
        *,
        now: datetime | None = None,
        participants: Mapping[str, ParticipantCounts] | None = None,
    ) -> pd.DataFrame:
        """One row per campaign: id, plan, currency, bet, betNumber, window, state at
        ``now``, and the participant counts (``participants``: campaign id -> counts)."""
        rows = []
        for r in self.campaigns():
            counts = (participants or {}).get(r.campaign_id, ParticipantCounts())
            rows.append(
                (r.campaign_id, r.plan_name, r.currency, r.bet, r.bet_number,
                 f"{r.start:%Y-%m-%d %H:%M} – {r.end:%Y-%m-%d %H:%M} {r.time_zone}",
                 r.state(now), counts.loaded, counts.rejected, counts.pending)
            )  # fmt: skip
        columns = ["campaign_id", "plan", "currency", "bet", "bet_number", "window", "state",
                   *PARTICIPANT_COUNTS]  # fmt: skip
        return pd.DataFrame(rows, columns=columns)

    def _repr_html_(self) -> str:
        return f"<p><b>Campaign register</b> {html.escape(str(self.path))}</p>" + html_table(
            self.frame()
        )


def server_identity(client: object) -> str:
    """What names the server a client talks to: its ``server_identity`` when it has one
    (stable across restarts of the embedded sandbox), else its ``base_url``."""
    for name in ("server_identity", "base_url"):
        value = getattr(client, name, None)
        if isinstance(value, str) and value:
            return value
    return "unknown"


def record_applied(
    register: CampaignRegister | str | os.PathLike[str] | None,
    plan: Plan,
    result: _Applied,
    client: object,
    *,
    now: datetime | None = None,
) -> list[CampaignRecord]:
    """Record an applied plan in ``register`` (a register, a path, or ``None`` for the
    default file)."""
    reg = register if isinstance(register, CampaignRegister) else CampaignRegister(register)
    return reg.record(plan, result, server=server_identity(client), now=now)


def participants_of(
    records: Sequence[CampaignRecord], loaded: Mapping[str, Sequence[str]] | None = None
) -> dict[str, tuple[str, ...]]:
    """Campaign id -> its players: those apply sent, and those a load acknowledged
    (``loaded``: campaign id -> ids, e.g. read from the loader's journals), once each."""
    out: dict[str, tuple[str, ...]] = {}
    for r in records:
        ids = dict.fromkeys((*r.players, *(loaded or {}).get(r.campaign_id, ())))
        out[r.campaign_id] = tuple(ids)
    return out
