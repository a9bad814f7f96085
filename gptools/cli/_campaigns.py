"""``gptools campaigns plan FILE`` and ``apply FILE`` (JSON or YAML plans); ``list`` and
``show ID`` (the local register); ``results SOURCE`` (from a delivery log)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from gptools import spec
from gptools.cli._common import NOW_HELP, cli_errors, connect_client, parse_now, resolve_brand
from gptools.cli._main import EXIT_BAD_INPUT, campaigns, cli_text, emit, fail
from gptools.cli._outputs import check_output_option, force_option, write_csv_output
from gptools.cli._params import BRAND_ID, column_mapping_options, mapping_fields
from gptools.errors import GameNotFoundError, MissingExtraError


@campaigns.command("plan")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option(
    "--offline",
    is_flag=True,
    help="Do not fetch the available feature costs (bets are not checked).",
)
@click.option("--brand", type=BRAND_ID, default=None, help="Brand id (overrides the plan's).")
@click.option("--now", "now_text", default=None, help=NOW_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def plan_command(
    file: str, offline: bool, brand: int | None, now_text: str | None, as_json: bool
) -> None:
    """Validate a plan FILE and show its budget and requests; exit 2 when it has errors."""
    from gptools.campaigns import AWARDED_FEATURE, load_plan, review
    from gptools.costs import CostBook

    now = parse_now(now_text)
    unknown: list[str] = []
    with cli_errors():
        plan = load_plan(file)
        costs = None
        if not offline and plan.campaign_type == AWARDED_FEATURE and plan.currencies:
            with connect_client() as client:
                chosen = resolve_brand(client, brand if brand is not None else plan.brand)
                plan = plan.model_copy(update={"brand": chosen})
                book = CostBook(client, brand=chosen)
                currencies = list(plan.currencies)
                # An unknown game is one problem of the plan, listed with the others.
                for game in plan.game_ids:
                    try:
                        book.table([game], currencies, source="configurations")
                    except GameNotFoundError:
                        unknown.append(game)
                known = [g for g in plan.game_ids if g not in unknown]
                costs = book.table(known, currencies, source="configurations")  # cached
        elif brand is not None:
            plan = plan.model_copy(update={"brand": brand})
        planned = review(plan, now=now, costs=costs, unknown_games=unknown)
    validation = planned.validation
    document = planned.to_dict()
    for problem in document["problems"]:
        problem["message"] = cli_text(problem["message"])
    document = {
        "plan": plan.name,
        "file": file,
        "ok": validation.ok,
        "bets_checked": costs is not None,
        **document,
    }
    plan_budget = document["budget"]

    def human() -> str:
        lines = [
            f"plan {plan.name!r}: "
            + ("valid" if validation.ok else f"{len(validation.errors)} error(s)")
        ]
        lines += [f"  {cli_text(str(p))}" for p in validation.problems]
        if plan_budget is not None:
            for row in plan_budget["rows"]:
                lines.append(
                    f"  {row['currency']}: max exposure {row['max_exposure']}"
                    + (
                        f" = {plan_budget['reporting_currency']} {row['reporting_value']}"
                        if row["reporting_value"]
                        else ""
                    )
                )
            if plan_budget["total"] is not None:
                lines.append(f"  total: {plan_budget['reporting_currency']} {plan_budget['total']}")
        lines += [
            f"  request {r['currency']}: requestId {r['requestId']}" for r in document["requests"]
        ]
        return "\n".join(lines)

    emit(document, as_json=as_json, human=human)
    if not validation.ok:
        raise SystemExit(EXIT_BAD_INPUT)


@campaigns.command("apply")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option(
    "--add-participants",
    is_flag=True,
    help="Also add each currency's player_ids (a re-run adds them again: harmless "
    "by assumption, spec.PARTICIPANT_ADDITION_IDEMPOTENT).",
)
@click.option(
    "--endpoint",
    type=click.Choice(spec.PARTICIPANT_ENDPOINTS),
    default="single",
    show_default=True,
    help="Participant endpoint for --add-participants: batch is the one the "
    "document recommends for large lists (its path is an assumption).",
)
@click.option("--brand", type=BRAND_ID, default=None, help="Brand id (overrides the plan's).")
@click.option("--now", "now_text", default=None, help=NOW_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def apply_command(
    file: str,
    add_participants: bool,
    endpoint: str,
    brand: int | None,
    now_text: str | None,
    as_json: bool,
) -> None:
    """Create the campaigns of a plan FILE (safe to repeat: same plan, same campaigns)."""
    from gptools.campaigns import apply_plan, load_plan

    now = parse_now(now_text)
    with cli_errors():
        plan = load_plan(file)
        with connect_client() as client:
            chosen = resolve_brand(client, brand if brand is not None else plan.brand)
            plan = plan.model_copy(update={"brand": chosen})
            result = apply_plan(
                client, plan, now=now, add_participants=add_participants, endpoint=endpoint
            )
    document = {
        "plan": plan.name,
        "brand": plan.brand,
        "campaigns": [
            {
                "currency": c.currency,
                "requestId": c.request_id,
                "campaignId": c.campaign_id,
                "participantsSent": c.participants_sent,
            }
            for c in result.campaigns
        ],
    }

    def human() -> str:
        return "\n".join(
            f"{c.currency}: campaign {c.campaign_id} (requestId {c.request_id})"
            + (f", {c.participants_sent} players sent" if c.participants_sent else "")
            for c in result.campaigns
        )

    emit(document, as_json=as_json, human=human)


def _participants(records: list[Any]) -> dict[tuple[str, str], Any]:
    """(server, campaign id) -> participant counts: loaded are the distinct players apply
    sent or a load's journal has acknowledged; rejected and pending add up the journals'
    (of that server, set-aside ones apart)."""
    from gptools.campaigns import ParticipantCounts
    from gptools.participants import journal_summaries, loaded_players

    out: dict[tuple[str, str], Any] = {}
    summaries = journal_summaries()
    for r in records:
        mine = [
            s for s in summaries
            if s.campaign_id == r.campaign_id and s.server == r.server
            and s.state in ("complete", "pending")
        ]  # fmt: skip
        loaded = dict.fromkeys((*r.players, *loaded_players(r.campaign_id, server=r.server)))
        out[(r.server, r.campaign_id)] = ParticipantCounts(
            loaded=len(loaded),
            rejected=sum(s.rejected for s in mine),
            pending=sum(s.pending for s in mine),
        )
    return out


def _campaign_line(doc: dict[str, Any]) -> str:
    p = doc["participants"]
    return (
        f"{doc['campaignId']}  {doc['state']:<9}  {doc['plan']!r} {doc['currency']} "
        f"{doc['bet']} × {doc['betNumber']}  {doc['start']} – {doc['end']} {doc['timeZone']}  "
        f"players loaded {p['loaded']}, rejected {p['rejected']}, pending {p['pending']}"
    )


@campaigns.command("list")
@click.option("--now", "now_text", default=None, help=NOW_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def list_command(now_text: str | None, as_json: bool) -> None:
    """The campaigns gptools created (the local register), with their state by window and
    their participants (loaded, rejected, pending)."""
    from gptools.campaigns import CampaignRegister

    now = parse_now(now_text)
    with cli_errors():
        register = CampaignRegister()
        records = register.campaigns()
        counts = _participants(records)
    docs = [r.to_dict(now=now, participants=counts[(r.server, r.campaign_id)]) for r in records]
    document = {"register": str(register.path), "campaigns": docs}

    def human() -> str:
        if not docs:
            return f"no campaign in the register {register.path} yet (gptools campaigns apply)"
        return "\n".join(_campaign_line(d) for d in docs)

    emit(document, as_json=as_json, human=human)


@campaigns.command("show")
@click.argument("campaign_id")
@click.option("--now", "now_text", default=None, help=NOW_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def show_command(campaign_id: str, now_text: str | None, as_json: bool) -> None:
    """One campaign of the register: its plan, window, state and participants; exit 2
    when it is not recorded."""
    from gptools.campaigns import CampaignRegister, RegisterError

    now = parse_now(now_text)
    with cli_errors():
        try:
            record = CampaignRegister().get(campaign_id)
        except RegisterError as exc:
            fail(str(exc), bad_input=True)
        counts = _participants([record])
    doc = record.to_dict(now=now, participants=counts[(record.server, record.campaign_id)])

    def human() -> str:
        keys = ("requestId", "server", "brand", "planHash", "type", "gameIds", "budget",
                "recordedAt")  # fmt: skip
        return "\n".join([_campaign_line(doc), *(f"  {k}: {doc[k]}" for k in keys)])

    emit(doc, as_json=as_json, human=human)


@campaigns.command("results")
@click.argument("source")
@click.option(
    "--campaign", "campaign_ids", multiple=True, help="A campaign id (repeat; default: all)."
)
@click.option(
    "--format",
    "fmt",
    default="auto",
    show_default=True,
    help="Log format: jsonl, parquet, sqlite or postgres; auto picks by name.",
)
@click.option(
    "--table", default="delivery_log", show_default=True, help="Store table (SQLite/PostgreSQL)."
)
@click.option(
    "--engine",
    default="duckdb",
    show_default=True,
    help="Where the results run: duckdb, or spark (the [spark] extra).",
)
@click.option(
    "--spark-master",
    envvar="GP_SPARK_MASTER",
    default=None,
    help="Spark master URL for --engine spark [env GP_SPARK_MASTER].",
)
@click.option(
    "--unreached-out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the players never reached (campaign_id, player_id) to this CSV file (a "
    "new one: an existing file only with --force).",
)
@force_option("--unreached-out")
@column_mapping_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def results_command(
    source: str, campaign_ids: tuple[str, ...], fmt: str, table: str, engine: str,
    spark_master: str | None, unreached_out: Path | None, force: bool,
    columns: tuple[tuple[str, str], ...], latency_unit: str, as_json: bool,
) -> None:  # fmt: skip
    """How the recorded campaigns did, from a webhook delivery log SOURCE (any log
    `webhooks analyze` reads): players reached and completed, rounds and exposure used
    against the budget, time to first play, and the players never reached.

    Events are attributed by the assumed rule spec.CAMPAIGN_ATTRIBUTION, unless a foreign
    log carries the campaign id: --column campaign_id=NAME attributes each action by it."""
    fields = mapping_fields(columns, latency_unit)
    check_output_option("--unreached-out", unreached_out, force=force)
    from gptools.campaigns import CampaignRegister, RegisterError
    from gptools.participants import loaded_players

    with cli_errors():
        register = CampaignRegister()
        try:
            records = (
                [register.get(c) for c in dict.fromkeys(campaign_ids)]
                if campaign_ids
                else register.campaigns()
            )
        except RegisterError as exc:
            fail(str(exc), bad_input=True)
        if not records:
            fail(f"no campaign in the register {register.path}: nothing to report", bad_input=True)
        players = {r.campaign_id: loaded_players(r.campaign_id, server=r.server) for r in records}
    try:
        from gptools.deliverylog import ColumnMapping, DeliveryLogError, campaign_results

        with campaign_results(
            source, records, players=players, format=fmt, table=table,  # type: ignore[arg-type]
            engine=engine, spark_master=spark_master,
            mapping=ColumnMapping(**fields),  # type: ignore[arg-type]
        ) as results:  # fmt: skip
            report = results.report
            unreached = results.unreached()
    except MissingExtraError as exc:
        fail(str(exc))
    except (DeliveryLogError, ImportError, ValueError) as exc:
        fail(str(exc), bad_input=True)
    if unreached_out is not None:
        rows = zip(unreached.campaign_id, unreached.player_id, strict=True)
        write_csv_output(
            "--unreached-out", unreached_out, ("campaign_id", "player_id"), rows, force=force
        )
    document = report.to_dict()
    document["unreached"] = len(unreached)

    def human() -> str:
        lines = [
            f"{report.actions:,} actions: {report.attributed:,} attributed, "
            f"{report.ambiguous:,} ambiguous, {report.unattributed:,} unattributed "
            f"({report.how()})"
        ]
        for c in report.campaigns:
            wait = c["wait_p50_s"]
            lines.append(
                f"{c['campaign_id']} {c['currency']}: reached {c['reached']}/{c['assigned']}, "
                f"completed {c['completed']}, rounds {c['rounds_used']}/{c['rounds_granted']}, "
                f"exposure {c['exposure_used']} of {c['budget']} {c['currency']}"
                + (f", median wait to first play {wait / 3600:.1f} h" if wait is not None else "")
            )
        lines.append(f"{len(unreached):,} player(s) never reached")
        if unreached_out is not None:
            lines.append(f"Wrote them to {unreached_out}")
        return "\n".join(lines)

    emit(document, as_json=as_json, human=human)
