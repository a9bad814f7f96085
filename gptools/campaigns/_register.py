"""The local register of the campaigns gptools created and of who was loaded into them:
one SQLite file, owner-only, the one record that ``campaigns list/show/results`` read.

The provider's document shows no endpoint that lists campaigns or their participants, so
what :func:`apply_plan <gptools.campaigns.apply_plan>` created (or found again by its
requestId) is written here: campaign id, requestId, brand, server, the plan (content and
hash), currency, bet, games, betNumber, window with its zone, and when. Every participant
load records itself here as its run ends (:meth:`CampaignRegister.record_load`): its
counts, and the player ids the server acknowledged, once each per campaign. The loader's
journals only make a load resumable; deleting them changes nothing here.

Every entry names its server (a client's ``server_identity``: the provider's normalised
base URL, or a sandbox's state identity, new after a reset), so the same campaign id on
two servers is two campaigns. Several processes may write at once: the file is in WAL
mode, every write is one ``BEGIN IMMEDIATE`` transaction synced to disk before it returns
and waits up to ``BUSY_TIMEOUT_S`` for another writer, so nothing is lost. Reading never
writes: a register that cannot be written (read-only, or from before loads were recorded)
is read as it is; the first write migrates an old one. The file itself (tables, migration,
opening it, a load's record) is :mod:`gptools._register_file`, which the participant
loader writes through too.

Where: ``$GPTOOLS_REGISTER`` (a file), else ``$XDG_DATA_HOME/gptools/campaigns.sqlite``,
else ``~/.local/share/gptools/campaigns.sqlite``; the folder is made owner-only (0700) and
the file 0600 (SQLite gives its WAL files the database file's permissions).
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, Final, Literal, Protocol
from zoneinfo import ZoneInfo

import pandas as pd

from gptools._register_file import (
    APPLY_LOAD,
    LoadRecord,
    RegisterError,
    check_writable,
    default_register_path,
    has_loads,
    iso,
    load_of,
    reading,
    record_load,
    tables,
    write_load,
    writing,
)
from gptools.campaigns._holdout import HoldoutSplit, group_digest
from gptools.campaigns._plan import Plan
from gptools.display import html_table


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


#: A campaign's state by its window at a moment.
CampaignState = Literal["scheduled", "running", "ended"]
#: Outcomes of a participant load shown per campaign.
PARTICIPANT_COUNTS: Final = ("loaded", "rejected", "pending")


class NotRecordedError(RegisterError):
    """What was done at the server stands, but the register could not record it (the
    file went bad or read-only meanwhile). ``campaign_ids`` maps each created campaign's
    currency to its id; ``remedy`` says how to record them once the register can be
    written (doing the same again: the requestIds make it create nothing new)."""

    def __init__(self, reason: str, campaign_ids: Mapping[str, str], remedy: str) -> None:
        created = ", ".join(f"{cur} {cid}" for cur, cid in campaign_ids.items())
        super().__init__(f"created at the server but not recorded: {created}; {reason}. {remedy}")
        self.campaign_ids = dict(campaign_ids)
        self.remedy = remedy


def plan_hash(plan: Plan) -> str:
    """The SHA-256 of the plan's canonical JSON (sorted keys, money as written)."""
    return hashlib.sha256(_plan_json(plan).encode()).hexdigest()


def _plan_json(plan: Plan) -> str:
    # A plan without a holdout is written as before holdouts existed: its hash is unchanged.
    unset = {f for f in ("holdout", "holdout_seed") if getattr(plan, f) is None}
    data = plan.model_dump(mode="json", exclude=unset)
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class ParticipantCounts:
    """Where a campaign's players stand: loaded (distinct players the server acknowledged,
    by apply or by a load), rejected (rows the loads rejected, locally or at the server),
    pending (ids a load left unacknowledged when its last run ended)."""

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
    :attr:`start_utc`/:attr:`end_utc` are the instants. ``players`` are the campaign's
    players the register knows (sent by apply or acknowledged to a load), sorted; empty
    when read without them (``with_players=False``).
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
            "recordedAt": iso(self.recorded_at),
            "updatedAt": iso(self.updated_at),
        }
        if participants is not None:
            out["participants"] = {k: getattr(participants, k) for k in PARTICIPANT_COUNTS}
        return out


