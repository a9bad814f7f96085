"""``gptools campaigns plan FILE`` and ``gptools campaigns apply FILE`` (JSON or YAML plans)."""

from __future__ import annotations

import click

from gptools import spec
from gptools.cli._common import NOW_HELP, cli_errors, connect_client, parse_now, resolve_brand
from gptools.cli._main import EXIT_BAD_INPUT, campaigns, cli_text, emit
from gptools.cli._params import BRAND_ID
from gptools.errors import GameNotFoundError


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
