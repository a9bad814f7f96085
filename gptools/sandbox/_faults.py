"""Seeded fault injection: error statuses at a rate, latency, dropped connections and
"commit then fail", per endpoint, optionally for the next N matching requests only."""

from __future__ import annotations

import fnmatch
import random
import re
import threading
from dataclasses import dataclass
from decimal import Decimal

from gptools import spec

_CLASSES = frozenset(
    {
        spec.ENDPOINT_CLASS_PARTICIPANT,
        spec.ENDPOINT_CLASS_CAMPAIGN_CREATE,
        spec.ENDPOINT_CLASS_OTHER,
    }
)
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an HTTP header name
_CRLF = re.compile(r"[\r\n]")
_CODE_BY_STATUS = {
    500: spec.CODE_UNKNOWN_ERROR,
    504: spec.CODE_TIMEOUT,
    spec.RATE_LIMIT_STATUS: spec.RATE_LIMIT_CODE,
}


@dataclass(frozen=True, slots=True)
class FaultRule:
    """One fault: which requests it hits and what happens to them.

    ``endpoint`` is a rate-table endpoint class (``"POST /campaign"``,
    ``"POST /campaign/*/participant"``, ``"other"``; every path form and the legacy path
    included), ``"*"`` for every API request, or ``"METHOD /glob"`` matched against the
    full path and against the path after its ``/api/v1[/brands/{id}]`` prefix (so
    ``"GET /game"`` and ``"GET /api/v1/brands/201/game"`` both work; ``*`` as the method
    matches any).

    A matching request is hit with probability ``rate`` (drawn from the sandbox's seeded
    RNG); ``count`` limits the rule to that many hits (``None``: unlimited). A hit waits
    ``latency_s`` (without blocking other requests), then: ``drop`` closes the connection
    without an answer; ``commit_then_fail`` performs the request and answers 504 TIMEOUT
    instead of its result; ``status`` answers that status with the error body (``code``
    defaults to the documented one: 500 UNKNOWN_ERROR, 504 TIMEOUT, else UNKNOWN_ERROR).
    A rule with only a latency delays the request and then serves it normally.

    ``headers`` are ``(name, value)`` pairs added to a ``status`` answer, replacing the
    sandbox's own of the same name: a ``Retry-After`` of any value (the rate-limit status
    otherwise gets ``Retry-After: 1``), or a ``Date`` that puts the server's clock
    elsewhere. As JSON, an object ``{"Retry-After": "120"}``.
    """

    endpoint: str
    status: int | None = None
    rate: float = 1.0
    count: int | None = None
    latency_s: float = 0.0
    drop: bool = False
    commit_then_fail: bool = False
    code: str | None = None
    headers: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"FaultRule rate must be within 0..1, got {self.rate}")
        if self.count is not None and self.count < 1:
            raise ValueError(f"FaultRule count must be at least 1 or None, got {self.count}")
        if self.latency_s < 0:
            raise ValueError(f"FaultRule latency_s must not be negative, got {self.latency_s}")
        if self.status is not None and not 400 <= self.status <= 599:
            raise ValueError(
                f"FaultRule status must be an error status 400..599, got {self.status}"
            )
        if (self.status is not None) + self.drop + self.commit_then_fail > 1:
            raise ValueError("FaultRule takes one of status, drop and commit_then_fail")
        if self.headers and self.status is None:
            raise ValueError("FaultRule headers go with a status answer; give status")
        for name, value in self.headers:
            if not _TOKEN.fullmatch(name) or not isinstance(value, str) or _CRLF.search(value):
                raise ValueError(
                    f"FaultRule header {name!r}: {value!r} is not a valid "
                    "header name and one-line value"
                )
        if self.status is None and not (self.drop or self.commit_then_fail or self.latency_s):
            raise ValueError(
                "FaultRule does nothing: give status, drop, commit_then_fail or latency_s"
            )
        if self.endpoint not in _CLASSES and self.endpoint != "*":
            method, _, glob = self.endpoint.partition(" ")
            if not method or not glob.startswith("/"):
                raise ValueError(
                    f"FaultRule endpoint {self.endpoint!r} is neither an endpoint class "
                    f"({', '.join(sorted(_CLASSES))}), '*', nor 'METHOD /path-glob'"
                )

    @classmethod
    def from_json(cls, data: object) -> FaultRule:
        """A rule from its JSON object (the fields of this class), types checked."""
        kinds: dict[str, tuple[type, ...]] = {
            "endpoint": (str,),
            "status": (int, type(None)),
            "rate": (int, Decimal, float),
            "count": (int, type(None)),
            "latency_s": (int, Decimal, float),
            "drop": (bool,),
            "commit_then_fail": (bool,),
            "code": (str, type(None)),
            "headers": (dict,),
        }
        if not isinstance(data, dict) or "endpoint" not in data:
            raise ValueError(
                f"a fault rule is a JSON object with an endpoint and some of {sorted(kinds)}"
            )
        for key, value in data.items():
            if key not in kinds:
                raise ValueError(f"unknown fault rule field {key!r}; known: {sorted(kinds)}")
            bad_bool = isinstance(value, bool) and bool not in kinds[key]
            if bad_bool or not isinstance(value, kinds[key]):
                raise ValueError(f"fault rule field {key} has the wrong type: {value!r}")
        return cls(
            endpoint=data["endpoint"],
            status=data.get("status"),
            rate=float(data.get("rate", 1.0)),
            count=data.get("count"),
            latency_s=float(data.get("latency_s", 0.0)),
            drop=data.get("drop", False),
            commit_then_fail=data.get("commit_then_fail", False),
            code=data.get("code"),
            headers=tuple((str(k), v) for k, v in data.get("headers", {}).items()),
        )

    @property
    def error_code(self) -> str:
        """The code of the error body this rule answers with."""
        if self.code is not None:
            return self.code
        if self.commit_then_fail:
            return spec.CODE_TIMEOUT
        return _CODE_BY_STATUS.get(self.status or 500, spec.CODE_UNKNOWN_ERROR)

    def matches(self, method: str, path: str, endpoint_path: str, endpoint_class: str) -> bool:
        """Whether a request falls under this rule (before the rate is drawn)."""
        if self.endpoint == "*" or self.endpoint == endpoint_class:
            return True
        if self.endpoint in _CLASSES:
            return False
        rule_method, _, glob = self.endpoint.partition(" ")
        if rule_method != "*" and rule_method.upper() != method:
            return False
        return fnmatch.fnmatchcase(endpoint_path, glob) or fnmatch.fnmatchcase(path, glob)


