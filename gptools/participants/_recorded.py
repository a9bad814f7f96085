"""A participant load recorded in the campaign register, the one record of who was loaded.

The journal makes a load resumable; the register (:class:`gptools.campaigns.
CampaignRegister`) is what ``campaigns list/show/results`` read. A load writes itself
there as each run ends (:func:`record_load`: its counts and the ids the server
acknowledged, keyed by the server, the campaign and the load's :attr:`Identity.key`), and
pruning a journal records it first (a journal written before loads were recorded is
migrated that way), so deleting journals changes no number. The writing goes through
:mod:`gptools._register_file`, not the campaigns package: a load imports no pandas.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from gptools import _register_file
from gptools._private_files import sqlite_read_uri
from gptools._register_file import LoadRecord, default_register_path
from gptools.participants._journal import Counts, Identity, loaded_ids, read_counts

if TYPE_CHECKING:
    from gptools.campaigns import CampaignRegister


def register_path(
    register: CampaignRegister | str | os.PathLike[str] | Literal[False] | None,
) -> Path | None:
    """The register file a ``register=`` argument names: a register's, a path, the default
    file for ``None``; ``None`` for ``False`` (not recorded)."""
    if register is False:
        return None
    if register is None:
        return default_register_path()
    if isinstance(register, str | os.PathLike):
        return Path(register)
    return Path(register.path)


def record_load(
    path: Path, meta: Mapping[str, str], counts: Counts, ids: Iterable[str]
) -> LoadRecord:
    """Record in the register at ``path`` the load whose journal holds ``meta`` and
    ``counts``, and ``ids``, those the server acknowledged: under the server the journal
    was made against, the load's :attr:`Identity.key`."""
    identity = Identity.of_meta(meta)
    load = LoadRecord(
        server=identity.server,
        campaign_id=identity.campaign_id,
        load_key=identity.key,
        brand=identity.brand,
        source=meta.get("source", ""),
        **counts.totals(),
        rejected_by_reason=counts.rejected_by_reason,
    )
    _register_file.record_load(path, load, ids)
    return load


def record_journal_file(register: Path, path: str | os.PathLike[str]) -> LoadRecord:
    """:func:`record_load` of the journal file at ``path``, opened read-only."""
    with contextlib.closing(sqlite3.connect(sqlite_read_uri(Path(path)), uri=True)) as db:
        meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
        return record_load(register, meta, read_counts(db), loaded_ids(db))
