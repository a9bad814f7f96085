"""The truth of what the sandbox's players played, written to a file (``sandbox play
--truth``): one JSON document, owner-only, replaced whole, never through a link."""

from __future__ import annotations

import json
import stat
from datetime import datetime, timedelta, timezone
from pathlib import Path

from gptools.sandbox import CampaignPlayed, write_truth

#: 14:30 at +02:00 is 12:30 UTC: the file says UTC.
UNTIL = datetime(2030, 3, 5, 14, 30, tzinfo=timezone(timedelta(hours=2)))
PLAYED = [
    CampaignPlayed("c-1", bet_number=4, participants=3, events=(), rounds={"p1": 4, "p2": 1}),
    CampaignPlayed("c-2", bet_number=2, participants=1, events=(), rounds={}),
]


def test_the_truth_is_one_document_in_utc(tmp_path: Path) -> None:
    path = write_truth(tmp_path / "truth.json", PLAYED, seed=7, until=UNTIL)
    assert path == tmp_path / "truth.json"
    assert json.loads(path.read_text(encoding="utf-8")) == {
        "seed": 7,
        "until": "2030-03-05T12:30:00Z",
        "campaigns": [
            {"campaignId": "c-1", "betNumber": 4, "participants": 3, "reached": 2,
             "completed": 1, "roundsUsed": 5, "rounds": {"p1": 4, "p2": 1}},
            {"campaignId": "c-2", "betNumber": 2, "participants": 1, "reached": 0,
             "completed": 0, "roundsUsed": 0, "rounds": {}},
        ],
    }  # fmt: skip
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["truth.json"]  # no temporary left


def test_a_link_at_the_path_is_replaced_not_written_through(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("untouched", encoding="utf-8")
    link = tmp_path / "truth.json"
    link.symlink_to(elsewhere)
    write_truth(link, PLAYED[:1], seed=1, until=UNTIL)
    assert not link.is_symlink()
    assert json.loads(link.read_text(encoding="utf-8"))["seed"] == 1
    assert elsewhere.read_text(encoding="utf-8") == "untouched"
