"""Where the client's settings come from: arguments, then the environment, then ``.env``
(address, credentials, retries and time-out alike).

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

#: What a ``timeout=`` argument may be: seconds for every phase, a ``(connect, read)`` pair,
#: or an :class:`httpx.Timeout` with every phase set.
TimeoutTypes = float | tuple[float, float] | httpx.Timeout

DEFAULT_TIMEOUT = httpx.Timeout(C.DEFAULT_READ_TIMEOUT, connect=C.DEFAULT_CONNECT_TIMEOUT)


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


def parse_timeout(text: str, *, name: str = C.ENV_TIMEOUT) -> httpx.Timeout:
    """``GP_TIMEOUT`` text as a time-out: ``"10"`` (seconds, every phase) or ``"2,30"``
    (connect, read). ``name`` says where the text came from in the error."""
    parts = [p.strip() for p in text.split(",")]
    try:
        seconds = [float(p) for p in parts]
    except ValueError:
        seconds = []
    if len(seconds) not in (1, 2):
        raise ConfigurationError(
            f"{name} must be seconds or connect,read seconds (e.g. 10 or 2,30), got {text!r}"
        )
    value: TimeoutTypes = seconds[0] if len(seconds) == 1 else (seconds[0], seconds[1])
    try:
        return as_timeout(value)
    except ConfigurationError as exc:
        raise ConfigurationError(f"{name}={text!r}: {exc}") from None


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


@dataclass(frozen=True, slots=True)
class ClientSettings:
    """The resolved settings of a client. ``password`` never shows in a repr."""

    base_url: str
    username: str
    password: SecretStr
    max_retries: int = C.DEFAULT_MAX_RETRIES
    timeout: httpx.Timeout = field(default_factory=lambda: DEFAULT_TIMEOUT)

    @classmethod
    def resolve(
        cls,
        base_url: str | None,
        username: str | None,
        password: str | SecretStr | None,
        *,
        max_retries: int | None = None,
        timeout: TimeoutTypes | None = None,
        env_file: str | Path | None = ".env",
        environ: Mapping[str, str] | None = None,
    ) -> ClientSettings:
        """Take each setting from its argument, else the environment, else ``env_file``.

        ``max_retries`` and ``timeout`` (``GP_MAX_RETRIES``, ``GP_TIMEOUT``: seconds or
        ``connect,read``) fall back to the defaults when set nowhere; ``None`` means "not
        given" for every argument here. ``env_file=None`` skips the file. Raises
        :class:`~gptools.errors.ConfigurationError` naming what is missing or wrong and
        where it was looked for.
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
            resolved = DEFAULT_TIMEOUT if not text else parse_timeout(text)
        else:
            resolved = as_timeout(timeout)
        return cls(
            base_url=url.rstrip("/"),
            username=user,
            password=secret,
            max_retries=max_retries,
            timeout=resolved,
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
