"""A replay run in a process of its own, for the kill test: ``python -m
tests.webhooks.replay_worker STORE_URL RECORD KILL_AT``. Its handler appends each
action id to RECORD (synced) and, on its KILL_AT-th call (0: never), kills its own
process with SIGKILL before doing anything: a crash in the middle of a replay."""

from __future__ import annotations

import os
import signal
import sys
from datetime import timedelta
from pathlib import Path

from gptools.models import GameEventNotification
from gptools.webhooks import open_store
from gptools.webhooks._find import FindFilter
from gptools.webhooks._replay import replay


def main(url: str, record: str, kill_at: int) -> None:
    path = Path(record)
    calls = 0

    def handler(event: GameEventNotification) -> None:
        nonlocal calls
        calls += 1
        if calls == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        with path.open("a") as out:
            out.write(f"{event.action_id}\n")
            out.flush()
            os.fsync(out.fileno())

    result = replay(
        open_store(url, create=False),
        FindFilter(),
        replay_id="kill-test",
        handler=handler,
        batch=7,
        show_progress=False,
        queue_options={
            "lease": timedelta(seconds=1),
            "handler_timeout": timedelta(seconds=0.5),
            "idle_wait": timedelta(seconds=0.05),
        },
    )
    print(result.queued, result.queued_total, result.done)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
