"""``gptools sandbox serve|reset|deliver|play``: run the simulated provider in the
foreground, forget its shared state, make it deliver generated game events to a receiver,
or make the players of its campaigns play them and deliver their events."""

from __future__ import annotations

import ssl
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import click

from gptools.cli._common import AUTH_CHOICE, NOW_HELP, cli_errors, connect_client, parse_now
from gptools.cli._main import emit, fail, listening_socket, sandbox, say
from gptools.cli._params import CAMPAIGN_ID, HTTP_URL, PositiveFinite, Share

#: The most events ``sandbox deliver`` generates, or ``sandbox play`` delivers, in one run
#: (they are held in memory).
DELIVER_MAX_EVENTS = 1_000_000
#: The longest ``sandbox play --days`` (ten years: longer than any campaign's window).
PLAY_MAX_DAYS = 3660.0

#: The options ``deliver`` and ``play`` share: where the events go and how.
URL_OPTION = click.option(
    "--url",
    type=HTTP_URL,
    required=True,
    help="The receiver's URL (e.g. http://127.0.0.1:8000/v1/game-action-events).",
)
AUTH_OPTION = click.option(
    "--auth",
    "auth_kind",
    type=AUTH_CHOICE,
    default="none",
    show_default=True,
    help="How to authenticate; secrets from the same GP_WEBHOOK_* variables.",
)
CONCURRENCY_OPTION = click.option(
    "--concurrency",
    type=click.IntRange(1, 256),
    default=8,
    show_default=True,
    help="Deliveries in flight at once.",
)
CA_BUNDLE_OPTION = click.option(
    "--ca-bundle",
    type=click.Path(exists=True, dir_okay=False, readable=True),
    default=None,
    help="Verify an https:// receiver against this CA bundle (PEM) instead of "
    "the system's certificate authorities.",
)


@sandbox.command("serve")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8080,
    show_default=True,
    help="Port to listen on (0: a free one).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option(
    "--seed", type=int, default=0, show_default=True, help="Seed of the fault-injection RNG."
)
@click.option("--no-rate-limits", is_flag=True, help="Do not enforce the rate tiers.")
@click.option(
    "--wallet-url",
    type=HTTP_URL,
    default=None,
    help="Wallet base URL; webhooks without a callback URL go to "
    "{wallet-url}/v1/game-action-events.",
)
@click.option(
    "--allow-insecure-callbacks",
    is_flag=True,
    help="Accept http:// callback URLs on loopback hosts (sandbox only).",
)
def serve(
    port: int,
    host: str,
    seed: int,
    no_rate_limits: bool,
    wallet_url: str | None,
    allow_insecure_callbacks: bool,
) -> None:
    """Serve the sandbox until Ctrl-C; prints its base URL and the demo credentials."""
    from gptools.sandbox import SandboxConfig, serve_forever

    config = SandboxConfig(
        seed=seed,
        enforce_rate_limits=not no_rate_limits,
        wallet_url=wallet_url,
        allow_insecure_callbacks=allow_insecure_callbacks,
    )

    def started(base_url: str) -> None:
        lines = [
            f"gptools sandbox serving at {base_url}  (Ctrl-C stops it)",
            f"rate limits: {'off' if no_rate_limits else 'enforced'}; "
            f"inspection: {base_url}/_sandbox/requests",
            "demo credentials (HTTP Basic):",
        ]
        for account in config.accounts.values():
            brands = ", ".join(str(b) for b in account.brand_ids)
            lines.append(
                f"  {account.principal_type:<12} {account.username}:"
                f"{account.password}  brands {brands}"
            )
        lines.append(
            f"try: curl -u {config.accounts['individual'].username}:"
            f"{config.accounts['individual'].password} {base_url}/api/v1/self"
        )
        for line in lines:
            say(line)

    sock = listening_socket(host, port)
    try:
        serve_forever(config, host=host, port=port, on_started=started, sock=sock)
    except KeyboardInterrupt:
        # uvicorn re-raises the Ctrl-C it handled; for a server it is the normal way out.
        say("sandbox stopped")
    except SystemExit as exc:
        # uvicorn exits with a status after logging why it could not start.
        if exc.code:
            fail(f"the sandbox could not serve on {host}:{port} (reason logged above)")
    finally:
        sock.close()


