"""Fixtures of the contract tests: a sandbox and a receiver on loopback, and one bounded,
seeded schemathesis run of an operation against a server.

schemathesis's pytest plugin builds its tests lazily from a fixture, which this pytest
does not support; the operations are parametrised here instead, from the descriptions
:mod:`gptools.openapi` generates (the tests of ``test_documents.py`` check that the servers
serve exactly these).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from gptools.client import Client
from gptools.sandbox import DEMO_ACCOUNTS, SandboxConfig, run_sandbox
from gptools.webhooks import ReceiverAuth, WebhookReceiver
from tests._support.campaigns import free_rounds
from tests.webhooks.conftest import receiver_process, serve_in_thread

__all__ = ["receiver_process"]  # the fixture, for the serve command's test

#: No 5xx, and every answer is documented: its status, content type, headers and body.
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
#: Cases per operation and generation mode: enough to reach every refusal, small enough
#: for the whole folder to stay well under two minutes.
MAX_EXAMPLES = 12
MODES = [GenerationMode.POSITIVE, GenerationMode.NEGATIVE]
RECEIVER_KEY = "contract-key"
#: The campaign the contract tests create (in their own sandbox, and to see the paths the
#: client calls): one round of neon-fruits in 2030.
CONTRACT_CAMPAIGN = free_rounds(
    name="contract",
    bet_number=1,
    game_ids=["neon-fruits"],
    start_date=datetime(2030, 1, 1),
    end_date=datetime(2030, 1, 8),
)
#: The contract receiver's body limit: a valid notification fits, many generated ones not.
RECEIVER_MAX_BODY = 512


def cases(document: dict[str, Any]) -> list[Any]:
    """A pytest parameter (operation, generation mode) per operation of a description and
    mode that applies: invalid data only where the operation takes some input."""
    schema = schemathesis.openapi.from_dict(document)
    out = []
    for result in schema.get_all_operations():
        operation = result.ok()
        takes_input = len(operation.body) or len(operation.path_parameters) or len(operation.query)
        for mode in MODES if takes_input else MODES[:1]:
            out.append(pytest.param(operation, mode, id=f"{operation.label} {mode.value}"))
    return out


def fuzz(
    operation: Any,
    base_url: str,
    mode: GenerationMode,
    headers: dict[str, str],
    path_parameters: dict[str, Any] | None = None,
) -> Counter[int]:
    """Send ``operation`` up to :data:`MAX_EXAMPLES` generated requests (seeded: the same
    ones every run) and fail on the first answer :data:`CHECKS` refuses; returns how many
    answers each status had. ``path_parameters`` replace generated ones in valid cases
    (a brand and a campaign that exist, so the cases reach the handlers)."""
    statuses: Counter[int] = Counter()

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=MAX_EXAMPLES,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def run(case: Any) -> None:
        if mode == GenerationMode.POSITIVE and path_parameters and case.path_parameters:
            known = {k: v for k, v in path_parameters.items() if k in case.path_parameters}
            case.path_parameters = {**case.path_parameters, **known}
        response = case.call_and_validate(base_url=base_url, headers=headers, checks=CHECKS)
        statuses[response.status_code] += 1

    run()
    return statuses


@dataclass(frozen=True)
class ContractSandbox:
    """A sandbox for the fuzzer: its base URL, the account the cases use, and path
    parameters that name things that exist (the account's brand, one of its campaigns)."""

    base_url: str
    headers: dict[str, str]
    path_parameters: dict[str, Any]


@pytest.fixture(scope="module")
def contract_sandbox() -> Iterator[ContractSandbox]:
    """A sandbox of its own (its state is the fuzzer's to spoil), rate limits off so that
    the cases reach the handlers rather than 429, with one campaign of brand 101 created by
    its INDIVIDUAL account (both path forms are open to it)."""
    account = DEMO_ACCOUNTS["individual"]
    with run_sandbox(SandboxConfig(enforce_rate_limits=False)) as running:
        (brand,) = account.brand_ids
        headers = {"Authorization": account.authorization}
        with Client(running.base_url, account.username, account.password, env_file=None) as c:
            campaign = c.create_campaign(CONTRACT_CAMPAIGN)
        yield ContractSandbox(
            running.base_url, headers, {"brandId": brand, "campaignId": campaign.campaign_id}
        )


@pytest.fixture(scope="module")
def contract_receiver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A receiver (BEARER, SQLite store, bodies up to :data:`RECEIVER_MAX_BODY` bytes, so
    that the fuzzer's larger bodies meet the 413) served by uvicorn on loopback; its base
    URL."""
    store = tmp_path_factory.mktemp("contract") / "receiver.sqlite3"
    receiver = WebhookReceiver(
        f"sqlite:///{store}",
        auth=ReceiverAuth.bearer(RECEIVER_KEY),
        max_body_bytes=RECEIVER_MAX_BODY,
    )
    with serve_in_thread(receiver) as server:
        yield server.base_url
