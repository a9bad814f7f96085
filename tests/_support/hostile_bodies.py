"""Request bodies a stranger may send the receiver, in one place for every test that needs
them (the fast check against the model, the export and the analyser of what they left in
the log): malformed JSON, JSON no two readers read alike (``NaN``, repeated keys, lone
surrogates), text that is not UTF-8, nesting past every parser's patience, numbers no
amount of memory writes out, and notifications one field away from valid.

Every body that names an ``actionId`` names :data:`ACTION_ID`; a test that needs them
apart gives each its own with :func:`with_action_id`.
"""

from __future__ import annotations

import json
from typing import Any

#: The actionId every body below names (when it names one).
ACTION_ID = "0a1b2c3d-0001-4000-8000-00000000000a"

#: A valid notification (``bet`` a float here: how a careless sender writes it).
VALID: dict[str, Any] = {
    "roundId": "R-1",
    "gameId": "golden-pharaoh",
    "playerId": "player-00001",
    "timestamp": "2026-03-02T10:15:30.123456",
    "bet": 2.10,
    "currencyCode": "EUR",
    "events": ["COIN"],
    "actionId": ACTION_ID,
}

_VALID = json.dumps(VALID).encode()
#: Deeper than any JSON parser of Python recurses (about 1,000 levels).
_DEEP = 2_000


def _bet(text: str) -> bytes:
    return _VALID.replace(b"2.1", text.encode())


def _round_id(raw: bytes) -> bytes:
    """The valid body with ``roundId``'s JSON string replaced by ``raw``, as it stands."""
    return _VALID.replace(b'"R-1"', raw)


#: Case id -> body, as sent.
HOSTILE_BODIES: dict[str, bytes] = {
    # -- not JSON, or not one object -----------------------------------------------------
    "empty": b"",
    "whitespace": b"  \n",
    "null": b"null",
    "array": b"[]",
    "string": b'"hello"',
    "truncated": b'{"roundId": "R-1",',
    "trailing-garbage": _VALID + b"x",
    "form": b"a=1",
    # -- JSON that readers do not read alike ------------------------------------------------
    "bet-nan": _bet("NaN"),
    "bet-infinity": _bet("Infinity"),
    "bet-minus-infinity": _bet("-Infinity"),
    "nan-alone": b'{"bet": NaN}',
    "repeated-key-first": b'{"roundId":"",' + _VALID[1:],
    "repeated-key-last": _VALID[:-1] + b',"roundId":""}',
    "lone-surrogate-escaped": _round_id(b'"\\ud800"'),
    "lone-low-surrogate-escaped": _round_id(b'"\\udc00"'),
    "surrogate-pair-escaped": _round_id(b'"\\ud83d\\ude00"'),
    "nul-escaped": _round_id(b'"R\\u00001"'),
    "escaped-dash": _round_id(b'"R\\u002d1"'),
    # -- bytes that are not UTF-8 -------------------------------------------------------------
    "lone-surrogate-raw": _round_id(b'"\xed\xa0\x80"'),
    "latin-1": _VALID.replace(b"R-1", "R-\u00e9".encode("latin-1")),
    "invalid-utf8": b'{"roundId": "\xff\xfe"}',
    "overlong-utf8": _round_id(b'"\xc0\xaf"'),
    "utf-16": json.dumps(VALID).encode("utf-16"),
    "bom": b"\xef\xbb\xbf" + _VALID,
    "nul-raw": _round_id(b'"R\x001"'),
    "control-raw": _round_id(b'"R\x07\x1b1"'),
    # -- nesting and sizes -----------------------------------------------------------------------
    "deep-array": b"[" * _DEEP + b"]" * _DEEP,
    "deep-in-events": _VALID.replace(b'["COIN"]', b"[" * _DEEP + b"]" * _DEEP),
    "deep-object": b'{"a":' * _DEEP + b"1" + b"}" * _DEEP,
    "over-the-limit": b'{"x": "' + b"a" * 70_000 + b'"}',
    "huge-integer": _bet("1" + "0" * 5_000),
    "huge-exponent": _bet("1e400"),
    "giant-exponent": _bet("1e999999999"),
    "tiny-exponent": _bet("1e-999999999"),
    "giant-exponent-elsewhere": _VALID[:-1] + b',"x":1e999999999}',
    # -- one field away from valid -------------------------------------------------------------
    "bet-negative-zero": _bet("-0"),
    "bet-negative-zero-float": _bet("-0.0"),
    "bet-negative": _bet("-2.10"),
    "bet-too-many-decimals": _bet("2.123456789"),
    "bet-too-many-digits": _bet("1" + "0" * 18),
    "bet-string": _bet('"2.10"'),
    "missing-bet": json.dumps({k: v for k, v in VALID.items() if k != "bet"}).encode(),
    "snake-case-key": json.dumps(
        {("round_id" if k == "roundId" else k): v for k, v in VALID.items()}
    ).encode(),
    "extra-field": json.dumps({**VALID, "extra": 1}).encode(),
    "action-id-braces": _VALID.replace(ACTION_ID.encode(), b"{" + ACTION_ID.encode() + b"}"),
    "action-id-upper": _VALID.replace(ACTION_ID.encode(), ACTION_ID.upper().encode()),
    "action-id-number": _VALID.replace(f'"{ACTION_ID}"'.encode(), b"42"),
    "timestamp-offset": _VALID.replace(b'.123456"', b'.123456+00:00"'),
}


def with_action_id(body: bytes, action_id: str) -> bytes:
    """``body`` naming ``action_id`` wherever it names :data:`ACTION_ID` (either case)."""
    return body.replace(ACTION_ID.encode(), action_id.encode()).replace(
        ACTION_ID.upper().encode(), action_id.upper().encode()
    )
