"""The timing of the events ``gptools sandbox deliver`` sends: all in the past, seeded."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gptools.sandbox import EventGenerator, events_before

NOW = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize("seed", range(12))
def test_every_event_has_happened_by_now(seed: int) -> None:
    start, events = events_before(NOW, 40, seed=seed)
    assert len(events) == 40
    stamps = [e.timestamp for e in events]
    assert stamps == sorted(stamps)
    assert start < stamps[0] and stamps[-1] <= NOW
    # Spread over roughly the last 40 seconds, not hours back.
    assert NOW - start < timedelta(seconds=40 * 4)


def test_a_series_that_overshoots_is_moved_back_whole() -> None:
    """When the random gaps add up to more than ``count`` gaps, the series keeps its gaps
    and ends exactly at ``now``; otherwise it starts ``count`` gaps before ``now``."""
    moved = kept = 0
    for seed in range(40):
        start, events = events_before(NOW, 10, seed=seed)
        gap = timedelta(seconds=1)
        plain = EventGenerator(seed=seed, start=NOW - 10 * gap, mean_gap=gap)
        plain_stamps = [e.timestamp for e in plain.take(10)]
        if plain_stamps[-1] > NOW:
            moved += 1
            assert events[-1].timestamp == NOW
            shift = plain_stamps[-1] - NOW
            assert [e.timestamp for e in events] == [t - shift for t in plain_stamps]
        else:
            kept += 1
            assert start == NOW - timedelta(seconds=10)
            assert [e.timestamp for e in events] == plain_stamps
    assert moved and kept  # both cases were seen


def test_the_same_seed_gives_the_same_events() -> None:
    assert events_before(NOW, 5, seed=3) == events_before(NOW, 5, seed=3)
    assert events_before(NOW, 5, seed=3)[1] != events_before(NOW, 5, seed=4)[1]


def test_a_naive_now_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        events_before(NOW.replace(tzinfo=None), 3)
