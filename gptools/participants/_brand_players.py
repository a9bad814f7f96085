"""A multi-brand plan's players into its campaigns, brand by brand, through the loader.

Each brand's players are loaded by :func:`~gptools.participants.load_plan_players` into
that brand's campaigns of the group (journaled, resumable, recorded in the campaign
register); a brand whose load fails is named with the reason and the other brands are
still loaded. The client's rate tiers are the account's (one user, whatever the brand).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from gptools.client import Client
from gptools.errors import GptoolsError
from gptools.participants._loader import Endpoint
from gptools.participants._plan_players import load_plan_players
from gptools.participants._summary import LoadSummary

if TYPE_CHECKING:
    from gptools.campaigns import CampaignRegister, Plan
    from gptools.campaigns._group import GroupResult


@dataclass(frozen=True, slots=True)
class BrandsLoad:
    """What loading a group's players did: (brand, currency) -> the load's summary, and
    brand -> why its load stopped (a brand whose load failed; its other currencies may
    have loaded)."""

    summaries: Mapping[tuple[int, str], LoadSummary] = field(default_factory=dict)
    failures: Mapping[int, str] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """Whether every load finished with every id accounted for and no brand failed."""
        return not self.failures and all(s.complete for s in self.summaries.values())

    def incomplete(self) -> list[str]:
        """One line per brand or load that is not complete, naming it."""
        lines = [f"brand {b}: {why}" for b, why in self.failures.items()]
        lines += [
            f"brand {b} {c}: {s.not_attempted} player id(s) of {s.campaign_id} not loaded "
            f"yet ({s.last_error or 'no answer'})"
            for (b, c), s in self.summaries.items()
            if not s.complete
        ]
        return lines


def load_group_players(
    client: Client,
    plans: Mapping[int, Plan],
    group: GroupResult,
    *,
    endpoint: Endpoint = "single",
    register: CampaignRegister | str | os.PathLike[str] | Literal[False] | None = None,
    progress: bool | None = None,
    notice: Callable[[str], object] | None = None,
) -> BrandsLoad:
    """Load each brand's ``player_ids`` (``plans``: brand -> its single-brand plan, as
    :class:`~gptools.campaigns.BrandsReview` holds them) into its created campaigns of
    ``group``. A brand without created campaigns is skipped (the group names it as
    failed or pending); a brand whose load raises is named in :attr:`BrandsLoad.failures`
    and the next brand is loaded. Running it again sends only what is not acknowledged."""
    summaries: dict[tuple[int, str], LoadSummary] = {}
    failures: dict[int, str] = {}
    for brand in group.brands:
        applied = group.applied(brand)
        if not applied.campaigns or brand not in plans:
            continue
        try:
            loaded = load_plan_players(
                client,
                plans[brand],
                applied,
                endpoint=endpoint,
                register=register,
                progress=progress,
                notice=notice,
            )
        except GptoolsError as exc:
            failures[brand] = str(exc)
            continue
        summaries.update({(brand, currency): s for currency, s in loaded.items()})
    return BrandsLoad(summaries, failures)
