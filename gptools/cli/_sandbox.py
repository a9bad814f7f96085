"""``gptools sandbox serve``: run the simulated provider in the foreground."""

from __future__ import annotations

import click

from gptools.cli._main import emit, fail, listening_socket, sandbox, say


@sandbox.command("serve")
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True,
              help="Port to listen on (0: a free one).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed of the fault-injection RNG.")
@click.option("--no-rate-limits", is_flag=True, help="Do not enforce the rate tiers.")
@click.option("--wallet-url", default=None,
              help="Wallet base URL; webhooks without a callback URL go to "
                   "{wallet-url}/v1/game-action-events.")
@click.option("--allow-insecure-callbacks", is_flag=True,
              help="Accept http:// callback URLs on loopback hosts (sandbox only).")
def serve(port: int, host: str, seed: int, no_rate_limits: bool, wallet_url: str | None,
          allow_insecure_callbacks: bool) -> None:
    """Serve the sandbox until Ctrl-C; prints its base URL and the demo credentials."""
    from gptools.sandbox import SandboxConfig
    from gptools.sandbox._server import serve_forever

    config = SandboxConfig(seed=seed, enforce_rate_limits=not no_rate_limits,
                           wallet_url=wallet_url,
                           allow_insecure_callbacks=allow_insecure_callbacks)

    def started(base_url: str) -> None:
        lines = [f"gptools sandbox serving at {base_url}  (Ctrl-C stops it)",
                 f"rate limits: {'off' if no_rate_limits else 'enforced'}; "
                 f"inspection: {base_url}/_sandbox/requests",
                 "demo credentials (HTTP Basic):"]
        for account in config.accounts.values():
            brands = ", ".join(str(b) for b in account.brand_ids)
            lines.append(f"  {account.principal_type:<12} {account.username}:"
                         f"{account.password}  brands {brands}")
        lines.append(f"try: curl -u {config.accounts['individual'].username}:"
                     f"{config.accounts['individual'].password} {base_url}/api/v1/self")
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
    from gptools.sandbox._persist import STATE_FILE, default_state_dir, reset_state

    directory = default_state_dir()
    existed = reset_state(directory)
    path = directory / STATE_FILE
    emit({"state_file": str(path), "cleared": existed}, as_json=as_json,
         human=lambda: (f"cleared the embedded sandbox state {path}" if existed
                        else f"no embedded sandbox state at {path}: nothing to clear"))
