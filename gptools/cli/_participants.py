"""``gptools participants load|status|journals``: a player list into a campaign, resumable,
every row counted; the journals that make loads resumable, listed and pruned."""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import click

from gptools import spec
from gptools.cli._common import PROGRESS_OPTION, cli_errors, connect_client
from gptools.cli._main import (
    EXIT_INTERRUPTED,
    NotRecorded,
    cli_text,
    emit,
    fail,
    participants,
    say,
)
from gptools.cli._outputs import force_option
from gptools.cli._params import BRAND_ID, CAMPAIGN_ID, FilePath


@participants.command("load")
@click.argument("file", type=FilePath(dir_okay=False, path_type=Path))
@click.option(
    "--campaign",
    "campaign_id",
    type=CAMPAIGN_ID,
    required=True,
    help="Campaign id to add players to.",
)
@click.option(
    "--brand", type=BRAND_ID, default=None, help="Brand id (PARTNER/THIRD_PARTY accounts)."
)
@click.option(
    "--journal",
    type=FilePath(dir_okay=False, path_type=Path),
    default=None,
    help="Journal file (SQLite) that makes the load resumable [default: one per load "
    "in the journal folder: $GPTOOLS_JOURNAL_DIR, else $XDG_CACHE_HOME/gptools/journals, "
    "else ~/.cache/gptools/journals].",
)
@click.option(
    "--rejects",
    type=FilePath(dir_okay=False, path_type=Path),
    default=None,
    help="CSV file for the rejected rows [default: FILE-STEM.rejects.csv here]; an existing "
    "rejects file (a re-run's) is replaced, any other file only with --force.",
)
@force_option("--rejects")
@click.option(
    "--endpoint",
    type=click.Choice(spec.PARTICIPANT_ENDPOINTS),
    default="single",
    show_default=True,
    help="Participant endpoint: batch is the one the document recommends for large "
    "lists (its path is an assumption, spec.ENDPOINT_BATCH_PARTICIPANT_TEMPLATE).",
)
@click.option(
    "--chunk-size",
    type=click.IntRange(min=1),
    default=None,
    help=f"Player ids per request (assumed limits) [default: "
    f"{spec.PARTICIPANT_MAX_IDS} single, {spec.BATCH_PARTICIPANT_MAX_IDS} batch].",
)
@click.option(
    "--column", default=None, help="Header name (or 0-based position) of the player-id column."
)
@click.option("--encoding", default=None, help="File encoding [default: detected].")
@click.option("--delimiter", default=None, help="Field delimiter [default: detected].")
@click.option("--sheet", default=None, help="Excel sheet name [default: the first].")
@click.option(
    "--header/--no-header",
    default=None,
    help="Whether the first row (after --skip-rows) names the columns [default: detected; "
    "a file where it cannot be told is refused until you say].",
)
@click.option(
    "--skip-rows",
    type=click.IntRange(min=0),
    default=None,
    help="Rows above the list (or its header) to skip, such as titles [default: detected].",
)
@click.option(
    "--max-id-length",
    type=click.IntRange(min=1),
    default=spec.PLAYER_ID_MAX_LENGTH,
    show_default=True,
    help="Longest player id accepted (assumed limit).",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=None,
    help="Requests in flight at most [default: 16].",
)
@click.option(
    "--restart",
    is_flag=True,
    help="Discard this load's journal and start over (every id is sent again).",
)
@PROGRESS_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON document.")
def load(
    file: Path,
    campaign_id: str,
    brand: int | None,
    journal: Path | None,
    rejects: Path | None,
    endpoint: str,
    chunk_size: int | None,
    column: str | None,
    encoding: str | None,
    delimiter: str | None,
    sheet: str | None,
    header: bool | None,
    skip_rows: int | None,
    max_id_length: int,
    concurrency: int | None,
    restart: bool,
    progress: bool | None,
    as_json: bool,
    force: bool,
) -> None:
    """Add the players listed in FILE (CSV, TSV or Excel) to a campaign.

    Every row ends loaded, rejected (written to the rejects file with its line and
    reason), duplicate, or not attempted; the summary shows that they add up. Run the same
    command again to resume an interrupted load: acknowledged chunks are never sent again.
    The load is recorded in the campaign register ($GPTOOLS_REGISTER), which `campaigns
    list/show/results` read; a load that reached nothing (unknown campaign, missing brand)
    leaves no journal and no record. Exit codes: 0 all rows settled, 1 some ids could not
    be sent (run again) or the server failed, 2 bad input (unreadable file, unknown
    campaign, missing brand), 4 loaded but not recorded in the register (run again to
    record it), 130 interrupted.
    """
    from gptools.participants import (
        DEFAULT_CONCURRENCY,
        LoadInterrupted,
        PlayerListError,
        load_participants,
    )

    rejects = rejects if rejects is not None else Path(f"{file.stem}.rejects.csv")
    picked: str | int | None = int(column) if column is not None and column.isdigit() else column
    with cli_errors(PlayerListError):
        try:
            with connect_client() as client:
                summary = load_participants(
                    client,
                    campaign_id,
                    file,
                    brand=brand,
                    column=picked,
                    encoding=encoding,
                    delimiter=delimiter,
                    sheet=int(sheet) if sheet and sheet.isdigit() else sheet,
                    header=header,
                    skip_rows=skip_rows,
                    journal=journal,
                    rejects=rejects,
                    overwrite_rejects=force,
                    chunk_size=chunk_size,
                    endpoint="batch" if endpoint == "batch" else "single",
                    max_id_length=max_id_length,
                    concurrency=concurrency or DEFAULT_CONCURRENCY,
                    progress=progress,
                    restart=restart,
                    notice=say,
                )
        except LoadInterrupted as exc:
            stopped = exc.summary
            emit(stopped.to_dict(), as_json=as_json, human=lambda: str(stopped))
            say("interrupted: run the same command again to resume")
            sys.exit(EXIT_INTERRUPTED)
    if summary.rows == 0:
        say(f"warning: {summary.source} holds no player rows; nothing was loaded")
    emit(summary.to_dict(), as_json=as_json, human=lambda: cli_text(str(summary)))
    if not summary.complete:
        fail(
            f"{summary.not_attempted} player id(s) not loaded yet "
            f"({summary.last_error or 'no answer'}); run the same command again to resume"
        )
    if summary.register_error is not None:
        raise NotRecorded(summary.register_error)


