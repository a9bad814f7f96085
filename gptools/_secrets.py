"""The one rule for keeping secrets out of messages.

A store URL (``postgresql://user:PASSWORD@host/db``, or ``?password=`` in its query) is
named in errors and logs by :func:`redact_url`, and any text that may quote it (a driver's
error, which can echo part of the URL) passes through :func:`scrub` first. A text a
server wrote (an error message, a body) passes through :func:`blank_credentials`, which
blanks the credentials the caller holds and any it recognises by their form (an
``Authorization`` value: :func:`blank_authorization`, which the receiver's log scrub uses
too).
A text that may quote URLs nobody told us about (a user's handler's exception) passes
through :func:`scrub_urls`.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable
from urllib.parse import quote, quote_plus, unquote

#: What a secret is replaced by.
REDACTED = "***"

_QUERY_PASSWORD = re.compile(r"(?i)(?:^|[?&;\s])password=([^&;\s]*)")
# scheme://user:PASSWORD@host: the password runs to the authority's last "@" (a password
# may hold a raw "@"), never past the authority's end.
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s/?#:@]*:)[^\s/?#]*@")
_ANY_QUERY_PASSWORD = re.compile(r"(?i)((?:^|[?&;\s\"'])password=)[^&;\s\"']*")


def url_secrets(url: str) -> list[str]:
    """The secrets ``url`` carries, as written and percent-decoded, longest first: the
    password of its user info and any ``password=`` query value."""
    found: list[str] = []
    _, sep, rest = url.partition("://")
    netloc = rest.split("/", 1)[0].split("?", 1)[0] if sep else ""
    userinfo, at, _ = netloc.rpartition("@")
    if at and ":" in userinfo:
        found.append(userinfo.partition(":")[2])
    found += _QUERY_PASSWORD.findall(url)
    variants = {v for s in found if s for v in (s, unquote(s))}
    return sorted(variants, key=len, reverse=True)


def scrub(text: str, url: str) -> str:
    """``text`` with every secret of ``url`` replaced by :data:`REDACTED`."""
    for secret in url_secrets(url):
        text = text.replace(secret, REDACTED)
    return text


def redact_url(url: str) -> str:
    """``url`` as it may be shown: its secrets replaced by :data:`REDACTED`."""
    return scrub(url, url)


def scrub_urls(text: str) -> str:
    """``text`` with the password of every URL it quotes (``scheme://user:PASSWORD@``) and
    every ``password=`` value replaced by :data:`REDACTED`, where they stand."""
    text = _URL_PASSWORD.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)
    return _ANY_QUERY_PASSWORD.sub(lambda m: f"{m.group(1)}{REDACTED}", text)


#: The value of an HTTP ``Authorization`` header (``Basic`` or ``Bearer``) as a text quotes
#: it: the scheme, then everything up to a space, a quote, a comma or a semicolon.
_AUTHORIZATION_VALUE = re.compile(
    r"(?i)(?P<named>authorization[\"']?\s*[:=]\s*[\"']?)?\b(?P<scheme>basic|bearer)(?P<space>\s+)"
    r"(?P<token>[^\s\"',;]+)"
)
#: What an authorization value not named as one needs to be taken for one: this many
#: characters, a digit or a sign among them (not a word).
_TOKEN_LENGTH = 8
_TOKEN_SIGN = re.compile(r"[0-9._~+/=-]")


def blank_authorization(text: str, *, words: bool = False) -> str:
    """``text`` with the value of each HTTP ``Authorization`` (``Basic``/``Bearer``) it
    quotes replaced by :data:`REDACTED`: wherever the header's name comes first, else
    where the value looks like a token (8 characters or more, a digit or a sign among
    them), or whatever it looks like with ``words`` (a log line, where a blanked word
    costs nothing; a server's message keeps "Basic Authentication needed")."""

    def blank(match: re.Match[str]) -> str:
        token = match["token"]
        looks_like_a_word = len(token) < _TOKEN_LENGTH or not _TOKEN_SIGN.search(token)
        if match["named"] is None and looks_like_a_word and not words:
            return match[0]
        return f"{match['named'] or ''}{match['scheme']}{match['space']}{REDACTED}"

    return _AUTHORIZATION_VALUE.sub(blank, text)


#: Secrets this long are blanked wherever they occur; a shorter one only where it stands
#: alone (not inside a longer word), so that a short password does not mangle messages
#: (``p`` inside "deeper").
_ANYWHERE_LENGTH = 8


def credential_forms(username: str, password: str) -> list[str]:
    """The forms a server may echo the credentials ``username``/``password`` in: the
    password as written, percent-encoded and JSON-escaped, and the HTTP Basic token."""
    if not password:
        return []
    token = base64.b64encode(f"{username}:{password}".encode()).decode("ascii")
    escaped = json.dumps(password, ensure_ascii=False)[1:-1]
    return [password, quote(password, safe=""), quote_plus(password), escaped, token]


def blank_credentials(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` (what a server wrote) with credentials replaced by :data:`REDACTED`: each
    of ``secrets`` (:func:`credential_forms` of the caller's own; one shorter than 8
    characters only where it stands alone), the value of any
    ``Basic``/``Bearer`` authorization, the password of any URL's user info and any
    ``password=`` query value."""
    return scrub_urls(blank_authorization(blank_secrets(text, secrets)))


def blank_secrets(text: str, secrets: Iterable[str]) -> str:
    """``text`` with each of ``secrets`` replaced by :data:`REDACTED`: one of 8 characters
    or more wherever it occurs, a shorter one only where it stands alone."""
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        if len(secret) >= _ANYWHERE_LENGTH:
            text = text.replace(secret, REDACTED)
        else:
            text = re.sub(rf"(?<![^\W_]){re.escape(secret)}(?![^\W_])", REDACTED, text)
    return text
