"""Campaign plans: validation, budget, plan then apply, and their display in notebooks.

A :class:`Plan` names games, the campaign type, currencies with their bet and number of
players, ``betNumber``, name, rules URL, external id, and start/end as wall-clock times in
an IANA zone. :func:`validate_plan` reports every problem at once; :func:`budget` gives the
maximum exposure; :func:`campaign_requests` turns the plan into one request per currency
with a deterministic ``requestId``; :func:`apply_plan` creates them (safe to repeat) and
records them in the local :class:`CampaignRegister`.

A :class:`BrandsPlan` runs one promotion on several brands of a PARTNER or THIRD_PARTY
account (``brands: [...]`` or ``all``, per-brand overrides): :func:`check_brands` reviews
it against the server, every problem named with its brand, the budget per brand and
currency (:class:`BrandsReview`).
"""

from gptools._register_file import LoadRecord, RegisterError, default_register_path
from gptools.campaigns._apply import (
    AppliedCampaign,
    ApplyResult,
    CampaignClient,
    add_participants_to,
    apply_plan,
)
from gptools.campaigns._brands import (
    ALL_BRANDS,
    BrandOverride,
    BrandsPlan,
    Expansion,
    brands_plan_from_dict,
    expand_brands,
    load_any_plan,
    read_players_file,
)
from gptools.campaigns._brands_review import (
    BrandCatalogue,
    BrandChecks,
    BrandsBudget,
    BrandsClient,
    BrandsReview,
    check_brands,
    fetch_brand_checks,
    review_brands,
)
from gptools.campaigns._budget import (
    Budget,
    budget,
)
from gptools.campaigns._group import (
    BrandGroups,
    GroupClient,
    GroupIncompleteError,
    GroupMember,
    GroupResult,
    apply_brands,
)
from gptools.campaigns._group_report import GroupReport, funnel_by_brand, group_report
from gptools.campaigns._holdout import MIN_GROUP, HoldoutSplit, split_players
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
    HoldoutGroups,
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
    "ALL_BRANDS",
    "MIN_GROUP",
    "AppliedCampaign",
    "ApplyResult",
    "BrandCatalogue",
    "BrandChecks",
    "BrandGroups",
    "BrandOverride",
    "BrandsBudget",
    "BrandsClient",
    "BrandsPlan",
    "BrandsReview",
    "Budget",
    "CampaignClient",
    "CampaignRecord",
    "CampaignRegister",
    "CampaignType",
    "CurrencyLine",
    "Expansion",
    "GroupClient",
    "GroupIncompleteError",
    "GroupMember",
    "GroupReport",
    "GroupResult",
    "HoldoutGroups",
    "HoldoutSplit",
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
    "apply_brands",
    "apply_plan",
    "brands_plan_from_dict",
    "budget",
    "campaign_requests",
    "check_brands",
    "default_register_path",
    "expand_brands",
    "fetch_brand_checks",
    "funnel_by_brand",
    "group_report",
    "load_any_plan",
    "load_plan",
    "offered_costs",
    "plan_from_dict",
    "read_players_file",
    "request_id",
    "review",
    "review_brands",
    "server_identity",
    "shared_ids",
    "split_players",
    "validate_plan",
]
