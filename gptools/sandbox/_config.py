"""The sandbox's settings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from gptools import spec
from gptools.sandbox._accounts import DEMO_ACCOUNTS, SandboxAccount
from gptools.sandbox._dispatcher import WalletCredentials


@dataclass(frozen=True, kw_only=True, slots=True)
class SandboxConfig:
    """How a sandbox behaves. Every assumed value of :mod:`gptools.spec` it uses can be
    changed here, so tests can also run with scaled-down rate limits.

    ``seed`` seeds the fault-injection RNG. ``enforce_rate_limits=False`` turns every rate
    tier off (benchmarks, demos). ``rate_tiers``/``rate_window``/``rate_limit_status`` are
    the rate table, its sliding window and the refusal status. ``participant_max_ids``,
    ``batch_participant_max_ids`` and ``player_id_max_length`` bound participant requests.
    ``campaign_players_max_ids`` bounds the ``players`` of a campaign body.
    ``wallet_url`` is the integrator's wallet base URL: deliveries of a subscription without
    a callback URL (or of a brand without a subscription) go to
    ``{wallet_url}/v1/game-action-events`` with ``wallet_credentials``, the authentication
    "already configured for the account's wallet" (default: none).
    ``readd_participants_refused`` simulates a server that refuses to add a player who is
    already a participant (assumed 409 PARTICIPANT_EXISTS), the other reading of
    ``spec.PARTICIPANT_ADDITION_IDEMPOTENT``. ``legacy_campaign_types`` are the campaign
    types the legacy ``freeround/campaign`` path accepts. ``free_rounds_bet_is_base_bet``
    requires a free-round bet to be one of the game's base bets.
    ``allow_insecure_callbacks`` accepts ``http://`` callback URLs on loopback hosts (a
    sandbox-only deviation for offline demos; the document requires HTTPS).
    ``max_recorded_requests`` bounds the request log of a long-running server (the oldest
    half is forgotten when it is reached).
    """

    seed: int = 0
    enforce_rate_limits: bool = True
    rate_tiers: tuple[spec.RateTier, ...] = spec.RATE_TIERS
    rate_window: timedelta = spec.RATE_LIMIT_WINDOW
    rate_limit_status: int = spec.RATE_LIMIT_STATUS
    participant_max_ids: int = spec.PARTICIPANT_MAX_IDS
    batch_participant_max_ids: int = spec.BATCH_PARTICIPANT_MAX_IDS
    player_id_max_length: int = spec.PLAYER_ID_MAX_LENGTH
    campaign_players_max_ids: int = spec.CAMPAIGN_PLAYERS_MAX_IDS
    wallet_url: str | None = None
    wallet_credentials: WalletCredentials = field(default_factory=WalletCredentials)
    readd_participants_refused: bool = False
    legacy_campaign_types: tuple[str, ...] = spec.LEGACY_CAMPAIGN_TYPES
    free_rounds_bet_is_base_bet: bool = spec.FREE_ROUNDS_BET_IS_BASE_BET
    allow_insecure_callbacks: bool = False
    max_recorded_requests: int = 100_000
    accounts: Mapping[str, SandboxAccount] = field(default_factory=lambda: DEMO_ACCOUNTS)

    def __post_init__(self) -> None:
        if self.rate_window <= timedelta(0):
            raise ValueError(f"rate_window must be positive, got {self.rate_window}")
        for name in (
            "participant_max_ids",
            "batch_participant_max_ids",
            "player_id_max_length",
            "campaign_players_max_ids",
            "max_recorded_requests",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
