"""``gptools campaigns reconcile LEDGER --log LOG``: the operator wallet's ledger
reconciled with the delivery log, per campaign and currency (the real cost, the
exceptions to act on)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from gptools.cli._campaigns import _nothing_here, _one_server_per_id, chosen_server, server_options
from gptools.cli._common import cli_errors, ledger_mapping, ledger_options
from gptools.cli._main import campaigns, emit, fail
from gptools.cli._outputs import write_csv_output
from gptools.errors import MissingExtraError


@campaigns.command("reconcile")
@click.argument("ledger")
@click.option("--log", "log", required=True, help="The webhook delivery log (any log "
              "`webhooks analyze` reads).")  # fmt: skip
@click.option(
    "--campaign", "campaign_ids", multiple=True, help="A campaign id (repeat; default: all)."
)
@ledger_options
@click.option(
    "--engine",
    default="duckdb",
    show_default=True,
    help="Where the reconciliation runs: duckdb, or spark (the [spark] extra).",
)
@click.option(
    "--exceptions-out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Write each exception list to DIR/KIND.csv (the folder is created; existing files "
    "only with --force).",
)
@click.option("--force", is_flag=True, help="Overwrite existing --exceptions-out files.")
@server_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def reconcile_command(
    ledger: str, log: str, campaign_ids: tuple[str, ...], ledger_format: str,
    ledger_table: str, ledger_columns: tuple[str, ...], engine: str,
    exceptions_out: Path | None, force: bool, server: str | None, all_servers: bool,
    as_json: bool,
) -> None:  # fmt: skip
    """The wallet LEDGER reconciled with the delivery log: per recorded campaign and
    currency, free-round debits against game events against rounds granted, the winnings
    credited (the real cost) against the exposure, and the exceptions to act on.

    The ledger's layout is the assumed spec.WALLET_LEDGER_COLUMNS unless --ledger-column
    names others."""
    from gptools.campaigns import CampaignRegister, RegisterError

    with cli_errors():
        chosen = chosen_server(server, all_servers)
        register = CampaignRegister()
        try:
            records = [
                r for r in register.campaigns(server=chosen)
                if not campaign_ids or r.campaign_id in campaign_ids
            ]  # fmt: skip
        except RegisterError as exc:
            fail(str(exc), bad_input=True)
        missing = sorted(set(campaign_ids) - {r.campaign_id for r in records})
        if missing:
            fail(f"no campaign {', '.join(missing)} in the register", bad_input=True)
        if not records:
            fail(f"{_nothing_here(register, chosen)}: nothing to reconcile", bad_input=True)
        _one_server_per_id(records)
    try:
        from gptools.deliverylog import DeliveryLogError
        from gptools.wallet import EXCEPTION_KINDS, LedgerError, reconcile

        mapping = ledger_mapping(ledger_columns)
        with reconcile(
            ledger, log, records, mapping=mapping, engine=engine,
            ledger_format=ledger_format, ledger_table=ledger_table,  # type: ignore[arg-type]
        ) as rec:  # fmt: skip
            report = rec.report
            frames = {k: rec.exceptions(k) for k in EXCEPTION_KINDS} if exceptions_out else {}
    except MissingExtraError as exc:
        fail(str(exc))
    except (DeliveryLogError, LedgerError, ImportError, ValueError) as exc:
        fail(str(exc), bad_input=True)
    written = []
    if exceptions_out is not None:
        exceptions_out.mkdir(parents=True, exist_ok=True)
        for kind, frame in frames.items():
            target = exceptions_out / f"{kind}.csv"
            rows: Any = frame.astype(object).where(frame.notna(), None).itertuples(index=False)
            write_csv_output("--exceptions-out", target, list(frame.columns), rows, force=force)
            written.append(str(target))
    document = report.to_dict()
    document["server"] = chosen
    document["exceptions_out"] = written

    def human() -> str:
        lines = [report.summary()]
        for c in report.campaigns:
            lines.append(
                f"{c['campaign_id']} {c['currency']}: wallet rounds {c['wallet_rounds']}, "
                f"game events {c['game_events']}, granted {c['rounds_granted']}; winnings "
                f"{c['winnings']} of exposure {c['exposure_used']} {c['currency']}"
            )
        if written:
            lines.append(f"Wrote {len(written)} exception lists to {exceptions_out}")
        return "\n".join(lines)

    emit(document, as_json=as_json, human=human)
