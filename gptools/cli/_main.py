"""The root command group, the capability groups, and the output/exit-code contract."""

from __future__ import annotations

import contextlib
import json
import os
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
#: Done at the server (campaigns created, players loaded) but not recorded in the campaign
#: register; the message names what was done and how to record it.
EXIT_NOT_RECORDED = 4
EXIT_INTERRUPTED = 130


class _ContractError(click.ClickException, GptoolsError):
    """A message, an exit code and a short code for ``--json``'s error document."""

    #: The error document's ``code`` when none more precise is given (a provider's code).
    default_code = "failure"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code or self.default_code


class BadInput(_ContractError):
    """Bad input from the user: a clear message and exit code 2, never a traceback."""

    exit_code = EXIT_BAD_INPUT
    default_code = "bad_input"


class Failure(_ContractError):
    """The work failed (server refused, I/O failed): a clear message and exit code 1."""

    exit_code = EXIT_FAILURE


class AddressInUse(_ContractError):
    """A server cannot listen on its address: a clear message and exit code 3."""

    exit_code = EXIT_ADDRESS_IN_USE
    default_code = "address_in_use"


class NotRecorded(_ContractError):
    """Done at the server but not recorded in the campaign register: exit code 4, with a
    message naming what was done and how to record it."""

    exit_code = EXIT_NOT_RECORDED
    default_code = "not_recorded"


