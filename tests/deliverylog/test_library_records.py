"""What ``gptools webhooks analyze`` and ``campaigns results`` print comes from the
library (issue 36 item 7): ``plain_value``, ``DeliveryAnalysis.lost_records`` and
``CampaignResults.apart_in_time``, which the CLI, the widgets and notebooks share."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
from click.testing import CliRunner

from gptools.cli import cli
from gptools.deliverylog import (
    LOST_COLUMNS,
    CampaignTerms,
    analyze,
    campaign_results,
    plain_value,
)

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample_delivery_log.jsonl"


def test_plain_value() -> None:
    assert [plain_value(v) for v in (None, float("nan"), pd.NaT)] == [None, None, None]
    assert plain_value(datetime(2026, 3, 2, 10, 0)) == "2026-03-02T10:00:00Z"
    east = datetime(2026, 3, 2, 12, 0, 0, 5, tzinfo=timezone(timedelta(hours=2)))
    assert plain_value(east) == "2026-03-02T10:00:00.000005Z"
    assert plain_value(pd.Timestamp("2026-03-02T10:00:00", tz="UTC")) == "2026-03-02T10:00:00Z"
    assert type(plain_value(np.int64(7))) is int and plain_value(np.int64(7)) == 7
    assert plain_value(Decimal("2.50")) == Decimal("2.50")
    assert plain_value("text") == "text"


def test_the_cli_lists_the_librarys_lost_records() -> None:
    with analyze(SAMPLE) as analysis:
        records = analysis.lost_records()
    assert records and all(tuple(r) == LOST_COLUMNS for r in records)
    result = CliRunner().invoke(cli, ["webhooks", "analyze", str(SAMPLE), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["lost"] == json.loads(json.dumps(records, default=str))


def _terms(start: datetime, days: int) -> CampaignTerms:
    return CampaignTerms(
        campaign_id="CMP-1", campaign_type="FREE_ROUNDS", currency="EUR", bet=Decimal("1"),
        bet_number=10, game_ids=("g",), start=start, end=start + timedelta(days=days),
    )  # fmt: skip


def test_apart_in_time() -> None:
    # The sample log's events run from 2026-03-02 00:00 to 2026-03-09 00:03 UTC.
    later = datetime(2030, 3, 1, 10, 0, tzinfo=timezone(timedelta(hours=1)))
    with campaign_results(SAMPLE, [_terms(later, 30)]) as results:
        assert results.apart_in_time() == (
            "the log's events (2026-03-02 00:00 – 2026-03-09 00:03 UTC) and the campaigns' "
            "windows (2030-03-01 09:00 – 2030-03-31 09:00 UTC) do not overlap in time: no "
            "event can be a campaign's (another log, or the campaigns of another server?)"
        )
    # One minute of overlap at either end is an overlap.
    for start in (datetime(2026, 3, 9, 0, 2, tzinfo=UTC), datetime(2026, 3, 1, 0, 1, tzinfo=UTC)):
        with campaign_results(SAMPLE, [_terms(start, 1)]) as results:
            assert results.apart_in_time() is None, start