@sandbox.command("reset")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def reset(as_json: bool) -> None:
    """Forget the embedded sandbox's state (campaigns, participants, subscriptions) that
    consecutive commands share; the next command starts from an empty sandbox."""
    from gptools.sandbox import STATE_FILE, default_state_dir, reset_state

    directory = default_state_dir()
    existed = reset_state(directory)
    path = directory / STATE_FILE
    emit(
        {"state_file": str(path), "cleared": existed},
        as_json=as_json,
        human=lambda: (
            f"cleared the embedded sandbox state {path}"
            if existed
            else f"no embedded sandbox state at {path}: nothing to clear"
        ),
    )


@sandbox.command("deliver")
@URL_OPTION
@click.option(
    "--count",
    "-n",
    type=click.IntRange(1, DELIVER_MAX_EVENTS),
    default=100,
    show_default=True,
    help="How many game events to generate and deliver.",
)
@AUTH_OPTION
@click.option(
    "--seed",
    type=int,
    default=0,
    show_default=True,
    help="Seed of the event generator: the same seed, the same events.",
)
@click.option(
    "--time-scale",
    type=PositiveFinite(maximum=1e9),
    default=None,
    help="Simulated seconds per real second (e.g. 100800: 7 days in 6 s); "
    "default: jump straight to each due time.",
)
@CONCURRENCY_OPTION
@CA_BUNDLE_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def deliver(
    url: str,
    count: int,
    auth_kind: str,
    seed: int,
    time_scale: float | None,
    concurrency: int,
    ca_bundle: str | None,
    as_json: bool,
) -> None:
    """Make the sandbox deliver COUNT generated game events to a receiver, with the
    provider's retries (5xx and time-outs retried with backoff for 7 simulated days).
    The events are generic play; `gptools sandbox play` delivers the play of the
    campaigns the CLI created."""
    from gptools.sandbox import ScaledClock, SimClock, VirtualClock, events_before

    target = delivery_target(url, auth_kind, ca_bundle)
    start, events = events_before(datetime.now(UTC), count, seed=seed)
    clock: SimClock = (
        ScaledClock(start, time_scale) if time_scale is not None else VirtualClock(start)
    )
    say(f"delivering {count} events to {url} ...")
    report, first_error = dispatch(events, clock, target, concurrency, ca_bundle)
    document = {"url": url, "events": count, **report.to_dict()}
    emit(
        document,
        as_json=as_json,
        human=lambda: f"{count} events, " + report.summary(),
    )
    check_delivered(report, first_error, url, count)


