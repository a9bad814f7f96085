"""gptools.spec against the API document: published constants, rate tiers, endpoint classes."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from gptools import spec


def test_error_table() -> None:
    assert spec.ERROR_STATUS == {
        "BRAND_REQUIRED": 400,
        "NOT_AUTHORIZED": 401,
        "BRAND_NOT_ALLOWED": 403,
        "INVALID_REQUEST": 403,
        "UNKNOWN_ERROR": 500,
        "TIMEOUT": 504,
    }


def test_field_limits_and_other_constants() -> None:
    assert (
        spec.NAME_MAX_LENGTH,
        spec.EXTERNAL_CAMPAIGN_ID_MAX_LENGTH,
        spec.REQUEST_ID_MAX_LENGTH,
        spec.RULES_URL_MAX_LENGTH,
        spec.BET_NUMBER_MAX,
    ) == (255, 512, 36, 2048, 1500)
    assert spec.BACK_OFFICE_CSV_IMPORT_MAX_ROWS == 50_000
    assert timedelta(days=7) == spec.WEBHOOK_RETRY_WINDOW
    assert timedelta(seconds=1) == spec.WEBHOOK_RESPONSE_BUDGET
    assert spec.DEFAULT_WEBHOOK_PATH == "/v1/game-action-events"
    assert spec.WEBHOOK_AUTH_TYPES == ("BEARER", "BASIC", "NONE")
    assert spec.CAMPAIGN_TYPE_AWARDED_FEATURE == "AWARDED_FEATURE"
    assert spec.ENDPOINT_LEGACY_CAMPAIGN == "freeround/campaign"
    assert {"INDIVIDUAL", "PARTNER", "THIRD_PARTY", "INTERNAL"} == spec.KNOWN_PRINCIPAL_TYPES
    assert {"PARTNER", "THIRD_PARTY"} == spec.EXPLICIT_ONLY_PRINCIPALS
    assert {"INDIVIDUAL"} == spec.IMPLICIT_ALLOWED_PRINCIPALS


def test_rate_table_has_all_seven_rows() -> None:
    rows = {(t.scope, t.per_second, t.methods, t.endpoint) for t in spec.RATE_TIERS}
    assert rows == {
        ("global", 500, None, None),
        ("global", 1000, frozenset({"GET"}), None),
        ("per_user_endpoint", 130, None, "POST /campaign/*/participant"),
        ("per_user_endpoint", 60, None, "POST /campaign"),
        ("per_user_endpoint", 60, None, "other"),
        ("per_endpoint", 270, None, "POST /campaign/*/participant"),
        ("per_endpoint", 135, None, "POST /campaign"),
    }
    assert len({t.name for t in spec.RATE_TIERS}) == 7


@pytest.mark.parametrize(
    ("method", "path", "expected"),
    [
        ("POST", "/api/v1/campaign", spec.ENDPOINT_CLASS_CAMPAIGN_CREATE),
        ("post", "/api/v1/brands/7/campaign", spec.ENDPOINT_CLASS_CAMPAIGN_CREATE),
        ("POST", "/api/v1/freeround/campaign", spec.ENDPOINT_CLASS_CAMPAIGN_CREATE),
        ("POST", "/api/v1/brands/7/freeround/campaign/", spec.ENDPOINT_CLASS_CAMPAIGN_CREATE),
        ("POST", "/api/v1/campaign/C1/participant", spec.ENDPOINT_CLASS_PARTICIPANT),
        ("POST", "/api/v1/brands/7/campaign/C1/participant", spec.ENDPOINT_CLASS_PARTICIPANT),
        ("POST", "/api/v1/freeround/campaign/C1/participant", spec.ENDPOINT_CLASS_PARTICIPANT),
        ("POST", "/api/v1/campaign/C1/participant/batch", spec.ENDPOINT_CLASS_PARTICIPANT),
        ("GET", "/api/v1/campaign", spec.ENDPOINT_CLASS_OTHER),
        ("GET", "/api/v1/campaign/C1/participant", spec.ENDPOINT_CLASS_OTHER),
        ("GET", "/api/v1/game", spec.ENDPOINT_CLASS_OTHER),
        ("POST", "/api/v1/webhook-subscription", spec.ENDPOINT_CLASS_OTHER),
        ("GET", "/api/v1/self", spec.ENDPOINT_CLASS_OTHER),
    ],
)
def test_endpoint_class(method: str, path: str, expected: str) -> None:
    assert spec.endpoint_class(method, path) == expected


@pytest.mark.parametrize(
    ("method", "path", "expected"),
    [
        ("GET", "/api/v1/game", "GET /game"),
        ("get", "/api/v1/brands/201/game", "GET /game"),
        (
            "GET",
            "/api/v1/brands/201/awarded-feature-configurations",
            "GET /awarded-feature-configurations",
        ),
        ("GET", "/api/v1/self", "GET /self"),
        ("POST", "/api/v1/brands/7/freeround/campaign/", "POST /campaign"),
        ("POST", "/api/v1/campaign/CMP-1/participant", "POST /campaign/*/participant"),
        (
            "POST",
            "/api/v1/brands/7/campaign/X/participant/batch",
            "POST /campaign/*/participant/batch",
        ),
        ("PUT", "/api/v1/brands/7/webhook-subscription", "PUT /webhook-subscription"),
    ],
)
def test_endpoint_of(method: str, path: str, expected: str) -> None:
    assert spec.endpoint_of(method, path) == expected


def test_every_other_endpoint_has_its_own_per_user_window() -> None:
    (other,) = [t for t in spec.RATE_TIERS if t.endpoint == spec.ENDPOINT_CLASS_OTHER]
    assert other.each_endpoint and other.per_second == 60
    assert other.window_key("GET /game") != other.window_key("GET /awarded-feature-configurations")
    assert all(not t.each_endpoint for t in spec.RATE_TIERS if t is not other)


@pytest.mark.parametrize(
    ("method", "path", "names"),
    [
        ("GET", "/api/v1/game", {"global_all", "global_get", "user_other"}),
        ("PUT", "/api/v1/webhook-subscription", {"global_all", "user_other"}),
        ("POST", "/api/v1/campaign", {"global_all", "user_campaign", "endpoint_campaign"}),
        (
            "POST",
            "/api/v1/brands/3/campaign/X/participant",
            {"global_all", "user_participant", "endpoint_participant"},
        ),
    ],
)
def test_tiers_for(method: str, path: str, names: set[str]) -> None:
    assert {t.name for t in spec.tiers_for(method, path)} == names


def test_assumption_lookup() -> None:
    found = spec.assumption("PARTICIPANT_MAX_IDS")
    assert found.value == spec.PARTICIPANT_MAX_IDS
    with pytest.raises(KeyError, match="no assumption named"):
        spec.assumption("NOPE")


def test_assumed_gaps_the_issue_names_are_recorded() -> None:
    names = " ".join(a.name for a in spec.ASSUMPTIONS)
    for needed in (
        "FREE_ROUNDS_CAMPAIGN_TYPE",
        "CAMPAIGN_START_FIELD",
        "CAMPAIGN_PLAYERS_FIELD",
        "RATE_LIMIT_STATUS",
        "VALIDATION_ERROR_CODE",
        "ENDPOINT_BATCH_PARTICIPANT_TEMPLATE",
        "ENDPOINT_WEBHOOK_SUBSCRIPTION",
        "PARTICIPANT_MAX_IDS",
    ):
        assert needed in names, needed


def test_player_id_rule_is_one_for_the_loader_and_the_sandbox() -> None:
    """spec.PLAYER_ID_FORBIDDEN (assumed): the loader rejects before sending exactly the ids
    the sandbox refuses for a control character or blankness."""
    from gptools.participants._validate import Rejection, check_player_id
    from gptools.sandbox._validation import player_id_problems

    samples = [
        "ok",
        "a\x00b",
        "a\tb",
        "a\x7fb",
        "a\x85b",
        "a\x9fb",
        "a\xa0b",
        "é",
        "a b",
        "a\u2028b",
        "a\x1fb",
    ]
    for pid in samples:
        loader_refuses = isinstance(check_player_id(pid, max_length=128), Rejection)
        sandbox_refuses = bool(player_id_problems([pid], "playerIds", 128))
        assert loader_refuses == sandbox_refuses, repr(pid)
    assert spec.assumption("PLAYER_ID_FORBIDDEN").value == spec.PLAYER_ID_FORBIDDEN


def test_a_get_counts_against_both_global_tiers() -> None:
    """spec.GLOBAL_TIERS_COMBINED (assumed): a GET counts in the 500 of all methods and in
    the 1000 of GETs, so 500 binds; other methods count only in the 500."""
    assert spec.assumption("GLOBAL_TIERS_COMBINED").value == spec.GLOBAL_TIERS_COMBINED
    get = {t.name for t in spec.tiers_for("GET", "/api/v1/self") if t.scope == "global"}
    post = {t.name for t in spec.tiers_for("POST", "/api/v1/campaign") if t.scope == "global"}
    assert (get, post) == ({"global_all", "global_get"}, {"global_all"})


def test_currency_decimals_is_the_one_rule_outside_the_sandbox() -> None:
    assert [spec.currency_decimals(c) for c in ("JPY", "EUR", "KWD")] == [0, 2, 3]
    assert spec.currency_decimals("XBT") is None  # Babel would say 2 for it
    package = Path(spec.__file__).parent
    readers = sorted(
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if "get_currency_precision" in path.read_text(encoding="utf-8")
        and path.parent.name != "sandbox"
    )
    assert readers == ["spec.py"]
