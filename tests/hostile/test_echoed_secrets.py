"""Issue 35 item 8: the client blanks credentials in every message it builds from a
server's answer.

A server may repeat what it was given: a 400 whose message quotes a connection string
with the account's password, a 500 that echoes the request's ``Authorization`` header, a
2xx of the wrong shape that echoes it too. None of it reaches an exception's text, its
attributes, the CLI's stderr or its ``--json`` document: the configured password (as
written, percent-encoded, JSON-escaped), any ``Basic``/``Bearer`` value and any URL's
password become ``***``. Each case runs with the sync client and the async one on both
transports, against a raw server on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from gptools import errors
from gptools._secrets import REDACTED, blank_credentials
from tests._support.cli import run_gptools
from tests.hostile.raw_server import RawServer
from tests.hostile.test_client_servers import KINDS, call_self

USERNAME = "hostuser"
PASSWORD = "Sup3r/Secret PW"
TOKEN = base64.b64encode(f"{USERNAME}:{PASSWORD}".encode()).decode()
OTHER_BEARER = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl"
#: Every text a message must not hold.
SECRETS = (PASSWORD, "Sup3r%2FSecret%20PW", "Sup3r%2FSecret+PW", TOKEN, OTHER_BEARER, "dbPW")


@dataclass
class EchoServer(RawServer):
    """A raw HTTP/1.1 server on 127.0.0.1 that answers every request as ``mode`` says,
    repeating the credentials it was given:

    - ``400``: the documented error body, its message quoting a connection string with a
      password, the account's password as written and percent-encoded, and a bearer token;
    - ``500``: a plain-text body echoing every request header, ``Authorization`` included;
    - ``200``: JSON of the wrong shape, echoing the ``Authorization`` header;
    - ``big``: a 200 past the client's size limit that starts with the same echo.
    """

    mode: str

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Read the request's head, then answer as :attr:`mode` says, echoing it."""
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            auth = next(
                (line.split(":", 1)[1].strip() for line in head.split("\r\n")
                 if line.lower().startswith("authorization:")),
                "",
            )  # fmt: skip
            status, kind, body = self._answer(head, auth)
            # The big answer has no length: it ends with the connection.
            length = "" if self.mode == "big" else f"Content-Length: {len(body)}\r\n"
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\n{length}"
                "Connection: close\r\n\r\n".encode()
                + body
            )
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            await asyncio.gather(writer.wait_closed(), return_exceptions=True)

    def _answer(self, head: str, auth: str) -> tuple[str, str, bytes]:
        if self.mode == "400":
            message = (
                f"cannot reach postgresql://{USERNAME}:dbPW@db.internal/gp as "
                f"{USERNAME}:{PASSWORD} (sent as {USERNAME}:Sup3r%2FSecret%20PW); "
                f"Authorization: Bearer {OTHER_BEARER}"
            )
            document = {"code": "VALIDATION_ERROR", "message": message, "path": "/x?password=dbPW"}
            return "400 Bad Request", "application/json", json.dumps(document).encode()
        if self.mode == "500":
            return "500 Internal Server Error", "text/plain", f"failed on:\n{head}".encode()
        if self.mode == "big":
            echoed = f'["Authorization: {auth}"'.encode()
            return "200 OK", "application/json", echoed + b" " * 5000
        document = {"principalType": 7, "allowedBrands": f"Authorization: {auth}"}
        return "200 OK", "application/json", json.dumps(document).encode()


@pytest.fixture
def echo(request: pytest.FixtureRequest) -> Iterator[EchoServer]:
    with EchoServer(request.param) as running:
        yield running


def _leaks(*texts: str) -> list[tuple[str, str]]:
    return [(secret, text) for text in texts for secret in SECRETS if secret in text]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("echo", ["400", "500", "200", "big"], indirect=True)
def test_no_client_message_repeats_a_credential(kind: str, echo: EchoServer) -> None:
    exc, _ = call_self(
        kind, echo.url, username=USERNAME, password=PASSWORD, max_retries=0, timeout=10,
        max_response_bytes=1000,
    )  # fmt: skip
    big = echo.mode == "big"
    assert isinstance(exc, errors.ResponseTooLargeError if big else errors.ApiError), repr(exc)
    texts = [str(exc), repr(exc), repr(vars(exc)), *exc.args]
    assert _leaks(*texts) == []
    assert REDACTED in str(exc) + (exc.body or "")
    if echo.mode == "400":
        assert exc.message == (
            f"cannot reach postgresql://{USERNAME}:***@db.internal/gp as {USERNAME}:*** "
            f"(sent as {USERNAME}:***); Authorization: Bearer ***"
        )
        assert exc.path == "/x?password=***"
    else:
        assert f"authorization: basic {REDACTED}" in (exc.body or "").lower()


@pytest.mark.parametrize("echo", ["400", "500"], indirect=True)
@pytest.mark.parametrize("as_json", [False, True])
def test_the_cli_prints_no_credential(echo: EchoServer, as_json: bool) -> None:
    env = {
        **os.environ,
        "GP_BASE_URL": echo.url,
        "GP_USERNAME": USERNAME,
        "GP_PASSWORD": PASSWORD,
        "GP_MAX_RETRIES": "0",
    }
    args = ["costs", "preview", "--game", "g", "--currency", "EUR"]
    done = run_gptools(*args, *(["--json"] if as_json else []), env=env, timeout=60)
    assert done.returncode == 1, done.stderr
    assert _leaks(done.stdout, done.stderr) == []
    shown = json.loads(done.stdout)["error"]["message"] if as_json else done.stderr
    assert REDACTED in shown


@pytest.mark.parametrize(
    ("text", "blanked"),
    [
        ("Authorization: Basic dTpw", "Authorization: Basic ***"),  # named: any value
        ('{"authorization": "Bearer abc"}', '{"authorization": "Bearer ***"}'),
        ("token Bearer eyJ0eXAi.x.y refused", "token Bearer *** refused"),
        # The whole value, beyond RFC 6750's token characters too.
        ("Authorization: Bearer p@ss!w(rd), then", "Authorization: Bearer ***, then"),
        ("token Bearer 12p@ss!w(rd) refused", "token Bearer *** refused"),
        ("see https://u:p%40ss@x.example/?a=1&password=zz&b=2",
         "see https://u:***@x.example/?a=1&password=***&b=2"),
        # Words, not credentials: left as they are.
        ("basic arithmetic; Basic Authentication needed; a bearer bond",
         "basic arithmetic; Basic Authentication needed; a bearer bond"),
        ("ratio 2:1 at https://x.example/a:b", "ratio 2:1 at https://x.example/a:b"),
    ],
)  # fmt: skip
def test_credentials_are_told_by_their_form(text: str, blanked: str) -> None:
    assert blank_credentials(text) == blanked


def test_a_short_password_is_blanked_where_it_stands_alone() -> None:
    assert (
        blank_credentials("nested deeper; sent u:p (p)", ["p"]) == "nested deeper; sent u:*** (***)"
    )
    assert blank_credentials("x Sup3rSecretPWy", ["Sup3rSecretPW"]) == "x ***y"
