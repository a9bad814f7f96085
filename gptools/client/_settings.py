"""Where the client's settings come from: arguments, then the environment, then ``.env``
(address, credentials, retries, time-out and answer size alike).

The password becomes a :class:`~pydantic.SecretStr` as soon as it is read, so nothing
downstream can print it by accident.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from dotenv import dotenv_values
from pydantic import SecretStr

from gptools.client import _constants as C
from gptools.errors import ConfigurationError

#: What a ``timeout=`` argument may be: seconds for the whole call, a ``(connect, read)``
#: pair, or an :class:`httpx.Timeout` with every phase set.
TimeoutTypes = float | tuple[float, float] | httpx.Timeout

DEFAULT_TIMEOUT = httpx.Timeout(C.DEFAULT_READ_TIMEOUT, connect=C.DEFAULT_CONNECT_TIMEOUT)


def call_deadline(value: TimeoutTypes) -> float:
    """The seconds a whole call may take for a ``timeout=`` argument: the connection, every
    read, every retry and every backoff wait together.

    Seconds (``10``) are the deadline itself. Per-phase values (a ``(connect, read)`` pair or
    an :class:`httpx.Timeout`) keep their meaning per phase, and the call ends within connect
    + read: a server that sends one byte per read time-out can no longer hold a call for
    ever. ``DEFAULT_TIMEOUT`` gives 35 s.
    """
    timeout = as_timeout(value)
    if isinstance(value, int | float):
        return float(value)
    assert timeout.connect is not None and timeout.read is not None  # as_timeout checked
    return timeout.connect + timeout.read


def as_timeout(value: TimeoutTypes | None) -> httpx.Timeout:
    """Turn a ``timeout=`` argument into an :class:`httpx.Timeout`; refuse "no timeout"."""
    if value is None:
        raise ConfigurationError(
            "timeout=None would wait forever; give seconds, a (connect, read) pair "
            "or an httpx.Timeout"
        )
    if isinstance(value, httpx.Timeout):
        timeout = value
    elif isinstance(value, tuple):
        if len(value) != 2:
            raise ConfigurationError(f"timeout pair must be (connect, read), got {value!r}")
        connect, read = value
        timeout = httpx.Timeout(read, connect=connect)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        timeout = httpx.Timeout(float(value))
    else:
        raise ConfigurationError(f"timeout must be seconds or (connect, read), got {value!r}")
    phases = {
        "connect": timeout.connect,
        "read": timeout.read,
        "write": timeout.write,
        "pool": timeout.pool,
    }
    for phase, seconds in phases.items():
        if seconds is None or not seconds > 0:
            raise ConfigurationError(
                f"{phase} timeout must be a positive number of seconds, got {seconds!r}"
            )
    return timeout


def parse_timeout(text: str, *, name: str = C.ENV_TIMEOUT) -> float | tuple[float, float]:
    """``GP_TIMEOUT`` text as a ``timeout=`` value: ``"10"`` (seconds for the whole call) or
    ``"2,30"`` (connect, read). ``name`` says where the text came from in the error."""
    parts = [p.strip() for p in text.split(",")]
    try:
        seconds = [float(p) for p in parts]
    except ValueError:
        seconds = []
    if len(seconds) not in (1, 2):
        raise ConfigurationError(
            f"{name} must be seconds or connect,read seconds (e.g. 10 or 2,30), got {text!r}"
        )
    value: float | tuple[float, float] = (
        seconds[0] if len(seconds) == 1 else (seconds[0], seconds[1])
    )
    try:
        as_timeout(value)
    except ConfigurationError as exc:
        raise ConfigurationError(f"{name}={text!r}: {exc}") from None
    return value


def parse_max_retries(text: str, *, name: str = C.ENV_MAX_RETRIES) -> int:
    """``GP_MAX_RETRIES`` text as a number of retries (a whole number, 0 or more)."""
    try:
        retries = int(text.strip())
    except ValueError:
        retries = -1
    if retries < 0:
        raise ConfigurationError(
            f"{name} must be a whole number of retries, 0 or more, got {text!r}"
        )
    return retries


def parse_max_response_bytes(text: str, *, name: str = C.ENV_MAX_RESPONSE_BYTES) -> int:
    """``GP_MAX_RESPONSE_BYTES`` text as the largest answer read (a whole number, 1 or more)."""
    try:
        limit = int(text.strip())
    except ValueError:
        limit = 0
    if limit < 1:
        raise ConfigurationError(f"{name} must be a whole number of bytes, 1 or more, got {text!r}")
    return limit


def checked_max_response_bytes(value: object) -> int:
    """A ``max_response_bytes=`` argument, or a one-line :class:`ConfigurationError`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"max_response_bytes must be 1 byte or more, got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class ClientSettings:
    """The resolved settings of a client. ``password`` never shows in a repr. ``deadline``
    is the seconds a whole call may take (:func:`call_deadline` of the time-out)."""

    base_url: str
    username: str
    password: SecretStr
    max_retries: int = C.DEFAULT_MAX_RETRIES
    timeout: httpx.Timeout = field(default_factory=lambda: DEFAULT_TIMEOUT)
    deadline: float = call_deadline(DEFAULT_TIMEOUT)
    max_response_bytes: int = C.DEFAULT_MAX_RESPONSE_BYTES

    @classmethod
    def resolve(
        cls,
        base_url: str | None,
        username: str | None,
        password: str | SecretStr | None,
        *,
        max_retries: int | None = None,
        timeout: TimeoutTypes | None = None,
        max_response_bytes: int | None = None,
        env_file: str | Path | None = ".env",
        environ: Mapping[str, str] | None = None,
    ) -> ClientSettings:
        """Take each setting from its argument, else the environment, else ``env_file``.

        ``max_retries``, ``timeout`` and ``max_response_bytes`` (``GP_MAX_RETRIES``,
        ``GP_TIMEOUT``: seconds or ``connect,read``, ``GP_MAX_RESPONSE_BYTES``) fall back to
        the defaults when set nowhere; ``None`` means "not given" for every argument here.
        ``env_file=None`` skips the file. Raises :class:`~gptools.errors.ConfigurationError`
        naming what is missing or wrong and where it was looked for.
        """
        env = os.environ if environ is None else environ
        file_values: Mapping[str, str | None] = {}
        if env_file is not None and Path(env_file).is_file():
            file_values = dotenv_values(env_file)

        def pick(given: str | None, name: str) -> str | None:
            if given is not None:
                return given
            if name in env:
                return env[name]
            return file_values.get(name)

        url = pick(base_url, C.ENV_BASE_URL)
        user = pick(username, C.ENV_USERNAME)
        secret = (
            password
            if isinstance(password, SecretStr)
            else SecretStr(value)
            if (value := pick(password, C.ENV_PASSWORD)) is not None
            else None
        )
        where = f"the environment or {env_file}" if env_file is not None else "the environment"
        missing = [
            f"{arg}= (or {var} in {where})"
            for arg, var, val in (
                ("base_url", C.ENV_BASE_URL, url),
                ("username", C.ENV_USERNAME, user),
                ("password", C.ENV_PASSWORD, secret.get_secret_value() if secret else None),
            )
            if not val
        ]
        if missing:
            raise ConfigurationError("missing client settings: give " + ", ".join(missing))
        assert url and user and secret  # for the type checker: `missing` covered each
        try:
            parsed = httpx.URL(url)
        except httpx.InvalidURL as exc:
            raise ConfigurationError(f"base URL is not a valid URL: {exc}") from None
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise ConfigurationError(f"base URL must be an http(s) URL, got {safe_url(url)!r}")
        if parsed.userinfo:
            raise ConfigurationError(
                "base URL must not carry credentials; give username= and password= instead"
            )
        if max_retries is None:
            text = pick(None, C.ENV_MAX_RETRIES)
            max_retries = C.DEFAULT_MAX_RETRIES if not text else parse_max_retries(text)
        elif isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ConfigurationError(f"max_retries must be 0 or more, got {max_retries!r}")
        if timeout is None:
            text = pick(None, C.ENV_TIMEOUT)
            timeout = DEFAULT_TIMEOUT if not text else parse_timeout(text)
        if max_response_bytes is None:
            text = pick(None, C.ENV_MAX_RESPONSE_BYTES)
            max_response_bytes = (
                C.DEFAULT_MAX_RESPONSE_BYTES if not text else parse_max_response_bytes(text)
            )
        return cls(
            base_url=url.rstrip("/"),
            username=user,
            password=secret,
            max_retries=max_retries,
            timeout=as_timeout(timeout),
            deadline=call_deadline(timeout),
            max_response_bytes=checked_max_response_bytes(max_response_bytes),
        )


def normalised_url(url: str) -> str:
    """``url`` in one spelling, so that equal addresses compare equal: scheme and host in
    lower case, the scheme's default port dropped, no trailing ``/``, no query or
    fragment, no user info (what :attr:`BaseClient.server_identity` defaults to)."""
    parsed = httpx.URL(url)
    default_port = {"http": 80, "https": 443}.get(parsed.scheme.lower())
    port = parsed.port if parsed.port != default_port else None
    host = parsed.host.lower()
    netloc = f"[{host}]" if ":" in host else host
    if port is not None:
        netloc += f":{port}"
    return f"{parsed.scheme.lower()}://{netloc}{parsed.path.rstrip('/')}"


def safe_url(url: str | httpx.URL) -> str:
    """``url`` as text without any user info (credentials never reach a message)."""
    parsed = httpx.URL(str(url))
    if parsed.userinfo:
        parsed = parsed.copy_with(username=None, password=None)
    return str(parsed)
