"""``exceeds_json_depth``: the one depth rule of the client and the receiver, read from
raw text before any parser can recurse."""

from __future__ import annotations

import json

import pytest

from gptools import spec
from gptools._json_depth import exceeds_json_depth


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("1", 0),
        ('{"a": [1]}', 2),
        ('[{"b": {"c": []}}]', 4),
        ('["[[[[", "{{{{"]', 1),  # brackets inside strings do not count
        (r'["\"[[[[", "\\", [2]]', 2),  # nor behind escaped quotes
        ("[" * 40 + "]" * 40, 40),
    ],
)
def test_depth_is_measured_outside_strings(text: str, depth: int) -> None:
    if depth:
        assert exceeds_json_depth(text, depth - 1) is True
    assert exceeds_json_depth(text, depth) is False
    assert exceeds_json_depth(text.encode(), depth) is False


def test_the_limit_is_the_specs_and_refuses_what_json_cannot_parse() -> None:
    assert spec.JSON_MAX_DEPTH == 32
    nested = "[" * 100_000 + "]" * 100_000
    with pytest.raises(RecursionError):
        json.loads(nested)
    assert exceeds_json_depth(nested)
    assert not exceeds_json_depth("[" * 32 + "]" * 32)
    assert exceeds_json_depth("[" * 33 + "]" * 33)
