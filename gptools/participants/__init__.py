"""The bulk participant loader: any reasonable player list into a campaign, resumably.

::

    from gptools.participants import load_participants
    summary = load_participants(client, "CMP-000001", "players.csv", rejects="rejects.csv")
    summary                      # an HTML table in Jupyter; str() for text
    summary.to_frame()           # one row per input row with its outcome

Every input row ends in exactly one outcome, ``loaded``, ``rejected``, ``duplicate`` or
``not_attempted``, and the counts add up. The journal (SQLite) makes a load resumable:
run the same load again and only what the server has not acknowledged is sent.
"""

from gptools.participants._brand_players import BrandsLoad, load_group_players
from gptools.participants._constants import DEFAULT_CONCURRENCY, DEFAULT_MAX_ATTEMPTS
from gptools.participants._journal import JournalBusyError, JournalMismatchError
from gptools.participants._journals import (
    JournalSummary,
    journal_summaries,
    journal_summary,
    prune_journals,
)
from gptools.participants._loader import (
    LoadInterrupted,
    LoadStopped,
    load_participants,
)
from gptools.participants._plan_players import load_plan_players
from gptools.participants._sources import (
    PLAYER_ID_HEADERS,
    REJECTS_COLUMNS,
    PlayerListError,
)
from gptools.participants._summary import LoadSummary, Outcome
from gptools.participants._validate import ReasonCode

__all__ = [
    "DEFAULT_CONCURRENCY",
    "DEFAULT_MAX_ATTEMPTS",
    "PLAYER_ID_HEADERS",
    "REJECTS_COLUMNS",
    "BrandsLoad",
    "JournalBusyError",
    "JournalMismatchError",
    "JournalSummary",
    "LoadInterrupted",
    "LoadStopped",
    "LoadSummary",
    "Outcome",
    "PlayerListError",
    "ReasonCode",
    "journal_summaries",
    "journal_summary",
    "load_group_players",
    "load_participants",
    "load_plan_players",
    "prune_journals",
]
