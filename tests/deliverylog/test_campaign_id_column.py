"""A foreign log that carries a campaign id column: the results attribute each action by it
(``ColumnMapping(campaign_id=...)``), not by the assumed rule. Known truth by construction:
plays the rule would refuse (another game, outside the window, a player not loaded) count
by their id; duplicates and retries once; an action is its first valid delivery's id's;
invalid deliveries never count; an id of no campaign reported and an empty id are
unattributed, each counted apart. JSONL and Parquet, DuckDB and Spark, Python and CLI."""

from __future__ import annotations

import html
import json
import random
import sqlite3
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from click.testing import CliRunner

from gptools.cli import cli
from gptools.cli._params import MAPPING_FIELDS
from gptools.deliverylog import (
    CampaignTerms,
    ColumnMapping,
    DeliveryLogError,
    analyze,
    campaign_results,
)
from gptools.models import dumps_wire
from tests.deliverylog.conftest import PG_DSN
from tests.deliverylog.test_engines import _close, _rows

START = datetime(2030, 3, 1, 10, 0, tzinfo=UTC)
#: The foreign log's own column names (latency in seconds, the body as raw text).
MAPPING = ColumnMapping(
    received_at="time", status="code", latency_ms="took_s", body="request",
    latency_unit="s", campaign_id="promo",
)  # fmt: skip
ABSENT = object()
UNKNOWN, WITHOUT = "unknown", "without"


def _terms() -> list[CampaignTerms]:
    eur = CampaignTerms(
        campaign_id="CMP-000001", campaign_type="FREE_ROUNDS", currency="EUR",
        bet=Decimal("0.20"), bet_number=3, game_ids=("g1",), start=START,
        end=START + timedelta(days=7), players=tuple(f"p{i}" for i in range(5)),
    )  # fmt: skip
    jpy = CampaignTerms(
        campaign_id="42", campaign_type="FREE_ROUNDS", currency="JPY", bet=Decimal("20"),
        bet_number=2, game_ids=("g2",), start=START, end=START + timedelta(days=7),
        players=("q0", "q1", "q2"),
    )  # fmt: skip
    return [eur, jpy]


@dataclass
class ForeignLog:
    """Deliveries in the foreign format, each action labelled with what the results must
    make of it: a campaign id, :data:`UNKNOWN`, :data:`WITHOUT`, or ``None`` (no valid
    delivery)."""

    rng: random.Random = field(default_factory=lambda: random.Random(24))
    records: list[dict[str, Any]] = field(default_factory=list)
    labels: Counter[str | None] = field(default_factory=Counter)
    rounds: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))

    def action(
        self,
        label: str | None,
        deliveries: list[tuple[int, Any, bool]],
        *,
        player: str,
        game: str = "g1",
        currency: str = "EUR",
        bet: str = "0.20",
        at: datetime = START + timedelta(hours=1),
        events: tuple[str, ...] = ("FREE_ROUND",),
    ) -> None:
        """One action, delivered as ``(status, promo, valid)`` in order (``ABSENT``: no
        promo key; ``valid=False``: the body lacks ``bet``)."""
        action_id = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
        payload = {
            "actionId": action_id, "roundId": f"R{self.rng.getrandbits(32)}", "gameId": game,
            "playerId": player, "timestamp": at.replace(tzinfo=None).isoformat(),
            "bet": Decimal(bet), "currencyCode": currency, "events": list(events),
        }  # fmt: skip
        for i, (status, promo, valid) in enumerate(deliveries):
            body = dict(payload) if valid else {k: v for k, v in payload.items() if k != "bet"}
            record: dict[str, Any] = {
                "time": (at + timedelta(seconds=2 + 30 * i)).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                "code": status,
                "took_s": 0.0125,
                "request": dumps_wire(body).decode(),  # exact money: 0.20 stays 0.20
            }
            if promo is not ABSENT:
                record["promo"] = promo
            self.records.append(record)
        self.labels[label] += 1
        if label not in (None, UNKNOWN, WITHOUT):
            self.rounds[label][player] += 1

    def write_jsonl(self, path: Path) -> Path:
        """JSONL, one record a line, in time order."""
        rows = sorted(self.records, key=lambda r: r["time"])
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        return path

    def frame(self) -> pd.DataFrame:
        """The records as a frame, the promo column as text (Parquet and SQLite keep one
        type per column); an absent promo is NULL."""
        rows = sorted(self.records, key=lambda r: r["time"])
        df = pd.DataFrame(rows, columns=["time", "code", "took_s", "request", "promo"])
        # An object Series keeps None (a plain list would give NaN, written as 'NaN').
        texts = [None if pd.isna(v) else str(v) for v in df["promo"]]
        df["promo"] = pd.Series(texts, dtype=object, index=df.index)
        return df


