"""``gptools campaigns plan FILE`` and ``apply FILE`` (JSON or YAML plans); ``list`` and
``show ID`` (the local register); ``results SOURCE`` (from a delivery log)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from gptools import spec
from gptools.cli._common import (
    NOW_HELP,
    PROGRESS_OPTION,
    cli_errors,
    connect_client,
    parse_now,
    resolve_brand,
)
from gptools.cli._main import EXIT_BAD_INPUT, NotRecorded, campaigns, cli_text, emit, fail, say
from gptools.cli._outputs import check_output_option, write_csv_output
from gptools.cli._params import (
    BRAND_ID,
    column_mapping_options,
    mapping_fields,
    max_line_bytes_option,
)
from gptools.errors import MissingExtraError


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
    from gptools.campaigns import load_plan, offered_costs, review
    from gptools.costs import CostBook

    now = parse_now(now_text)
    unknown: tuple[str, ...] = ()
    with cli_errors():
        plan = load_plan(file)
        costs = None
        if not offline and plan.checks_bets:
            with connect_client() as client:
                chosen = resolve_brand(client, brand if brand is not None else plan.brand)
                plan = plan.model_copy(update={"brand": chosen})
                costs, unknown = offered_costs(CostBook(client, brand=chosen), plan)
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
    "--no-participants",
    is_flag=True,
    help="Create the campaigns only; do not load each currency's player_ids (a later "
    "`gptools participants load` can).",
)
@click.option(
    "--endpoint",
    type=click.Choice(spec.PARTICIPANT_ENDPOINTS),
    default="single",
    show_default=True,
    help="Participant endpoint the player_ids are loaded through: batch is the one the "
    "document recommends for large lists (its path is an assumption).",
)
@click.option("--brand", type=BRAND_ID, default=None, help="Brand id (overrides the plan's).")
@click.option("--now", "now_text", default=None, help=NOW_HELP)
@PROGRESS_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def apply_command(
    file: str,
    no_participants: bool,
    endpoint: str,
    brand: int | None,
    now_text: str | None,
    progress: bool | None,
    as_json: bool,
) -> None:
    """Create the campaigns of a plan FILE and load each currency's player_ids into its
    campaign (through the participant loader: journaled, resumable, recorded); safe to
    repeat: same plan, same campaigns, and a complete load sends nothing again.

    Everything is recorded in the campaign register ($GPTOOLS_REGISTER), which is checked
    before anything is created. Exit codes: 0 done, 1 failure (nothing created when the
    register cannot be written), 2 bad input, 4 created but not recorded (the message
    names the campaigns; running the same command again records them)."""
    from gptools.campaigns import CampaignRegister, NotRecordedError, apply_plan, load_plan
    from gptools.participants import PlayerListError, load_plan_players

    now = parse_now(now_text)
    register = CampaignRegister()
    with cli_errors(PlayerListError):
        plan = load_plan(file)
        with connect_client() as client:
            chosen = resolve_brand(client, brand if brand is not None else plan.brand)
            plan = plan.model_copy(update={"brand": chosen})
            server = client.server_identity
            # What the register already holds of this server tells a campaign found again
            # by its requestId from a new one (the client does not show the status).
            known = {r.request_id for r in register.campaigns(server=server, with_players=False)}
            try:
                result = apply_plan(client, plan, now=now, register=register)
            except NotRecordedError as exc:
                raise NotRecorded(
                    cli_text(str(exc)).replace(
                        exc.remedy,
                        f"Run `gptools campaigns apply {file}` again once the register "
                        "can be written: it creates nothing new and records them.",
                    )
                ) from None
            loads = {}
            if not no_participants:
                loads = load_plan_players(
                    client,
                    plan,
                    result,
                    endpoint="batch" if endpoint == "batch" else "single",
                    register=register,
                    progress=progress,
                    notice=say,
                )
    entries: list[dict[str, Any]] = []
    for c in result.campaigns:
        summary = loads.get(c.currency)
        entries.append(
            {
                "currency": c.currency,
                "requestId": c.request_id,
                "campaignId": c.campaign_id,
                "status": "existed" if c.request_id in known else "created",
                "participants": None if summary is None else summary.counts(),
            }
        )
    document = {"plan": plan.name, "brand": plan.brand, "server": server, "campaigns": entries}

    def human() -> str:
        lines = []
        for e in entries:
            what = "created" if e["status"] == "created" else "already existed"
            p = e["participants"]
            players = (
                "no player_ids in the plan"
                if p is None and not no_participants
                else "players not loaded (--no-participants)"
                if p is None
                else f"players loaded {p['loaded']} ({p['loaded_this_run']} this run), "
                f"rejected {p['rejected']}, duplicate {p['duplicate']}, "
                f"not attempted {p['not_attempted']}"
            )
            lines.append(
                f"{e['currency']}: campaign {e['campaignId']} {what} "
                f"(requestId {e['requestId']}); {players}"
            )
        return "\n".join(lines)

    emit(document, as_json=as_json, human=human)
    unrecorded = [s.register_error for s in loads.values() if s.register_error]
    incomplete = [s for s in loads.values() if not s.complete]
    if incomplete:
        fail(
            "; ".join(
                f"{s.not_attempted} player id(s) of {s.campaign_id} not loaded yet "
                f"({s.last_error or 'no answer'})"
                for s in incomplete
            )
            + f"; run `gptools campaigns apply {file}` again to resume"
        )
    if unrecorded:
        raise NotRecorded("; ".join(unrecorded))


_SERVER_OPTIONS = (
    click.option(
        "--server",
        default=None,
        help="The server whose campaigns to read, as the register names it (see "
        "`campaigns list --all-servers`) [default: the server this command talks to: "
        "GP_BASE_URL, or the embedded sandbox's state].",
    ),
    click.option(
        "--all-servers", is_flag=True, help="Read the campaigns of every server recorded."
    ),
)


def server_options(command: Any) -> Any:
    """Add ``--server`` and ``--all-servers`` to a command that reads the register."""
    for option in reversed(_SERVER_OPTIONS):
        command = option(command)
    return command


def chosen_server(server: str | None, all_servers: bool) -> str | None:
    """The server a register command reads (``None``: every one): ``--server``, else the
    identity of the server the command talks to (as a load or an apply records it)."""
    if server is not None and all_servers:
        fail("--server and --all-servers exclude each other: give one", bad_input=True)
    if all_servers:
        return None
    if server is not None:
        if not server.strip():
            fail("--server must name a server, got an empty value", bad_input=True)
        return server
    with connect_client() as client:
        identity: str = client.server_identity
    return identity


def _nothing_here(register: Any, server: str | None) -> str:
    """Why a register read for ``server`` found no campaign, and where the others are."""
    if server is None:
        return f"no campaign in the register {register.path} yet (gptools campaigns apply)"
    others = {s: n for s, n in register.servers().items() if s != server}
    where = (
        f"; {sum(others.values())} on other servers ({', '.join(others)}): --all-servers "
        "lists them, --server names one"
        if others
        else " (gptools campaigns apply)"
    )
    return f"no campaign of the server {server} in the register {register.path}{where}"


def _campaign_line(doc: dict[str, Any]) -> str:
    p = doc["participants"]
    return (
        f"{doc['campaignId']}  {doc['state']:<9}  {doc['plan']!r} {doc['currency']} "
        f"{doc['bet']} × {doc['betNumber']}  {doc['start']} – {doc['end']} {doc['timeZone']}  "
        f"players loaded {p['loaded']}, rejected {p['rejected']}, pending {p['pending']}  "
        f"server {doc['server']}"
    )


@campaigns.command("list")
@server_options
@click.option("--now", "now_text", default=None, help=NOW_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def list_command(
    server: str | None, all_servers: bool, now_text: str | None, as_json: bool
) -> None:
    """The campaigns gptools created on a server (the local register; by default the
    server this command talks to), with their state by window and their participants
    (loaded, rejected, pending), as the register records every apply and load."""
    from gptools.campaigns import CampaignRegister

    now = parse_now(now_text)
    with cli_errors():
        chosen = chosen_server(server, all_servers)
        register = CampaignRegister()
        docs = register.to_dicts(now=now, server=chosen)
    document = {"register": str(register.path), "server": chosen, "campaigns": docs}

    def human() -> str:
        if not docs:
            return _nothing_here(register, chosen)
        return "\n".join(_campaign_line(d) for d in docs)

    emit(document, as_json=as_json, human=human)


@campaigns.command("show")
@click.argument("campaign_id")
@server_options
@click.option("--now", "now_text", default=None, help=NOW_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def show_command(
    campaign_id: str, server: str | None, all_servers: bool, now_text: str | None, as_json: bool
) -> None:
    """One campaign of the register: its plan, window, state, participants and the loads
    that put them there; exit 2 when it is not recorded (for the server: by default the
    one this command talks to; with --all-servers the one most recently updated)."""
    from gptools.campaigns import CampaignRegister, RegisterError

    now = parse_now(now_text)
    with cli_errors():
        chosen = chosen_server(server, all_servers)
        register = CampaignRegister()
        try:
            record = register.get(campaign_id, server=chosen)
        except RegisterError as exc:
            fail(str(exc), bad_input=True)
        mine = register.participants_of(record)
        loads = register.loads(server=record.server, campaign_id=record.campaign_id)
    doc = record.to_dict(now=now, participants=mine)
    doc["loads"] = [load.to_dict() for load in loads]

    def human() -> str:
        keys = ("requestId", "server", "brand", "planHash", "type", "gameIds", "recordedAt")
        lines = [_campaign_line(doc), *(f"  {k}: {doc[k]}" for k in keys)]
        lines.append(f"  budget: {doc['budget']} {doc['currency']}")
        lines += [
            f"  load {load.source or load.load_key}: loaded {load.loaded}, rejected "
            f"{load.rejected}, duplicate {load.duplicate}, pending {load.pending}"
            for load in loads
        ]
        return "\n".join(lines)

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
@click.option(
    "--force",
    is_flag=True,
    help="Read a JSONL log even when its first 1,000 lines are mostly not JSON objects "
    "(refused by default: it does not look like a delivery log), and overwrite an existing "
    "--unreached-out file (never through a symbolic link).",
)
@max_line_bytes_option
@column_mapping_options
@server_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def results_command(
    source: str, campaign_ids: tuple[str, ...], fmt: str, table: str, engine: str,
    spark_master: str | None, unreached_out: Path | None, force: bool,
    max_line_bytes: int | None, columns: tuple[tuple[str, str], ...], latency_unit: str,
    server: str | None, all_servers: bool, as_json: bool,
) -> None:  # fmt: skip
    """How the recorded campaigns did, from a webhook delivery log SOURCE (any log
    `webhooks analyze` reads): players reached and completed, rounds and exposure used
    against the budget, time to first play, and the players never reached.

    Events are attributed by the assumed rule spec.CAMPAIGN_ATTRIBUTION, unless a foreign
    log carries the campaign id: --column campaign_id=NAME attributes each action by it."""
    fields = mapping_fields(columns, latency_unit)
    check_output_option("--unreached-out", unreached_out, force=force)
    from gptools.campaigns import CampaignRegister, RegisterError

    with cli_errors():
        chosen = chosen_server(server, all_servers)
        register = CampaignRegister()
        try:
            records = (
                [register.get(c, server=chosen) for c in dict.fromkeys(campaign_ids)]
                if campaign_ids and chosen is not None
                else [
                    r for r in register.campaigns(server=chosen)
                    if not campaign_ids or r.campaign_id in campaign_ids
                ]
            )  # fmt: skip
        except RegisterError as exc:
            fail(str(exc), bad_input=True)
        if not records:
            fail(f"{_nothing_here(register, chosen)}: nothing to report", bad_input=True)
        _one_server_per_id(records)
    try:
        from gptools.deliverylog import (
            DEFAULT_MAX_LINE_BYTES,
            ColumnMapping,
            DeliveryLogError,
            campaign_results,
        )

        with campaign_results(
            source, records, format=fmt, table=table,  # type: ignore[arg-type]
            engine=engine, spark_master=spark_master, force=force,
            max_line_bytes=DEFAULT_MAX_LINE_BYTES if max_line_bytes is None else max_line_bytes,
            mapping=ColumnMapping(**fields),  # type: ignore[arg-type]
        ) as results:  # fmt: skip
            report = results.report
            unreached = results.unreached()
            apart = None if report.attributed else results.apart_in_time()
    except MissingExtraError as exc:
        fail(str(exc))
    except (DeliveryLogError, ImportError, ValueError) as exc:
        fail(str(exc), bad_input=not getattr(exc, "io_failed", False))
    if unreached_out is not None:
        rows = zip(unreached.campaign_id, unreached.player_id, strict=True)
        write_csv_output(
            "--unreached-out", unreached_out, ("campaign_id", "player_id"), rows, force=force
        )
    document = report.to_dict()
    document["unreached"] = len(unreached)
    document["server"] = chosen
    document["apart_in_time"] = apart

    def human() -> str:
        if apart is not None:
            return apart
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


def _one_server_per_id(records: list[Any]) -> None:
    """Refuse campaigns of several servers that share an id: the results name campaigns
    by id, and one log's events cannot be told apart between two servers' campaigns."""
    from gptools.campaigns import shared_ids

    shared = shared_ids(records)
    if shared:
        named = "; ".join(f"{cid} on {', '.join(s)}" for cid, s in sorted(shared.items()))
        fail(
            f"the same campaign id is recorded for several servers ({named}): the results "
            "of one log are one server's; name it with --server",
            bad_input=True,
        )
