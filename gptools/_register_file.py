"""The campaign register's file: where it is, its tables, opening it to read or to write,
and a participant load's record in it.

Two capabilities write the register: :mod:`gptools.campaigns` (``CampaignRegister``, the
campaigns ``apply_plan`` created, and everything that reads it) and the participant loader
(each load records itself as its run ends, and pruning a journal records it first). What
both need lives here, importing nothing that either capability brings (no pandas), so a
load stays as light as it was.

Layout: version 1 (``PRAGMA user_version`` 0) held the ``campaigns`` table alone: the
players of a campaign were the plan's ``player_ids`` when apply had sent them
(``players_sent``), the rest lived only in the loader's journals. Version 2 adds ``loads``
(one row per participant load: its counts) and ``players`` (who was loaded into each
campaign, once each), so that the register alone answers who is in a campaign. Version 3
adds ``holdouts`` (per campaign of a plan with a holdout share: the split's seed, share,
method and each group's size and digest) and ``holdout_players`` (both groups, player by
player). Version 4 adds ``brand_groups`` and ``brand_group_members`` (a multi-brand
promotion and each of its campaigns' state). The first
write migrates a version-1 file (:func:`migrate`: apply's players copied over); a register
that cannot be written is read as it is (:func:`has_loads`).

Several processes may write at once: the file is in WAL mode, every write is one
``BEGIN IMMEDIATE`` transaction synced to disk before it returns (``synchronous=FULL``)
and waits up to :data:`BUSY_TIMEOUT_S` for another writer. Reading never writes: it opens
the file read-only (or as an unchanging file where the folder cannot be written).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from gptools._private_files import create_private, sqlite_read_uri
from gptools.errors import GptoolsError

#: The environment variable naming the register file.
ENV_REGISTER: Final = "GPTOOLS_REGISTER"
#: How long a write waits for another process's write to finish.
BUSY_TIMEOUT_S: Final = 30.0
#: The version of the register's layout this code writes.
VERSION: Final = 4
#: The load key of the players ``apply_plan(add_participants=True)`` sent itself (not
#: through the loader, which names each load by its journal's identity).
APPLY_LOAD: Final = "apply"


class RegisterError(GptoolsError, LookupError):
    """The register cannot answer: no such campaign, or the file cannot be opened."""


def default_register_path() -> Path:
    """``$GPTOOLS_REGISTER``, else ``$XDG_DATA_HOME/gptools/campaigns.sqlite``, else
    ``~/.local/share/gptools/campaigns.sqlite``."""
    if os.environ.get(ENV_REGISTER):
        return Path(os.environ[ENV_REGISTER])
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "gptools" / "campaigns.sqlite"


CAMPAIGNS: Final = """
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
)
"""

LOADS: Final = """
CREATE TABLE IF NOT EXISTS loads (
    server TEXT NOT NULL,
    campaign_id TEXT NOT NULL,
    load_key TEXT NOT NULL,
    brand INTEGER,
    source TEXT NOT NULL,
    rows INTEGER NOT NULL,
    loaded INTEGER NOT NULL,
    rejected INTEGER NOT NULL,
    duplicate INTEGER NOT NULL,
    pending INTEGER NOT NULL,
    rejected_by_reason TEXT NOT NULL,
    recorded_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (server, campaign_id, load_key)
)
"""

PLAYERS: Final = """
CREATE TABLE IF NOT EXISTS players (
    server TEXT NOT NULL,
    campaign_id TEXT NOT NULL,
    player_id TEXT NOT NULL,
    load_key TEXT NOT NULL,
    PRIMARY KEY (server, campaign_id, player_id)
) WITHOUT ROWID
"""

HOLDOUTS: Final = """
CREATE TABLE IF NOT EXISTS holdouts (
    server TEXT NOT NULL,
    campaign_id TEXT NOT NULL,
    share TEXT NOT NULL,
    seed TEXT NOT NULL,
    method TEXT NOT NULL,
    treatment INTEGER NOT NULL,
    holdout INTEGER NOT NULL,
    treatment_digest TEXT NOT NULL,
    holdout_digest TEXT NOT NULL,
    recorded_at TEXT NOT NULL,
    PRIMARY KEY (server, campaign_id)
)
"""

HOLDOUT_PLAYERS: Final = """
CREATE TABLE IF NOT EXISTS holdout_players (
    server TEXT NOT NULL,
    campaign_id TEXT NOT NULL,
    player_id TEXT NOT NULL,
    arm TEXT NOT NULL CHECK (arm IN ('treatment', 'holdout')),
    PRIMARY KEY (server, campaign_id, player_id)
) WITHOUT ROWID
"""

#: Columns of ``loads``, in order (for inserts).
LOAD_COLUMNS: Final = (
    "server", "campaign_id", "load_key", "brand", "source", "rows", "loaded", "rejected",
    "duplicate", "pending", "rejected_by_reason", "recorded_at", "updated_at",
)  # fmt: skip

#: Insert or replace a load's counts; its first ``recorded_at`` is kept.
UPSERT_LOAD: Final = (
    f"INSERT INTO loads ({', '.join(LOAD_COLUMNS)}) VALUES ({', '.join('?' * len(LOAD_COLUMNS))}) "
    "ON CONFLICT (server, campaign_id, load_key) DO UPDATE SET "
    + ", ".join(
        f"{c} = excluded.{c}" for c in LOAD_COLUMNS if c not in ("server", "campaign_id",
                                                                 "load_key", "recorded_at")
    )
)  # fmt: skip

#: A multi-brand promotion (:mod:`gptools.campaigns._group`): its plan and brands.
BRAND_GROUPS: Final = """
CREATE TABLE IF NOT EXISTS brand_groups (
    server TEXT NOT NULL,
    name TEXT NOT NULL,
    plan_hash TEXT NOT NULL,
    plan_json TEXT NOT NULL,
    brands TEXT NOT NULL,
    recorded_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (server, name)
)
"""
#: Each campaign of a group: its brand, currency, requestId, campaign id and state.
BRAND_GROUP_MEMBERS: Final = """
CREATE TABLE IF NOT EXISTS brand_group_members (
    server TEXT NOT NULL,
    name TEXT NOT NULL,
    brand INTEGER NOT NULL,
    currency TEXT NOT NULL,
    request_id TEXT NOT NULL,
    campaign_id TEXT,
    status TEXT NOT NULL,
    error TEXT,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (server, name, request_id)
)
"""

#: Add a player once per campaign (the first load that acknowledged it keeps it).
INSERT_PLAYER: Final = (
    "INSERT OR IGNORE INTO players (server, campaign_id, player_id, load_key) VALUES (?,?,?,?)"
)


def version(db: sqlite3.Connection) -> int:
    """The layout version of the register open in ``db`` (0: a new or version-1 file)."""
    return int(db.execute("PRAGMA user_version").fetchone()[0])


def tables(db: sqlite3.Connection) -> set[str]:
    """The names of the tables of the register open in ``db``."""
    return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def has_loads(db: sqlite3.Connection) -> bool:
    """Whether the register open in ``db`` has the ``loads`` and ``players`` tables (a
    version-1 register read as it is has not)."""
    return {"loads", "players"} <= tables(db)


def migrate(db: sqlite3.Connection) -> None:
    """Bring the register open in ``db`` (inside the caller's write transaction) to
    :data:`VERSION`: create what is missing, and copy the players apply sent in a
    version-1 register into ``players``, as the load :data:`APPLY_LOAD`."""
    was = version(db)
    if was >= VERSION:
        return
    for statement in (
        CAMPAIGNS,
        LOADS,
        PLAYERS,
        HOLDOUTS,
        HOLDOUT_PLAYERS,
        BRAND_GROUPS,
        BRAND_GROUP_MEMBERS,
    ):
        db.execute(statement)
    if was < 2:
        _copy_apply_players(db)
    db.execute(f"PRAGMA user_version = {VERSION}")


def _copy_apply_players(db: sqlite3.Connection) -> None:
    rows = db.execute(
        "SELECT server, campaign_id, brand, plan_json, currency, players_sent, recorded_at, "
        "updated_at FROM campaigns WHERE players_sent > 0"
    ).fetchall()
    for server, campaign_id, brand, plan_json, currency, sent, recorded, updated in rows:
        line = json.loads(plan_json).get("currencies", {}).get(currency, {})
        ids = [str(p) for p in line.get("player_ids", ())][:sent]
        db.executemany(INSERT_PLAYER, ((server, campaign_id, p, APPLY_LOAD) for p in ids))
        db.execute(
            UPSERT_LOAD,
            (server, campaign_id, APPLY_LOAD, brand, "the plan's player_ids", len(ids),
             len(ids), 0, 0, 0, "{}", recorded, updated),
        )  # fmt: skip


def _moment(text: str | None) -> datetime | None:
    return None if not text else datetime.fromisoformat(text.replace("Z", "+00:00"))


@dataclass(frozen=True, slots=True)
class LoadRecord:
    """One participant load as the register holds it, as its last run ended.

    ``load_key`` names the load (the loader's: campaign, brand and input, whatever the
    journal file; ``"apply"`` for the players apply sent itself). Counts are rows of the
    input: ``rows == loaded + rejected + duplicate + pending``, where ``pending`` ids were
    not acknowledged yet (running the same load again sends them).
    """

    server: str
    campaign_id: str
    load_key: str
    brand: int | None
    source: str
    rows: int
    loaded: int
    rejected: int
    duplicate: int
    pending: int
    rejected_by_reason: Mapping[str, int] = field(default_factory=dict)
    recorded_at: datetime | None = None
    updated_at: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready values (times ISO 8601 UTC)."""
        return {
            "loadKey": self.load_key,
            "brand": self.brand,
            "source": self.source,
            "rows": self.rows,
            "loaded": self.loaded,
            "rejected": self.rejected,
            "duplicate": self.duplicate,
            "pending": self.pending,
            "rejectedByReason": dict(self.rejected_by_reason),
            "recordedAt": iso(self.recorded_at) if self.recorded_at else None,
            "updatedAt": iso(self.updated_at) if self.updated_at else None,
        }


def load_of(row: sqlite3.Row) -> LoadRecord:
    """The :class:`LoadRecord` of a ``loads`` row."""
    return LoadRecord(
        server=row["server"],
        campaign_id=row["campaign_id"],
        load_key=row["load_key"],
        brand=row["brand"],
        source=row["source"],
        rows=int(row["rows"]),
        loaded=int(row["loaded"]),
        rejected=int(row["rejected"]),
        duplicate=int(row["duplicate"]),
        pending=int(row["pending"]),
        rejected_by_reason=json.loads(row["rejected_by_reason"]),
        recorded_at=_moment(row["recorded_at"]),
        updated_at=_moment(row["updated_at"]),
    )


def _set_up(db: sqlite3.Connection) -> None:
    """WAL, on a file another process may be setting up at this moment. Switching a new
    file to WAL can answer "database is locked" at once, without waiting for the busy
    timeout (SQLite does not call the busy handler there), so it is tried again, with
    backoff, until the busy timeout has passed."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    attempt = 0
    while True:
        try:
            db.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            attempt += 1
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            if time.monotonic() >= deadline:
                raise
            time.sleep(min(0.01 * 2**attempt, 0.5))


def _open_read_only(path: Path) -> sqlite3.Connection:
    """``path`` opened read-only. A WAL file needs its ``-shm`` beside it, which a folder
    that cannot be written cannot get: such a file is read as an unchanging one (no
    process can be writing it there)."""
    uri = sqlite_read_uri(path)
    try:
        return _probed(sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S))
    except sqlite3.OperationalError:
        return _probed(sqlite3.connect(uri + "&immutable=1", uri=True, timeout=BUSY_TIMEOUT_S))


def _probed(db: sqlite3.Connection) -> sqlite3.Connection:
    """``db`` once a first read worked (SQLite opens lazily), closed if it failed."""
    try:
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except BaseException:
        db.close()
        raise
    return db


def _fail(path: Path, exc: BaseException, doing: str) -> RegisterError:
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
    return RegisterError(f"{path}: cannot {doing} the campaign register: {reason}")


@contextlib.contextmanager
def writing(path: Path) -> Iterator[sqlite3.Connection]:
    """A connection inside one ``BEGIN IMMEDIATE`` transaction on the register at ``path``
    (created owner-only in an owner-only folder, migrated to :data:`VERSION`); committed
    and synced when the block ends, rolled back if it raises. :class:`RegisterError` when
    the file cannot be written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        # Created owner-only before SQLite opens it; SQLite copies the mode to -wal/-shm.
        create_private(path)
        db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    except (OSError, sqlite3.Error) as exc:
        raise _fail(path, exc, "write") from None
    try:
        db.row_factory = sqlite3.Row
        db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        _set_up(db)
        db.execute("PRAGMA synchronous = FULL")
        db.execute("BEGIN IMMEDIATE")
        try:
            migrate(db)
            yield db
            db.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")
            raise
    except sqlite3.Error as exc:
        raise _fail(path, exc, "write") from None
    finally:
        db.close()


@contextlib.contextmanager
def reading(path: Path) -> Iterator[sqlite3.Connection | None]:
    """A read-only connection to the register at ``path`` (``None`` when there is none
    yet); :class:`RegisterError` when it cannot be read."""
    if not path.exists():
        yield None
        return
    try:
        db = _open_read_only(path)
    except (OSError, sqlite3.Error) as exc:
        raise _fail(path, exc, "read") from None
    try:
        db.row_factory = sqlite3.Row
        yield db
    except sqlite3.Error as exc:
        raise _fail(path, exc, "read") from None
    finally:
        db.close()


def check_writable(path: Path, consequence: str = "") -> None:
    """Raise :class:`RegisterError` unless the register at ``path`` can be written now
    (created, or migrated, if need be); ``consequence`` ends the message (what the caller
    did not do)."""
    try:
        with writing(path) as db:
            # SQLite opens a file it cannot write read-only without a word, and reads and
            # empty transactions go through: only a write tells.
            db.execute("CREATE TABLE write_probe (x)")
            db.execute("DROP TABLE write_probe")
    except RegisterError as exc:
        raise RegisterError(f"{exc}; {consequence}" if consequence else str(exc)) from None


def write_load(
    db: sqlite3.Connection, load: LoadRecord, player_ids: Iterable[str], moment: str
) -> None:
    """Write ``load`` (its counts replace those of its earlier runs; its first
    ``recorded_at`` is kept) and ``player_ids`` (each once per campaign, whichever load
    acknowledged it first) inside the caller's write transaction."""
    db.execute(
        UPSERT_LOAD,
        (load.server, load.campaign_id, load.load_key, load.brand, load.source, load.rows,
         load.loaded, load.rejected, load.duplicate, load.pending,
         json.dumps(dict(load.rejected_by_reason), sort_keys=True), moment, moment),
    )  # fmt: skip
    db.executemany(
        INSERT_PLAYER, ((load.server, load.campaign_id, p, load.load_key) for p in player_ids)
    )


def record_load(
    path: Path, load: LoadRecord, player_ids: Iterable[str], *, now: datetime | None = None
) -> None:
    """Record a participant load in the register at ``path``, in one transaction (see
    :func:`write_load`)."""
    with writing(path) as db:
        write_load(db, load, player_ids, iso(now or datetime.now(UTC)))


def iso(moment: datetime) -> str:
    """``moment`` as the register writes times: ISO 8601 UTC with ``Z``."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
