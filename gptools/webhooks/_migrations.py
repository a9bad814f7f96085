"""The store's schema versions: the migrations that bring a store from one version to the
next (on SQLite and on PostgreSQL), the check every connection makes, and what a
migration run reports.

Version 0 is the layout of a gptools from before schema versions (its tables, no
``webhook_schema_version`` table); version 1 adds that table, the purges' indexes and the
purge's lease table, and brings any earlier layout up to date. A store's version is the
highest ``version`` in its version table; each row also records ``compatible_from``, the
oldest version whose code still runs on the store once the migration is applied. Code of
version C runs on a store of version S when S = C, or when S > C and the store's
``compatible_from`` <= C (a rolling upgrade: the store was migrated for newer code while
this code still serves). A store older than the code is refused: the code may use what
the migration adds.

Adding a migration: append a :class:`Migration` to :data:`MIGRATIONS` with the next
version, its statements for both engines (each idempotent, ``IF NOT EXISTS``: on
PostgreSQL an index is built ``CONCURRENTLY`` before the migration's transaction, so a
run can stop between the two) and the oldest version that still runs on the result
(``compatible_from``: keep the previous version as long as the change only adds tables,
indexes or nullable columns, so that a rolling upgrade works). Until a release has
shipped version 1, new tables and indexes go into ``_schema.py``'s DDL lists, which
migration 1 runs.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from gptools.webhooks._find_schema import PG_FIND_DDL, SQLITE_FIND_DDL
from gptools.webhooks._records import SchemaVersionError
from gptools.webhooks._schema import PG_DDL, SQLITE_DDL, VERSION_TABLE
from gptools.webhooks._schema_v3 import PG_V3_DDL, SQLITE_V3_DDL

#: Runs one statement on the store (inside the migration's transaction).
Execute = Callable[[str], Any]
#: A migration's step: a statement, or a function for a step that depends on what the
#: store holds (its docstring's first line says what it does, for ``--dry-run``).
Step = str | Callable[[Execute], None]


def _sqlite_lease_owner(execute: Execute) -> None:
    """ALTER TABLE webhook_actions ADD COLUMN lease_owner TEXT -- where it is missing"""
    # SQLite has no ADD COLUMN IF NOT EXISTS; stores made before leases had owners lack it.
    columns = {row[1] for row in execute("PRAGMA table_info(webhook_actions)")}
    if "lease_owner" not in columns:
        execute("ALTER TABLE webhook_actions ADD COLUMN lease_owner TEXT")


@dataclass(frozen=True, slots=True)
class Migration:
    """One step of the store's layout: from ``version`` - 1 to ``version``, with its
    statements on each engine; ``compatible_from`` is the oldest version whose code still
    runs on the store afterwards."""

    version: int
    description: str
    compatible_from: int
    sqlite: tuple[Step, ...]
    postgres: tuple[Step, ...]


#: Every migration, in order (a fresh store gets all of them).
MIGRATIONS: Final[tuple[Migration, ...]] = (
    Migration(
        1,
        "schema version table; indexes for the purges (delivery_log_received_at, "
        "webhook_actions_done); the purge's lease table (webhook_leases); an earlier "
        "layout brought up to date",
        compatible_from=0,
        sqlite=(*SQLITE_DDL, _sqlite_lease_owner),
        postgres=PG_DDL,
    ),
    # Only adds indexes and tables: code of version 1 still runs on the result.
    Migration(
        2,
        "find and replay: indexes of delivery_log by action_id and by the body's playerId, "
        "roundId and gameId; the replays and replay_items tables",
        compatible_from=1,
        sqlite=SQLITE_FIND_DDL,
        postgres=PG_FIND_DDL,
    ),
    # The contract watcher's and the forwarding stage's tables: only new tables, so code
    # of versions 1 and 2 still runs on the result.
    Migration(
        3,
        "the contract watcher's first sightings (webhook_first_seen); the forwarding "
        "stage's per-destination state (webhook_forwards, partial indexes on its pending "
        "and dead rows)",
        compatible_from=1,
        sqlite=SQLITE_V3_DDL,
        postgres=PG_V3_DDL,
    ),
)

#: The schema version this gptools lays out and runs on: its last migration's.
SCHEMA_VERSION: Final = MIGRATIONS[-1].version


@dataclass(frozen=True, slots=True)
class StoreVersion:
    """What a store says of its layout: ``version`` (None: there is no store; 0: a layout
    from before schema versions) and ``compatible_from``."""

    version: int | None
    compatible_from: int = 0


#: The store's version and compatibility, from its version table.
READ_VERSION = f"SELECT version, compatible_from FROM {VERSION_TABLE} ORDER BY version DESC LIMIT 1"
#: Records an applied migration.
RECORD_MIGRATION = (
    f"INSERT INTO {VERSION_TABLE} (version, compatible_from, description, applied_at,"
    " applied_by) VALUES (?, ?, ?, ?, ?)"
)
#: The tables whose presence makes a store (of version 0 when the version table is not
#: among them).
STORE_TABLES = ("delivery_log", "webhook_actions")


def version_from(tables: set[str], read: Callable[[], tuple[Any, ...] | None]) -> StoreVersion:
    """The store's version, given the tables it has and a way to read its version row."""
    if VERSION_TABLE in tables:
        row = read()
        if row is not None:
            return StoreVersion(int(row[0]), int(row[1]))
        return StoreVersion(0)  # the table was created, no migration finished: version 0
    if any(name in tables for name in STORE_TABLES):
        return StoreVersion(0)
    return StoreVersion(None)


