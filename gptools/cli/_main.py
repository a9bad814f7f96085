"""The root command group, the capability groups, and the output/exit-code contract."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import sys
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

import click

from gptools.errors import (
    ApiError,
    BrandNotAllowedError,
    BrandRequiredError,
    ConfigurationError,
    GptoolsError,
    InvalidRequestError,
    MissingExtraError,
    TransportError,
)

EXIT_FAILURE = 1
EXIT_BAD_INPUT = 2
#: A server command could not listen on its address (the port is in use, or not permitted).
EXIT_ADDRESS_IN_USE = 3
EXIT_INTERRUPTED = 130


class BadInput(click.ClickException, GptoolsError):
    """Bad input from the user: a clear message and exit code 2, never a traceback."""

    exit_code = EXIT_BAD_INPUT


class Failure(click.ClickException, GptoolsError):
    """The work failed (server refused, I/O failed): a clear message and exit code 1."""

    exit_code = EXIT_FAILURE


class AddressInUse(click.ClickException, GptoolsError):
    """A server cannot listen on its address: a clear message and exit code 3."""

    exit_code = EXIT_ADDRESS_IN_USE


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` for a server to serve on (bound here so that the
    start-up line is printed only once the address is really ours), or exit 3."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise AddressInUse(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose "
            "another --port (0 picks a free one)"
        ) from None
    sock.set_inheritable(True)
    return sock


def emit(document: Any, *, as_json: bool, human: Callable[[], str] | None = None) -> None:
    """Print a result: exactly one JSON document on stdout with ``--json``, else text."""
    if as_json:
        click.echo(json.dumps(document, default=str, ensure_ascii=False, indent=2))
    elif human is not None:
        click.echo(human())
    else:
        click.echo(json.dumps(document, default=str, ensure_ascii=False, indent=2))


def say(message: str) -> None:
    """A human line on stderr (never pollutes ``--json`` output)."""
    click.echo(message, err=True)


#: Hints in library messages that name a Python argument, and what the CLI says instead.
#: Every CLI message passes through :func:`cli_text`; tests check that no Python form is
#: left in what the commands print.
_PYTHON_HINTS: tuple[tuple[str, str], ...] = (
    ("Pass brand=ID or use client.brand(ID)", "Name one with --brand"),
    ("encoding=...", "--encoding"),
    ("column=...", "--column"),
    ("header=True or header=False", "--header or --no-header"),
    ("skip_rows=N", "--skip-rows N"),
    ("pass format= one of", "pass --format, one of"),
    ("(pass costs=)", "(run without --offline)"),
)


#: The same for hints whose text varies (the CLI has no way to give a currency's exponent).
_PYTHON_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"pass its number of decimals, e\.g\. exponents=\{[^}]*\}"),
        "the CLI takes ISO 4217 codes only",
    ),
)


def cli_text(message: str) -> str:
    """A library message with its Python-argument hints replaced by the CLI options."""
    for python, option in _PYTHON_HINTS:
        message = message.replace(python, option)
    for pattern, replacement in _PYTHON_PATTERNS:
        message = pattern.sub(replacement, message)
    return message


def fail(message: str, *, bad_input: bool = False) -> NoReturn:
    """Stop with a message and the contract's exit code."""
    raise (BadInput if bad_input else Failure)(cli_text(message))


@contextlib.contextmanager
def cli_errors(*bad_input: type[BaseException]) -> Iterator[None]:
    """Turn gptools errors into the CLI contract: exit 2 for bad input (settings, a brand or
    campaign the account cannot use, and the caller's ``bad_input`` types), 1 for failures."""
    expected: tuple[type[BaseException], ...] = (
        ConfigurationError,
        InvalidRequestError,
        *bad_input,
    )
    try:
        yield
    except click.ClickException:
        raise  # already the contract's message and exit code (BadInput is a GptoolsError too)
    except expected as exc:
        fail(str(exc), bad_input=True)
    except (BrandRequiredError, BrandNotAllowedError) as exc:
        text = cli_text(str(exc))
        fail(text if "--brand" in text else f"{text}. Name one with --brand.", bad_input=True)
    except TransportError as exc:
        # Never reached the server: the one line that names the address says it all.
        fail(exc.message if not exc.sent else str(exc))
    except (ApiError, GptoolsError) as exc:
        fail(str(exc))


def _timeout_option(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    """``--timeout``: seconds for the whole call, or ``connect,read`` (as ``GP_TIMEOUT``)."""
    from gptools.client._settings import parse_timeout

    if value is None:
        return None
    try:
        return parse_timeout(value, name="--timeout")
    except ConfigurationError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None


#: The client settings the top-level command takes (before any subcommand).
CLIENT_OPTIONS = ("max_retries", "timeout")


def client_options() -> dict[str, Any]:
    """The client keyword arguments given to the top-level command (``--max-retries``,
    ``--timeout``); what is not given there comes from the environment or ``.env``."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return {}
    given = ctx.find_root().params
    return {name: given[name] for name in CLIENT_OPTIONS if given.get(name) is not None}


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="gptools")
@click.option(
    "--max-retries",
    type=click.IntRange(min=0),
    default=None,
    help="Retries after a request's first attempt [default: GP_MAX_RETRIES, else 3].",
)
@click.option(
    "--timeout",
    default=None,
    callback=_timeout_option,
    metavar="SECONDS|CONNECT,READ",
    help="Time-out: seconds for a whole call, or connect,read (the call then ends within "
    "their sum) [default: GP_TIMEOUT, else 5,30].",
)
def cli(max_retries: int | None, timeout: Any) -> None:
    """gptools: campaigns, feature costs, participants and webhooks for the GP public API."""


@cli.group()
def sandbox() -> None:
    """The embedded simulation of the provider."""


@cli.group()
def costs() -> None:
    """Awarded-feature costs per game and currency."""


@cli.group()
def campaigns() -> None:
    """Plan, validate and create campaigns."""


@cli.group()
def participants() -> None:
    """Load players into campaigns."""


@cli.group()
def webhooks() -> None:
    """Receive game-event webhooks and analyse their delivery log."""


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    try:
        cli.main(args=argv, prog_name="gptools", standalone_mode=True)
    except MissingExtraError as exc:
        # Wherever a command met it: one line naming the extra, never a traceback.
        say(f"Error: {exc}")
        sys.exit(EXIT_FAILURE)
    except KeyboardInterrupt:
        say("interrupted")
        sys.exit(EXIT_INTERRUPTED)
