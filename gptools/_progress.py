"""Progress where a person watches it: a bar on a terminal or in a notebook, and otherwise
(a cron job, a CI log, a pipe) a plain line now and then, never the ``\\r`` redraws of a bar.

:func:`progress` is the one helper every long task uses; ``show`` forces the choice
(``True`` a bar, ``False`` nothing), ``None`` decides by where the output goes.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import IO, Any, Protocol

#: Seconds between two plain progress lines (where no bar is shown).
PLAIN_LINE_EVERY_S = 10.0


class Progress(Protocol):
    """What a task reports progress to: a tqdm bar or a :class:`PlainProgress`."""

    def update(self, n: float | None = 1) -> bool | None:
        """Count ``n`` more units done."""

    def close(self) -> None:
        """The task ended (a plain reporter prints its last line)."""

    def __enter__(self) -> Any: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Any: ...


def in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel (where tqdm draws a widget)."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    shell = ipython.get_ipython()
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def watched(stream: IO[str]) -> bool:
    """Whether a person watches ``stream``: a terminal, or a notebook's output."""
    if in_notebook():
        return True
    isatty = getattr(stream, "isatty", None)
    return bool(isatty is not None and isatty())


class PlainProgress:
    """Progress as a plain line every ``every`` seconds and one at the end, e.g.
    ``loading into CMP-1: 12,000/600,000 rows (2 %)``."""

    def __init__(
        self,
        *,
        desc: str,
        unit: str,
        total: float | None = None,
        initial: float = 0,
        stream: IO[str] | None = None,
        every: float = PLAIN_LINE_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.desc, self.unit, self.total, self.n = desc, unit, total, initial
        self.stream = stream if stream is not None else sys.stderr
        self.every, self.clock = every, clock
        self._last = clock()
        self._closed = False

    def line(self) -> str:
        """The progress so far as one line."""
        done = f"{self.n:,.0f}"
        if self.total:
            return (
                f"{self.desc}: {done}/{self.total:,.0f} {self.unit} "
                f"({100 * self.n / self.total:.0f} %)"
            )
        return f"{self.desc}: {done} {self.unit}"

    def _print(self) -> None:
        print(self.line(), file=self.stream, flush=True)

    def update(self, n: float | None = 1) -> bool | None:
        """Count ``n`` more; print a line when ``every`` seconds passed since the last."""
        self.n += n or 0
        now = self.clock()
        if now - self._last >= self.every:
            self._last = now
            self._print()
        return None

    def close(self) -> None:
        """Print the final line (once)."""
        if not self._closed:
            self._closed = True
            self._print()

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def progress(
    *,
    desc: str,
    unit: str,
    total: float | None = None,
    initial: float = 0,
    show: bool | None = None,
    leave: bool = True,
    stream: IO[str] | None = None,
) -> Progress:
    """A progress reporter: a tqdm bar (a widget in a notebook) where a person watches
    ``stream`` (stderr by default) or when ``show`` is true, nothing when ``show`` is
    false, else a :class:`PlainProgress`."""
    from tqdm.auto import tqdm

    out = stream if stream is not None else sys.stderr
    if show is False:
        bar: Progress = tqdm(disable=True)
        return bar
    if show or watched(out):
        bar = tqdm(total=total, initial=initial, desc=desc, unit=unit, leave=leave, file=out)
        return bar
    return PlainProgress(desc=desc, unit=unit, total=total, initial=initial, stream=out)
