"""Campaign plans: validation, budget, plan then apply, and their display in notebooks.

A :class:`Plan` names games, the campaign type, currencies with their bet and number of
players, ``betNumber``, name, rules URL, external id, and start/end as wall-clock times in
an IANA zone. :func:`validate_plan` reports every problem at once; :func:`budget` gives the
maximum exposure; :func:`campaign_requests` turns the plan into one request per currency
with a deterministic ``requestId``; :func:`apply_plan` creates them (safe to repeat) and
records them in the local :class:`CampaignRegister`.
"""

from gptools.campaigns._apply import (
    AppliedCampaign,
    ApplyResult,
    CampaignClient,
    add_participants_to,
    add_players,
    apply_plan,
)
from gptools.campaigns._budget import BUDGET_COLUMNS, Budget, budget
from gptools.campaigns._plan import (
    AWARDED_FEATURE,
    CAMPAIGN_TYPES,
    FREE_ROUNDS,
    CurrencyLine,
    Plan,
    PlanFileError,
    load_plan,
    plan_from_dict,
    plan_html,
    player_view,
)
from gptools.campaigns._register import (
    ENV_REGISTER,
    CampaignRecord,
    CampaignRegister,
    ParticipantCounts,
    RegisterError,
    default_register_path,
    participants_of,
    plan_hash,
    server_identity,
)
from gptools.campaigns._requests import (
    REQUEST_ID_NAMESPACE,
    campaign_request,
    campaign_requests,
    request_id,
)
from gptools.campaigns._review import Review, review
from gptools.campaigns._validate import (
    PlanInvalidError,
    Problem,
    Validation,
    instant,
    local_time_kind,
    validate_plan,
)

__all__ = [
    "AWARDED_FEATURE",
    "BUDGET_COLUMNS",
    "CAMPAIGN_TYPES",
    "ENV_REGISTER",
    "FREE_ROUNDS",
    "REQUEST_ID_NAMESPACE",
    "AppliedCampaign",
    "ApplyResult",
    "Budget",
    "CampaignClient",
    "CampaignRecord",
    "CampaignRegister",
    "CurrencyLine",
    "ParticipantCounts",
    "Plan",
    "PlanFileError",
    "PlanInvalidError",
    "Problem",
    "RegisterError",
    "Review",
    "Validation",
    "add_participants_to",
    "add_players",
    "apply_plan",
    "budget",
    "campaign_request",
    "campaign_requests",
    "default_register_path",
    "instant",
    "load_plan",
    "local_time_kind",
    "participants_of",
    "plan_from_dict",
    "plan_hash",
    "plan_html",
    "player_view",
    "request_id",
    "review",
    "server_identity",
    "validate_plan",
]
