"""How the receiver checks a delivery's credentials: BEARER, BASIC or NONE, with one or
several credentials valid at once (a key rotation: the old key and the new one).

A request is compared with every credential, whichever matches: what it presents is
hashed with a key drawn at random for this :class:`ReceiverAuth` (keyed BLAKE2b) and the
digest compared in constant time (:func:`hmac.compare_digest`) with each credential's, so
the time taken tells nothing about which credential, or which part of a BASIC pair, nearly
matched, nor about their lengths. Secrets are :class:`~pydantic.SecretStr` and never reach
a repr; a credential is shown by its id only (``_credentials.py``).
"""

from __future__ import annotations

import binascii
import hashlib
import hmac
import os
import secrets
from base64 import b64decode
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from gptools.models import WebhookAuthType
from gptools.webhooks._constants import MAX_CREDENTIALS
from gptools.webhooks._credentials import (
    DEFAULT_CREDENTIAL_ID,
    ENV_CREDENTIAL_ID,
    AuthConfigError,
    Credential,
    read_credentials_file,
)
from gptools.webhooks._metric_families import counter

#: Environment variables the CLI reads secrets from (never from arguments).
ENV_API_KEY = "GP_WEBHOOK_API_KEY"
ENV_USERNAME = "GP_WEBHOOK_USERNAME"
ENV_PASSWORD = "GP_WEBHOOK_PASSWORD"  # noqa: S105  (a variable name, not a password)

_NEEDS = {
    "BEARER": f"BEARER authentication needs an API key (set {ENV_API_KEY}, or list keys in a "
    "credentials file)",
    "BASIC": f"BASIC authentication needs a username and a password (set {ENV_USERNAME} and "
    f"{ENV_PASSWORD}, or list pairs in a credentials file)",
}


