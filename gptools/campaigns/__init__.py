"""Campaign plans: validation, budget, plan then apply, and their display in notebooks.

A :class:`Plan` names games, the campaign type, currencies with their bet and number of
players, ``betNumber``, name, rules URL, external id, and start/end as wall-clock times in
an IANA zone. :func:`validate_plan` reports every problem at once; :func:`budget` gives the
maximum exposure; :func:`campaign_requests` turns the plan into one request per currency
with a deterministic ``requestId``; :func:`apply_plan` creates them (safe to repeat) and
records them in the local :class:`CampaignRegister`.
"""

from gptools._register_file import LoadRecord, RegisterError, default_register_path
from gptools.campaigns._apply import (
    AppliedCampaign,
    ApplyResult,
    CampaignClient,
    add_participants_to,
    apply_plan,
)
from gptools.campaigns._budget import (
    Budget,
    budget,
)
from gptools.campaigns._plan import (
    CampaignType,
    CurrencyLine,
    Plan,
    PlanFileError,
    load_plan,
    plan_from_dict,
)
from gptools.campaigns._register import (
    CampaignRecord,
    CampaignRegister,
    NotRecordedError,
    ParticipantCounts,
    server_identity,
    shared_ids,
)
from gptools.campaigns._requests import (
    campaign_requests,
    request_id,
)
from gptools.campaigns._review import Review, offered_costs, review
from gptools.campaigns._validate import (
    PlanInvalidError,
    Problem,
    Validation,
    validate_plan,
)

__all__ = [
    "AppliedCampaign",
    "ApplyResult",
    "Budget",
    "CampaignClient",
    "CampaignRecord",
    "CampaignRegister",
    "CampaignType",
    "CurrencyLine",
    "LoadRecord",
    "NotRecordedError",
    "ParticipantCounts",
    "Plan",
    "PlanFileError",
    "PlanInvalidError",
    "Problem",
    "RegisterError",
    "Review",
    "Validation",
    "add_participants_to",
    "apply_plan",
    "budget",
    "campaign_requests",
    "default_register_path",
    "load_plan",
    "offered_costs",
    "plan_from_dict",
    "request_id",
    "review",
    "server_identity",
    "shared_ids",
    "validate_plan",
]
