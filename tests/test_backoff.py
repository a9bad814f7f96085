"""The one backoff formula (``gptools._backoff``) and the three places that wait by it: the
client's retries, the loader's re-sends and the webhook processing queue."""

from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path

import pytest

import gptools.client
from gptools._backoff import BACKOFF_JITTER, backoff_delay
from gptools.participants import _loader
from gptools.webhooks import ProcessingQueue, open_store


def test_exact_without_rng_jittered_with_one() -> None:
    assert [backoff_delay(a, base=1.0, cap=10.0, factor=3.0) for a in range(5)] == [
        1.0,
        3.0,
        9.0,
        10.0,
        10.0,
    ]
    rng = random.Random(3)
    delays = [backoff_delay(a, rng, base=0.5, cap=15.0) for a in range(8)]
    for attempt, delay in enumerate(delays):
        exact = min(15.0, 0.5 * 2**attempt)
        assert exact * (1 - BACKOFF_JITTER) <= delay <= exact
    again = random.Random(3)
    assert delays == [backoff_delay(a, again, base=0.5, cap=15.0) for a in range(8)]
    assert len({round(d / min(15.0, 0.5 * 2**a), 9) for a, d in enumerate(delays)}) > 1
    with pytest.raises(ValueError, match="counts from 0"):
        backoff_delay(-1, base=1.0, cap=2.0)


def test_a_very_late_attempt_waits_the_cap() -> None:
    # 2.0 ** 5000 overflows a float: the cap, not an OverflowError.
    assert backoff_delay(5000, base=0.5, cap=8.0) == 8.0


def test_the_client_and_the_loader_use_the_one_formula() -> None:
    assert gptools.client.backoff_delay is backoff_delay
    assert _loader.backoff_delay is backoff_delay


def test_processing_queue_waits_by_the_formula(tmp_path: Path) -> None:
    q = ProcessingQueue(
        open_store(f"sqlite:///{tmp_path / 'q.db'}"),
        lambda ev: None,
        first_delay=timedelta(seconds=2),
        factor=3.0,
        max_delay=timedelta(minutes=1),
    )
    assert [q.delay_after(n) for n in range(1, 6)] == [
        timedelta(seconds=s) for s in (2, 6, 18, 54, 60)
    ]
    # An action retried for a long time (max_attempts is the caller's) waits the cap.
    assert q.delay_after(10_000) == timedelta(minutes=1)