def scenario() -> ForeignLog:
    """Every case the brief names, with its truth."""
    log = ForeignLog()
    eur, jpy = "CMP-000001", "42"
    ok = True
    # p0 uses all 3 rounds: once plainly, once duplicated, once after a 503 retry.
    log.action(eur, [(200, eur, ok)], player="p0")
    log.action(eur, [(200, eur, ok), (200, eur, ok)], player="p0")
    log.action(eur, [(503, eur, ok), (200, eur, ok)], player="p0")
    # The rule would refuse these three; the log's id says they are the campaign's.
    log.action(eur, [(200, eur, ok)], player="p1", game="g9")
    log.action(eur, [(200, eur, ok)], player="p1", at=START - timedelta(days=1))
    log.action(eur, [(200, eur, ok)], player="outsider")
    # The first valid delivery's id decides: the invalid first one (id 42) does not.
    log.action(eur, [(400, jpy, False), (200, f"  {eur} ", ok)], player="p2")
    # An id given as a JSON number names the campaign "42"; one with spaces too.
    log.action(jpy, [(200, 42, ok)], player="q0", game="g2", currency="JPY", bet="20")
    log.action(jpy, [(200, " 42", ok), (200, 42, ok)], player="q0", game="g2",
               currency="JPY", bet="20")  # fmt: skip
    # A play that fits the JPY campaign's every term, but the log names another campaign.
    log.action(UNKNOWN, [(200, "CMP-999", ok)], player="q1", game="g2", currency="JPY",
               bet="20")  # fmt: skip
    # Empty ids: "", spaces, JSON null, no key at all; each fits the EUR campaign's rule.
    for promo in ("", "   ", None, ABSENT):
        log.action(WITHOUT, [(200, promo, ok)], player="p3")
    # Invalid deliveries never count, whatever their id.
    log.action(None, [(400, eur, False), (400, eur, False)], player="p4")
    return log


@pytest.fixture(scope="module")
def foreign(tmp_path_factory: pytest.TempPathFactory) -> tuple[ForeignLog, Path, Path]:
    log = scenario()
    folder = tmp_path_factory.mktemp("foreign-campaign-id")
    jsonl = log.write_jsonl(folder / "foreign.jsonl")
    parquet = folder / "foreign.parquet"
    log.frame().to_parquet(parquet, index=False)
    return log, jsonl, parquet


def _check(report: Any, log: ForeignLog) -> None:
    """Every count of ``report`` equals the log's truth."""
    attributed = sum(n for k, n in log.labels.items() if k not in (None, UNKNOWN, WITHOUT))
    assert report.actions == sum(log.labels.values()) == 15
    assert (report.attributed, report.ambiguous) == (attributed, 0) == (9, 0)
    assert report.unattributed == log.labels[UNKNOWN] + log.labels[WITHOUT] + log.labels[None]
    assert (report.unknown_campaign_id, report.without_campaign_id) == (1, 4)
    assert report.without_valid_delivery == log.labels[None] == 1
    assert report.identity_holds and report.attributed_by == "campaign_id"
    entries = {c["campaign_id"]: c for c in report.campaigns}
    eur, jpy = entries["CMP-000001"], entries["42"]
    assert eur["rounds_used"] == sum(log.rounds["CMP-000001"].values()) == 7
    # Reached counts every player the log says played, the one not loaded included.
    assert (eur["reached"], eur["completed"], eur["assigned"]) == (4, 1, 5)
    assert eur["exposure_used"] == Decimal("1.40") and str(eur["exposure_used"]) == "1.40"
    assert (jpy["reached"], jpy["completed"], jpy["rounds_used"]) == (1, 1, 2)
    assert str(jpy["exposure_used"]) == "40"


