"""Reloading a running receiver's credentials and TLS certificate (SIGHUP to the serve
process, or ``gptools webhooks reload``) without dropping a connection or a delivery.

What is read again: the credentials file, and the TLS certificate chain and key from the
paths ``serve`` was given. Environment variables cannot change under a running process, so
``GP_WEBHOOK_API_KEY`` (or the BASIC pair) reads the same as at start. Everything is checked
before anything is used: a file that cannot be read, a certificate that does not go with its
key, a credential no request could match (``_credentials.py``) keep the settings in use, and
the reload counts as failed.

How the signal reaches every worker:

- One worker: uvicorn serves in the serve process itself, and its event loop handles
  SIGHUP (:func:`install`, from the worker's factory).
- Several: uvicorn's supervisor would restart every worker on SIGHUP, closing their
  kept-alive connections. ``serve`` runs :class:`ReloadingSupervisor` instead, whose SIGHUP
  writes the reload's generation into a private directory, sends SIGHUP to each worker once
  it serves (its handler is installed before it does), and waits for each worker's
  confirmation there (``RELOAD_TIMEOUT_S``). Until the event loop's handler is installed,
  the serve process ignores SIGHUP: a reload asked too early is not answered, never fatal.

How a worker swaps in place, in its event loop's thread: the TLS context uvicorn serves with
(kept by :func:`live_ssl_context`, uvicorn's ``ssl_context_factory``) loads the new
certificate and key, so new handshakes use them while connections already open keep theirs;
then the receiver's ``auth`` is replaced by one assignment, so a request sees the old
credentials or the new ones, never a mix. The TLS files are first copied to a private
temporary directory and checked there in a scratch context, and the live context loads the
copy: a file replaced halfway cannot leave it with a certificate and no key.

The answer: the serve process counts each reload once in
``gptools_webhook_config_reloads_total{result}`` (``ok`` or ``failed``), logs one line
(``config_reloaded``, or ``config_reload_failed`` with the reason), and with a pid file
writes it to the status file beside it (``PID_FILE.reload``), where :func:`reload_receiver`
waits for it. The pid file is locked while ``serve`` runs, so a stale one (the receiver
gone, its pid perhaps another process's by now) is never signalled.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import ssl
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gptools._private_files import open_private
from gptools.errors import ConfigurationError, GptoolsError
from gptools.webhooks._auth import ReceiverAuth
from gptools.webhooks._constants import (
    RELOAD_ANSWER_MARGIN_S,
    RELOAD_POLL_S,
    RELOAD_TIMEOUT_S,
    TLS_FILE_MAX_BYTES,
)
from gptools.webhooks._file_locks import is_held, lock_now
from gptools.webhooks._metric_families import counter

if TYPE_CHECKING:
    from uvicorn.config import Config

    from gptools.webhooks._app import WebhookReceiver

logger = logging.getLogger("gptools.webhooks")

#: Where the workers of a multi-worker ``serve`` find the reload's generation and write
#: their confirmations (a private directory ``serve`` creates).
ENV_RELOAD_DIR = "GP_WEBHOOK_RELOAD_DIR"
#: The status file a one-worker ``serve`` writes its reloads' answers to (with a pid file).
ENV_RELOAD_STATUS = "GP_WEBHOOK_RELOAD_STATUS"
#: What the status file's name adds to the pid file's.
STATUS_SUFFIX = ".reload"


@dataclass(frozen=True, slots=True)
class ReloadResult:
    """What a reload came to: ``ok``; the serve process's ``pid``; how many ``workers``
    took the new settings; the ``credentials`` (ids) now accepted; whether a TLS
    certificate was loaded (``tls``); and ``detail``, why it failed (empty when ok)."""

    ok: bool
    pid: int
    workers: int
    credentials: tuple[str, ...] = ()
    tls: bool = False
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON-ready values (the status file, ``webhooks reload --json``)."""
        return {
            "result": "ok" if self.ok else "failed",
            "pid": self.pid,
            "workers": self.workers,
            "credentials": list(self.credentials),
            "tls": self.tls,
            "detail": self.detail,
        }


class ReloadError(GptoolsError):
    """No running receiver answered: none holds the pid file, or it did not answer in
    time (the settings it uses are unknown; its log says more)."""


# -- the TLS context uvicorn serves with ----------------------------------------------------


@dataclass
class _LiveTls:
    context: ssl.SSLContext | None = None
    certfile: str = ""
    keyfile: str | None = None
    password: str | None = None


_LIVE = _LiveTls()


def live_ssl_context(config: Config, default: Callable[[], ssl.SSLContext]) -> ssl.SSLContext:
    """uvicorn's ``ssl_context_factory``: the context uvicorn would build, kept (with the
    paths it came from) so that a reload can load a new certificate into it."""
    context = default()
    _LIVE.context = context
    _LIVE.certfile = os.fspath(config.ssl_certfile or "")
    _LIVE.keyfile = os.fspath(config.ssl_keyfile) if config.ssl_keyfile else None
    _LIVE.password = config.ssl_keyfile_password
    return context