@sandbox.command("play")
@URL_OPTION
@AUTH_OPTION
@click.option(
    "--campaign",
    "campaign_ids",
    type=CAMPAIGN_ID,
    multiple=True,
    help="A campaign to play (repeat) [default: every campaign of the sandbox].",
)
@click.option("--now", "now_text", default=None, help=NOW_HELP + " The play clock's time.")
@click.option(
    "--days",
    type=PositiveFinite(maximum=PLAY_MAX_DAYS),
    default=None,
    help="Let the play clock run this many days from --now: the plays of those days are "
    "delivered [default: every play before --now].",
)
@click.option(
    "--seed",
    type=int,
    default=0,
    show_default=True,
    help="Seed of the player model: the same seed, the same plays.",
)
@click.option(
    "--accept-share",
    type=Share(),
    default=None,
    help="Share of the participants who play at all [default: the player model's].",
)
@click.option(
    "--finish-share",
    type=Share(),
    default=None,
    help="Share of those who use every round [default: the player model's].",
)
@click.option(
    "--truth",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write what the players had played by the clock's time (per campaign: reached, "
    "completed, rounds per player) to this JSON file, to compare results with.",
)
@click.option(
    "--ledger",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Keep the operator wallet's side too: write its ledger (CSV, the assumed layout "
    "spec.WALLET_LEDGER_COLUMNS) to this file, and deliver what the wallet model says "
    "(some rounds' events never arrive; one player gets a round over betNumber).",
)
@click.option(
    "--wallet-seed", type=int, default=0, show_default=True, help="Seed of the wallet model."
)
@click.option("--force", is_flag=True, help="Replace an existing --truth or --ledger file.")
@CONCURRENCY_OPTION
@CA_BUNDLE_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def play(
    url: str,
    auth_kind: str,
    campaign_ids: tuple[str, ...],
    now_text: str | None,
    days: float | None,
    seed: int,
    accept_share: float | None,
    finish_share: float | None,
    truth: Path | None,
    ledger: Path | None,
    wallet_seed: int,
    force: bool,
    concurrency: int,
    ca_bundle: str | None,
    as_json: bool,
) -> None:
    """Make the players of the sandbox's campaigns play them and deliver their game
    events to a receiver (the provider's retries, on a simulated clock).

    The sandbox is the one the CLI's commands share (its campaigns and their
    participants, as `campaigns apply` and `participants load` left them), or the one
    `gptools sandbox serve` serves at a loopback GP_BASE_URL. Its seeded player model
    plays each campaign: a participant accepts or not, plays up to betNumber rounds,
    spread over the window. Delivered: every play before --now (default: the current
    time), or with --days the plays of the days from --now on. A play delivered again
    (a later clock covering it) has the same actionId: the receiver stores it once."""
    from gptools.sandbox import (
        CampaignNotPlayableError,
        PlayerModel,
        VirtualClock,
        play_campaign,
        write_truth,
    )

    target = delivery_target(url, auth_kind, ca_bundle)
    for option, path in (("--truth", truth), ("--ledger", ledger)):
        if path is not None and not force and (path.exists() or path.is_symlink()):
            fail(f"{option} {path} exists; --force replaces it", bad_input=True)
    now = parse_now(now_text) or datetime.now(UTC)
    since, until = (now, now + timedelta(days=days)) if days is not None else (None, now)
    model = PlayerModel(
        seed=seed,
        **{k: v for k, v in (("accept_share", accept_share),
                             ("finish_share", finish_share)) if v is not None},
    )  # fmt: skip
    with cli_errors():
        state = _played_sandbox()
        stored = state.campaigns
        chosen = list(dict.fromkeys(campaign_ids)) or sorted(stored)
        unknown = [c for c in chosen if c not in stored]
        if unknown:
            fail(f"no campaign {', '.join(unknown)} in the sandbox", bad_input=True)
        try:
            played = [
                play_campaign(c, stored[c].body, state.participants(c), model).before(until)
                for c in chosen
            ]
        except CampaignNotPlayableError as exc:
            fail(str(exc), bad_input=True)
    wallets = _wallets(played, stored, wallet_seed) if ledger is not None else None
    sent = [w.delivered for w in wallets] if wallets is not None else [p.events for p in played]
    events = sorted(
        (e for plays in sent for e in plays if since is None or e.timestamp >= since),
        key=lambda e: (e.timestamp, str(e.action_id)),
    )
    if len(events) > DELIVER_MAX_EVENTS:
        fail(
            f"{len(events):,} plays to deliver, more than {DELIVER_MAX_EVENTS:,} at once: "
            "play fewer days at a time (--now, --days) or fewer campaigns (--campaign)",
            bad_input=True,
        )
    report = None
    first_error = "no answer"
    if events:
        say(f"delivering {len(events)} plays of {len(played)} campaign(s) to {url} ...")
        report, first_error = dispatch(
            events, VirtualClock(events[0].timestamp), target, concurrency, ca_bundle
        )
    truths = [p.summary() for p in played]
    if ledger is not None and wallets is not None:
        from gptools.sandbox import write_ledger

        try:
            write_ledger(ledger, wallets)
        except OSError as exc:
            fail(f"--ledger {ledger}: cannot write: {exc.strerror or exc}")
    if truth is not None:
        try:
            write_truth(truth, played, seed=seed, until=until)
        except OSError as exc:
            fail(f"--truth {truth}: cannot write: {exc.strerror or exc}")
    per_campaign = [
        {
            **{k: t[k] for k in ("campaignId", "participants", "reached", "completed")},
            "roundsUsed": t["roundsUsed"],
            "delivered": sum(1 for e in plays if since is None or e.timestamp >= since),
        }
        for t, plays in zip(truths, sent, strict=True)
    ]
    document = {
        "url": url,
        "from": _iso(since),
        "until": _iso(until),
        "seed": seed,
        "campaigns": per_campaign,
        "events": len(events),
        **(report.to_dict() if report is not None else {}),
        "truth": str(truth) if truth is not None else None,
        "ledger": str(ledger) if ledger is not None else None,
        "wallet": [w.truth() for w in wallets] if wallets is not None else None,
    }

    def human() -> str:
        lines = [
            f"{c['campaignId']}: {c['reached']} of {c['participants']} participants played by "
            f"{until:%Y-%m-%d %H:%M} UTC, {c['completed']} used every round, "
            f"{c['roundsUsed']} rounds"
            for c in per_campaign
        ]
        if report is None:
            lines.append(
                f"no play {'between ' + f'{since:%Y-%m-%d %H:%M} and ' if since else 'before '}"
                f"{until:%Y-%m-%d %H:%M} UTC: nothing delivered (the campaigns' windows are "
                "elsewhere; move the clock with --now and --days)"
            )
        else:
            lines.append(f"{len(events)} plays, " + report.summary())
        if truth is not None:
            lines.append(f"Wrote the truth to {truth}")
        return "\n".join(lines)

    emit(document, as_json=as_json, human=human)
    if report is not None:
        check_delivered(report, first_error, url, len(events))


