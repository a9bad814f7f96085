"""Configuration from arguments, the environment and ``.env``; secrets never leak into a
repr, a log record (DEBUG included) or an exception text."""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable
from pathlib import Path

import pytest

from gptools import errors
from gptools.client import AsyncClient, Client, ClientSettings
from gptools.sandbox import FaultRule, RunningSandbox
from tests.client.conftest import MakeClient
from tests.client.test_operations import GAME


def test_settings_precedence(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text(
        "GP_BASE_URL=https://file.example\nGP_USERNAME=file-user\nGP_PASSWORD=file-pass\n"
    )
    env = {"GP_USERNAME": "env-user"}
    s = ClientSettings.resolve(None, None, None, env_file=env_file, environ=env)
    assert (s.base_url, s.username, s.password.get_secret_value()) == (
        "https://file.example",
        "env-user",
        "file-pass",
    )
    s = ClientSettings.resolve(
        "https://arg.example/", None, "arg-pass", env_file=env_file, environ=env
    )
    assert (s.base_url, s.username, s.password.get_secret_value()) == (
        "https://arg.example",
        "env-user",
        "arg-pass",
    )
    assert "arg-pass" not in repr(s)


def test_missing_settings_name_what_to_set() -> None:
    with pytest.raises(errors.ConfigurationError) as caught:
        ClientSettings.resolve(None, "u", None, env_file=None, environ={})
    text = str(caught.value)
    assert "GP_BASE_URL" in text and "GP_PASSWORD" in text and "GP_USERNAME" not in text
    with pytest.raises(errors.ConfigurationError, match="http"):
        ClientSettings.resolve("ftp://x", "u", "p", env_file=None, environ={})
    with pytest.raises(errors.ConfigurationError, match="not a valid URL"):
        ClientSettings.resolve("http://[::1", "u", "p", env_file=None, environ={})
    with pytest.raises(errors.ConfigurationError, match="must not carry credentials"):
        ClientSettings.resolve("https://u:hunter2@x.example", "u", "p", env_file=None, environ={})


@pytest.mark.parametrize("klass", [Client, AsyncClient])
def test_clients_read_the_env_file(
    klass: type[Client] | type[AsyncClient], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("GP_BASE_URL", "GP_USERNAME", "GP_PASSWORD"):
        monkeypatch.delenv(var, raising=False)
    (tmp_path / ".env").write_text(
        "GP_BASE_URL=https://gp.example\nGP_USERNAME=me\nGP_PASSWORD=from-dotenv\n"
    )
    monkeypatch.chdir(tmp_path)
    client = klass()
    assert client.base_url == "https://gp.example"
    assert "from-dotenv" not in repr(client)
    with pytest.raises(errors.ConfigurationError, match="wait forever"):
        klass(timeout=None)  # type: ignore[arg-type]


def test_secrets_never_leak(
    make: MakeClient, sb: RunningSandbox, caplog: pytest.LogCaptureFixture
) -> None:
    acct = sb.accounts["partner"]
    secrets = {
        acct.password,
        base64.b64encode(f"{acct.username}:{acct.password}".encode()).decode(),
        "wrong-secret-x9",
        base64.b64encode(f"{acct.username}:wrong-secret-x9".encode()).decode(),
    }
    texts: list[str] = []
    with caplog.at_level(logging.DEBUG):
        c = make("partner")
        texts += [repr(c), str(c), repr(c.settings), repr(c.brand(201)), repr(c.stats)]
        c.game(GAME.game_id, brand=201)
        sb.faults.add(FaultRule("other", status=503, count=1))
        c.game(GAME.game_id, brand=201)  # a retry, logged at INFO
        attempts: list[Callable[[], object]] = [
            lambda: make("partner", password="wrong-secret-x9").self(),  # 401
            lambda: c.game(GAME.game_id),  # local BRAND_REQUIRED
            lambda: c.add_participants("CMP-9", ["p"], brand=201),  # 403
        ]
        for attempt in attempts:
            with pytest.raises(errors.ApiError) as caught:
                attempt()
            texts += [str(caught.value), repr(caught.value), repr(vars(caught.value))]
        sb.faults.add(FaultRule("other", drop=True))
        with pytest.raises(errors.TransportError) as dropped:
            make("partner", max_retries=1).self()
        texts += [str(dropped.value), repr(dropped.value), repr(dropped.value.__cause__)]
    assert any("retry 1 of" in r.getMessage() for r in caplog.records)
    texts += [r.getMessage() for r in caplog.records]
    texts += [repr(r.args) for r in caplog.records]
    texts.append(caplog.text)
    leaks = [(s, t) for t in texts for s in secrets if s in t]
    assert leaks == []


# --------------------------------------------------------------------------------------
# GP_MAX_RETRIES and GP_TIMEOUT (issue 13 item 4)
# --------------------------------------------------------------------------------------


def test_retries_and_timeout_precedence(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("GP_MAX_RETRIES=7\nGP_TIMEOUT=2,40\n")
    base = ("https://gp.example", "u", "p")
    s = ClientSettings.resolve(*base, env_file=env_file, environ={})
    assert s.max_retries == 7
    assert (s.timeout.connect, s.timeout.read) == (2.0, 40.0)
    s = ClientSettings.resolve(
        *base, env_file=env_file, environ={"GP_MAX_RETRIES": "0", "GP_TIMEOUT": "12.5"}
    )
    assert s.max_retries == 0
    assert (s.timeout.connect, s.timeout.read, s.timeout.pool) == (12.5, 12.5, 12.5)
    s = ClientSettings.resolve(
        *base,
        max_retries=1,
        timeout=(1, 2),
        env_file=env_file,
        environ={"GP_MAX_RETRIES": "0", "GP_TIMEOUT": "12.5"},
    )
    assert (s.max_retries, s.timeout.connect, s.timeout.read) == (1, 1.0, 2.0)
    s = ClientSettings.resolve(*base, env_file=None, environ={})
    assert (s.max_retries, s.timeout.connect, s.timeout.read) == (3, 5.0, 30.0)


@pytest.mark.parametrize(
    ("var", "value", "says"),
    [
        ("GP_MAX_RETRIES", "-1", "GP_MAX_RETRIES must be a whole number"),
        ("GP_MAX_RETRIES", "three", "GP_MAX_RETRIES must be a whole number"),
        ("GP_TIMEOUT", "fast", "GP_TIMEOUT must be seconds or connect,read"),
        ("GP_TIMEOUT", "1,2,3", "GP_TIMEOUT must be seconds or connect,read"),
        ("GP_TIMEOUT", "0", "GP_TIMEOUT='0': connect timeout must be a positive"),
    ],
)
def test_bad_retries_or_timeout_say_which_variable(var: str, value: str, says: str) -> None:
    with pytest.raises(errors.ConfigurationError) as caught:
        ClientSettings.resolve("https://gp.example", "u", "p", env_file=None, environ={var: value})
    assert str(caught.value).startswith(says)


@pytest.mark.parametrize("klass", [Client, AsyncClient])
def test_clients_take_retries_and_timeout_from_the_environment(
    klass: type[Client] | type[AsyncClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GP_MAX_RETRIES", "5")
    monkeypatch.setenv("GP_TIMEOUT", "1.5,9")
    client = klass("https://gp.example", "u", "p", env_file=None)
    assert client.max_retries == 5
    assert (client.timeout.connect, client.timeout.read) == (1.5, 9.0)
    assert klass("https://gp.example", "u", "p", env_file=None, max_retries=0).max_retries == 0
