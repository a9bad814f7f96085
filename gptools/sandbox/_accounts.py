"""The sandbox's fixed demo accounts and brands.

Demo credentials (HTTP Basic; these are public demo values, never real secrets):

=============  ======================  ======================  ==============  ====================
key            username                password                principal type  brands
=============  ======================  ======================  ==============  ====================
individual     demo-individual         individual-demo-pass    INDIVIDUAL      101
partner        demo-partner            partner-demo-pass       PARTNER         201, 202, 203
third_party    demo-third-party        third-party-demo-pass   THIRD_PARTY     202, 301
internal       demo-internal           internal-demo-pass      INTERNAL        101, 201-203, 301
aggregator     demo-aggregator         aggregator-demo-pass    PARTNER         2001-2030 (30)
supplier       demo-supplier           supplier-demo-pass      THIRD_PARTY     2029, 2030, 3001-3004
=============  ======================  ======================  ==============  ====================

The aggregator's and the supplier's brands each offer their own games and currencies
(:mod:`gptools.sandbox._brand_offers`); the other brands offer the whole catalogue.

Brands 901, 902 and 903 exist but no account covers them: naming one in the explicit path
is answered 403 BRAND_NOT_ALLOWED for every account.

INTERNAL (sandbox decision, the document does not say): it uses the explicit form only, like
PARTNER (the implicit form answers 400 BRAND_REQUIRED), and may act on every brand that some
integrator account covers (101, 201-203, 301), not on the uncovered ones; the aggregator's
and the supplier's brands, added for multi-brand campaigns, are left out so that the
original accounts stay as they were.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from gptools import spec
from gptools.sandbox._brand_offers import AGGREGATOR_BRAND_IDS, BRAND_OFFERS, SUPPLIER_BRAND_IDS


@dataclass(frozen=True, slots=True)
class SandboxAccount:
    """A demo account of the sandbox: credentials, principal type and covered brands.

    ``password`` is a plain string on purpose: these are published demo credentials.
    """

    key: str
    username: str
    password: str
    principal_type: str
    brand_ids: tuple[int, ...]

    def __repr__(self) -> str:
        # Demo passwords are public, but a habit of never printing passwords is cheaper
        # than deciding case by case which ones are harmless.
        return (
            f"SandboxAccount(key={self.key!r}, username={self.username!r}, "
            f"principal_type={self.principal_type!r}, brand_ids={self.brand_ids!r})"
        )

    @property
    def authorization(self) -> str:
        """The ``Authorization`` header value for this account."""
        raw = f"{self.username}:{self.password}".encode()
        return "Basic " + base64.b64encode(raw).decode("ascii")


#: Every brand of the sandbox: id -> name.
BRANDS: Mapping[int, str] = MappingProxyType(
    {
        101: "Lucky Lagoon",
        201: "Northern Star Casino",
        202: "Northern Star Sports",
        203: "Polar Spins",
        301: "Aurora Bingo",
        901: "Uncovered Alpha",
        902: "Uncovered Beta",
        903: "Uncovered Gamma",
        **{b: offer.name for b, offer in BRAND_OFFERS.items()},
    }
)

#: Brands that exist but that no account may act on.
UNCOVERED_BRAND_IDS: tuple[int, ...] = (901, 902, 903)

_INTEGRATOR_BRANDS = (101, 201, 202, 203, 301)

#: The fixed demo accounts, by key: ``individual``, ``partner``, ``third_party``, ``internal``,
#: ``aggregator`` (PARTNER, 30 brands) and ``supplier`` (THIRD_PARTY, 6 brands).
DEMO_ACCOUNTS: Mapping[str, SandboxAccount] = MappingProxyType(
    {
        "individual": SandboxAccount(
            "individual",
            "demo-individual",
            "individual-demo-pass",
            spec.PRINCIPAL_INDIVIDUAL,
            (101,),
        ),
        "partner": SandboxAccount(
            "partner", "demo-partner", "partner-demo-pass", spec.PRINCIPAL_PARTNER, (201, 202, 203)
        ),
        "third_party": SandboxAccount(
            "third_party",
            "demo-third-party",
            "third-party-demo-pass",
            spec.PRINCIPAL_THIRD_PARTY,
            (202, 301),
        ),
        "internal": SandboxAccount(
            "internal",
            "demo-internal",
            "internal-demo-pass",
            spec.PRINCIPAL_INTERNAL,
            _INTEGRATOR_BRANDS,
        ),
        "aggregator": SandboxAccount(
            "aggregator",
            "demo-aggregator",
            "aggregator-demo-pass",
            spec.PRINCIPAL_PARTNER,
            AGGREGATOR_BRAND_IDS,
        ),
        "supplier": SandboxAccount(
            "supplier",
            "demo-supplier",
            "supplier-demo-pass",
            spec.PRINCIPAL_THIRD_PARTY,
            (*AGGREGATOR_BRAND_IDS[-2:], *SUPPLIER_BRAND_IDS),
        ),
    }
)


class Authenticator:
    """Maps an ``Authorization`` header to an account (or ``None``), with a cache.

    The cache holds only the exact header values of known accounts, so a flood of wrong
    credentials cannot grow it.
    """

    def __init__(self, accounts: Mapping[str, SandboxAccount]) -> None:
        self._by_header = {a.authorization.encode("ascii"): a for a in accounts.values()}
        self._by_name = {a.username: a for a in accounts.values()}

    def __call__(self, header: bytes | None) -> SandboxAccount | None:
        """The account the header authenticates, or ``None`` (missing or wrong)."""
        if header is None:
            return None
        hit = self._by_header.get(header)
        if hit is not None:
            return hit
        scheme, _, token = header.partition(b" ")
        if scheme.lower() != b"basic":
            return None
        try:
            raw = base64.b64decode(token.strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
        username, sep, password = raw.partition(":")
        account = self._by_name.get(username)
        if (
            not sep
            or account is None
            or not hmac.compare_digest(account.password.encode(), password.encode())
        ):
            return None
        return account