def test_the_id_column_attributes_every_action(foreign: tuple[ForeignLog, Path, Path]) -> None:
    log, jsonl, parquet = foreign
    for source in (jsonl, parquet):
        with campaign_results(source, _terms(), mapping=MAPPING) as results:
            _check(results.report, log)
            unreached = results.unreached()
            assert list(zip(unreached.campaign_id, unreached.player_id, strict=True)) == [
                ("42", "q1"), ("42", "q2"), ("CMP-000001", "p3"), ("CMP-000001", "p4"),
            ]  # fmt: skip
            doc = results.report.to_dict()
            assert doc["attributed_by"] == "campaign_id" and doc["campaign_id_column"] == "promo"
            assert "campaign id column 'promo'" in html.unescape(results.report._repr_html_())
        # The analyser reads the same log through the same mapping: the same actions.
        with analyze(source, mapping=MAPPING) as analysis:
            assert analysis.report.actions == 15


def test_an_unreported_campaign_id_is_unknown(foreign: tuple[ForeignLog, Path, Path]) -> None:
    _, jsonl, _ = foreign
    with campaign_results(jsonl, _terms()[:1], mapping=MAPPING) as results:
        report = results.report
        # The JPY campaign's 2 actions now name a campaign not reported.
        assert (report.attributed, report.unknown_campaign_id) == (7, 3)
        assert report.identity_holds


def test_the_first_valid_delivery_names_the_campaign_not_a_later_one(tmp_path: Path) -> None:
    # Two valid deliveries of one action that name different campaigns: the first one
    # decides, whatever the later ones (retries, duplicates) say.
    log = ForeignLog()
    eur, ok = "CMP-000001", True
    log.action(eur, [(200, eur, ok), (200, "42", ok)], player="p0")
    log.action(eur, [(400, "42", False), (200, eur, ok), (200, "CMP-999", ok)], player="p1")
    with campaign_results(log.write_jsonl(tmp_path / "log.jsonl"), _terms(),
                          mapping=MAPPING) as results:  # fmt: skip
        report = results.report
        assert (report.actions, report.attributed, report.unknown_campaign_id) == (2, 2, 0)
        rounds = {c["campaign_id"]: c["rounds_used"] for c in report.campaigns}
        assert rounds == {"CMP-000001": 2, "42": 0}


def test_without_the_column_the_rule_attributes(foreign: tuple[ForeignLog, Path, Path]) -> None:
    _, jsonl, _ = foreign
    rule = ColumnMapping(received_at="time", status="code", latency_ms="took_s",
                         body="request", latency_unit="s")  # fmt: skip
    with campaign_results(jsonl, _terms(), mapping=rule) as results:
        report = results.report
        assert report.attributed_by == "assumed_rule" and report.unknown_campaign_id is None
        # By the rule: p0's 3, p2's 1 and the four empty-id plays of p3 (EUR); q0's 2 and
        # the unknown id's play of q1 (JPY). Another game, before the start, the outsider:
        # not the campaign's.
        assert report.attributed == 11 and report.identity_holds


