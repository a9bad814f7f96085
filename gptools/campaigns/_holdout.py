"""Holdout groups: a seeded, reproducible split of a plan's player list into the players
the campaign is given to (treatment) and those held back to compare with (holdout).

The method: a player is held out when the first 8 bytes of
``SHA-256("gptools-holdout-v1\\0{seed}\\0{player_id}")``, read as an unsigned big-endian
integer and divided by 2**64, are below the holdout share. Each player's group depends
only on the seed, the share and the player's own id: the same plan and players give the
same split on any machine, adding or removing players moves no one else, and the share
held out is the share asked for up to chance (a binomial draw, never exactly). The seed is
the plan's ``holdout_seed``, else one derived from its name (:func:`default_seed`), and the
register keeps it with both groups.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, Final

#: The method's name, kept with every split in the register.
METHOD: Final = "sha256-threshold-v1"
#: The largest holdout share a plan may ask for. An even split gives the tightest interval
#: for a given number of players; holding out more than half would make the campaign the
#: smaller group of its own test.
MAX_SHARE: Final = Decimal("0.5")
#: The fewest players either group needs before an uplift is reported (below it the
#: normal-theory interval of a difference of means is not to be trusted for spend, which
#: is skewed); a plan whose groups would be smaller gets a warning.
MIN_GROUP: Final = 30

_PERCENT = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*%\s*$")
_PREFIX: Final = b"gptools-holdout-v1\x00"


def parse_share(value: Any) -> Decimal | None:
    """A holdout share as a fraction: ``"10%"`` (a percentage) or a number below 1
    (``0.1``); ``None`` stays ``None``. Range is the plan validation's business (0 <
    share <= :data:`MAX_SHARE`); a text that is neither, or a number of 1 or more (is
    ``10`` ten per cent or ten times the list?), raises :class:`ValueError` saying what
    to write."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"holdout must be a share like '10%' or 0.10, got {value!r}")
    if isinstance(value, str):
        match = _PERCENT.match(value)
        if match is not None:
            return Decimal(match.group(1)) / 100
        try:
            number = Decimal(value.strip())
        except InvalidOperation:
            raise ValueError(f"holdout must be a share like '10%' or 0.10, got {value!r}") from None
    elif isinstance(value, float):
        number = Decimal(str(value))
    elif isinstance(value, int | Decimal):
        number = Decimal(value)
    else:
        raise ValueError(f"holdout must be a share like '10%' or 0.10, got {value!r}")
    if not number.is_finite() or number >= 1:
        raise ValueError(
            f"holdout {value!r} is ambiguous or out of range: write a percentage ('10%') "
            "or a fraction below 1 (0.10)"
        )
    return number


def default_seed(plan_name: str) -> int:
    """The seed of a plan that names none: the first 8 bytes of the SHA-256 of its name
    (so renaming a plan redraws its split; adding players does not)."""
    return int.from_bytes(hashlib.sha256(plan_name.encode()).digest()[:8], "big")


def held_out(player_id: str, share: Decimal, seed: int) -> bool:
    """Whether ``player_id`` falls in the holdout group of a split with ``share`` and
    ``seed`` (the method of this module's docstring)."""
    digest = hashlib.sha256(_PREFIX + f"{seed}\x00{player_id}".encode()).digest()
    return Decimal(int.from_bytes(digest[:8], "big")) < share * (1 << 64)


def group_digest(player_ids: Iterable[str]) -> str:
    """The SHA-256 of a group's ids, sorted, one per line: what the register keeps to tell
    a group was not changed."""
    return hashlib.sha256("\n".join(sorted(player_ids)).encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class HoldoutSplit:
    """One player list split: ``treatment`` (the players the campaign is given to, in the
    list's order) and ``holdout`` (held back), with the ``share`` asked for, the ``seed``
    and the :data:`METHOD`."""

    share: Decimal
    seed: int
    treatment: tuple[str, ...] = field(repr=False)
    holdout: tuple[str, ...] = field(repr=False)
    method: str = METHOD

    @property
    def realised_share(self) -> float:
        """The share of the players actually held out."""
        total = len(self.treatment) + len(self.holdout)
        return len(self.holdout) / total if total else 0.0

    def digests(self) -> dict[str, str]:
        """Each group's :func:`group_digest`."""
        return {"treatment": group_digest(self.treatment), "holdout": group_digest(self.holdout)}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: share (a string), seed, method, group sizes and digests."""
        return {
            "share": str(self.share),
            "seed": self.seed,
            "method": self.method,
            "treatment": len(self.treatment),
            "holdout": len(self.holdout),
            "digests": self.digests(),
        }


def split_players(player_ids: Iterable[str], share: Decimal, seed: int) -> HoldoutSplit:
    """Split ``player_ids`` (repeats kept once, in order) into treatment and holdout."""
    ids = list(dict.fromkeys(player_ids))
    holdout = tuple(p for p in ids if held_out(p, share, seed))
    out = set(holdout)
    return HoldoutSplit(share, seed, tuple(p for p in ids if p not in out), holdout)
