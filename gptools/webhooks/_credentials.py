"""The credentials a receiver accepts: each an id that metrics and logs may show, and a
secret they never show; the rules that refuse a credential no request could match; the
credentials file.

A credential is refused, with a message naming where it came from and never its secret,
when no delivery could ever carry it: a BEARER key that is empty, has whitespace around it
(the HTTP parser strips it from every header, so ``"s3cr3t "`` would refuse every
delivery) or holds a character a header cannot carry as it is (a control character, or
anything outside ASCII); a BASIC pair with an empty username or password, a ``:`` in the
username (Basic puts the first ``:`` between the two) or a control character (RFC 7617).

The credentials file holds one credential a line, ``ID SECRET`` (``ID USERNAME:PASSWORD``
for BASIC), blank lines and ``#`` comments aside. An id is 1 to 32 letters, digits, ``.``,
``_`` or ``-`` that the user chooses (``2025-06``, ``provider-b``): it is what
``gptools_webhook_credential_deliveries_total{credential}`` shows, so nothing of the secret
is ever derived from it. Like an SSH key, the file is refused when anyone but its owner
may read or write it. A line may not end with whitespace: it is invisible in the file and
would be part of the secret.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import SecretStr

from gptools.errors import ConfigurationError
from gptools.webhooks._constants import CREDENTIALS_FILE_MAX_BYTES

#: What a credential's id may be: short, and safe in a metric label and a log line.
CREDENTIAL_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,31}")
#: The id of a credential given in Python without one (``ReceiverAuth.bearer(key)``).
DEFAULT_CREDENTIAL_ID = "default"
#: The id of the credential read from ``GP_WEBHOOK_API_KEY`` (or the BASIC pair's variables).
ENV_CREDENTIAL_ID = "env"

#: Characters a BEARER key may hold: visible ASCII, and spaces inside it.
_HEADER_SAFE = re.compile(r"[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?")
#: Control characters (C0, DEL, C1), which RFC 7617 forbids in a Basic username or password.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_LINE = re.compile(r"(?P<id>\S+)[ \t]+(?P<secret>.*)")

Kind = Literal["BEARER", "BASIC"]


class AuthConfigError(ConfigurationError, ValueError):
    """The receiver's authentication settings are incomplete or cannot match a request (a
    ValueError too, as it always was)."""


@dataclass(frozen=True, slots=True)
class Credential:
    """One credential a receiver accepts: ``id`` (shown in metrics and logs), ``kind``,
    ``secret`` (the API key, or the BASIC password) and the BASIC ``username``. ``origin``
    says where it came from, for messages (a variable's name, a file and line)."""

    id: str
    kind: Kind
    secret: SecretStr
    username: SecretStr | None = None
    origin: str = field(default="", compare=False)

    def presented(self) -> bytes:
        """What a matching ``Authorization`` header carries after its scheme: the key, or
        ``username:password`` (base64-decoded) for BASIC."""
        if self.kind == "BEARER":
            return self.secret.get_secret_value().encode()
        assert self.username is not None
        pair = f"{self.username.get_secret_value()}:{self.secret.get_secret_value()}"
        return pair.encode()

    def check(self) -> None:
        """Raise :class:`AuthConfigError` when no request could carry this credential (the
        module docstring lists why), naming it by its id and origin, never by its secret."""
        if not CREDENTIAL_ID_PATTERN.fullmatch(self.id):
            raise AuthConfigError(
                f"{self._where()}: a credential id is 1 to 32 letters, digits, '.', '_' or '-'"
                ", starting with a letter or digit"
            )
        if self.kind == "BEARER":
            problem = bearer_key_problem(self.secret.get_secret_value())
        else:
            assert self.username is not None
            problem = basic_pair_problem(
                self.username.get_secret_value(), self.secret.get_secret_value()
            )
        if problem is not None:
            raise AuthConfigError(f"{self._where()}: {problem}; no delivery could match it")

    def _where(self) -> str:
        named = f"credential {self.id!r}" if CREDENTIAL_ID_PATTERN.fullmatch(self.id) else ""
        return ", ".join(part for part in (self.origin, named) if part) or "a credential"


def bearer_key_problem(key: str) -> str | None:
    """Why no ``Authorization: Bearer`` header could carry ``key``, or None."""
    if not key.strip():
        return "the API key is empty (or only whitespace)"
    if key != key.strip():
        return (
            "the API key starts or ends with whitespace, which the HTTP parser strips from "
            "every request"
        )
    if not _HEADER_SAFE.fullmatch(key):
        return (
            "the API key holds a control or non-ASCII character, which an HTTP header "
            "cannot carry as it is"
        )
    return None


def basic_pair_problem(username: str, password: str) -> str | None:
    """Why no ``Authorization: Basic`` header could carry this pair, or None."""
    if not username:
        return "the username is empty"
    if not password:
        return "the password is empty"
    if ":" in username:
        return "the username holds ':', which Basic authentication puts between the two"
    if _CONTROL.search(username) or _CONTROL.search(password):
        return "the username or password holds a control character (RFC 7617 forbids them)"
    return None


def read_credentials_file(path: str | Path, kind: Kind) -> tuple[Credential, ...]:
    """The credentials of the file at ``path`` (see the module docstring), each checked.

    Raises :class:`AuthConfigError` naming the file (and the line) when it cannot be read,
    may be read by others, is too large, or holds a line that is not a credential."""
    data = _read_owner_only(Path(path))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AuthConfigError(
            f"the credentials file {path} is not UTF-8 text (byte {exc.start})"
        ) from None
    found: list[Credential] = []
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.removesuffix("\r")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        origin = f"{path} line {number}"
        parsed = _LINE.fullmatch(line.lstrip())
        if parsed is None:
            raise AuthConfigError(f"{origin}: expected ID SECRET, found no secret after the id")
        if line != line.rstrip():
            raise AuthConfigError(
                f"{origin}: the line ends with whitespace, which would be part of the secret"
            )
        secret = parsed["secret"]
        if kind == "BEARER":
            credential = Credential(parsed["id"], kind, SecretStr(secret), origin=origin)
        else:
            username, sep, password = secret.partition(":")
            if not sep:
                raise AuthConfigError(f"{origin}: a BASIC credential is ID USERNAME:PASSWORD")
            credential = Credential(
                parsed["id"],
                kind,
                SecretStr(password),
                username=SecretStr(username),
                origin=origin,
            )
        credential.check()
        found.append(credential)
    return tuple(found)


def _read_owner_only(path: Path) -> bytes:
    """The bytes of ``path``, a regular file only its owner may read or write, at most
    ``CREDENTIALS_FILE_MAX_BYTES`` of them."""
    try:
        # Non-blocking: a FIFO in its place must not hang the receiver (it is refused below).
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        raise AuthConfigError(
            f"cannot read the credentials file {path}: {exc.strerror or exc}"
        ) from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise AuthConfigError(f"the credentials file {path} is not a regular file")
    with os.fdopen(fd, "rb") as fh:
        if info.st_mode & 0o077:
            raise AuthConfigError(
                f"the credentials file {path} may be read or written by others (mode "
                f"{stat.S_IMODE(info.st_mode):04o}): make it owner-only (chmod 600), like an "
                "SSH key"
            )
        data = fh.read(CREDENTIALS_FILE_MAX_BYTES + 1)
    if len(data) > CREDENTIALS_FILE_MAX_BYTES:
        raise AuthConfigError(
            f"the credentials file {path} is larger than {CREDENTIALS_FILE_MAX_BYTES} bytes"
        )
    return data
