"""The one rule for keeping a URL's password out of messages: a store URL
(``postgresql://user:PASSWORD@host/db``, or ``?password=`` in its query) is named in
errors and logs by :func:`redact_url`, and any text that may quote it (a driver's error,
which can echo part of the URL) passes through :func:`scrub` first. A text that may quote
URLs nobody told us about (a user's handler's exception) passes through
:func:`scrub_urls`.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

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