@dataclass(frozen=True, slots=True)
class _TlsCopy:
    """The certificate and key as read once, in a private directory, checked."""

    directory: Path
    certfile: Path
    keyfile: Path | None

    def apply(self) -> None:
        assert _LIVE.context is not None
        _LIVE.context.load_cert_chain(self.certfile, self.keyfile, _LIVE.password)

    def discard(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


def _copy_tls() -> _TlsCopy | None:
    """The TLS files copied and checked (None when the receiver serves no TLS)."""
    if _LIVE.context is None:
        return None
    directory = Path(tempfile.mkdtemp(prefix="gptools-tls-"))
    copy = _TlsCopy(
        directory, directory / "cert.pem", directory / "key.pem" if _LIVE.keyfile else None
    )
    try:
        for source, target in ((_LIVE.certfile, copy.certfile), (_LIVE.keyfile, copy.keyfile)):
            if source is not None and target is not None:
                with open_private(target, "wb") as out:
                    out.write(_read_bounded(Path(source)))
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(
            copy.certfile, copy.keyfile, _LIVE.password
        )
    except (OSError, ssl.SSLError) as exc:
        copy.discard()
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigurationError(
            f"cannot use the TLS certificate {_LIVE.certfile} with key {_LIVE.keyfile}: {reason}"
        ) from None
    return copy


def _read_bounded(path: Path) -> bytes:
    with path.open("rb") as fh:
        data = fh.read(TLS_FILE_MAX_BYTES + 1)
    if len(data) > TLS_FILE_MAX_BYTES:
        raise OSError(f"{path} is larger than {TLS_FILE_MAX_BYTES} bytes")
    return data


# -- in each worker -------------------------------------------------------------------------


def reload_worker(receiver: WebhookReceiver, load_auth: Callable[[], ReceiverAuth]) -> ReloadResult:
    """Read the credentials (``load_auth``) and the TLS files again and, when both are
    usable, swap them in: the certificate into the live TLS context, then the receiver's
    ``auth``. Otherwise nothing changes. Runs in the worker's event loop's thread."""
    try:
        auth = load_auth()
        tls = _copy_tls()
    except ConfigurationError as exc:  # AuthConfigError is one
        return ReloadResult(False, os.getpid(), 0, detail=str(exc))
    if tls is not None:
        try:
            tls.apply()
        finally:
            tls.discard()
    receiver.use_auth(auth)
    return ReloadResult(True, os.getpid(), 1, auth.credential_ids, tls is not None)


def install(receiver: WebhookReceiver, load_auth: Callable[[], ReceiverAuth]) -> None:
    """Make SIGHUP reload ``receiver`` (:func:`reload_worker`), from the event loop uvicorn
    builds it in (its factory runs there); outside one (a Python caller's own server, not
    the main thread) SIGHUP is left alone."""
    try:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGHUP, _reload_on_signal, receiver, load_auth)
    except (RuntimeError, ValueError, NotImplementedError):
        return
    if not os.environ.get(ENV_RELOAD_DIR):
        count_reloads()  # this worker is the serve process: the counter from the start


def _reload_on_signal(receiver: WebhookReceiver, load_auth: Callable[[], ReceiverAuth]) -> None:
    outcome = reload_worker(receiver, load_auth)
    directory = os.environ.get(ENV_RELOAD_DIR)
    if directory:
        # One worker of several: the serve process gathers the outcomes and answers.
        _confirm(Path(directory), outcome)
        return
    status = os.environ.get(ENV_RELOAD_STATUS)
    answer_reload(outcome, Path(status) if status else None)


def _confirm(directory: Path, outcome: ReloadResult) -> None:
    generation = read_json(directory / "generation").get("generation", 0)
    write_json(
        directory / f"worker-{os.getpid()}.json", {"generation": generation, **outcome.to_dict()}
    )


# -- in the serve process -------------------------------------------------------------------


_RELOADS = counter(
    "gptools_webhook_config_reloads_total",
    "Reloads of the credentials and TLS certificate (SIGHUP, webhooks reload), by result.",
    "result",
)


def count_reloads() -> None:
    for result in ("ok", "failed"):
        _RELOADS.made().labels(result=result)


def answer_reload(result: ReloadResult, status: Path | None) -> None:
    """Count, log and (with a status file) write one reload's result."""
    _RELOADS.made().labels(result="ok" if result.ok else "failed").inc()
    if result.ok:
        logger.info(
            "reloaded in %d worker%s: credentials %s%s",
            result.workers,
            "s" if result.workers != 1 else "",
            ", ".join(result.credentials) or "(none: NONE)",
            " and the TLS certificate" if result.tls else "",
            extra={"event": "config_reloaded"},
        )
    else:
        logger.error(
            "reload failed, the settings in use are kept: %s",
            result.detail,
            extra={"event": "config_reload_failed"},
        )
    if status is not None:
        generation = read_json(status).get("generation", 0) + 1
        write_json(status, {"generation": generation, **result.to_dict()})


