"""``gptools webhooks find|replay``: the support desk's lookup and the ops desk's replay,
over a receiver's store (thin layers over :func:`gptools.webhooks.find_actions`,
:func:`gptools.webhooks.plan_replay` and :func:`gptools.webhooks.replay`)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import click

from gptools.cli._main import emit, fail, webhooks
from gptools.cli._params import HTTP_URL, STORE_URL, Between, FilePath

_STORE_HELP = "sqlite:///PATH (or a bare PATH) or postgresql://USER@HOST/DB[?schema=NAME]"


class AwareTime(click.ParamType[datetime]):
    """An ISO 8601 date-time with its zone (``2026-03-02T10:00:00Z``)."""

    name = "TIME"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> datetime:
        if isinstance(value, datetime):
            return value
        try:
            moment = datetime.fromisoformat(str(value))
        except ValueError:
            self.fail(f"{value!r} is not an ISO 8601 date-time", param, ctx)
        if moment.tzinfo is None:
            self.fail(f"{value!r} has no zone: add Z or an offset such as +02:00", param, ctx)
        return moment


AWARE_TIME = AwareTime()


def filter_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The filter options ``find`` and ``replay`` share (they combine with AND)."""
    options = [
        click.option("--action-id", default=None, help="The action's actionId."),
        click.option("--round-id", default=None, help="The payload's roundId."),
        click.option("--player-id", default=None, help="The payload's playerId."),
        click.option("--game-id", default=None, help="The payload's gameId."),
        click.option("--currency", default=None, help="The payload's currencyCode."),
        click.option("--event-type", default=None, help="One of the payload's events (COIN...)."),
        click.option("--since", type=AWARE_TIME, default=None,
                     help="First delivery at or after TIME (ISO 8601 with a zone)."),
        click.option("--until", type=AWARE_TIME, default=None,
                     help="First delivery before TIME (ISO 8601 with a zone)."),
    ]  # fmt: skip
    for option in reversed(options):
        command = option(command)
    return command


def _filter(options: dict[str, Any]) -> Any:
    from gptools.webhooks import FindFilter

    try:
        return FindFilter(
            action_id=options["action_id"],
            round_id=options["round_id"],
            player_id=options["player_id"],
            game_id=options["game_id"],
            currency=options["currency"],
            event_type=options["event_type"],
            outcome=options.get("outcome"),
            status=options.get("status"),
            since=options["since"],
            until=options["until"],
        )
    except ValueError as exc:
        fail(str(exc), bad_input=True)


def _store(url: str) -> Any:
    from gptools.webhooks import open_store

    try:
        return open_store(url, create=False)
    except ValueError as exc:
        fail(str(exc), bad_input=True)


def _campaigns(register: str | None, campaign_ids: tuple[str, ...]) -> list[Any]:
    if register is None and not campaign_ids:
        return []
    from gptools.campaigns import CampaignRegister, RegisterError

    try:
        reg = CampaignRegister(register) if register else CampaignRegister()
        records = list(reg.campaigns())
    except RegisterError as exc:
        fail(str(exc), bad_input=True)
    if campaign_ids:
        records = [r for r in records if str(r.campaign_id) in campaign_ids]
        missing = set(campaign_ids) - {str(r.campaign_id) for r in records}
        if missing:
            fail(f"no campaign {', '.join(sorted(missing))} in the register", bad_input=True)
    return records


