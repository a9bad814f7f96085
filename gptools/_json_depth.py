"""How deep a JSON document nests, read from its raw text before anything parses it.

Python's :mod:`json` (and pydantic after it) recurses once per level, so a few kilobytes of
``[[[[...`` raise :class:`RecursionError` instead of a parse error. The receiver and the
client check a body with :func:`exceeds_json_depth` first and refuse it with their own
typed error. The scan is linear and needs no parse: strings are cut out, then the brackets
left are counted.
"""

from __future__ import annotations

import re
from itertools import accumulate

from gptools import spec

#: A complete JSON string, escapes included (unrolled: linear, no backtracking).
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
#: Openings as the signed byte +1, closings as -1 (0xFF), for a running sum in C.
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")


def exceeds_json_depth(data: bytes | str, limit: int = spec.JSON_MAX_DEPTH) -> bool:
    """Whether the JSON text ``data`` nests arrays and objects more than ``limit`` deep
    (``{"a": [1]}`` is 2 deep). Text that is not JSON is measured as far as it goes: a
    bracket inside an unterminated string counts, which errs towards refusing."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False  # too few openings to get that deep: the usual case, no scan
    # Without an escaped quote every '"' opens or closes a string: split, keep the outside.
    outside = b"".join(raw.split(b'"')[::2]) if b'\\"' not in raw else _STRING.sub(b"", raw)
    steps = outside.translate(_STEPS, _NOT_BRACKETS)
    return max(accumulate(memoryview(steps).cast("b")), default=0) > limit
