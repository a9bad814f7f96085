"""Apply a plan: create its campaigns (safe to repeat) and optionally add participants."""

from __future__ import annotations

import hashlib
import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from os import PathLike
from typing import Literal, Protocol

import pandas as pd

from gptools import spec
from gptools._register_file import LoadRecord, RegisterError
from gptools.campaigns._plan import AWARDED_FEATURE, Plan
from gptools.campaigns._register import (
    CampaignRegister,
    NotRecordedError,
    as_register,
    server_identity,
)
from gptools.campaigns._requests import campaign_requests
from gptools.costs import CatalogueClient, cost_book
from gptools.display import html_table
from gptools.models import CampaignCreated, CampaignRequest, ParticipantsAdded


class CampaignClient(CatalogueClient, Protocol):
    """What applying needs: :class:`gptools.client.Client` (or ``client.brand(ID)``).
    ``brand=None`` means the client's own brand, if it has one."""

    def create_campaign(
        self, request: CampaignRequest, *, brand: int | None = None
    ) -> CampaignCreated:
        """``POST /api/v1/campaign``."""

    def add_participants(
        self, campaign_id: str, player_ids: Sequence[str], *, brand: int | None = None
    ) -> ParticipantsAdded:
        """``POST /api/v1/campaign/{campaignId}/participant``."""

    def add_participants_batch(
        self,
        campaign_id: str,
        player_ids: Sequence[str],
        *,
        brand: int | None = None,
        max_ids: int = ...,
    ) -> ParticipantsAdded:
        """The batch participant endpoint (path assumed, see :mod:`gptools.spec`)."""


@dataclass(frozen=True, slots=True)
class AppliedCampaign:
    """One campaign of an applied plan: its currency, requestId, the server's campaign id
    and how many player ids were sent to it by this call."""

    currency: str
    request_id: str
    campaign_id: str
    participants_sent: int = 0


@dataclass(frozen=True, slots=True)
class ApplyResult:
    """What :func:`apply_plan` did: one :class:`AppliedCampaign` per currency."""

    plan_name: str
    campaigns: tuple[AppliedCampaign, ...]

    @property
    def campaign_ids(self) -> dict[str, str]:
        """Currency -> campaign id."""
        return {c.currency: c.campaign_id for c in self.campaigns}

    def to_frame(self) -> pd.DataFrame:
        """One row per campaign: currency, request_id, campaign_id, participants_sent."""
        return pd.DataFrame(
            [
                (c.currency, c.request_id, c.campaign_id, c.participants_sent)
                for c in self.campaigns
            ],
            columns=["currency", "request_id", "campaign_id", "participants_sent"],
        )

    def _repr_html_(self) -> str:
        name = html.escape(self.plan_name)
        head = f"<p><b>Applied</b> {name}: {len(self.campaigns)} campaign(s)</p>"
        return head + html_table(self.to_frame())


def add_players(
    client: CampaignClient,
    campaign_id: str,
    player_ids: Sequence[str],
    *,
    chunk_size: int | None = None,
    endpoint: str = "single",
    brand: int | None = None,
) -> int:
    """Add ``player_ids`` to a campaign in requests of at most ``chunk_size`` ids; returns
    how many ids were sent. Re-adding a player is harmless by assumption
    (``spec.PARTICIPANT_ADDITION_IDEMPOTENT``), so a repeated call is safe against such a
    server; large lists: the participants loader (journal, bisection of refused chunks).

    ``endpoint="batch"`` uses the batch participant endpoint the document recommends for
    large lists (path assumed), in chunks of ``spec.BATCH_PARTICIPANT_MAX_IDS``; the
    default ``"single"`` uses the documented one, in chunks of ``spec.PARTICIPANT_MAX_IDS``.
    ``brand`` is passed to every call (``None``: the client's own brand, if any).
    """
    chunk_size = spec.participant_chunk_size(endpoint, chunk_size)
    batch = endpoint == "batch"
    ids = list(player_ids)
    for start in range(0, len(ids), chunk_size):
        chunk = ids[start : start + chunk_size]
        if batch:
            client.add_participants_batch(campaign_id, chunk, brand=brand, max_ids=chunk_size)
        else:
            client.add_participants(campaign_id, chunk, brand=brand)
    return len(ids)