def _wallets(played: list[Any], stored: Any, seed: int) -> list[Any]:
    """The wallet side of each campaign's play (the sandbox's wallet model, ``seed``)."""
    from gptools.sandbox import WalletModel, wallet_side

    model = WalletModel(seed=seed)
    return [wallet_side(p, stored[p.campaign_id].body, model) for p in played]


def _played_sandbox() -> Any:
    """The state of the sandbox the CLI's commands talk to: the embedded one (its state
    shared between commands), or the one served at a loopback ``GP_BASE_URL``."""
    from gptools.sandbox import RemoteSandbox
    from gptools.session import embedded_sandbox, real_service_configured

    with connect_client() as client:
        if not real_service_configured():
            running = embedded_sandbox()
            assert running is not None  # connect_client started it
            return running.state
        if not client.server_identity.startswith("sandbox:"):
            fail(
                f"GP_BASE_URL names {client.base_url}, which is not a sandbox: only a "
                "sandbox's players can be made to play (unset GP_BASE_URL for the "
                "embedded one)",
                bad_input=True,
            )
        return RemoteSandbox.at(client.base_url).state


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def delivery_target(url: str, auth_kind: str, ca_bundle: str | None) -> Any:
    """The receiver at ``url`` as the sandbox's dispatcher reaches it, authenticated as
    ``--auth`` says with the secrets of the same ``GP_WEBHOOK_*`` variables the receiver
    reads (``url`` is checked by its option's type); bad input (exit 2) for a CA bundle
    that is not one."""
    from gptools.sandbox import DeliveryTarget
    from gptools.webhooks import AuthConfigError, ReceiverAuth

    try:
        auth = ReceiverAuth.from_env(auth_kind)
    except AuthConfigError as exc:
        fail(str(exc), bad_input=True)
    if ca_bundle is not None:
        try:
            ssl.create_default_context(cafile=ca_bundle)
        except (ssl.SSLError, OSError) as exc:
            fail(
                f"--ca-bundle {ca_bundle} is not a PEM bundle of CA certificates: {exc}",
                bad_input=True,
            )
    return DeliveryTarget.from_subscription(auth.subscription(url))


def dispatch(
    events: Iterable[Any], clock: Any, target: Any, concurrency: int, ca_bundle: str | None
) -> tuple[Any, str]:
    """Deliver ``events`` to ``target`` with the provider's retries on ``clock``; the
    dispatcher's report, and the first transport error met (for the failure message)."""
    from gptools.sandbox import WebhookDispatcher

    with WebhookDispatcher(
        clock=clock, target=target, concurrency=concurrency, ca_bundle=ca_bundle
    ) as dispatcher:
        for event in events:
            dispatcher.enqueue(event)
        report = dispatcher.run()
    first = next((a.error for a in dispatcher.attempts if a.error), None)
    return report, first or "no answer"


def check_delivered(report: Any, first_error: str, url: str, count: int) -> None:
    """Exit 1 when the delivery failed as a whole (:meth:`DispatchReport.failure`)."""
    message = report.failure(url, count, first_error)
    if message is not None:
        fail(message)