_CAMPAIGN_FILTER_OPTION = click.option(
    "--campaign",
    "campaign_id",
    type=CAMPAIGN_ID,
    default=None,
    help="Only this campaign's journals.",
)
_JOURNAL_DIR_OPTION = click.option(
    "--journal-dir",
    type=FilePath(file_okay=False, path_type=Path),
    default=None,
    help="Folder of the journals [default: $GPTOOLS_JOURNAL_DIR, else "
    "$XDG_CACHE_HOME/gptools/journals, else ~/.cache/gptools/journals].",
)


def _journal_table(rows: list[Any]) -> str:
    if not rows:
        return "no journals"
    lines = [
        f"{'state':<10} {'campaign':<14} {'loaded':>9} {'rejected':>9} {'pending':>9}  "
        f"{'updated (UTC)':<19}  server / file"
    ]
    for j in rows:
        when = j.updated_at.strftime("%Y-%m-%d %H:%M:%S") if j.updated_at else "-"
        lines.append(
            f"{j.state:<10} {j.campaign_id or '-':<14} {j.loaded:>9,} {j.rejected:>9,} "
            f"{j.pending:>9,}  {when:<19}  {j.server or '-'}"
        )
        lines.append(f"{'':>10} {j.path}" + (f"  ({j.note})" if j.note else ""))
    return "\n".join(lines)


@participants.command("status")
@_CAMPAIGN_FILTER_OPTION
@_JOURNAL_DIR_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def status(campaign_id: str | None, journal_dir: Path | None, as_json: bool) -> None:
    """Show the journals of participant loads: state (pending, complete, set aside),
    loaded, rejected and pending rows, when, and which server each was made against."""
    from gptools.participants import journal_summaries

    with cli_errors():
        rows = journal_summaries(journal_dir, campaign_id=campaign_id)
    emit(
        {"journals": [j.to_dict() for j in rows]},
        as_json=as_json,
        human=lambda: _journal_table(rows),
    )


@participants.command("journals")
@click.option(
    "--prune",
    is_flag=True,
    help="Delete complete and set-aside journals (not pending ones, nor one in use), each "
    "recorded in the campaign register first.",
)
@click.option(
    "--older-than",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="With --prune: only journals last written more than this many days ago.",
)
@_CAMPAIGN_FILTER_OPTION
@_JOURNAL_DIR_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def journals(
    prune: bool, older_than: int, campaign_id: str | None, journal_dir: Path | None, as_json: bool
) -> None:
    """List the journal files (as status does), or with --prune delete those no longer
    needed (each load is in the campaign register, which pruning changes nothing of). A
    complete load run again after its journal is pruned sends its ids again."""
    from gptools.participants import journal_summaries, prune_journals

    with cli_errors():
        if not prune:
            rows = journal_summaries(journal_dir, campaign_id=campaign_id)
            emit(
                {"journals": [j.to_dict() for j in rows]},
                as_json=as_json,
                human=lambda: _journal_table(rows),
            )
            return
        removed = prune_journals(
            journal_dir, campaign_id=campaign_id, older_than=timedelta(days=older_than)
        )
    freed = sum(j.size_bytes for j in removed)
    emit(
        {"pruned": [j.to_dict() for j in removed], "freed_bytes": freed},
        as_json=as_json,
        human=lambda: (
            f"pruned {len(removed)} journal(s), {freed / 1e6:,.1f} MB freed"
            + "".join(f"\n  {j.state:<10} {j.path}" for j in removed)
        ),
    )