def apply_plan(
    client: CampaignClient,
    plan: Plan,
    *,
    now: datetime | None = None,
    costs: pd.DataFrame | None = None,
    add_participants: bool = False,
    endpoint: str = "single",
    register: CampaignRegister | str | PathLike[str] | Literal[False] | None = None,
) -> ApplyResult:
    """Validate ``plan`` and create its campaigns, one per currency; safe to call again.

    Each request carries a ``requestId`` derived from its content, so applying the same
    plan again returns the same campaign ids and creates nothing new. For AWARDED_FEATURE
    without ``costs`` the bets are checked against the configurations endpoint (the
    document's recommended source) first. With ``add_participants`` every currency's
    ``player_ids`` are added after its campaign is created; a re-run adds them again, which
    is harmless by assumption (``spec.PARTICIPANT_ADDITION_IDEMPOTENT``: the document does
    not say; against a server that refuses re-adds, a re-run raises its 4xx, and
    ``Client(participant_retries=False)`` stops the client repeating). ``endpoint`` is the
    participant endpoint (``"single"``, the default, or ``"batch"``, see
    :func:`add_players`). ``client`` is a
    :class:`~gptools.client.Client`; every call acts on the plan's ``brand``.

    The campaigns are recorded in the campaign ``register`` (``None``: the default file,
    :func:`~gptools.campaigns.default_register_path`; ``False``: not recorded) once
    every one of them is created, with the server's identity, and with the players sent
    by ``add_participants``. The register is checked before anything is created: one that
    cannot be written raises :class:`RegisterError` and nothing is sent. Should recording
    fail after the campaigns were created, :class:`NotRecordedError` names them (and
    applying the same plan again, once the register can be written, records them).
    """
    reg = as_register(register) if register is not False else None
    if reg is not None:
        reg.check_writable("nothing was created")  # before anything it could not record
    if plan.campaign_type == AWARDED_FEATURE and costs is None and plan.currencies:
        costs = cost_book(client, brand=plan.brand).table(
            list(plan.game_ids), list(plan.currencies), source="configurations"
        )
    requests = campaign_requests(plan, now=now, costs=costs)
    applied = []
    for currency, request in requests.items():
        created = client.create_campaign(request, brand=plan.brand)
        sent = 0
        if add_participants and plan.treatment_ids(currency):
            sent = add_players(
                client,
                created.campaign_id,
                plan.treatment_ids(currency),
                endpoint=endpoint,
                brand=plan.brand,
            )
        assert request.request_id is not None
        applied.append(AppliedCampaign(currency, request.request_id, created.campaign_id, sent))
    result = ApplyResult(plan.name, tuple(applied))
    if reg is not None:
        try:
            reg.record(plan, result, server=server_identity(client))
        except RegisterError as exc:
            raise NotRecordedError(
                str(exc), result.campaign_ids, "Apply the same plan again to record them."
            ) from None
    return result


def add_participants_to(
    client: CampaignClient,
    result: ApplyResult,
    player_ids: Mapping[str, Sequence[str]],
    *,
    brand: int | None = None,
    register: CampaignRegister | str | PathLike[str] | Literal[False] | None = None,
) -> dict[str, int]:
    """Add players to the campaigns of an applied plan: currency -> ids; returns
    currency -> ids sent. An unknown currency raises :class:`KeyError` before sending.

    Each currency's ids are recorded in the campaign ``register`` once sent (``None``: the
    default file; ``False``: not recorded), as a load of their own, so that ``campaigns
    list`` and the results count them (a long list: the participant loader, which
    journals and resumes)."""
    ids = result.campaign_ids
    unknown = sorted(set(player_ids) - set(ids))
    if unknown:
        raise KeyError(f"the applied plan has no campaign in {unknown}; it has {sorted(ids)}")
    reg = as_register(register) if register is not False else None
    if reg is not None:
        reg.check_writable("nothing was sent")
    sent = {}
    for cur, pids in player_ids.items():
        sent[cur] = add_players(client, ids[cur], pids, brand=brand)
        if reg is not None:
            added = list(dict.fromkeys(pids))
            digest = hashlib.sha256("\n".join(added).encode()).hexdigest()[:20]
            load = LoadRecord(server_identity(client), ids[cur], f"added-{digest}", brand,
                              "add_participants_to", len(pids), len(added), 0,
                              len(pids) - len(added), 0)  # fmt: skip
            reg.record_load(load, added)
    return sent