def _plan_players(row: sqlite3.Row) -> tuple[str, ...]:
    """The players apply sent, as a version-1 register tells them (its plan's ids)."""
    if not row["players_sent"]:
        return ()
    line = json.loads(row["plan_json"]).get("currencies", {}).get(row["currency"], {})
    return tuple(sorted(dict.fromkeys(str(p) for p in line.get("player_ids", ()))))


def _record(row: sqlite3.Row, players: tuple[str, ...]) -> CampaignRecord:
    return CampaignRecord(
        campaign_id=row["campaign_id"],
        request_id=row["request_id"],
        server=row["server"],
        brand=row["brand"],
        plan_name=row["plan_name"],
        plan_hash=row["plan_hash"],
        plan=json.loads(row["plan_json"]),
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


class CampaignRegister:
    """The register file at ``path`` (default :func:`default_register_path`); created,
    owner-only, by the first write. Each method opens, works and closes, so one object may
    be shared and many processes may use the same file. Methods that take ``server`` read
    one server's entries (a client's ``server_identity``); without it, every server's."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else default_register_path()

    def __repr__(self) -> str:
        return f"CampaignRegister({str(self.path)!r})"

    def check_writable(self, consequence: str = "") -> None:
        """Raise :class:`RegisterError` unless the register can be written now (it is
        created, or migrated, if need be): what ``campaigns apply`` and a participant load
        check before they send anything, so that nothing is created unrecorded.
        ``consequence`` ends the error's message (what the caller did not do)."""
        check_writable(self.path, consequence)

    # -- the file ---------------------------------------------------------------------

    # -- writing ----------------------------------------------------------------------

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
        ``recorded_at``; its ``updated_at`` and the number of players sent are updated.
        Players apply sent itself (``participants_sent``) are recorded as the load
        ``"apply"``."""
        moment = iso((now or datetime.now(UTC)).astimezone(UTC))
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
        with writing(self.path) as db:
            db.executemany(
                "INSERT INTO campaigns VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) "
                "ON CONFLICT (server, campaign_id) DO UPDATE SET "
                "players_sent = max(players_sent, excluded.players_sent), "
                "updated_at = excluded.updated_at",
                rows,
            )
            for c in result.campaigns:
                if c.participants_sent:
                    sent = plan.treatment_ids(c.currency)[: c.participants_sent]
                    write_load(
                        db,
                        LoadRecord(server, c.campaign_id, APPLY_LOAD, plan.brand,
                                   "the plan's player_ids", len(sent), len(sent), 0, 0, 0),
                        sent,
                        moment,
                    )  # fmt: skip
                split = plan.holdout_split(c.currency)
                if split is not None:
                    _write_split(db, server, c.campaign_id, split, moment)
        created = {c.campaign_id for c in result.campaigns}
        return [r for r in self.campaigns(server=server) if r.campaign_id in created]

    def record_load(
        self, load: LoadRecord, player_ids: Iterable[str], *, now: datetime | None = None
    ) -> None:
        """Record a participant load as its run ended (one transaction): its counts
        (replacing those of its earlier runs; its first ``recorded_at`` is kept) and the
        player ids the server acknowledged (each once per campaign, whichever load
        acknowledged it first)."""
        record_load(self.path, load, player_ids, now=now)

    # -- reading ----------------------------------------------------------------------

    def campaigns(
        self, *, server: str | None = None, with_players: bool = True
    ) -> list[CampaignRecord]:
        """Every recorded campaign (of one ``server`` when given), oldest first, with its
        players (``with_players=False``: without them, for listing)."""
        where, args = ("WHERE server = ?", (server,)) if server is not None else ("", ())
        with reading(self.path) as db:
            if db is None or "campaigns" not in tables(db):
                return []
            rows = db.execute(
                f"SELECT * FROM campaigns {where} ORDER BY recorded_at, campaign_id", args
            ).fetchall()
            players: dict[tuple[str, str], list[str]] = {}
            loads = has_loads(db)
            if with_players and loads:
                for r in db.execute(
                    f"SELECT server, campaign_id, player_id FROM players {where} "
                    "ORDER BY server, campaign_id, player_id",
                    args,
                ):
                    players.setdefault((r[0], r[1]), []).append(r[2])
        out = []
        for row in rows:
            key = (row["server"], row["campaign_id"])
            if not with_players:
                mine: tuple[str, ...] = ()
            elif loads:
                mine = tuple(players.get(key, ()))
            else:
                mine = _plan_players(row)
            out.append(_record(row, mine))
        return out

    def holdout_groups(self, record: CampaignRecord) -> HoldoutGroups | None:
        """The holdout split recorded for a campaign (``None``: its plan held no one out,
        or the register predates holdouts)."""
        with reading(self.path) as db:
            if db is None or "holdouts" not in tables(db):
                return None
            key = (record.server, record.campaign_id)
            row = db.execute(
                "SELECT * FROM holdouts WHERE server = ? AND campaign_id = ?", key
            ).fetchone()
            if row is None:
                return None
            arms: dict[str, list[str]] = {"treatment": [], "holdout": []}
            for pid, arm in db.execute(
                "SELECT player_id, arm FROM holdout_players WHERE server = ? AND campaign_id = ? "
                "ORDER BY player_id",
                key,
            ):
                arms[arm].append(pid)
        return HoldoutGroups(
            campaign_id=record.campaign_id,
            share=Decimal(row["share"]),
            seed=int(row["seed"]),
            method=row["method"],
            treatment=tuple(arms["treatment"]),
            holdout=tuple(arms["holdout"]),
            digests={"treatment": row["treatment_digest"], "holdout": row["holdout_digest"]},
        )

    def servers(self) -> dict[str, int]:
        """Server -> how many campaigns the register holds for it."""
        with reading(self.path) as db:
            if db is None or "campaigns" not in tables(db):
                return {}
            rows = db.execute(
                "SELECT server, count(*) FROM campaigns GROUP BY server ORDER BY server"
            ).fetchall()
        return {r[0]: int(r[1]) for r in rows}

    def get(self, campaign_id: str, *, server: str | None = None) -> CampaignRecord:
        """The campaign ``campaign_id`` of ``server`` (without ``server``: the one most
        recently updated); :class:`RegisterError` when it is not recorded there."""
        found = [r for r in self.campaigns(server=server) if r.campaign_id == campaign_id]
        if not found:
            elsewhere = sorted(
                r.server for r in self.campaigns(with_players=False)
                if r.campaign_id == campaign_id
            )  # fmt: skip
            where = f" for the server {server}" if server is not None else ""
            hint = (
                f"; it is recorded for {', '.join(elsewhere)} (--server names one)"
                if elsewhere
                else " (only campaigns created by gptools campaigns apply / apply_plan are "
                "recorded)"
            )
            raise RegisterError(
                f"campaign {campaign_id!r} is not in the register {self.path}{where}{hint}"
            )
        return max(found, key=lambda r: r.updated_at)

    def loads(
        self, *, server: str | None = None, campaign_id: str | None = None
    ) -> list[LoadRecord]:
        """The participant loads recorded (of ``server``, into ``campaign_id``, when
        given), oldest first."""
        terms = [(c, v) for c, v in (("server", server), ("campaign_id", campaign_id)) if v]
        where = ("WHERE " + " AND ".join(f"{c} = ?" for c, _ in terms)) if terms else ""
        with reading(self.path) as db:
            if db is None or not has_loads(db):
                return self._loads_as_they_were(server, campaign_id)
            rows = db.execute(
                f"SELECT * FROM loads {where} ORDER BY recorded_at, load_key",
                [v for _, v in terms],
            ).fetchall()
        return [load_of(r) for r in rows]

    def _loads_as_they_were(self, server: str | None, campaign_id: str | None) -> list[LoadRecord]:
        """The loads of a version-1 register, read as it is: apply's players only."""
        return [
            LoadRecord(r.server, r.campaign_id, APPLY_LOAD, r.brand,
                       "the plan's player_ids", len(r.players), len(r.players), 0, 0, 0,
                       recorded_at=r.recorded_at, updated_at=r.updated_at)
            for r in self.campaigns(server=server)
            if r.players and (campaign_id is None or r.campaign_id == campaign_id)
        ]  # fmt: skip

    def participant_counts(
        self, *, server: str | None = None
    ) -> dict[tuple[str, str], ParticipantCounts]:
        """(server, campaign id) -> where the campaign's players stand, for every campaign
        or load the register holds (of ``server`` when given): the one count that
        ``campaigns list/show``, the notebooks and :meth:`frame` show."""
        where, args = ("WHERE server = ?", (server,)) if server is not None else ("", ())
        with reading(self.path) as db:
            if db is None or not has_loads(db):
                return {
                    (r.server, r.campaign_id): ParticipantCounts(loaded=r.loaded)
                    for r in self._loads_as_they_were(server, None)
                }
            loaded = db.execute(
                f"SELECT server, campaign_id, count(*) FROM players {where} "
                "GROUP BY server, campaign_id",
                args,
            ).fetchall()
            others = db.execute(
                f"SELECT server, campaign_id, sum(rejected), sum(pending) FROM loads {where} "
                "GROUP BY server, campaign_id",
                args,
            ).fetchall()
        counts: dict[tuple[str, str], ParticipantCounts] = {}
        for s, c, n in loaded:
            counts[(s, c)] = ParticipantCounts(loaded=int(n))
        for s, c, rejected, pending in others:
            counts[(s, c)] = counts.get((s, c), ParticipantCounts()) + ParticipantCounts(
                rejected=int(rejected or 0), pending=int(pending or 0)
            )
        return counts

    def counted(
        self, *, server: str | None = None
    ) -> list[tuple[CampaignRecord, ParticipantCounts]]:
        """Every recorded campaign (of ``server`` when given; oldest first, without its
        players) with where its players stand (:meth:`participant_counts`; zeros for a
        campaign no load has touched)."""
        counts = self.participant_counts(server=server)
        return [
            (r, counts.get((r.server, r.campaign_id), ParticipantCounts()))
            for r in self.campaigns(server=server, with_players=False)
        ]

    def participants_of(self, record: CampaignRecord) -> ParticipantCounts:
        """Where the players of one recorded campaign stand (zeros when no load has)."""
        counts = self.participant_counts(server=record.server)
        return counts.get((record.server, record.campaign_id), ParticipantCounts())

    def to_dicts(
        self, *, now: datetime | None = None, server: str | None = None
    ) -> list[dict[str, Any]]:
        """Every recorded campaign (of ``server`` when given) as
        :meth:`CampaignRecord.to_dict` at ``now`` with its participant counts: what
        ``gptools campaigns list --json`` prints."""
        return [r.to_dict(now=now, participants=c) for r, c in self.counted(server=server)]

    def frame(self, *, now: datetime | None = None, server: str | None = None) -> pd.DataFrame:
        """One row per campaign (of ``server`` when given): id, server, plan, currency,
        bet, betNumber, window, state at ``now``, and its players (loaded, rejected,
        pending: :meth:`participant_counts`)."""
        rows = []
        for r, mine in self.counted(server=server):
            rows.append(
                (r.campaign_id, r.server, r.plan_name, r.currency, r.bet, r.bet_number,
                 f"{r.start:%Y-%m-%d %H:%M} – {r.end:%Y-%m-%d %H:%M} {r.time_zone}",
                 r.state(now), mine.loaded, mine.rejected, mine.pending)
            )  # fmt: skip
        columns = ["campaign_id", "server", "plan", "currency", "bet", "bet_number", "window",
                   "state", *PARTICIPANT_COUNTS]  # fmt: skip
        return pd.DataFrame(rows, columns=columns)

    def _repr_html_(self) -> str:
        return f"<p><b>Campaign register</b> {html.escape(str(self.path))}</p>" + html_table(
            self.frame()
        )


@dataclass(frozen=True, slots=True)
class HoldoutGroups:
    """A campaign's holdout split as the register keeps it: the ``share`` asked for, the
    ``seed`` and ``method`` (:mod:`gptools.campaigns._holdout`), and both groups (sorted),
    with the digests recorded when the plan was applied (:meth:`verified` checks them)."""

    campaign_id: str
    share: Decimal
    seed: int
    method: str
    treatment: tuple[str, ...] = field(repr=False)
    holdout: tuple[str, ...] = field(repr=False)
    digests: Mapping[str, str] = field(default_factory=dict, repr=False)

    @property
    def verified(self) -> bool:
        """Whether both groups still have the digests recorded with them."""
        return self.digests == {
            "treatment": group_digest(self.treatment),
            "holdout": group_digest(self.holdout),
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: share, seed, method, group sizes and digests (not the ids)."""
        return {
            "campaignId": self.campaign_id,
            "share": str(self.share),
            "seed": self.seed,
            "method": self.method,
            "treatment": len(self.treatment),
            "holdout": len(self.holdout),
            "digests": dict(self.digests),
        }


def _write_split(
    db: sqlite3.Connection, server: str, campaign_id: str, split: HoldoutSplit, moment: str
) -> None:
    """Record a campaign's split (replacing one recorded before: applying the same plan
    again gives the same split)."""
    digests = split.digests()
    db.execute(
        "INSERT OR REPLACE INTO holdouts VALUES (?,?,?,?,?,?,?,?,?,?)",
        (server, campaign_id, str(split.share), str(split.seed), split.method,
         len(split.treatment), len(split.holdout), digests["treatment"], digests["holdout"],
         moment),
    )  # fmt: skip
    db.execute(
        "DELETE FROM holdout_players WHERE server = ? AND campaign_id = ?", (server, campaign_id)
    )
    db.executemany(
        "INSERT INTO holdout_players VALUES (?,?,?,?)",
        [(server, campaign_id, p, "treatment") for p in split.treatment]
        + [(server, campaign_id, p, "holdout") for p in split.holdout],
    )


def shared_ids(records: Iterable[CampaignRecord]) -> dict[str, list[str]]:
    """The campaign ids ``records`` hold for more than one server, each with those servers
    (in the records' order). Campaign results name campaigns by id, and one log's events
    cannot be told apart between two servers' campaigns of the same id."""
    servers: dict[str, list[str]] = {}
    for r in records:
        servers.setdefault(r.campaign_id, []).append(r.server)
    return {cid: s for cid, s in servers.items() if len(s) > 1}


def server_identity(client: object) -> str:
    """What names the server a client talks to: its ``server_identity`` when it has one
    (stable across restarts of the embedded sandbox), else its ``base_url``."""
    for name in ("server_identity", "base_url"):
        value = getattr(client, name, None)
        if isinstance(value, str) and value:
            return value
    return "unknown"


def as_register(register: CampaignRegister | str | os.PathLike[str] | None) -> CampaignRegister:
    """``register`` as a :class:`CampaignRegister` (a path, or ``None``: the default file)."""
    return register if isinstance(register, CampaignRegister) else CampaignRegister(register)