class ReceiverAuth:
    """The credentials a receiver accepts; build one with :meth:`bearer`, :meth:`basic`,
    :meth:`none`, :meth:`from_env`, or several at once with :meth:`any_of`.

    The constructor takes one credential (``api_key`` for BEARER, ``username`` and
    ``password`` for BASIC, none for NONE) and its ``credential_id``, the name metrics and
    logs show for it. Raises :class:`AuthConfigError` for a credential missing, or one no
    request could match (``_credentials.py`` lists why)."""

    __slots__ = ("_digests", "_key", "credentials", "kind")

    kind: WebhookAuthType
    #: Every credential accepted (none for NONE).
    credentials: tuple[Credential, ...]
    _key: bytes
    _digests: tuple[tuple[str, bytes], ...]

    def __init__(
        self,
        kind: WebhookAuthType,
        api_key: SecretStr | None = None,
        username: SecretStr | None = None,
        password: SecretStr | None = None,
        *,
        credential_id: str = DEFAULT_CREDENTIAL_ID,
    ) -> None:
        found: list[Credential] = []
        if kind == "BEARER":
            if not (api_key and api_key.get_secret_value()):
                raise AuthConfigError(_NEEDS["BEARER"])
            found.append(Credential(credential_id, "BEARER", api_key))
        elif kind == "BASIC":
            if not (
                username
                and username.get_secret_value()
                and password
                and password.get_secret_value()
            ):
                raise AuthConfigError(_NEEDS["BASIC"])
            found.append(Credential(credential_id, "BASIC", password, username=username))
        elif kind != "NONE":
            raise AuthConfigError(
                f"unknown authentication type {kind!r}: use bearer, basic or none"
            )
        self._set(kind, found)

    def _set(self, kind: WebhookAuthType, credentials: Iterable[Credential]) -> None:
        accepted = tuple(credentials)
        if len(accepted) > MAX_CREDENTIALS:
            raise AuthConfigError(
                f"{len(accepted)} credentials: a receiver accepts at most {MAX_CREDENTIALS} "
                "(each request is compared with all of them)"
            )
        seen: dict[str, Credential] = {}
        for credential in accepted:
            if credential.kind != kind:
                raise AuthConfigError(
                    f"credential {credential.id!r} is {credential.kind}, the receiver expects "
                    f"{kind}"
                )
            credential.check()
            if credential.id in seen:
                raise AuthConfigError(f"credential id {credential.id!r} is given twice")
            for other in seen.values():
                if hmac.compare_digest(other.presented(), credential.presented()):
                    raise AuthConfigError(
                        f"credentials {other.id!r} and {credential.id!r} are the same secret "
                        "(the metrics could not tell which one a delivery used)"
                    )
            seen[credential.id] = credential
        key = secrets.token_bytes(32)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "credentials", accepted)
        object.__setattr__(self, "_key", key)
        object.__setattr__(
            self, "_digests", tuple((c.id, _digest(key, c.presented())) for c in accepted)
        )

    def subscription(self, url: str) -> dict[str, object]:
        """The subscription body (the provider's camelCase fields) of a sender that reaches
        this receiver at ``url`` with its first credential: ``callbackUrl``,
        ``authenticationType`` and the ``apiKey`` (BEARER) or ``username`` and ``password``
        (BASIC), the secrets as :class:`~pydantic.SecretStr`. What ``gptools sandbox
        deliver`` and ``play`` hand the sandbox's dispatcher."""
        body: dict[str, object] = {"callbackUrl": url, "authenticationType": self.kind}
        for sent in self.credentials[:1]:
            if sent.username is None:
                body["apiKey"] = sent.secret
            else:
                body["username"] = sent.username.get_secret_value()
                body["password"] = sent.secret
        return body

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"ReceiverAuth is immutable; {name} cannot be set")

    def __repr__(self) -> str:
        return f"ReceiverAuth(kind={self.kind!r}, credentials={self.credential_ids!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ReceiverAuth):
            return NotImplemented
        return (self.kind, self.credentials) == (other.kind, other.credentials)

    def __hash__(self) -> int:
        return hash((self.kind, self.credentials))

    @property
    def credential_ids(self) -> tuple[str, ...]:
        """The ids of the credentials accepted, in order (what metrics and logs show)."""
        return tuple(c.id for c in self.credentials)

    @classmethod
    def bearer(
        cls, api_key: str | SecretStr, *, credential_id: str = DEFAULT_CREDENTIAL_ID
    ) -> ReceiverAuth:
        """Expect ``Authorization: Bearer <api_key>``."""
        return cls("BEARER", api_key=SecretStr(_reveal(api_key)), credential_id=credential_id)

    @classmethod
    def basic(
        cls,
        username: str,
        password: str | SecretStr,
        *,
        credential_id: str = DEFAULT_CREDENTIAL_ID,
    ) -> ReceiverAuth:
        """Expect HTTP Basic authentication with ``username`` and ``password``."""
        return cls(
            "BASIC",
            username=SecretStr(username),
            password=SecretStr(_reveal(password)),
            credential_id=credential_id,
        )

    @classmethod
    def none(cls) -> ReceiverAuth:
        """Accept deliveries without credentials (the document: not for production)."""
        return cls("NONE")

    @classmethod
    def any_of(cls, *auths: ReceiverAuth) -> ReceiverAuth:
        """Accept every credential of ``auths`` (all of one kind, with distinct ids and
        secrets): several keys valid at once, as during a rotation."""
        if not auths:
            raise AuthConfigError("any_of needs at least one ReceiverAuth")
        if len(auths) > 1 and any(auth.kind == "NONE" for auth in auths):
            raise AuthConfigError("NONE accepts every delivery: it combines with nothing")
        return cls._of(auths[0].kind, [c for auth in auths for c in auth.credentials])

    @classmethod
    def from_env(
        cls,
        kind: str,
        environ: Mapping[str, str] | None = None,
        *,
        credentials_file: str | Path | None = None,
    ) -> ReceiverAuth:
        """The credentials ``kind`` (bearer/basic/none, any case) needs: from the
        environment (``GP_WEBHOOK_API_KEY``, or ``GP_WEBHOOK_USERNAME`` and
        ``GP_WEBHOOK_PASSWORD``; credential id ``env``) and from ``credentials_file`` (one
        ``ID SECRET`` a line, owner-only; ``_credentials.py``), at least one in all."""
        env = os.environ if environ is None else environ
        upper = kind.upper()
        if upper == "NONE":
            if credentials_file is not None:
                raise AuthConfigError(
                    "authentication NONE checks no credentials: leave out the credentials file"
                )
            return cls("NONE")
        if upper not in ("BEARER", "BASIC"):
            raise AuthConfigError(
                f"unknown authentication type {kind!r}: use bearer, basic or none"
            )
        bearer = upper == "BEARER"
        listed = (
            read_credentials_file(credentials_file, "BEARER" if bearer else "BASIC")
            if credentials_file is not None
            else ()
        )
        given: list[Credential] = []
        if bearer and (key := env.get(ENV_API_KEY, "")):
            given.append(
                Credential(ENV_CREDENTIAL_ID, "BEARER", SecretStr(key), origin=ENV_API_KEY)
            )
        elif not bearer:
            username, password = env.get(ENV_USERNAME, ""), env.get(ENV_PASSWORD, "")
            if (username or password) and not (username and password):
                raise AuthConfigError(_NEEDS["BASIC"])
            if username:
                given.append(
                    Credential(
                        ENV_CREDENTIAL_ID,
                        "BASIC",
                        SecretStr(password),
                        username=SecretStr(username),
                        origin=f"{ENV_USERNAME}/{ENV_PASSWORD}",
                    )
                )
        if not given and not listed:
            raise AuthConfigError(_NEEDS["BEARER" if bearer else "BASIC"])
        return cls._of("BEARER" if bearer else "BASIC", [*given, *listed])

    @classmethod
    def _of(cls, kind: WebhookAuthType, credentials: Iterable[Credential]) -> ReceiverAuth:
        auth = cls.__new__(cls)
        auth._set(kind, credentials)
        return auth

    def match(self, authorization: bytes | None) -> str | None:
        """The id of the credential an ``Authorization`` header value (raw bytes, or
        ``None`` when absent) carries, ``""`` for NONE (nothing to carry), or ``None`` when
        it carries none of them. Malformed values are refused, never raised."""
        if self.kind == "NONE":
            return ""
        if authorization is None:
            return None
        scheme, _, rest = authorization.strip().partition(b" ")
        rest = rest.strip()
        if self.kind == "BEARER":
            if scheme.lower() != b"bearer":
                return None
            presented = rest
        else:
            if scheme.lower() != b"basic":
                return None
            try:
                presented = b64decode(rest, validate=True)
            except (binascii.Error, ValueError):
                return None
        digest = _digest(self._key, presented)
        found = None
        for credential_id, expected in self._digests:
            # Every credential is compared, whichever matches.
            if hmac.compare_digest(digest, expected) and found is None:
                found = credential_id
        return found

    def check(self, authorization: bytes | None) -> bool:
        """Whether an ``Authorization`` header value (raw bytes, or ``None`` when absent)
        carries one of the expected credentials (:meth:`match`)."""
        return self.match(authorization) is not None

    def challenge(self) -> bytes | None:
        """The ``WWW-Authenticate`` value to send with a 401, or ``None`` for NONE."""
        if self.kind == "BEARER":
            return b'Bearer realm="gptools-webhooks"'
        if self.kind == "BASIC":
            return b'Basic realm="gptools-webhooks", charset="UTF-8"'
        return None


