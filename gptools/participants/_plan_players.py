"""A plan's players into its campaigns, through the loader: journaled, resumable, every id
accounted for, and recorded in the campaign register (what ``campaigns apply`` does after
creating the campaigns)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from gptools.client import Client
from gptools.participants._loader import Endpoint, load_participants
from gptools.participants._summary import LoadSummary

if TYPE_CHECKING:
    from gptools.campaigns import ApplyResult, CampaignRegister, Plan


def load_plan_players(
    client: Client,
    plan: Plan,
    applied: ApplyResult,
    *,
    endpoint: Endpoint = "single",
    register: CampaignRegister | str | os.PathLike[str] | Literal[False] | None = None,
    progress: bool | None = None,
    notice: Callable[[str], object] | None = None,
) -> dict[str, LoadSummary]:
    """Load each currency's ``player_ids`` of ``plan`` into its campaign of ``applied``
    (what :func:`~gptools.campaigns.apply_plan` returned) with :func:`load_participants`,
    on the plan's brand (its treatment group only, when the plan has a ``holdout``);
    returns currency -> summary, for the currencies that list players.

    Each load has its own journal (the default one), so running it again after an
    interruption sends only what was not acknowledged, and after a complete load sends
    nothing; each is recorded in ``register`` (see :func:`load_participants`).
    """
    ids = applied.campaign_ids
    summaries: dict[str, LoadSummary] = {}
    for currency in plan.currencies:
        treatment = plan.treatment_ids(currency)
        if not treatment or currency not in ids:
            continue
        summaries[currency] = load_participants(
            client,
            ids[currency],
            list(treatment),
            brand=plan.brand,
            endpoint=endpoint,
            register=register,
            progress=progress,
            notice=notice,
        )
    return summaries