def test_a_store_table_with_an_integer_id_column(
    foreign: tuple[ForeignLog, Path, Path], tmp_path: Path
) -> None:
    log, _, _ = foreign
    path = tmp_path / "foreign.sqlite3"
    frame = log.frame()
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE deliveries (time TEXT, code INTEGER, took_s REAL, "
                   "request TEXT, promo)")  # fmt: skip
        # SQLite keeps each value's own type: 42 as an integer, the rest as text.
        rows = [
            (r.time, int(r.code), float(r.took_s), r.request, 42 if r.promo == "42" else r.promo)
            for r in frame.itertuples()
        ]
        db.executemany("INSERT INTO deliveries VALUES (?, ?, ?, ?, ?)", rows)
    with campaign_results(path, _terms(), mapping=MAPPING, table="deliveries") as results:
        _check(results.report, log)


def test_a_postgresql_table_with_a_text_id_column(
    foreign: tuple[ForeignLog, Path, Path], pg_conn: Any, pg_schema: str
) -> None:
    log, _, _ = foreign
    pg_conn.execute(f'CREATE SCHEMA "{pg_schema}"')
    pg_conn.execute(
        f'CREATE TABLE "{pg_schema}".gateway (time timestamptz, code integer, '
        "took_s double precision, request text, promo text)"
    )
    rows = [(r.time, int(r.code), float(r.took_s), r.request, r.promo)
            for r in log.frame().itertuples()]  # fmt: skip
    with pg_conn.cursor() as cur:
        cur.executemany(f'INSERT INTO "{pg_schema}".gateway VALUES (%s, %s, %s, %s, %s)', rows)
    source = f"{PG_DSN}?schema={pg_schema}"
    with campaign_results(source, _terms(), mapping=MAPPING, table="gateway") as results:
        _check(results.report, log)


def test_a_mapping_naming_an_absent_column_is_refused(
    foreign: tuple[ForeignLog, Path, Path],
) -> None:
    _, _, parquet = foreign
    mapping = ColumnMapping(received_at="time", status="code", latency_ms="took_s",
                            body="request", campaign_id="campaign")  # fmt: skip
    with pytest.raises(DeliveryLogError, match="campaign"):
        campaign_results(parquet, _terms(), mapping=mapping)
    with pytest.raises(ValueError, match="campaign_id must name a column"):
        ColumnMapping(campaign_id="")


def test_both_engines_agree(foreign: tuple[ForeignLog, Path, Path], spark: Any) -> None:
    log, jsonl, parquet = foreign
    for source in (jsonl, parquet):
        with (
            campaign_results(source, _terms(), mapping=MAPPING) as duck,
            campaign_results(source, _terms(), mapping=MAPPING, engine="spark", spark=spark) as sp,
        ):
            _check(sp.report, log)
            one, two = duck.report.to_dict(), sp.report.to_dict()
            assert one.pop("source") == two.pop("source")
            _close(one, two, "report")
            for name in ("players", "uptake", "unreached"):
                a, b = getattr(duck, name)(), getattr(sp, name)()
                _close(_rows(a), _rows(b), name)


