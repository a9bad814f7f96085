"""Participant addition: unknown campaigns, id rules, limits, counts, the batch endpoint."""

from __future__ import annotations

import httpx
import pytest

from gptools import spec
from gptools.sandbox import RunningSandbox, SandboxConfig, run_sandbox
from tests.sandbox.conftest import assert_error, auth, campaign_body, path


@pytest.fixture
def campaign(http: httpx.Client) -> str:
    response = http.post(path("campaign", 201), json=campaign_body(), auth=auth("partner"))
    assert response.status_code == 201
    campaign_id: str = response.json()["campaignId"]
    return campaign_id


def _add(
    http: httpx.Client, campaign_id: str, ids: object, *, batch: bool = False, brand: int = 201
) -> httpx.Response:
    endpoint = f"campaign/{campaign_id}/participant" + ("/batch" if batch else "")
    return http.post(path(endpoint, brand), json={"playerIds": ids}, auth=auth("partner"))


def test_repeated_additions_are_counted(
    http: httpx.Client, fresh_sandbox: RunningSandbox, campaign: str
) -> None:
    first = _add(http, campaign, ["p1", "p2"])
    assert first.status_code == 200
    assert first.json() == {"campaignId": campaign, "added": 2, "newParticipants": 2}
    second = _add(http, campaign, ["p2", "p3", "p3"])
    assert second.json() == {"campaignId": campaign, "added": 3, "newParticipants": 1}
    assert fresh_sandbox.state.participants(campaign) == {"p1": 1, "p2": 2, "p3": 2}
    assert fresh_sandbox.state.participants("CMP-424242") == {}


@pytest.mark.parametrize("campaign_id", ["CMP-999999", "not-a-campaign", "0"])
@pytest.mark.parametrize("batch", [False, True])
def test_unknown_campaign_is_invalid_request(
    http: httpx.Client, campaign_id: str, batch: bool
) -> None:
    body = assert_error(
        _add(http, campaign_id, ["p1"], batch=batch), 403, spec.CODE_INVALID_REQUEST
    )
    assert f"campaign id '{campaign_id}' is invalid or does not exist" in body["message"]


def test_max_ids_passes_and_one_more_fails(
    http: httpx.Client, campaign: str, fresh_sandbox: RunningSandbox
) -> None:
    limit = spec.PARTICIPANT_MAX_IDS
    ok = _add(http, campaign, [f"p{i}" for i in range(limit)])
    assert ok.status_code == 200 and ok.json()["added"] == limit
    refused = _add(http, campaign, [f"q{i}" for i in range(limit + 1)])
    message = assert_error(refused, 400, spec.VALIDATION_ERROR_CODE)["message"]
    assert f"{limit + 1} ids" in message and str(limit) in message and "batch" in message
    assert len(fresh_sandbox.state.participants(campaign)) == limit


def test_batch_endpoint_takes_more(
    http: httpx.Client, campaign: str, fresh_sandbox: RunningSandbox
) -> None:
    limit = spec.BATCH_PARTICIPANT_MAX_IDS
    ok = _add(http, campaign, [f"p{i}" for i in range(limit)], batch=True)
    assert ok.status_code == 200, ok.text
    refused = _add(http, campaign, [f"q{i}" for i in range(limit + 1)], batch=True)
    assert f"{limit + 1} ids" in assert_error(refused, 400, spec.VALIDATION_ERROR_CODE)["message"]
    assert len(fresh_sandbox.state.participants(campaign)) == limit


@pytest.mark.parametrize(
    ("ids", "fragment"),
    [
        (["ok", ""], "playerIds[1] '' is empty"),
        (["ok", "   "], "playerIds[1] '   ' is empty"),
        (["x" * (spec.PLAYER_ID_MAX_LENGTH + 1)], f"is {spec.PLAYER_ID_MAX_LENGTH + 1} characters"),
        (["bad\nid"], "playerIds[0] 'bad\\nid' contains a control character"),
        (["tab\tid"], "contains a control character"),
        (["ok", 42], "playerIds[1] must be a string"),
        ([], "must be a non-empty list"),
        ("p1", "must be a non-empty list"),
    ],
)
def test_invalid_ids_are_named(
    http: httpx.Client, campaign: str, ids: object, fragment: str, fresh_sandbox: RunningSandbox
) -> None:
    message = assert_error(_add(http, campaign, ids), 400, spec.VALIDATION_ERROR_CODE)["message"]
    assert fragment in message, message
    assert fresh_sandbox.state.participants(campaign) == {}


def test_id_at_max_length_passes(http: httpx.Client, campaign: str) -> None:
    assert _add(http, campaign, ["x" * spec.PLAYER_ID_MAX_LENGTH]).status_code == 200


def test_every_invalid_id_is_reported(http: httpx.Client, campaign: str) -> None:
    message = assert_error(
        _add(http, campaign, ["ok", "", "fine", "a\x00b"]), 400, spec.VALIDATION_ERROR_CODE
    )["message"]
    assert "playerIds[1]" in message and "playerIds[3]" in message
    assert "playerIds[0]" not in message


def test_body_without_player_ids(http: httpx.Client, campaign: str) -> None:
    response = http.post(
        path(f"campaign/{campaign}/participant", 201), json={"ids": ["p"]}, auth=auth("partner")
    )
    assert (
        "playerIds is required"
        in assert_error(response, 400, spec.VALIDATION_ERROR_CODE)["message"]
    )


def test_limits_come_from_the_config() -> None:
    config = SandboxConfig(participant_max_ids=2, player_id_max_length=3)
    with run_sandbox(config) as sb, httpx.Client(base_url=sb.base_url) as http:
        campaign = http.post(
            path("campaign"), json=campaign_body(), auth=auth("individual")
        ).json()["campaignId"]
        url = path(f"campaign/{campaign}/participant")
        assert (
            http.post(url, json={"playerIds": ["abc", "def"]}, auth=auth("individual")).status_code
            == 200
        )
        assert (
            http.post(url, json={"playerIds": ["a", "b", "c"]}, auth=auth("individual")).status_code
            == 400
        )
        assert (
            http.post(url, json={"playerIds": ["abcd"]}, auth=auth("individual")).status_code == 400
        )
