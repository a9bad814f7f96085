"""What the sandbox remembers: requests, campaigns, participants, subscriptions."""

from __future__ import annotations

import re
import secrets
import threading
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from gptools.models import dumps_wire, loads_wire

_MASK = "****"
#: What a sandbox's identity starts with (then 16 random hex digits).
IDENTITY_PREFIX = "sandbox:"


#: A well-formed sandbox identity (what a client accepts from ``GET /_sandbox/identity``).
IDENTITY_RE = re.compile(r"sandbox:[0-9a-f]{16,64}")


def new_identity() -> str:
    """A fresh random sandbox identity: ``sandbox:`` and 16 hex digits."""
    return IDENTITY_PREFIX + secrets.token_hex(8)


_SECRET_FIELDS = ("apiKey", "password")


def masked(value: Any) -> Any:
    """``value`` (a subscription body, or any JSON value) with every secret field
    (``apiKey``, ``password``), at any depth, replaced by ``****``."""
    if isinstance(value, dict):
        return {k: (_MASK if k in _SECRET_FIELDS and v else masked(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [masked(v) for v in value]
    return value


def masked_body(body: bytes) -> str:
    """A recorded request body as inspection shows it: secrets masked by :func:`masked`.
    A body that is not JSON (or too deep to parse) is shown only when it names no secret
    field; otherwise it is replaced by ``****`` whole."""
    text = body.decode("utf-8", errors="replace")
    try:
        data = loads_wire(text)
    except (ValueError, RecursionError):
        return _MASK if any(name in text for name in _SECRET_FIELDS) else text
    shown = masked(data)
    return text if shown == data else dumps_wire(shown).decode()


@dataclass(slots=True)
class RecordedRequest:
    """One request the API paths received (inspection paths are not recorded).

    ``query`` holds the query parameters (last value wins), ``username`` the authenticated
    account (``None`` when authentication failed), ``brand_id`` the brand the request acted
    on (``None`` when none was resolved), ``status`` the answer's HTTP status (``0`` when the
    connection was dropped without an answer), ``at`` when it arrived (aware, UTC), and
    ``monotonic`` the same moment on the monotonic clock, the time the rate limiter counts
    the request at (so a check of the windows measures exactly what the limiter did).
    """

    method: str
    path: str
    query: dict[str, str]
    username: str | None
    brand_id: int | None
    status: int
    at: datetime
    body: bytes
    monotonic: float = 0.0


@dataclass(frozen=True, slots=True)
class StoredCampaign:
    """A campaign the sandbox created: its id, brand, idempotency key and the body sent."""

    campaign_id: str
    brand_id: int
    request_id: str | None
    body: dict[str, Any]
    created_at: datetime


@dataclass(slots=True)
class SandboxState:
    """The sandbox's memory. Read it freely from tests; it is mutated by the server.

    ``subscriptions`` maps a brand id to its stored webhook subscription body (camelCase
    wire fields, secrets in clear: a dispatcher needs them to authenticate deliveries).
    ``wallet_url`` is the configured wallet base URL (``None``: not configured).
    ``identity`` names this state: a random id made when the state is created, kept with the
    persisted state, and replaced by :meth:`clear` (a reset). A client's
    ``server_identity`` is this value, so a journal written against one state is never
    trusted against another, whatever port the sandbox listens on.
    """

    wallet_url: str | None = None
    identity: str = field(default_factory=new_identity)
    requests: list[RecordedRequest] = field(default_factory=list)
    campaigns: dict[str, StoredCampaign] = field(default_factory=dict)
    subscriptions: dict[int, dict[str, Any]] = field(default_factory=dict)
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False)
    _participants: dict[str, Counter[str]] = field(default_factory=dict, repr=False)
    _by_request_id: dict[tuple[int, str], str] = field(default_factory=dict, repr=False)
    _next_campaign: int = 1

    def participants(self, campaign_id: str) -> dict[str, int]:
        """Player id -> how many times it was added to the campaign (repeats are counted)."""
        with self.lock:
            return dict(self._participants.get(campaign_id, {}))

    def clear(self) -> None:
        """Forget everything; campaign ids start again at ``CMP-000001`` and the state
        gets a new :attr:`identity` (what was loaded into the old one is gone)."""
        with self.lock:
            self.identity = new_identity()
            self.requests.clear()
            self.campaigns.clear()
            self.subscriptions.clear()
            self._participants.clear()
            self._by_request_id.clear()
            self._next_campaign = 1

    # The methods below are the server's; they run on its event loop thread.

    def campaign_for_request_id(self, brand_id: int, request_id: str) -> StoredCampaign | None:
        """The campaign an earlier request with this ``requestId`` created for this brand."""
        campaign_id = self._by_request_id.get((brand_id, request_id))
        return None if campaign_id is None else self.campaigns.get(campaign_id)

    def add_campaign(
        self, brand_id: int, request_id: str | None, body: dict[str, Any], at: datetime
    ) -> StoredCampaign:
        """Store a new campaign under the next deterministic id."""
        campaign = StoredCampaign(f"CMP-{self._next_campaign:06d}", brand_id, request_id, body, at)
        self._next_campaign += 1
        self.campaigns[campaign.campaign_id] = campaign
        self._participants[campaign.campaign_id] = Counter()
        if request_id is not None:
            self._by_request_id[(brand_id, request_id)] = campaign.campaign_id
        return campaign

    def add_participants(self, campaign_id: str, player_ids: list[str]) -> int:
        """Count each id once more; return how many were new to the campaign."""
        counter = self._participants[campaign_id]
        new = len({p for p in player_ids if p not in counter})
        counter.update(player_ids)
        return new

    # Persistence: what a later process needs to carry on (see gptools.sandbox._persist).

    def snapshot(self) -> dict[str, Any]:
        """Campaigns, participants, subscriptions and the next campaign number as
        JSON-ready values (Decimals kept for :func:`gptools.models.dumps_wire`); the request
        log is left out: it is a record of this process's traffic, not provider data."""
        with self.lock:
            return {
                "identity": self.identity,
                "next_campaign": self._next_campaign,
                "campaigns": [
                    {
                        "campaignId": c.campaign_id,
                        "brandId": c.brand_id,
                        "requestId": c.request_id,
                        "createdAt": c.created_at.isoformat(),
                        "body": c.body,
                    }
                    for c in self.campaigns.values()
                ],
                "participants": {k: dict(v) for k, v in self._participants.items()},
                "subscriptions": {str(k): v for k, v in self.subscriptions.items()},
            }

    def restore(self, snapshot: dict[str, Any]) -> None:
        """Replace campaigns, participants and subscriptions with a :meth:`snapshot`'s."""
        with self.lock:
            self.clear()
            for c in snapshot.get("campaigns", []):
                campaign = StoredCampaign(
                    str(c["campaignId"]),
                    int(c["brandId"]),
                    c.get("requestId"),
                    dict(c["body"]),
                    datetime.fromisoformat(c["createdAt"]),
                )
                self.campaigns[campaign.campaign_id] = campaign
                if campaign.request_id is not None:
                    self._by_request_id[(campaign.brand_id, campaign.request_id)] = (
                        campaign.campaign_id
                    )
                self._participants[campaign.campaign_id] = Counter()
            for campaign_id, counts in snapshot.get("participants", {}).items():
                self._participants[campaign_id] = Counter(
                    {str(k): int(v) for k, v in counts.items()}
                )
            self.subscriptions.update(
                {int(k): dict(v) for k, v in snapshot.get("subscriptions", {}).items()}
            )
            self._next_campaign = int(snapshot.get("next_campaign", len(self.campaigns) + 1))
            # A state saved before identities existed keeps the new one clear() made.
            identity = snapshot.get("identity")
            if isinstance(identity, str) and IDENTITY_RE.fullmatch(identity):
                self.identity = identity