@webhooks.command("find")
@click.option("--store", "store_url", type=STORE_URL, default=None, help=_STORE_HELP)
@click.option(
    "--log",
    "log_source",
    default=None,
    metavar="PATH",
    help="A delivery log instead of a store: any format `webhooks analyze` reads.",
)
@filter_options
@click.option(
    "--outcome",
    type=click.Choice(["acknowledged", "lost", "pending"]),
    default=None,
    help="acknowledged (answered 2xx), lost (last answer 4xx) or pending.",
)
@click.option(
    "--status",
    type=click.IntRange(100, 599),
    default=None,
    help="An HTTP status one of its deliveries was answered.",
)
@click.option(
    "--limit",
    type=click.IntRange(1, 10_000),
    default=100,
    show_default=True,
    help="The most actions shown (the answer says when more match).",
)
@click.option(
    "--register",
    type=FilePath(dir_okay=False),
    default=None,
    help="A campaign register: say which campaign each action counts for, or why none.",
)
@click.option(
    "--campaign",
    "campaign_ids",
    multiple=True,
    help="Only these campaigns of the register (repeatable).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def find(
    log_source: str | None,
    limit: int,
    register: str | None,
    campaign_ids: tuple[str, ...],
    as_json: bool,
    **options: Any,
) -> None:
    """Find actions in a store by id, round, player, game, currency, event type, outcome,
    answer and time: each with its deliveries in order (answers, latencies), acknowledged,
    lost or pending, and with --register its campaign or why none. On a store it reads
    indexes only, never the whole log; --log reads a delivery log file instead."""
    from gptools.webhooks import SchemaVersionError, StoreError, StoreNotFoundError, find_actions

    wanted = _filter(options)
    if (options["store_url"] is None) == (log_source is None):
        fail("give --store or --log (one of them)", bad_input=True)
    campaigns = _campaigns(register, campaign_ids)
    try:
        if log_source is not None:
            from gptools.webhooks import find_in_log

            result = find_in_log(log_source, wanted, limit=limit, campaigns=campaigns)
        else:
            store = _store(options["store_url"])
            result = find_actions(store, wanted, limit=limit, campaigns=campaigns)
    except (StoreNotFoundError, SchemaVersionError, ValueError) as exc:
        fail(str(exc), bad_input=True)
    except StoreError as exc:
        fail(str(exc))
    emit(result.to_dict(), as_json=as_json, human=lambda: str(result))


@webhooks.command("replay")
@click.option("--store", "store_url", type=STORE_URL, required=True, help=_STORE_HELP)
@filter_options
@click.option(
    "--plan",
    "plan_only",
    is_flag=True,
    help="Only say how many actions and deliveries match and what would run.",
)
@click.option(
    "--id",
    "replay_id",
    default=None,
    help="The replay's id (default: one derived from the filter and target); "
    "running it again resumes it, and does nothing once it is done.",
)
@click.option(
    "--handler",
    default=None,
    metavar="MODULE:FUNCTION",
    help="Run this handler (the receiver's) here, until every action has run.",
)
@click.option(
    "--url", type=HTTP_URL, default=None, help="POST each notification to this URL instead."
)
@click.option(
    "--forward",
    "forward",
    multiple=True,
    metavar="NAME",
    help="Forward the actions again to this destination of the receiver's forwarding "
    "stage (repeat), instead of running the handler; the receiver serving the store with "
    "that destination publishes them.",
)
@click.option(
    "--rate",
    type=Between(0.001, 1_000_000.0),
    default=None,
    help="At most this many actions a second (default: as fast as the store goes).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def replay_command(plan_only: bool, replay_id: str | None, handler: str | None, url: str | None,
                   forward: tuple[str, ...], rate: float | None, as_json: bool,
                   **options: Any) -> None:  # fmt: skip
    """Run the handler again for the stored actions the filter chooses, through the
    durable processing queue (retries, dead letters, one run per action). Without
    --handler or --url, the receiver serving the store runs them; with --forward, it
    forwards them again to those destinations instead. Resumable after a crash or Ctrl-C,
    idempotent per --id, recorded in the store's replays table."""
    from gptools.webhooks import (
        SchemaVersionError,
        StoreError,
        StoreNotFoundError,
        forward_target,
        load_handler,
        plan_replay,
        post_handler,
        replay,
    )

    if handler and url:
        fail("give --handler or --url, not both", bad_input=True)
    if forward and (handler or url):
        fail("--forward sends the actions again, --handler/--url runs them: give one",
             bad_input=True)  # fmt: skip
    wanted = _filter(options)
    store = _store(options["store_url"])
    target = (
        f"handler {handler}" if handler else f"POST {url}" if url
        else forward_target(forward) if forward
        else "the receiver's queue"
    )  # fmt: skip
    try:
        if plan_only:
            plan = plan_replay(store, wanted, replay_id=replay_id, target=target)
            emit(plan.to_dict(), as_json=as_json, human=lambda: str(plan))
            return
        run = load_handler(handler) if handler else post_handler(url) if url else None
        result = replay(
            store,
            wanted,
            replay_id=replay_id,
            handler=run,
            target=target,
            rate=rate,
            show_progress=None if not as_json else False,
            forward=forward,
        )
    except ValueError as exc:
        fail(str(exc), bad_input=True)
    except (StoreNotFoundError, SchemaVersionError) as exc:
        fail(str(exc), bad_input=True)
    except StoreError as exc:
        fail(str(exc))
    emit(result.to_dict(), as_json=as_json, human=lambda: str(result))
