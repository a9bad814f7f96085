"""The receiver's Prometheus metric families: each declared where it is counted
(:class:`Family`, :func:`counter`, :func:`gauge`, :func:`histogram`) and made in
``prometheus_client`` once per process on first use, alone (:meth:`Family.made`) or with
the others of its group (:class:`Families`).

On first use, because ``prometheus_client`` fixes its storage (memory or multiprocess
files) when it is imported, which must come after the serve command has set the
directory; and because a family is in every scrape from when it is made (one without
labels at 0), so each is made where its value starts to mean something. Once, because
the registry refuses a second family of the same name.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Literal


@dataclass(frozen=True, slots=True)
class Family:
    """One metric family as declared: ``kind`` (``prometheus_client``'s class), name, help
    and label names; a gauge's ``multiprocess_mode``, a histogram's ``buckets``."""

    kind: Literal["Counter", "Gauge", "Histogram"]
    name: str
    documentation: str
    labels: tuple[str, ...] = ()
    multiprocess_mode: str | None = None
    buckets: tuple[float, ...] | None = None

    def made(self) -> Any:
        """The family in ``prometheus_client``, made by the first call in this process."""
        return _made(self)


@functools.cache
def _made(family: Family) -> Any:
    import prometheus_client

    options: dict[str, Any] = {}
    if family.multiprocess_mode is not None:
        options["multiprocess_mode"] = family.multiprocess_mode
    if family.buckets is not None:
        options["buckets"] = family.buckets
    kind = getattr(prometheus_client, family.kind)
    return kind(family.name, family.documentation, family.labels, **options)


def counter(name: str, documentation: str, *labels: str) -> Family:
    """A counter, by ``labels`` if any."""
    return Family("Counter", name, documentation, labels)


def gauge(name: str, documentation: str, *labels: str, mode: str) -> Family:
    """A gauge, by ``labels`` if any, whose worker processes' values merge by ``mode``
    (``multiprocess_mode``: ``livemin``, ``max``, ...)."""
    return Family("Gauge", name, documentation, labels, multiprocess_mode=mode)


def histogram(name: str, documentation: str, *, buckets: tuple[float, ...]) -> Family:
    """A histogram of ``buckets`` (upper bounds)."""
    return Family("Histogram", name, documentation, buckets=buckets)


class Families:
    """Families made together, when the group is first asked for (:meth:`made`): those
    whose values start to mean something at the same moment (a worker that serves, a
    spool loop that runs)."""

    def __init__(self, **families: Family) -> None:
        self.families = families

    def made(self) -> SimpleNamespace:
        """Each family of the group made, as the attribute of the name it was given."""
        return SimpleNamespace(**{attr: f.made() for attr, f in self.families.items()})
