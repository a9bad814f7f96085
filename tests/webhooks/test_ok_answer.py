"""The 200 that acknowledges a delivery: its headers are built for its body, whatever the
actionId's length (they were once looked up by the length a canonical UUID gives)."""

from __future__ import annotations

import json

import pytest

from gptools.webhooks._app import _ok_answer


@pytest.mark.parametrize("new", [True, False])
@pytest.mark.parametrize("action_id", ["7b0c5a6e-2f51-4d7e-9a43-0c1f2e3d4b5a", "a", "x" * 100])
def test_the_answer_declares_its_own_length(new: bool, action_id: str) -> None:
    body, headers = _ok_answer(new, action_id)
    assert json.loads(body) == {
        "status": "accepted" if new else "duplicate",
        "actionId": action_id,
    }
    assert headers == [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]


def test_each_answer_gets_a_list_of_its_own() -> None:
    # The request id is appended to it: a list shared between answers would grow.
    first, second = _ok_answer(True, "a")[1], _ok_answer(True, "b")[1]
    first.append((b"x-request-id", b"r1"))
    assert second == [(b"content-type", b"application/json"), (b"content-length", b"36")]