class Faults:
    """The fault rules of one sandbox, with their remaining counts and the seeded RNG.

    Safe to change from a test thread while the server runs.
    """

    def __init__(self, seed: int) -> None:
        self._seed = seed
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._rules: list[FaultRule] = []
        self._left: list[int | None] = []

    def add(self, rule: FaultRule) -> None:
        """Add a rule; rules are tried in the order they were added, the first hit wins."""
        with self._lock:
            self._rules.append(rule)
            self._left.append(rule.count)

    def clear(self) -> None:
        """Remove every rule and re-seed the RNG, so a run after clear() repeats exactly."""
        with self._lock:
            self._rules.clear()
            self._left.clear()
            self._rng = random.Random(self._seed)

    @property
    def rules(self) -> list[FaultRule]:
        """The rules still able to fire (a counted rule disappears when used up)."""
        with self._lock:
            return [r for r, left in zip(self._rules, self._left, strict=True) if left != 0]

    def pick(
        self, method: str, path: str, endpoint_path: str, endpoint_class: str
    ) -> FaultRule | None:
        """The rule that hits this request, if any (its count is spent)."""
        if not self._rules:
            return None
        with self._lock:
            for i, rule in enumerate(self._rules):
                if self._left[i] == 0 or not rule.matches(
                    method, path, endpoint_path, endpoint_class
                ):
                    continue
                if rule.rate < 1.0 and self._rng.random() >= rule.rate:
                    continue
                left = self._left[i]
                if left is not None:
                    self._left[i] = left - 1
                return rule
        return None