class Interrupted(_ContractError):
    """Ctrl-C (SIGINT) stopped a command: exit code 130, whatever the command was doing."""

    exit_code = EXIT_INTERRUPTED
    default_code = "interrupted"

    def __init__(self) -> None:
        super().__init__("interrupted")

    def show(self, file: Any = None) -> None:
        """One plain line: an interruption is not an error of the command."""
        say("interrupted")


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` for a server to serve on (bound here so that the
    start-up line is printed only once the address is really ours), or exit 3."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except (UnicodeError, TypeError):  # a host name IDNA cannot encode
        sock.close()
        raise BadInput(f"--host {host!r} is not a host name or address") from None
    except OSError as exc:
        sock.close()
        raise AddressInUse(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose "
            "another --port (0 picks a free one)"
        ) from None
    sock.set_inheritable(True)
    return sock


def emit(document: Any, *, as_json: bool, human: Callable[[], str] | None = None) -> None:
    """Print a result: exactly one JSON document on stdout with ``--json``, else text.

    A command that fails after its result was printed (a plan with errors, a load left
    incomplete) prints no error document: ``--json`` output stays one document."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        ctx.find_root().meta[_EMITTED] = True
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
    ("sheet=...", "--sheet"),
    ("force=True", "--force"),
    ("overwrite_rejects=True", "--force"),
    ("header=True or header=False", "--header or --no-header"),
    ("skip_rows=N", "--skip-rows N"),
    ("pass format= one of", "pass --format, one of"),
    ("(pass costs=)", "(run without --offline)"),
    ("give username= and password= instead", "set GP_USERNAME and GP_PASSWORD instead"),
    ("missing client settings: give ", "missing client settings: set "),
    (
        "(lost_actions() lists what a replay request needs)",
        "(listed below with what a replay request needs; --lost-out FILE writes them)",
    ),
)


#: The same for hints whose text varies (the CLI has no way to give a currency's exponent).
_PYTHON_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # "missing client settings: give username= (or GP_USERNAME in the environment)"
    (re.compile(r"\b[a-z_]+= \(or (GP_[A-Z_]+) in ([^)]*)\)"), r"\1 (in \2)"),
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


def fail(message: str, *, bad_input: bool = False, code: str | None = None) -> NoReturn:
    """Stop with a message and the contract's exit code (``code``: the error document's,
    e.g. the provider's error code)."""
    raise (BadInput if bad_input else Failure)(cli_text(message), code=code)


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
        fail(str(exc), bad_input=True, code=getattr(exc, "code", None))
    except (BrandRequiredError, BrandNotAllowedError) as exc:
        text = cli_text(str(exc))
        fail(
            text if "--brand" in text else f"{text}. Name one with --brand.",
            bad_input=True,
            code=exc.code,
        )
    except TransportError as exc:
        # Never reached the server: the one line that names the address says it all.
        fail(exc.message if not exc.sent else str(exc), code="transport_error")
    except ApiError as exc:
        fail(str(exc), code=exc.code)
    except GptoolsError as exc:
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


_ARGV = "gptools.cli.argv"
_EMITTED = "gptools.cli.emitted"


def wants_json(args: list[str]) -> bool:
    """Whether a command line asks for ``--json`` (before a ``--`` that ends the options)."""
    return "--json" in (args[: args.index("--")] if "--" in args else args)


def error_document(code: str, message: str, exit_code: int) -> None:
    """The one JSON document ``--json`` prints when a command fails before its result."""
    emit(
        {"error": {"code": code, "message": message, "exit": exit_code}},
        as_json=True,
    )


class _Root(click.Group):
    """The ``gptools`` group. Whatever the subcommand: with ``--json`` a failure still
    prints one JSON document (``error_document``); Ctrl-C is exit 130; a missing extra is
    one line and exit 1. Parsing a subcommand's options happens inside :meth:`invoke`, so
    a bad option value is covered too."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Keep the command line, to know later whether it asked for ``--json``."""
        ctx.meta[_ARGV] = list(args)
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        """Run the subcommand under the contract (see the class)."""
        try:
            try:
                return super().invoke(ctx)
            except MissingExtraError as exc:
                # Wherever a command met it: one line naming the extra, never a traceback.
                raise Failure(str(exc), code="missing_extra") from None
            except KeyboardInterrupt:
                raise Interrupted from None
            except BrokenPipeError:
                raise  # the reader went away (``| head``): click handles it quietly
            except OSError as exc:
                # I/O failed (the README's exit 1): the file and the system's reason.
                where = f"{exc.filename}: " if exc.filename else ""
                raise Failure(f"{where}{exc.strerror or exc}", code="io_error") from None
        except click.ClickException as exc:
            if wants_json(ctx.meta.get(_ARGV, [])) and not ctx.meta.get(_EMITTED):
                code = getattr(exc, "code", None) or (
                    "usage_error" if isinstance(exc, click.UsageError) else "failure"
                )
                with contextlib.suppress(Exception):  # stdout gone: the message still shows
                    error_document(code, exc.format_message(), exc.exit_code)
            raise


@click.group(cls=_Root, context_settings={"help_option_names": ["-h", "--help"]})
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


#: Set to 1 to see the traceback of an unexpected error instead of its one-line report.
ENV_TRACEBACK = "GPTOOLS_TRACEBACK"


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point.

    The last resort of "no traceback, ever": an exception no command expected (a bug) is one
    line naming it and exit 1 (with ``--json``, the error document). Only here, not in
    :data:`cli`: tests invoke ``cli`` and see such an exception as it is, so it cannot hide
    a bug from them; ``GPTOOLS_TRACEBACK=1`` shows it here too."""
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        cli.main(args=args, prog_name="gptools", standalone_mode=True)
    except MissingExtraError as exc:
        say(f"Error: {exc}")
        sys.exit(EXIT_FAILURE)
    except KeyboardInterrupt:
        say("interrupted")
        sys.exit(EXIT_INTERRUPTED)
    except Exception as exc:
        if os.environ.get(ENV_TRACEBACK, "") not in ("", "0"):
            raise
        message = f"unexpected {type(exc).__name__}: {exc}"
        if wants_json(args):
            with contextlib.suppress(Exception):
                error_document("internal_error", message, EXIT_FAILURE)
        say(
            f"Error: {message} (a bug in gptools: please report it; "
            f"{ENV_TRACEBACK}=1 shows the traceback)"
        )
        sys.exit(EXIT_FAILURE)
