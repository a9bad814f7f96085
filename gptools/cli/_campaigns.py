"""``gptools campaigns plan FILE`` and ``gptools campaigns apply FILE`` (JSON or YAML plans)."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

import click
import pandas as pd

from gptools.cli._costs import cli_errors, connect_client, resolve_brand
from gptools.cli._main import EXIT_BAD_INPUT, campaigns, cli_text, emit, fail


def _text(value: Any) -> Any:
    if isinstance(value, Decimal):
        return f"{value:f}"
    if isinstance(value, list | tuple):
        return [_text(v) for v in value]
    if isinstance(value, dict):
        return {k: _text(v) for k, v in value.items()}
    return value


def _now(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        fail(f"--now {value!r} is not an ISO 8601 date-time", bad_input=True)
    if moment.tzinfo is None:
        fail(f"--now {value!r} needs an offset, e.g. 2030-01-01T00:00:00+00:00", bad_input=True)
    return moment


_NOW_HELP = "Treat this aware ISO 8601 time as now (default: the current time)."


@campaigns.command("plan")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--offline", is_flag=True,
              help="Do not fetch the available feature costs (bets are not checked).")
@click.option("--brand", type=int, default=None, help="Brand id (overrides the plan's).")
@click.option("--now", "now_text", default=None, help=_NOW_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def plan_command(file: str, offline: bool, brand: int | None, now_text: str | None,
                 as_json: bool) -> None:
    """Validate a plan FILE and show its budget and requests; exit 2 when it has errors."""
    from gptools.campaigns import AWARDED_FEATURE, budget, campaign_request, load_plan
    from gptools.campaigns import validate_plan as validate
    from gptools.costs import CostBook

    now = _now(now_text)
    with cli_errors():
        plan = load_plan(file)
        costs = None
        if not offline and plan.campaign_type == AWARDED_FEATURE and plan.currencies:
            client = connect_client()
            try:
                chosen = resolve_brand(client, brand if brand is not None else plan.brand)
                plan = plan.model_copy(update={"brand": chosen})
                costs = CostBook(client, brand=chosen).table(
                    list(plan.game_ids), list(plan.currencies), source="configurations")
            finally:
                client.close()
        elif brand is not None:
            plan = plan.model_copy(update={"brand": brand})
        validation = validate(plan, now=now, costs=costs)
    problems = [
        {"severity": p.severity, "field": p.field, "value": _text(p.value),
         "limit": _text(p.limit), "message": cli_text(p.message)}
        for p in validation.problems
    ]
    plan_budget: dict[str, Any] | None = None
    try:
        b = budget(plan)
        plan_budget = {
            "reporting_currency": b.reporting_currency,
            "total": _text(b.total),
            "rows": [{k: (None if pd.isna(v) else _text(v)) for k, v in row.items()}
                     for row in b.table.to_dict(orient="records")],
        }
    except ValueError:
        plan_budget = None
    requests = []
    if validation.ok:
        for currency in plan.currencies:
            request = campaign_request(plan, currency)
            requests.append({"currency": currency, "requestId": request.request_id,
                             "body": _text(request.model_dump(mode="python", by_alias=True,
                                                               exclude_none=True))})
    document = {"plan": plan.name, "file": file, "ok": validation.ok,
                "bets_checked": costs is not None, "problems": problems,
                "budget": plan_budget, "requests": requests}

    def human() -> str:
        lines = [f"plan {plan.name!r}: "
                 + ("valid" if validation.ok else f"{len(validation.errors)} error(s)")]
        lines += [f"  {cli_text(str(p))}" for p in validation.problems]
        if plan_budget is not None:
            for row in plan_budget["rows"]:
                lines.append(f"  {row['currency']}: max exposure {row['max_exposure']}"
                             + (f" = {plan_budget['reporting_currency']} "
                                f"{row['reporting_value']}" if row["reporting_value"] else ""))
            if plan_budget["total"] is not None:
                lines.append(f"  total: {plan_budget['reporting_currency']} "
                             f"{plan_budget['total']}")
        lines += [f"  request {r['currency']}: requestId {r['requestId']}" for r in requests]
        return "\n".join(lines)

    emit(document, as_json=as_json, human=human)
    if not validation.ok:
        raise SystemExit(EXIT_BAD_INPUT)


@campaigns.command("apply")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--add-participants", is_flag=True,
              help="Also add each currency's player_ids (a re-run adds them again: harmless "
                   "by assumption, spec.PARTICIPANT_ADDITION_IDEMPOTENT).")
@click.option("--endpoint", type=click.Choice(["single", "batch"]), default="single",
              show_default=True,
              help="Participant endpoint for --add-participants: batch is the one the "
                   "document recommends for large lists (its path is an assumption).")
@click.option("--brand", type=int, default=None, help="Brand id (overrides the plan's).")
@click.option("--now", "now_text", default=None, help=_NOW_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def apply_command(file: str, add_participants: bool, endpoint: str, brand: int | None,
                  now_text: str | None, as_json: bool) -> None:
    """Create the campaigns of a plan FILE (safe to repeat: same plan, same campaigns)."""
    from gptools.campaigns import apply_plan, load_plan

    now = _now(now_text)
    with cli_errors():
        plan = load_plan(file)
        client = connect_client()
        try:
            chosen = resolve_brand(client, brand if brand is not None else plan.brand)
            plan = plan.model_copy(update={"brand": chosen})
            result = apply_plan(client, plan, now=now, add_participants=add_participants,
                                endpoint=endpoint)
        finally:
            client.close()
    document = {"plan": plan.name, "brand": plan.brand, "campaigns": [
        {"currency": c.currency, "requestId": c.request_id, "campaignId": c.campaign_id,
         "participantsSent": c.participants_sent} for c in result.campaigns]}

    def human() -> str:
        return "\n".join(
            f"{c.currency}: campaign {c.campaign_id} (requestId {c.request_id})"
            + (f", {c.participants_sent} players sent" if c.participants_sent else "")
            for c in result.campaigns)

    emit(document, as_json=as_json, human=human)

