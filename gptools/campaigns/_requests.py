"""Plan -> one campaign request per currency, each with a deterministic ``requestId``."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import pandas as pd

from gptools.campaigns._plan import Plan
from gptools.campaigns._validate import validate_plan
from gptools.costs import minor_unit
from gptools.models import CampaignRequest, dumps_wire

#: The UUID5 namespace of gptools' campaign request ids (uuid5(NAMESPACE_DNS,
#: "campaign-plan.gptools")); fixed forever, or re-applying an old plan would duplicate it.
REQUEST_ID_NAMESPACE = uuid.UUID("a352d875-0407-55d5-b941-13be22206e11")


def _canonical(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _canonical(obj[k]) for k in sorted(obj)}
    if isinstance(obj, list | tuple):
        return [_canonical(v) for v in obj]
    return obj


def request_id(request: CampaignRequest, *, brand: int | None = None) -> str:
    """The UUID5 (36 characters) of a request's content and brand, ``requestId`` excluded.

    The same content always gives the same id, so sending it again creates nothing new;
    any change (a date, the bet, the brand) gives a new id.
    """
    body = request.model_dump(mode="python", by_alias=True, exclude_none=True)
    body.pop("requestId", None)
    content = dumps_wire({"brand": brand, "campaign": _canonical(body)})
    return str(uuid.uuid5(REQUEST_ID_NAMESPACE, content.decode()))


def campaign_request(plan: Plan, currency: str) -> CampaignRequest:
    """The request for one currency of ``plan`` (not validated: see :func:`campaign_requests`).

    The bet is written with exactly the currency's decimals (``2.5`` EUR is sent as
    ``2.50``), so equal amounts give equal request ids.
    """
    line = plan.currencies[currency]
    draft = CampaignRequest(
        type=plan.wire_type,
        name=plan.name,
        external_campaign_id=plan.external_campaign_id,
        rules_url=plan.rules_url,
        bet_number=plan.bet_number,
        game_ids=list(plan.game_ids),
        bet=line.bet.quantize(minor_unit(currency)),
        currency_code=currency,
        start_date=plan.start,
        end_date=plan.end,
        time_zone=plan.time_zone,
    )
    return draft.model_copy(update={"request_id": request_id(draft, brand=plan.brand)})


def campaign_requests(
    plan: Plan,
    *,
    now: datetime | None = None,
    costs: pd.DataFrame | None = None,
) -> dict[str, CampaignRequest]:
    """Validate ``plan`` and build one request per currency (currency -> request).

    Raises :class:`~gptools.campaigns.PlanInvalidError` listing every error when the plan
    has one; warnings do not stop it. ``now`` and ``costs`` as in :func:`validate_plan`.
    """
    validate_plan(plan, now=now, costs=costs).raise_for_errors()
    return {currency: campaign_request(plan, currency) for currency in plan.currencies}