def read_json(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return document if isinstance(document, dict) else {}


def write_json(path: Path, document: dict[str, Any]) -> None:
    """Replace ``path`` at once (a reader sees the old document or the new one)."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    with open_private(partial, "w", encoding="utf-8") as out:
        json.dump(document, out)
    os.replace(partial, path)


@dataclass(frozen=True, slots=True)
class ReloadControl:
    """What ``serve`` set up for reloads: the workers' private ``directory`` (several
    workers only) and the ``status`` file (with a pid file)."""

    directory: Path | None
    status: Path | None

    def environment(self) -> dict[str, str]:
        """The variables that tell a worker where to answer a reload."""
        variables = {}
        if self.directory is not None:
            variables[ENV_RELOAD_DIR] = str(self.directory)
        if self.status is not None:
            variables[ENV_RELOAD_STATUS] = str(self.status)
        return variables


@contextlib.contextmanager
def reload_control(
    pid_file: str | os.PathLike[str] | None, workers: int
) -> Iterator[ReloadControl]:
    """For the time ``serve`` runs: SIGHUP ignored until a handler takes it (never fatal);
    the pid file written and locked, with its status file; for several workers, their
    private directory (:meth:`ReloadControl.environment` names them for the workers).
    Everything is removed afterwards.

    Raises :class:`~gptools.errors.ConfigurationError` when the pid file cannot be written
    or another running receiver holds it."""
    previous_handler = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with contextlib.ExitStack() as stack:
            status = None
            if pid_file is not None:
                status = stack.enter_context(_locked_pid_file(Path(pid_file)))
            directory = None
            if workers > 1:
                directory = Path(tempfile.mkdtemp(prefix="gptools-reload-"))
                stack.callback(shutil.rmtree, directory, ignore_errors=True)
            yield ReloadControl(directory, status)
    finally:
        signal.signal(signal.SIGHUP, previous_handler)


@contextlib.contextmanager
def _locked_pid_file(path: Path) -> Iterator[Path]:
    """Write this process's id to ``path`` and hold a lock on it; yield the status file."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise ConfigurationError(
            f"cannot write the pid file {path}: {exc.strerror or exc}"
        ) from None
    try:
        if not lock_now(fd):
            held = os.read(fd, 32).decode("ascii", "replace").strip()
            raise ConfigurationError(
                f"the pid file {path} is held by a running receiver (pid {held}): give each "
                "receiver a pid file of its own"
            ) from None
        found = os.read(fd, 64).strip()
        if found and not found.isdigit():
            # Some other file: never overwritten (and removed at the end) by mistake.
            raise ConfigurationError(f"{path} exists and is not a pid file: name another")
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, f"{os.getpid()}\n".encode())
        status = path.with_name(path.name + STATUS_SUFFIX)
        write_json(status, {"generation": 0, "pid": os.getpid()})
        try:
            yield status
        finally:
            with contextlib.suppress(OSError):
                status.unlink()
            with contextlib.suppress(OSError):
                path.unlink()
    finally:
        os.close(fd)


# -- the reload command ---------------------------------------------------------------------


def reload_receiver(
    pid_file: str | os.PathLike[str],
    *,
    timeout: float = RELOAD_TIMEOUT_S + RELOAD_ANSWER_MARGIN_S,
) -> ReloadResult:
    """Ask the receiver ``gptools webhooks serve --pid-file PID_FILE`` runs as to read its
    credentials file and TLS certificate and key again (SIGHUP), and wait up to ``timeout``
    seconds for its answer.

    Raises :class:`~gptools.errors.ConfigurationError` for a pid file that is missing or
    holds no process id, and :class:`ReloadError` when no running receiver holds it or none
    answers in time. A reload the receiver refused is a result with ``ok`` false (the
    settings in use are kept)."""
    path = Path(pid_file)
    try:
        text = path.read_text(encoding="ascii", errors="replace").strip()
    except FileNotFoundError:
        raise ConfigurationError(
            f"no pid file at {path}: is the receiver running with --pid-file {path}?"
        ) from None
    except OSError as exc:
        raise ConfigurationError(f"cannot read the pid file {path}: {exc.strerror}") from None
    if not text.isdigit() or not 0 < int(text) < 2**31:
        raise ConfigurationError(f"the pid file {path} holds no process id")
    pid = int(text)
    if not is_held(path):
        raise ReloadError(
            f"no running receiver holds the pid file {path} (a stale one: pid {pid} may be "
            "another process now): nothing to reload"
        )
    status = path.with_name(path.name + STATUS_SUFFIX)
    before = read_json(status).get("generation", 0)
    try:
        os.kill(pid, signal.SIGHUP)
    except ProcessLookupError:
        raise ReloadError(f"the receiver of {path} (pid {pid}) has ended") from None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answer = read_json(status)
        if answer.get("generation", 0) > before:
            return ReloadResult(
                answer["result"] == "ok",
                int(answer["pid"]),
                int(answer["workers"]),
                tuple(answer["credentials"]),
                bool(answer["tls"]),
                str(answer["detail"]),
            )
        time.sleep(RELOAD_POLL_S)
    raise ReloadError(
        f"the receiver (pid {pid}) did not answer within {timeout:g} s; its log says why"
    )
