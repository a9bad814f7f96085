"""How the receiver checks a delivery's credentials: BEARER, BASIC or NONE.

Every comparison of a secret runs in constant time (:func:`hmac.compare_digest`), and both
halves of a BASIC pair are always compared, so the time taken does not tell an attacker
which part was wrong. Secrets are :class:`~pydantic.SecretStr` and never reach a repr.
"""

from __future__ import annotations

import binascii
import hmac
import os
from base64 import b64decode
from dataclasses import dataclass

from pydantic import SecretStr

from gptools.errors import ConfigurationError
from gptools.models import WebhookAuthType

#: Environment variables the CLI reads secrets from (never from arguments).
ENV_API_KEY = "GP_WEBHOOK_API_KEY"
ENV_USERNAME = "GP_WEBHOOK_USERNAME"
ENV_PASSWORD = "GP_WEBHOOK_PASSWORD"  # noqa: S105  (a variable name, not a password)


class AuthConfigError(ConfigurationError, ValueError):
    """The receiver's authentication settings are incomplete (a ValueError too, as it
    always was)."""


@dataclass(frozen=True, slots=True)
class ReceiverAuth:
    """The credentials a receiver expects; build one with :meth:`bearer`, :meth:`basic`,
    :meth:`none` or :meth:`from_env`."""

    kind: WebhookAuthType
    api_key: SecretStr | None = None
    username: SecretStr | None = None
    password: SecretStr | None = None

    def __post_init__(self) -> None:
        if self.kind == "BEARER" and not (self.api_key and self.api_key.get_secret_value()):
            raise AuthConfigError(f"BEARER authentication needs an API key (set {ENV_API_KEY})")
        if self.kind == "BASIC" and not (
            self.username
            and self.username.get_secret_value()
            and self.password
            and self.password.get_secret_value()
        ):
            raise AuthConfigError(
                f"BASIC authentication needs a username and a password "
                f"(set {ENV_USERNAME} and {ENV_PASSWORD})"
            )

    @classmethod
    def bearer(cls, api_key: str | SecretStr) -> ReceiverAuth:
        """Expect ``Authorization: Bearer <api_key>``."""
        return cls("BEARER", api_key=SecretStr(_reveal(api_key)))

    @classmethod
    def basic(cls, username: str, password: str | SecretStr) -> ReceiverAuth:
        """Expect HTTP Basic authentication with ``username`` and ``password``."""
        return cls("BASIC", username=SecretStr(username), password=SecretStr(_reveal(password)))

    @classmethod
    def none(cls) -> ReceiverAuth:
        """Accept deliveries without credentials (the document: not for production)."""
        return cls("NONE")

    @classmethod
    def from_env(cls, kind: str, environ: dict[str, str] | None = None) -> ReceiverAuth:
        """Read the secrets ``kind`` (bearer/basic/none, any case) needs from the
        environment: ``GP_WEBHOOK_API_KEY``, or ``GP_WEBHOOK_USERNAME`` and
        ``GP_WEBHOOK_PASSWORD``."""
        env = os.environ if environ is None else environ
        upper = kind.upper()
        if upper == "BEARER":
            return cls("BEARER", api_key=SecretStr(env.get(ENV_API_KEY, "")))
        if upper == "BASIC":
            return cls(
                "BASIC",
                username=SecretStr(env.get(ENV_USERNAME, "")),
                password=SecretStr(env.get(ENV_PASSWORD, "")),
            )
        if upper == "NONE":
            return cls("NONE")
        raise AuthConfigError(f"unknown authentication type {kind!r}: use bearer, basic or none")

    def check(self, authorization: bytes | None) -> bool:
        """Whether an ``Authorization`` header value (raw bytes, or ``None`` when absent)
        carries the expected credentials. Malformed values are refused, never raised."""
        if self.kind == "NONE":
            return True
        if authorization is None:
            return False
        scheme, _, rest = authorization.strip().partition(b" ")
        rest = rest.strip()
        if self.kind == "BEARER":
            assert self.api_key is not None
            return scheme.lower() == b"bearer" and hmac.compare_digest(
                rest, self.api_key.get_secret_value().encode()
            )
        if scheme.lower() != b"basic":
            return False
        try:
            decoded = b64decode(rest, validate=True)
        except (binascii.Error, ValueError):
            return False
        user, sep, password = decoded.partition(b":")
        assert self.username is not None and self.password is not None
        user_ok = hmac.compare_digest(user, self.username.get_secret_value().encode())
        password_ok = hmac.compare_digest(password, self.password.get_secret_value().encode())
        return bool(sep) and user_ok and password_ok

    def challenge(self) -> bytes | None:
        """The ``WWW-Authenticate`` value to send with a 401, or ``None`` for NONE."""
        if self.kind == "BEARER":
            return b'Bearer realm="gptools-webhooks"'
        if self.kind == "BASIC":
            return b'Basic realm="gptools-webhooks", charset="UTF-8"'
        return None


def _reveal(value: str | SecretStr) -> str:
    return value.get_secret_value() if isinstance(value, SecretStr) else value
