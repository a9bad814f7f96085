"""The multi-brand side of ``gptools campaigns``: ``plan`` and ``apply`` of a plan file with
``brands``, and ``list/show/results --group NAME`` (one promotion over several brands,
reported as one). ``_campaigns`` parses the options and hands over here."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from gptools.cli._common import cli_errors, connect_client
from gptools.cli._main import EXIT_BAD_INPUT, NotRecorded, cli_text, emit, fail, say


def not_recorded(exc: Any, file: Any) -> NotRecorded:
    """The CLI's answer to campaigns created but not recorded (``NotRecordedError``): its
    text with the remedy a command-line user takes, re-running ``apply`` on ``file``."""
    return NotRecorded(
        cli_text(str(exc)).replace(
            exc.remedy,
            f"Run `gptools campaigns apply {file}` again once the register "
            "can be written: it creates nothing new and records them.",
        )
    )


def plan_brands(
    file: str, plan: Any, *, offline: bool, now: datetime | None, as_json: bool
) -> None:
    """``campaigns plan FILE`` of a multi-brand plan: every problem with its brand, the
    budget per brand and currency and per currency; exit 2 when it has errors."""
    from gptools.campaigns import check_brands, review_brands

    with cli_errors():
        if offline:
            reviewed = review_brands(plan, now=now)
        else:
            with connect_client() as client:
                reviewed = check_brands(client, plan, now=now)
    document = {"file": file, "checked_at_server": not offline, **reviewed.to_dict()}
    for problem in document["problems"]:
        problem["message"] = cli_text(problem["message"])
    budget = document["budget"]

    def human() -> str:
        v = reviewed.validation
        lines = [
            f"plan {plan.name!r} on {len(reviewed.brand_ids)} brand(s): "
            + ("valid" if v.ok else f"{len(v.errors)} error(s)")
        ]
        lines += [f"  {cli_text(str(p))}" for p in v.problems]
        for row in budget["per_currency"]:
            lines.append(
                f"  {row['currency']}: {row['brands']} brand(s), {row['players']} players, "
                f"max exposure {row['max_exposure']}"
                + (f" = {budget['reporting_currency']} {row['reporting_value']}"
                   if row["reporting_value"] else "")
            )  # fmt: skip
        if budget["total"] is not None:
            lines.append(f"  total: {budget['reporting_currency']} {budget['total']}")
        lines.append(f"  {len(document['requests'])} campaign request(s)")
        return "\n".join(lines)

    emit(document, as_json=as_json, human=human)
    if not reviewed.validation.ok:
        raise SystemExit(EXIT_BAD_INPUT)


def apply_brands_file(
    file: str,
    plan: Any,
    *,
    no_participants: bool,
    endpoint: str,
    now: datetime | None,
    progress: bool | None,
    as_json: bool,
) -> None:
    """``campaigns apply FILE`` of a multi-brand plan: every brand's campaigns once (the
    register's group says which exist), then each brand's players through the loader.
    A brand that failed is named (exit 1) after the others were created and loaded."""
    from gptools.campaigns import (
        CampaignRegister,
        GroupIncompleteError,
        NotRecordedError,
        apply_brands,
        check_brands,
    )
    from gptools.participants import PlayerListError, load_group_players

    register = CampaignRegister()
    incomplete: GroupIncompleteError | None = None
    with cli_errors(PlayerListError), connect_client() as client:
        reviewed = check_brands(client, plan, now=now)
        # As for one brand: a member the register already holds for this server existed
        # before this run (found again by its requestId, not created now).
        known = {
            r.request_id
            for r in register.campaigns(server=client.server_identity, with_players=False)
        }
        try:
            group = apply_brands(client, reviewed, register=register)
        except GroupIncompleteError as exc:
            incomplete, group = exc, exc.result
        except NotRecordedError as exc:
            raise not_recorded(exc, file) from None
        loads = None
        if not no_participants:
            loads = load_group_players(
                client,
                reviewed.plans,
                group,
                endpoint="batch" if endpoint == "batch" else "single",
                register=register,
                progress=progress,
                notice=say,
            )
    members: list[dict[str, Any]] = []
    for m in group.members:
        summary = None if loads is None else loads.summaries.get((m.brand, m.currency))
        members.append(
            {"brand": m.brand, "currency": m.currency, "requestId": m.request_id,
             "campaignId": m.campaign_id,
             "status": "existed" if m.status == "created" and m.request_id in known else m.status,
             "error": m.error,
             "participants": None if summary is None else summary.counts()}
        )  # fmt: skip
    document = {
        "group": group.name,
        "server": group.server,
        "brands": list(group.brands),
        "complete": group.complete,
        "failed_brands": list(group.brands_in("failed")),
        "pending_brands": list(group.brands_in("pending")),
        "members": members,
        "load_failures": {} if loads is None else {str(b): e for b, e in loads.failures.items()},
    }

    def human() -> str:
        lines = [
            f"group {group.name!r}: {len(group.created)} campaign(s) on "
            f"{len(group.brands_in('created'))} brand(s)"
        ]
        for m in members:
            p = m["participants"]
            players = "" if p is None else f"; players loaded {p['loaded']}"
            status = "already existed" if m["status"] == "existed" else m["status"]
            what = m["campaignId"] if m["status"] in ("created", "existed") else m["error"] or ""
            lines.append(f"  brand {m['brand']} {m['currency']}: {status} {what}{players}")
        return "\n".join(lines)

    emit(document, as_json=as_json, human=human)
    problems = [] if loads is None else loads.incomplete()
    if incomplete is not None or problems:
        parts = ([str(incomplete)] if incomplete is not None else []) + problems
        fail("; ".join(parts) + f"; run `gptools campaigns apply {file}` again to complete it")


def group_document(
    name: str, server: str | None, now: datetime | None
) -> tuple[Any, dict[str, Any]]:
    """The report of the group ``name`` and its JSON document; exit 2 when the register
    has no such group."""
    from gptools.campaigns import RegisterError, group_report

    try:
        report = group_report(name, server=server, now=now)
    except RegisterError as exc:
        fail(str(exc), bad_input=True)
    return report, report.to_dict()


def group_human(report: Any) -> str:
    """A group's report as text: per currency, per brand, and the brands not complete."""
    doc = report.to_dict()
    lines = [
        f"group {doc['group']!r} on {len(doc['brands'])} brand(s), server {doc['server']}: "
        + ("complete" if doc["complete"] else "incomplete")
    ]
    if doc["failed_brands"]:
        lines.append(f"  failed brands: {', '.join(str(b) for b in doc['failed_brands'])}")
    if doc["pending_brands"]:
        lines.append(f"  pending brands: {', '.join(str(b) for b in doc['pending_brands'])}")
    lines += [
        f"  {r['currency']}: {r['campaigns']} campaign(s), players loaded {r['players_loaded']}, "
        f"budget {r['budget']}"
        for r in doc["per_currency"]
    ]
    lines += [
        f"  brand {r['brand']}: created {r['created']}, failed {r['failed']}, pending "
        f"{r['pending']}, players loaded {r['players_loaded']}, budget {r['budget']}"
        for r in doc["per_brand"]
    ]
    return "\n".join(lines)
