"""Validation: each rejection reason, trimming, and properties over any text."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gptools import spec
from gptools.participants import ReasonCode
from gptools.participants._validate import Rejection, check_player_id


@pytest.mark.parametrize(
    ("raw", "code", "message"),
    [
        (None, "missing_field", "no field in the player-id column"),
        ("", "empty", "empty player id"),
        (" \t\u00a0\ufeff", "empty", "only white space"),
        ("playerId", "header_row", "'playerId' is a column header"),
        (" PLAYER_ID ", "header_row", "column header"),
        ("p-1\x07x", "control_character", "U+0007 (BELL) at position 4"),
        ("p\x1b", "control_character", "U+001B (ESCAPE) at position 2"),
        ("a\nb", "control_character", "U+000A (LINE FEED) at position 2"),
        ("x\x85", "control_character", "U+0085"),
        ("x\ud800", "invalid_text", "unpaired surrogate"),
        (
            "p" * (spec.PLAYER_ID_MAX_LENGTH + 1),
            "too_long",
            f"is {spec.PLAYER_ID_MAX_LENGTH + 1} characters; the limit is "
            f"{spec.PLAYER_ID_MAX_LENGTH}",
        ),
    ],
)
def test_each_reason(raw: str | None, code: str, message: str) -> None:
    result = check_player_id(raw)
    assert isinstance(result, Rejection)
    assert result.code == code
    assert code in tuple(ReasonCode)
    assert message in result.message


def test_trimming_and_accepted_ids() -> None:
    assert check_player_id("  p-1\t\r\n") == "p-1"
    assert check_player_id("\u00a0jöhn 7\u3000") == "jöhn 7"
    assert check_player_id("p" * spec.PLAYER_ID_MAX_LENGTH) == "p" * spec.PLAYER_ID_MAX_LENGTH
    assert check_player_id("игрок-5") == "игрок-5"
    # Vertical tab and file separator are white space to str.strip(), but control
    # characters here: rejected, not silently trimmed.
    assert isinstance(check_player_id("p-1\x0b"), Rejection)
    assert isinstance(check_player_id("\x1cp-1"), Rejection)


def test_max_length_and_own_header_are_options() -> None:
    assert isinstance(check_player_id("abcdef", max_length=5), Rejection)
    assert check_player_id("abcde", max_length=5) == "abcde"
    assert check_player_id("Mitglied") == "Mitglied"
    rejected = check_player_id("mitglied", header="Mitglied")
    assert isinstance(rejected, Rejection)
    assert rejected.code == "header_row"


@given(st.one_of(st.none(), st.text()))
def test_any_text_is_either_a_clean_id_or_a_known_rejection(raw: str | None) -> None:
    result = check_player_id(raw, max_length=20)
    if isinstance(result, Rejection):
        assert result.code in tuple(ReasonCode)
        assert result.message
    else:
        assert raw is not None
        assert result
        assert len(result) <= 20
        assert result in raw
        assert result == result.strip(" \t\r\n\u00a0")
        assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in result)
