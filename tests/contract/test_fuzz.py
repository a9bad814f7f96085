"""schemathesis against the sandbox and the receiver over loopback: bounded, seeded cases
for every operation of their descriptions, valid and invalid; no answer may be a 5xx, and
every answer must match the description (status, content type, headers, body)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from schemathesis import GenerationMode

from gptools import spec
from gptools.openapi import provider_openapi, receiver_openapi
from gptools.sandbox import DEMO_ACCOUNTS, SandboxConfig, run_sandbox
from tests.contract.conftest import (
    RECEIVER_KEY,
    RECEIVER_MAX_BODY,
    ContractSandbox,
    cases,
    fuzz,
)

_RECEIVER = receiver_openapi(auth_kind="BEARER", max_body_bytes=RECEIVER_MAX_BODY)


@pytest.mark.parametrize(("operation", "mode"), cases(provider_openapi()))
def test_sandbox_answers_as_described(
    contract_sandbox: ContractSandbox, operation: Any, mode: GenerationMode
) -> None:
    sandbox = contract_sandbox
    statuses = fuzz(operation, sandbox.base_url, mode, sandbox.headers, sandbox.path_parameters)
    assert statuses and max(statuses) < 500, statuses


@pytest.mark.parametrize(("operation", "mode"), cases(_RECEIVER))
def test_receiver_answers_as_described(
    contract_receiver: str, operation: Any, mode: GenerationMode
) -> None:
    headers = {"Authorization": f"Bearer {RECEIVER_KEY}"}
    statuses = fuzz(operation, contract_receiver, mode, headers)
    assert statuses and max(statuses) < 500, statuses
    if operation.method == "post" and mode == GenerationMode.POSITIVE:
        assert statuses[200] and statuses[413], statuses  # stored ones and too large ones
    elif operation.method == "post":
        assert statuses[422] or statuses[400], statuses


@pytest.mark.parametrize("authorization", ["Bearer wrong-key", "Basic dTpw", ""])
def test_receiver_refusals_of_credentials_are_described(
    contract_receiver: str, authorization: str
) -> None:
    (delivery,) = [p.values[0] for p in cases(_RECEIVER) if p.values[0].label.startswith("POST ")][
        :1
    ]
    headers = {"Authorization": authorization} if authorization else {}
    statuses = fuzz(delivery, contract_receiver, GenerationMode.POSITIVE, headers)
    assert statuses[401], statuses


def test_sandbox_rate_limit_answers_are_described() -> None:
    # One request a minute: the first case is served, the others get 429 + Retry-After.
    tier = spec.RateTier("contract", "global", 1, None, None)
    config = SandboxConfig(rate_tiers=(tier,), rate_window=timedelta(minutes=1))
    (game,) = [
        p.values[0]
        for p in cases(provider_openapi())
        if p.values[0].label == f"GET {spec.API_PREFIX}/{spec.ENDPOINT_GAME}"
    ][:1]
    headers = {"Authorization": DEMO_ACCOUNTS["individual"].authorization}
    with run_sandbox(config) as sandbox:
        statuses = fuzz(game, sandbox.base_url, GenerationMode.POSITIVE, headers)
    assert statuses[spec.RATE_LIMIT_STATUS] >= 2, statuses
