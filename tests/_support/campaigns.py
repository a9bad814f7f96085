"""A campaign request the sandbox accepts, for tests that need a campaign and do not test
the request itself."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

from gptools import spec
from gptools.models import CampaignRequest


def free_rounds(**changes: Any) -> CampaignRequest:
    """A FREE_ROUNDS campaign of ten rounds of golden-pharaoh at 0.10 EUR for the week of
    1 March 2026 (Malta time), with ``changes`` (model field names) on top."""
    fields: dict[str, Any] = {
        "type": spec.FREE_ROUNDS_CAMPAIGN_TYPE,
        "name": "test campaign",
        "bet_number": 10,
        "game_ids": ["golden-pharaoh"],
        "bet": Decimal("0.10"),
        "currency_code": "EUR",
        "start_date": datetime(2026, 3, 1),
        "end_date": datetime(2026, 3, 8),
        "time_zone": "Europe/Malta",
    }
    return CampaignRequest(**{**fields, **changes})