class CredentialUse:
    """Deliveries accepted by authentication, by credential id: counted in a dict on the
    hot path (event loop's thread only), handed to
    ``gptools_webhook_credential_deliveries_total{credential}`` by :meth:`flush`."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}
        # Made now, not at the first flush: a scrape (and the dashboard's panel) shows the
        # family from the start, and /metrics does not depend on what an earlier request did.
        _CREDENTIAL_DELIVERIES.made()

    def count(self, credential_id: str) -> None:
        """Count one delivery the credential ``credential_id`` was accepted for (``""``,
        NONE's, is not a credential and is not counted)."""
        if credential_id:
            self._counts[credential_id] = self._counts.get(credential_id, 0) + 1

    def flush(self) -> None:
        """Hand the counts since the last flush to prometheus_client."""
        counts, self._counts = self._counts, {}
        for credential_id, n in counts.items():
            _CREDENTIAL_DELIVERIES.made().labels(credential=credential_id).inc(n)


_CREDENTIAL_DELIVERIES = counter(
    "gptools_webhook_credential_deliveries_total",
    "Deliveries accepted by authentication, by the id of the credential they carried.",
    "credential",
)


def _digest(key: bytes, presented: bytes) -> bytes:
    # Keyed BLAKE2b is a MAC by design, and a third of HMAC-SHA256's cost per request.
    return hashlib.blake2b(presented, key=key, digest_size=32).digest()


def _reveal(value: str | SecretStr) -> str:
    return value.get_secret_value() if isinstance(value, SecretStr) else value