def test_the_cli_maps_the_column(cli_runner: CliRunner, tmp_path: Path) -> None:
    example = Path(__file__).resolve().parents[2] / "data" / "example_plan.yaml"
    apply = ["campaigns", "apply", str(example), "--json", "--now", "2029-12-01T12:00:00Z"]
    applied = cli_runner.invoke(cli, apply)
    assert applied.exit_code == 0, applied.output
    eur = {c["currency"]: c["campaignId"] for c in json.loads(applied.stdout)["campaigns"]}["EUR"]
    log = ForeignLog()
    # The example plan's EUR campaign: an awarded feature at 20.00 on golden-pharaoh.
    play: dict[str, Any] = {"game": "golden-pharaoh", "bet": "20.00", "events": ("FEATURE",),
                            "at": datetime(2030, 3, 2, 12, 0, tzinfo=UTC)}  # fmt: skip
    log.action(eur, [(503, eur, True), (200, eur, True)], player="p-eur-0001", **play)
    log.action(eur, [(200, eur, True)], player="p-eur-0001", **{**play, "game": "another"})
    log.action(UNKNOWN, [(200, "CMP-999", True)], player="p-eur-0002", **play)
    log.action(WITHOUT, [(200, "", True)], player="p-eur-0002", **play)
    path = log.write_jsonl(tmp_path / "foreign.jsonl")
    columns = ["--column", "received_at=time", "--column", "status=code", "--column",
               "latency_ms=took_s", "--column", "body=request", "--latency-unit", "s"]  # fmt: skip
    by_id = [*columns, "--column", "campaign_id=promo"]
    result = cli_runner.invoke(cli, ["campaigns", "results", str(path), *by_id, "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert (doc["actions"], doc["attributed"], doc["unattributed"]) == (4, 2, 2)
    assert (doc["unknown_campaign_id"], doc["without_campaign_id"]) == (1, 1)
    assert doc["attributed_by"] == "campaign_id" and doc["check"]["holds"]
    entries = {c["campaign_id"]: c for c in doc["campaigns"]}
    assert entries[eur]["rounds_used"] == 2 and entries[eur]["exposure_used"] == "40.00"
    human = cli_runner.invoke(cli, ["campaigns", "results", str(path), *by_id])
    assert "campaign id column 'promo'" in human.stdout, human.output
    # The same log without the column: the assumed rule (the other game is not the
    # campaign's; the unknown and empty ids' plays fit its every term).
    ruled = cli_runner.invoke(cli, ["campaigns", "results", str(path), *columns, "--json"])
    assert json.loads(ruled.stdout)["attributed"] == 3
    analysed = cli_runner.invoke(cli, ["webhooks", "analyze", str(path), *by_id, "--json"])
    assert analysed.exit_code == 0, analysed.output
    assert json.loads(analysed.stdout)["actions"] == 4
    bad = cli_runner.invoke(cli, ["webhooks", "analyze", str(path), "--column", "promo"])
    assert bad.exit_code == 2 and "FIELD=NAME" in bad.stderr
    twice = cli_runner.invoke(
        cli, ["webhooks", "analyze", str(path), "--column", "status=a", "--column", "status=b"]
    )
    assert twice.exit_code == 2 and "status given twice" in twice.stderr


def test_the_cli_knows_every_mapping_field() -> None:
    named = [f for f in ColumnMapping.__dataclass_fields__ if f != "latency_unit"]
    assert list(MAPPING_FIELDS) == named


def test_the_sample_foreign_log() -> None:
    """``data/sample_foreign_log.jsonl`` (the README's example): 8 actions, CMP-000001's 4
    (one duplicated, one retried), CMP-000002's 1, an empty and an absent id, and one
    action whose only delivery is invalid."""
    sample = Path(__file__).resolve().parents[2] / "data" / "sample_foreign_log.jsonl"
    mapping = ColumnMapping(received_at="time", status="upstream_status",
                            latency_ms="request_time", latency_unit="s", body="request_body",
                            campaign_id="promo_id")  # fmt: skip
    terms = [
        CampaignTerms(
            campaign_id=cid,
            campaign_type="AWARDED_FEATURE",
            currency=cur,
            bet=Decimal(bet),
            bet_number=10,
            game_ids=("golden-pharaoh",),
            start=START,
            end=START + timedelta(days=30),
        )
        for cid, cur, bet in (("CMP-000001", "EUR", "20.00"), ("CMP-000002", "JPY", "2000"))
    ]
    with campaign_results(sample, terms, mapping=mapping) as results:
        r = results.report
        assert (r.actions, r.attributed, r.unattributed) == (8, 5, 3)
        assert (r.unknown_campaign_id, r.without_campaign_id, r.without_valid_delivery) == (0, 2, 1)
        assert [c["rounds_used"] for c in r.campaigns] == [4, 1]
    with campaign_results(sample, terms[:1], mapping=mapping) as results:
        r = results.report
        assert (r.attributed, r.unknown_campaign_id, r.without_campaign_id) == (4, 1, 2)
