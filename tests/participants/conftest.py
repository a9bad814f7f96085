"""Fixtures of the participant loader tests: a client of the session sandbox, a campaign."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gptools.client import Client
from gptools.participants._sources import open_source
from gptools.sandbox import RecordedRequest, RunningSandbox
from tests._support.campaigns import free_rounds

BRAND = 201


def source_rows(path: Path, **options: Any) -> list[tuple[int, str | None]]:
    """Each row of the players file at ``path`` (read with ``options``): its line and the
    id as read."""
    src = open_source(path, **options)
    try:
        return [(r.line, r.raw) for r in src.rows()]
    finally:
        src.close()


def make_client(sb: RunningSandbox, **options: Any) -> Client:
    """A partner client of ``sb`` with short, seeded backoff (faults make it retry), named
    by the sandbox's identity as :func:`gptools.session.connect` names it (so a CLI run and
    a library run of one load share a journal)."""
    acct = sb.accounts["partner"]
    defaults: dict[str, Any] = {
        "server_identity": sb.identity,
        "backoff_base": 0.02,
        "backoff_cap": 0.2,
        "rng": random.Random(7),
        "env_file": None,
    }
    return Client(sb.base_url, acct.username, acct.password, **{**defaults, **options})


def cli_env(sb: RunningSandbox) -> dict[str, str]:
    """The settings a ``gptools`` command needs to reach ``sb`` as its partner account."""
    acct = sb.accounts["partner"]
    return {
        "GP_BASE_URL": sb.base_url,
        "GP_USERNAME": acct.username,
        "GP_PASSWORD": acct.password,
    }


def load_args(players: Path, campaign: str, where: Path, *more: str) -> list[str]:
    """``participants load`` of ``players`` into ``campaign`` on :data:`BRAND`, its journal
    and rejects under ``where``, without a progress bar, then ``more``."""
    return [
        "participants", "load", str(players), "--campaign", campaign, "--brand", str(BRAND),
        "--journal", str(where / "journal.sqlite"), "--rejects", str(where / "rejects.csv"),
        "--no-progress", *more,
    ]  # fmt: skip


@pytest.fixture
def env(
    fresh_sandbox: RunningSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    """The environment of a ``gptools participants`` command against the fresh sandbox,
    run from ``tmp_path`` with its journals under ``tmp_path / "journals"``."""
    monkeypatch.chdir(tmp_path)
    return {**cli_env(fresh_sandbox), "GPTOOLS_JOURNAL_DIR": str(tmp_path / "journals")}


@pytest.fixture
def client(fresh_sandbox: RunningSandbox) -> Iterator[Client]:
    """A partner client of the freshly reset session sandbox."""
    with make_client(fresh_sandbox) as c:
        yield c


@pytest.fixture
def campaign(client: Client) -> str:
    """A new campaign on brand 201 of the session sandbox."""
    return new_campaign(client)


def new_campaign(client: Client) -> str:
    """The id of a new campaign (:func:`tests._support.campaigns.free_rounds`) on brand
    :data:`BRAND` of ``client``'s sandbox."""
    return client.create_campaign(free_rounds(), brand=BRAND).campaign_id


def participant_requests(sb: RunningSandbox) -> list[RecordedRequest]:
    """The recorded participant-addition requests of ``sb``, in order."""
    return [r for r in sb.state.requests if r.method == "POST" and r.path.endswith("/participant")]
