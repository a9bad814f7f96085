"""The sandbox: a simulation of the provider's public API for tests, notebooks and demos.

It behaves as the API document says (HTTP Basic auth, both brand path forms and the legacy
campaign path, the documented errors and limits, all rate tiers) and fills each gap with
the assumption recorded in :mod:`gptools.spec`. It never imports :mod:`gptools.client`, so
tests that run the client against it check two independent readings of the document.

>>> from gptools.sandbox import run_sandbox, SandboxConfig
>>> with run_sandbox(SandboxConfig(seed=0)) as sb:          # doctest: +SKIP
...     httpx.get(sb.base_url + "/api/v1/self",
...               auth=(sb.accounts["partner"].username, sb.accounts["partner"].password))

Demo accounts are listed in :mod:`gptools.sandbox._accounts` (and ``GET /_sandbox/accounts``);
the catalogue is :data:`CATALOGUE`; the provider's webhook side (deliveries with
retries on a simulated clock) is :class:`WebhookDispatcher`; how a campaign's participants
play it is :func:`play_campaign` (a seeded :class:`PlayerModel`); inspection paths are described in
:mod:`gptools.sandbox._inspect`.
"""

from gptools.sandbox._accounts import (
    DEMO_ACCOUNTS,
    SandboxAccount,
)
from gptools.sandbox._catalogue import (
    CATALOGUE,
    CURRENCIES,
    CatalogueBuyFeature,
    CatalogueGame,
)
from gptools.sandbox._config import SandboxConfig
from gptools.sandbox._dispatcher import (
    DeliveryTarget,
    ScaledClock,
    SimClock,
    VirtualClock,
    WalletCredentials,
    WebhookDispatcher,
    attach_dispatcher,
)
from gptools.sandbox._events import CampaignPlay, EventGenerator, events_before
from gptools.sandbox._faults import FaultRule
from gptools.sandbox._paid_play import PaidPlayed, PaidPlayModel, play_paid, write_paid_ledger
from gptools.sandbox._persist import (
    STATE_FILE,
    SandboxStateError,
    default_state_dir,
    reset_state,
)
from gptools.sandbox._players import (
    CampaignNotPlayableError,
    CampaignPlayed,
    PlayerModel,
    play_campaign,
    write_truth,
)
from gptools.sandbox._remote import RemoteSandbox
from gptools.sandbox._server import RunningSandbox, run_sandbox, serve_forever
from gptools.sandbox._state import (
    RecordedRequest,
)
from gptools.sandbox._wallet import CampaignWallet, WalletModel, wallet_side, write_ledger

__all__ = [
    "CATALOGUE",
    "CURRENCIES",
    "DEMO_ACCOUNTS",
    "STATE_FILE",
    "CampaignNotPlayableError",
    "CampaignPlay",
    "CampaignPlayed",
    "CampaignWallet",
    "CatalogueBuyFeature",
    "CatalogueGame",
    "DeliveryTarget",
    "EventGenerator",
    "FaultRule",
    "PaidPlayModel",
    "PaidPlayed",
    "PlayerModel",
    "RecordedRequest",
    "RemoteSandbox",
    "RunningSandbox",
    "SandboxAccount",
    "SandboxConfig",
    "SandboxStateError",
    "ScaledClock",
    "SimClock",
    "VirtualClock",
    "WalletCredentials",
    "WalletModel",
    "WebhookDispatcher",
    "attach_dispatcher",
    "default_state_dir",
    "events_before",
    "play_campaign",
    "play_paid",
    "reset_state",
    "run_sandbox",
    "serve_forever",
    "wallet_side",
    "write_ledger",
    "write_paid_ledger",
    "write_truth",
]
