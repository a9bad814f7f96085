"""``gptools campaigns plan FILE`` and ``apply FILE`` (JSON or YAML plans); ``list`` and
``show ID`` (the local register); ``results SOURCE`` (from a delivery log)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from gptools import spec
from gptools.cli._campaign_groups import (
    apply_brands_file,
    group_document,
    group_human,
    not_recorded,
    plan_brands,
)
from gptools.cli._common import (
    NOW_HELP,
    PROGRESS_OPTION,
    cli_errors,
    connect_client,
    ledger_mapping,
    ledger_options,
    parse_now,
    resolve_brand,
)
from gptools.cli._main import EXIT_BAD_INPUT, NotRecorded, campaigns, cli_text, emit, fail, say
from gptools.cli._outputs import check_output_option, write_csv_output
from gptools.cli._params import (
    BRAND_ID,
    LEDGER_SOURCE,
    column_mapping_options,
    mapping_fields,
    max_line_bytes_option,
)
from gptools.errors import MissingExtraError

if TYPE_CHECKING:
    from gptools.deliverylog import CampaignResults, LogOptions
    from gptools.wallet import LedgerMapping


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
    from gptools.campaigns import BrandsPlan, offered_costs, review
    from gptools.campaigns import load_any_plan as load_plan
    from gptools.costs import CostBook

    now = parse_now(now_text)
    unknown: tuple[str, ...] = ()
    with cli_errors():
        plan = load_plan(file)
        if isinstance(plan, BrandsPlan):
            _no_brand_option(brand)
            plan_brands(file, plan, offline=offline, now=now, as_json=as_json)
            return
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
    from gptools.campaigns import BrandsPlan, CampaignRegister, NotRecordedError, apply_plan
    from gptools.campaigns import load_any_plan as load_plan
    from gptools.participants import PlayerListError, load_plan_players

    now = parse_now(now_text)
    register = CampaignRegister()
    with cli_errors(PlayerListError):
        plan = load_plan(file)
        if isinstance(plan, BrandsPlan):
            _no_brand_option(brand)
            apply_brands_file(file, plan, no_participants=no_participants, endpoint=endpoint,
                              now=now, progress=progress, as_json=as_json)  # fmt: skip
            return
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
                raise not_recorded(exc, file) from None
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


def _no_brand_option(brand: int | None) -> None:
    if brand is not None:
        fail(
            "--brand names one brand; this plan names its brands itself ('brands')",
            bad_input=True,
        )


#: ``--group NAME`` of list, show and results.
GROUP_OPTION = click.option(
    "--group",
    "group",
    default=None,
    help="A multi-brand promotion (its plan's name): its campaigns as one, rolled up per "
    "currency and per brand, failed and pending brands named.",
)


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
@GROUP_OPTION
@server_options
@click.option("--now", "now_text", default=None, help=NOW_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def list_command(
    group: str | None, server: str | None, all_servers: bool, now_text: str | None, as_json: bool
) -> None:
    """The campaigns gptools created on a server (the local register; by default the
    server this command talks to), with their state by window and their participants
    (loaded, rejected, pending), as the register records every apply and load. With
    --group, one multi-brand promotion as one."""
    from gptools.campaigns import BrandGroups, CampaignRegister

    now = parse_now(now_text)
    with cli_errors():
        chosen = chosen_server(server, all_servers)
        if group is not None:
            report, doc = group_document(group, chosen, now)
            emit(doc, as_json=as_json, human=lambda: group_human(report))
            return
        register = CampaignRegister()
        docs = register.to_dicts(now=now, server=chosen)
        groups = [n for _, n in BrandGroups(register.path).names(server=chosen)]
    document = {
        "register": str(register.path), "server": chosen, "campaigns": docs, "groups": groups
    }  # fmt: skip

    def human() -> str:
        if not docs:
            return _nothing_here(register, chosen)
        lines = [_campaign_line(d) for d in docs]
        if groups:
            lines.append(f"multi-brand groups (--group NAME): {', '.join(groups)}")
        return "\n".join(lines)

    emit(document, as_json=as_json, human=human)


@campaigns.command("show")
@click.argument("campaign_id", required=False)
@GROUP_OPTION
@server_options
@click.option("--now", "now_text", default=None, help=NOW_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def show_command(
    campaign_id: str | None, group: str | None, server: str | None, all_servers: bool,
    now_text: str | None, as_json: bool,
) -> None:  # fmt: skip
    """One campaign of the register: its plan, window, state, participants and the loads
    that put them there; exit 2 when it is not recorded (for the server: by default the
    one this command talks to; with --all-servers the one most recently updated). With
    --group NAME instead of an id: one multi-brand promotion, every campaign of it."""
    from gptools.campaigns import CampaignRegister, RegisterError

    now = parse_now(now_text)
    if (campaign_id is None) == (group is None):
        fail("name a campaign id or --group NAME (one of them)", bad_input=True)
    with cli_errors():
        chosen = chosen_server(server, all_servers)
        if group is not None:
            report, doc = group_document(group, chosen, now)

            def members() -> str:
                rows = [
                    f"  brand {m['brand']} {m['currency']}: {m['status']} "
                    f"{m['campaign_id'] or m['error'] or ''}  players loaded {m['loaded']}"
                    for m in doc["members"]
                ]
                return "\n".join([group_human(report), *rows])

            emit(doc, as_json=as_json, human=members)
            return
        assert campaign_id is not None
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
@click.option(
    "--ledger",
    type=LEDGER_SOURCE,
    default=None,
    help="The operator's wallet ledger (a CSV, JSONL or Parquet file, or a database URL; "
    "in the assumed layout spec.WALLET_LEDGER_COLUMNS unless --ledger-column names others; "
    "read as `campaigns reconcile` reads it): adds net gaming revenue to the holdout uplift, "
    "and the incremental revenue and ROI.",
)
@ledger_options
@max_line_bytes_option
@column_mapping_options
@GROUP_OPTION
@server_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def results_command(
    source: str, campaign_ids: tuple[str, ...], fmt: str, table: str, engine: str,
    spark_master: str | None, unreached_out: Path | None, force: bool, ledger: str | None,
    ledger_format: str, ledger_table: str, ledger_columns: tuple[str, ...],
    max_line_bytes: int | None, columns: tuple[tuple[str, str], ...], latency_unit: str,
    group: str | None, server: str | None, all_servers: bool, as_json: bool,
) -> None:  # fmt: skip
    """How the recorded campaigns did, from a webhook delivery log SOURCE (any log
    `webhooks analyze` reads): players reached and completed, rounds and exposure used
    against the budget, time to first play, and the players never reached.

    Events are attributed by the assumed rule spec.CAMPAIGN_ATTRIBUTION, unless a foreign
    log carries the campaign id: --column campaign_id=NAME attributes each action by it.

    A campaign planned with a holdout share is compared with its holdout group on paid play
    from its start: turnover and active days per player from the log, net gaming revenue
    from --ledger, each with a 95 % Welch interval; with --ledger, the incremental revenue
    and ROI against the real cost (the winnings credited to the free rounds the ledger
    holds), else against the exposure (the bets' value, not the cost)."""
    fields = mapping_fields(columns, latency_unit)
    check_output_option("--unreached-out", unreached_out, force=force)
    if ledger is None:
        _no_ledger_options()
    from gptools.campaigns import CampaignRegister, RegisterError

    group_report: Any = None
    if group is not None and campaign_ids:
        fail("--group and --campaign exclude each other: give one", bad_input=True)
    with cli_errors():
        chosen = chosen_server(server, all_servers)
        register = CampaignRegister()
        if group is not None:
            group_report, _ = group_document(group, chosen, None)
            if not group_report.records:
                fail(f"group {group!r} has no campaign created yet: nothing to report",
                     bad_input=True)  # fmt: skip
        try:
            records = list(group_report.records) if group_report is not None else (
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
        groups = {r.campaign_id: g for r in records if (g := register.holdout_groups(r))}
    if ledger is not None and not groups:
        fail(
            # Not naming the value: a database URL may carry a password.
            "--ledger: no campaign reported has a holdout group (plan field "
            "holdout), and the ledger serves the holdout uplift only",
            bad_input=True,
        )
    try:
        from gptools.deliverylog import (
            DEFAULT_MAX_LINE_BYTES,
            ColumnMapping,
            DeliveryLogError,
            LogOptions,
        )

        options = LogOptions(
            format=fmt, table=table, spark_master=spark_master, force=force,  # type: ignore[arg-type]
            max_line_bytes=DEFAULT_MAX_LINE_BYTES if max_line_bytes is None else max_line_bytes,
            mapping=ColumnMapping(**fields),  # type: ignore[arg-type]
        )  # fmt: skip
        read = None if ledger is None else _LedgerRead(
            ledger, ledger_mapping(ledger_columns), ledger_format, ledger_table
        )  # fmt: skip
        with _opened(source, records, engine, options, read) as (results, cost):
            report = results.report
            unreached = results.unreached()
            apart = None if report.attributed else results.apart_in_time()
            uplift = _uplift(results, groups, read, cost)
    except MissingExtraError as exc:
        fail(str(exc))
    except (DeliveryLogError, ImportError, ValueError, OSError) as exc:
        fail(str(exc), bad_input=not getattr(exc, "io_failed", False))
    if unreached_out is not None:
        rows = zip(unreached.campaign_id, unreached.player_id, strict=True)
        write_csv_output(
            "--unreached-out", unreached_out, ("campaign_id", "player_id"), rows, force=force
        )
    document = report.to_dict()
    if group_report is not None:
        from gptools.campaigns import funnel_by_brand

        funnel = funnel_by_brand(report.campaigns, group_report.group)
        document["group"] = {
            **{k: v for k, v in group_report.to_dict().items() if k != "members"},
            "funnel_by_brand": {b: funnel[b].to_dict() for b in funnel.columns},
        }
    document["unreached"] = len(unreached)
    document["server"] = chosen
    document["apart_in_time"] = apart
    document["uplift"] = None if uplift is None else uplift.to_dict()

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
        if group_report is not None:
            lines.append(group_human(group_report))
            lines.append(funnel.to_string())
        lines.append(f"{len(unreached):,} player(s) never reached")
        if uplift is not None:
            lines += _uplift_lines(uplift)
        if unreached_out is not None:
            lines.append(f"Wrote them to {unreached_out}")
        return "\n".join(lines)

    emit(document, as_json=as_json, human=human)


def _no_ledger_options() -> None:
    """Refuse ledger options given without ``--ledger``: they would be ignored, and a
    reader who gave them expects the ledger's numbers."""
    ctx = click.get_current_context()
    options = {
        "ledger_format": "--ledger-format",
        "ledger_table": "--ledger-table",
        "ledger_columns": "--ledger-column",
    }
    given = [
        option for name, option in options.items()
        if ctx.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT
    ]  # fmt: skip
    if given:
        fail(f"{', '.join(given)} without --ledger: name the ledger they read", bad_input=True)


@dataclass(frozen=True, slots=True)
class _LedgerRead:
    """``--ledger`` and how to read it, alike for the reconciliation and the uplift."""

    source: str
    mapping: LedgerMapping
    format: str
    table: str


@contextlib.contextmanager
def _opened(
    source: str, records: list[Any], engine: str, options: LogOptions, ledger: _LedgerRead | None
) -> Iterator[tuple[CampaignResults, dict[str, Decimal] | None]]:
    """The campaign results of ``source`` and, with a ``ledger``, each campaign's real
    cost (its winnings, from the reconciliation on the same opened log); a ledger the
    wallet's reader cannot read is bad input, named."""
    if ledger is None:
        from gptools.deliverylog import campaign_results, open_log

        with campaign_results(open_log(source, engine, options), records) as results:
            yield results, None
        return
    from gptools.wallet import LedgerError, reconcile

    try:
        rec = reconcile(
            ledger.source, source, records, mapping=ledger.mapping, engine=engine,
            options=options, ledger_format=ledger.format,  # type: ignore[arg-type]
            ledger_table=ledger.table,
        )  # fmt: skip
    except LedgerError as exc:
        raise ValueError(f"--ledger: cannot read it: {exc}") from None
    with rec:
        try:
            cost = rec.report.winnings()
        except LedgerError as exc:
            raise ValueError(f"--ledger: cannot read it: {exc}") from None
        yield rec.results, cost


def _uplift(
    results: Any, groups: dict[str, Any], ledger: _LedgerRead | None, cost: dict[str, Any] | None
) -> Any:
    """The holdout uplift of the campaigns with a holdout group (``None``: none has one),
    costed at the ledger's winnings where it holds a campaign's free rounds."""
    if not groups:
        return None
    from gptools.deliverylog import holdout_uplift
    from gptools.wallet import LedgerError

    try:
        if ledger is None:
            return holdout_uplift(results, groups, cost=cost)
        return holdout_uplift(
            results, groups, ledger=ledger.source, ledger_mapping=ledger.mapping,
            ledger_format=ledger.format, ledger_table=ledger.table,  # type: ignore[arg-type]
            cost=cost,
        )  # fmt: skip
    except LedgerError as exc:
        raise ValueError(f"--ledger: cannot read it: {exc}") from None


def _uplift_lines(uplift: Any) -> list[str]:
    """The uplift in a few lines: per campaign, each metric's difference per player with
    its interval, the incremental revenue and ROI, or why no number is given."""
    lines = [f"Holdout uplift: {uplift.method}"]
    for c in uplift.campaigns:
        if c.refused:
            lines.append(f"{c.campaign_id} {c.currency}: {c.refused}")
            continue
        for m in c.metrics:
            r = m.row()
            lines.append(
                f"{c.campaign_id} {m.metric}: {r['difference']:+} {m.unit} per player "
                f"[{r['low']}, {r['high']}] ({m.treatment_players} treatment, "
                f"{m.holdout_players} holdout)"
            )
        rev, roi = c.incremental_revenue, c.roi
        if rev is not None and roi is not None:
            lines.append(
                f"{c.campaign_id}: incremental revenue {rev[0]} {c.currency} [{rev[1]}, "
                f"{rev[2]}], cost {c.cost} ({c.cost_basis}), ROI {roi[0]:.2f} "
                f"[{roi[1]:.2f}, {roi[2]:.2f}]"
            )
        else:
            lines.append(f"{c.campaign_id}: no ROI without net gaming revenue (--ledger)")
    return lines


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
