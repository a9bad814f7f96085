"""The API client: :class:`Client` (sync) and :class:`AsyncClient` over one shared base.

It picks the path form for the account's principal type, refuses a missing or foreign
brand before sending anything, acts on one brand through a view of itself
(``client.brand(ID)``, ``client.with_options(...)``: the same class, one pool, one rate
limiter, one set of counters), retries what is safe to retry (5xx, the rate-limit
response, connection errors and time-outs) with jittered exponential backoff, keeps every
request inside the published rate tiers, and raises the classes of :mod:`gptools.errors`.

::

    from gptools.client import Client
    with Client() as client:               # GP_BASE_URL / GP_USERNAME / GP_PASSWORD or .env
        print(client.self().allowed_brands)
        shop = client.brand(201)           # shares the pool, the limiter and the counters
"""

from gptools._backoff import backoff_delay
from gptools.client._async import AsyncClient
from gptools.client._base import (
    NOT_GIVEN,
    ClientStats,
    NotGiven,
)
from gptools.client._settings import (
    DEFAULT_TIMEOUT,
    ClientSettings,
    TimeoutTypes,
)
from gptools.client._sync import Client

__all__ = [
    "DEFAULT_TIMEOUT",
    "NOT_GIVEN",
    "AsyncClient",
    "Client",
    "ClientSettings",
    "ClientStats",
    "NotGiven",
    "TimeoutTypes",
    "backoff_delay",
]