def pending(found: StoreVersion) -> tuple[Migration, ...]:
    """The migrations a store at ``found`` still needs, in order."""
    start = found.version or 0
    return tuple(m for m in MIGRATIONS if m.version > start)


def check_version(url: str, found: StoreVersion) -> None:
    """Nothing when this gptools runs on a store at ``found``; else
    :class:`SchemaVersionError`, one line saying what to run."""
    version = found.version
    if version is None or version == SCHEMA_VERSION:
        return
    if version < SCHEMA_VERSION:
        before = " (laid out before schema versions)" if version == 0 else ""
        raise SchemaVersionError(
            f"the store {url} is at schema version {version}{before}; this gptools needs "
            f"version {SCHEMA_VERSION}: run `gptools webhooks migrate --store {url}` "
            "(as a role allowed to change tables), then start it again",
            found=version,
            expected=SCHEMA_VERSION,
        )
    if found.compatible_from > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"the store {url} is at schema version {version}, which this gptools (schema "
            f"version {SCHEMA_VERSION}) cannot run on (it needs schema version "
            f"{found.compatible_from} or newer): upgrade gptools on this host",
            found=version,
            expected=SCHEMA_VERSION,
        )


def step_text(step: Step) -> str:
    """What a step runs, as ``--dry-run`` shows it."""
    if isinstance(step, str):
        return " ".join(step.split())
    return (step.__doc__ or step.__name__).strip().splitlines()[0]


def applied_by() -> str:
    """Who applies a migration: this gptools, with its version."""
    try:
        return f"gptools {importlib.metadata.version('gptools')}"
    except importlib.metadata.PackageNotFoundError:
        return "gptools"


@dataclass(frozen=True, slots=True)
class MigrationResult:
    """What :func:`~gptools.webhooks.migrate` did, or would do (``dry_run``): the store
    (``url``, without password), its version before (``from_version``; None: there was
    no store, 0: a layout from before schema versions) and after (``to_version``), and
    the migrations applied (or to apply), each as (version, description, statements)."""

    url: str
    from_version: int | None
    to_version: int
    applied: tuple[tuple[int, str, tuple[str, ...]], ...]
    dry_run: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON-ready data (``gptools webhooks migrate --json``)."""
        return {
            "store": self.url,
            "from_version": self.from_version,
            "to_version": self.to_version,
            "dry_run": self.dry_run,
            "applied": [
                {"version": v, "description": d, "statements": list(s)} for v, d, s in self.applied
            ],
        }

    def __str__(self) -> str:
        start = "no store" if self.from_version is None else f"version {self.from_version}"
        if not self.applied:
            return f"{self.url} is at schema version {self.to_version}: nothing to do"
        verb = "would migrate" if self.dry_run else "migrated"
        lines = [f"{verb} {self.url} from {start} to version {self.to_version}:"]
        for version, description, statements in self.applied:
            lines.append(f"  {version}: {description}")
            if self.dry_run:
                lines += [f"     {s}" for s in statements]
        return "\n".join(lines)


def result(
    url: str,
    found: StoreVersion,
    done: tuple[Migration, ...],
    steps: Callable[[Migration], Any],
    *,
    dry_run: bool = False,
) -> MigrationResult:
    """The :class:`MigrationResult` of migrations ``done`` (or to do: ``dry_run``) on a
    store found at ``found`` (``steps`` gives a migration's steps on its engine)."""
    target = done[-1].version if done else (found.version or SCHEMA_VERSION)
    return MigrationResult(
        url,
        found.version,
        target,
        tuple((m.version, m.description, tuple(step_text(s) for s in steps(m))) for m in done),
        dry_run,
    )
