"""``gptools sandbox serve|reset|deliver``: run the simulated provider in the foreground,
forget its shared state, or make it deliver game events to a receiver."""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from datetime import UTC, datetime

import click

from gptools.cli._common import AUTH_CHOICE
from gptools.cli._main import emit, fail, listening_socket, sandbox, say
from gptools.cli._params import PositiveFinite

#: The most events ``sandbox deliver`` generates in one run (they are held in memory).
DELIVER_MAX_EVENTS = 1_000_000


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
@click.option(
    "--url",
    required=True,
    help="The receiver's URL (e.g. http://127.0.0.1:8000/v1/game-action-events).",
)
@click.option(
    "--count",
    "-n",
    type=click.IntRange(1, DELIVER_MAX_EVENTS),
    default=100,
    show_default=True,
    help="How many game events to generate and deliver.",
)
@click.option(
    "--auth",
    "auth_kind",
    type=AUTH_CHOICE,
    default="none",
    show_default=True,
    help="How to authenticate; secrets from the same GP_WEBHOOK_* variables.",
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--time-scale",
    type=PositiveFinite(maximum=1e9),
    default=None,
    help="Simulated seconds per real second (e.g. 100800: 7 days in 6 s); "
    "default: jump straight to each due time.",
)
@click.option("--concurrency", type=click.IntRange(1, 256), default=8, show_default=True)
@click.option(
    "--ca-bundle",
    type=click.Path(exists=True, dir_okay=False, readable=True),
    default=None,
    help="Verify an https:// receiver against this CA bundle (PEM) instead of "
    "the system's certificate authorities.",
)
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
    provider's retries (5xx and time-outs retried with backoff for 7 simulated days)."""
    from gptools.sandbox import (
        DeliveryTarget,
        ScaledClock,
        SimClock,
        VirtualClock,
        WebhookDispatcher,
        events_before,
    )
    from gptools.webhooks import AuthConfigError, ReceiverAuth

    try:
        auth = ReceiverAuth.from_env(auth_kind)
    except AuthConfigError as exc:
        fail(str(exc), bad_input=True)
    if not url.startswith(("http://", "https://")):
        fail(f"--url must be an http(s) URL, got {url!r}", bad_input=True)
    if ca_bundle is not None:
        try:
            ssl.create_default_context(cafile=ca_bundle)
        except (ssl.SSLError, OSError) as exc:
            fail(
                f"--ca-bundle {ca_bundle} is not a PEM bundle of CA certificates: {exc}",
                bad_input=True,
            )
    subscription: dict[str, object] = {"callbackUrl": url, "authenticationType": auth.kind}
    # The sender's one credential, from the environment (NONE has none).
    for sent in auth.credentials[:1]:
        if sent.username is None:
            subscription["apiKey"] = sent.secret
        else:
            subscription["username"] = sent.username.get_secret_value()
            subscription["password"] = sent.secret
    start, events = events_before(datetime.now(UTC), count, seed=seed)
    clock: SimClock = (
        ScaledClock(start, time_scale) if time_scale is not None else VirtualClock(start)
    )
    with WebhookDispatcher(
        clock=clock,
        target=DeliveryTarget.from_subscription(subscription),
        concurrency=concurrency,
        ca_bundle=ca_bundle,
    ) as dispatcher:
        for event in events:
            dispatcher.enqueue(event)
        say(f"delivering {count} events to {url} ...")
        report = dispatcher.run()
    document = {
        "url": url,
        "events": count,
        "attempts": report.attempts,
        "statuses": report.statuses,
        **report.counts,
        "duplicates": report.duplicates,
    }
    answers = ", ".join(f"{k}×{v}" for k, v in sorted(report.statuses.items()))
    emit(
        document,
        as_json=as_json,
        human=lambda: (
            f"{count} events, {report.attempts} attempts: "
            + ", ".join(f"{k} {v}" for k, v in report.counts.items())
            + f", duplicates {report.duplicates}; answers {answers}"
        ),
    )
    if report.attempts and set(report.statuses) == {"no answer"}:
        first = next((a.error for a in dispatcher.attempts if a.error), "no answer")
        fail(
            f"no answer from {url} on any of {report.attempts} attempts (first: {first}); "
            "is the receiver running there?"
        )
    if report.counts["delivered"] == 0:
        fail(
            f"the receiver at {url} acknowledged none of {count} events (answers {answers}); "
            + refusal_hint(report.statuses)
        )


def refusal_hint(statuses: Mapping[str, int]) -> str:
    """What the answers of a delivery that nothing acknowledged suggest to check."""
    codes = {int(k) for k in statuses if k.isdigit()}
    hints = []
    if codes & {401, 403}:
        hints.append("wrong key or credentials? --auth and GP_WEBHOOK_* must match the receiver's")
    if codes & {404, 405}:
        hints.append("wrong path? --url must end with the receiver's --path")
    if 413 in codes:
        hints.append("the receiver's --max-body-bytes is below an event's size")
    if 415 in codes or 400 in codes or 422 in codes:
        hints.append("the receiver refuses the events' content; is it a gptools receiver?")
    if any(c >= 500 for c in codes):
        hints.append("the receiver is failing; see its log")
    return "; ".join(hints) or "see the receiver's log"
