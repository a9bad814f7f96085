"""The receiver's fast body check never accepts what the model refuses.

``fast_action_id`` may only vouch for bodies :class:`GameEventNotification` accepts, and
must give the same canonical ``actionId``; everything else it hands to the model. These
tests mutate a valid body field by field (and at random) and hold it to that.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from gptools._json_depth import exceeds_json_depth
from gptools.models import GameEventNotification
from gptools.webhooks._payload import fast_action_id
from tests._support.hostile_bodies import HOSTILE_BODIES, VALID


def _model_id(body: bytes) -> str | None:
    try:
        return str(GameEventNotification.model_validate_json(body).action_id)
    except ValidationError:
        return None


def _agrees(body: bytes) -> str | None:
    """Check the fast check against the model on ``body``; return what the fast one said."""
    fast = fast_action_id(body)
    if fast is not None:
        assert _model_id(body) == fast, body
    return fast


def test_the_usual_body_takes_the_fast_path() -> None:
    assert _agrees(json.dumps(VALID).encode()) == VALID["actionId"]
    assert _agrees(json.dumps({**VALID, "bet": 7}).encode()) == VALID["actionId"]
    assert _agrees(json.dumps({**VALID, "events": []}).encode()) == VALID["actionId"]


REPLACEMENTS: list[tuple[str, Any]] = [
    (field, value)
    for field in VALID
    for value in ("", " ", 0, 1.5, True, None, [], {}, ["COIN"], "x", "2026-03-02T10:15:30")
] + [
    ("timestamp", "2026-03-02T10:15:30.123456Z"),
    ("timestamp", "2026-03-02T10:15:30.123456+00:00"),
    ("timestamp", "2026-13-02T10:15:30.123456"),
    ("timestamp", "2026-02-30T10:15:30.123456"),
    ("timestamp", "2026-03-02T24:15:30.123456"),
    ("timestamp", "2026-03-02 10:15:30.123456"),
    ("timestamp", "2026-03-02T10:15:30.1234567"),
    ("timestamp", "٢٠٢٦-03-02T10:15:30.123456"),
    ("bet", 1e400),
    ("bet", -1e400),
    ("bet", 10**40),
    ("bet", "2.10"),
    ("bet", False),
    ("events", ["COIN", 1]),
    ("events", "COIN"),
    ("actionId", VALID["actionId"].upper()),
    ("actionId", "{" + VALID["actionId"] + "}"),
    ("actionId", VALID["actionId"].replace("-", "")),
    ("actionId", "urn:uuid:" + VALID["actionId"]),
    ("actionId", VALID["actionId"][:-1] + "g"),
    ("actionId", VALID["actionId"] + "0"),
]


@pytest.mark.parametrize(("field", "value"), REPLACEMENTS)
def test_a_changed_field_never_gets_past_the_model(field: str, value: Any) -> None:
    _agrees(json.dumps({**VALID, field: value}).encode())


#: The hostile bodies that reach the fast check: deeper ones are refused before it.
_SHALLOW = {case: body for case, body in HOSTILE_BODIES.items() if not exceeds_json_depth(body)}


@pytest.mark.parametrize("body", _SHALLOW.values(), ids=_SHALLOW.keys())
def test_odd_bodies_agree(body: bytes) -> None:
    _agrees(body)


def test_refusals_always_go_to_the_model() -> None:
    # Whatever the fast check cannot vouch for is the model's to accept or refuse.
    assert fast_action_id(json.dumps({**VALID, "bet": 1e400}).encode()) is None
    assert fast_action_id(json.dumps({**VALID, "extra": 1}).encode()) is None
    assert fast_action_id(b"\xff") is None


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(field=st.sampled_from(sorted(VALID)), value=_json_values)
def test_random_field_values_agree(field: str, value: Any) -> None:
    _agrees(json.dumps({**VALID, field: value}).encode())


@settings(max_examples=300, deadline=None, derandomize=True)
@given(position=st.integers(min_value=0, max_value=250), byte=st.integers(0, 255))
def test_random_byte_flips_agree(position: int, byte: int) -> None:
    body = bytearray(json.dumps(VALID).encode())
    body[position % len(body)] = byte
    _agrees(bytes(body))
