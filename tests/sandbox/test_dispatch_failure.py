"""Why a sandbox delivery failed as a whole comes from the library
(``DispatchReport.failure`` and ``refusal_hint``), which ``gptools sandbox deliver`` and
``play`` print with exit 1 (issue 36 item 7)."""

from __future__ import annotations

from gptools.sandbox._dispatcher import DispatchReport

URL = "http://127.0.0.1:9/v1/game-action-events"


def _report(statuses: dict[str, int], delivered: int = 0) -> DispatchReport:
    outcomes = {f"a{i}": "delivered" for i in range(delivered)}
    outcomes |= {f"r{i}": "refused" for i in range(2)}
    return DispatchReport(outcomes=outcomes, attempts=sum(statuses.values()), statuses=statuses)  # type: ignore[arg-type]


def test_no_answer_at_all() -> None:
    report = _report({"no answer": 3})
    assert report.failure(URL, 2, "connection refused") == (
        f"no answer from {URL} on any of 3 attempts (first: connection refused); "
        "is the receiver running there?"
    )


def test_nothing_acknowledged_names_what_to_check() -> None:
    report = _report({"401": 2, "503": 1})
    assert report.failure(URL, 2, "x") == (
        f"the receiver at {URL} acknowledged none of 2 events (answers 401×2, 503×1); "
        "wrong key or credentials? --auth and GP_WEBHOOK_* must match the receiver's; "
        "the receiver is failing; see its log"
    )
    assert _report({"404": 1}).refusal_hint() == (
        "wrong path? --url must end with the receiver's --path"
    )
    assert _report({"413": 1}).refusal_hint() == (
        "the receiver's --max-body-bytes is below an event's size"
    )
    assert _report({"422": 1}).refusal_hint() == (
        "the receiver refuses the events' content; is it a gptools receiver?"
    )
    assert _report({"302": 1}).refusal_hint() == "see the receiver's log"


def test_a_delivery_with_one_acknowledgement_did_not_fail() -> None:
    assert _report({"200": 1, "503": 4}, delivered=1).failure(URL, 3, "x") is None
    assert _report({}).failure(URL, 0, "x") is None
