"""The sandbox's ASGI application: the provider's API paths and the inspection paths.

``GET /openapi.json`` answers the API as gptools reads it (:mod:`gptools.openapi`).
API requests go through a small hand-written dispatcher (it is on the hot path of every
rate-limit test and benchmark); the inspection paths under ``/_sandbox/`` and the ASGI
lifespan are a Starlette application. Each API request passes, in this order:

1. rate limiting (every tier of the table; keyed by the authenticated user, or by the
   anonymous user when authentication fails) -> 429 TOO_MANY_REQUESTS + Retry-After;
2. HTTP Basic authentication -> 401 NOT_AUTHORIZED;
3. routing -> 404 NOT_FOUND / 405 METHOD_NOT_ALLOWED (sandbox codes, not documented);
4. brand resolution (Authentication rules 3-5) -> 400 BRAND_REQUIRED / 403 BRAND_NOT_ALLOWED;
5. fault injection (latency, status, dropped connection, commit then fail);
6. the handler. Any unexpected exception becomes 500 UNKNOWN_ERROR.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import formatdate
from typing import Any
from urllib.parse import parse_qsl

from starlette.routing import BaseRoute
from starlette.types import Message, Receive, Scope, Send

from gptools import spec
from gptools.errors import GptoolsError
from gptools.models import dumps_wire
from gptools.openapi import OPENAPI_PATH, provider_openapi, to_json
from gptools.sandbox._accounts import BRANDS, Authenticator, SandboxAccount
from gptools.sandbox._brand_offers import BRAND_OFFERS, BrandOffer
from gptools.sandbox._catalogue import CATALOGUE, GAMES, feature_costs
from gptools.sandbox._config import SandboxConfig
from gptools.sandbox._faults import Faults
from gptools.sandbox._inspect import build_inspection_app
from gptools.sandbox._ratelimit import RateLimiter
from gptools.sandbox._refusal import Refusal, error_body
from gptools.sandbox._state import RecordedRequest, SandboxState, masked
from gptools.sandbox._validation import (
    CAMPAIGN_TYPES,
    parse_json_object,
    validate_campaign,
    validate_player_ids,
    validate_subscription,
)

logger = logging.getLogger("gptools.sandbox")

_JSON_HEADERS = ((b"content-type", b"application/json"),)
_PARTICIPANT = re.compile(r"^/(?:freeround/)?campaign/([^/]+)/participant(/batch)?$")


class _DropConnection(GptoolsError):
    """A fault rule asks to close the connection without an answer."""


@dataclass(slots=True)
class _Call:
    """What a handler needs to know about the request it serves."""

    record: RecordedRequest
    account: SandboxAccount
    brand_id: int
    campaign_id: str | None = None
    batch: bool = False


_Answer = tuple[int, bytes]
_Handler = Callable[["SandboxApp", _Call], _Answer]


def _json(status: int, payload: Any) -> _Answer:
    return status, dumps_wire(payload)


class SandboxApp:
    """The simulated provider as an ASGI application (see the module docstring).

    ``state`` is what it remembers, ``faults`` the fault rules, ``config`` its settings.
    ``routes`` are extra Starlette routes served under the inspection prefix.
    """

    def __init__(
        self, config: SandboxConfig | None = None, *, routes: Sequence[BaseRoute] = ()
    ) -> None:
        self.config = config or SandboxConfig()
        self.state = SandboxState(wallet_url=self.config.wallet_url)
        self.faults = Faults(self.config.seed)
        self._authenticate = Authenticator(self.config.accounts)
        self._limiter = (
            RateLimiter(self.config.rate_tiers, self.config.rate_window.total_seconds())
            if self.config.enforce_rate_limits
            else None
        )
        self._inspection = build_inspection_app(self, routes)
        self._games = {g.game_id: dumps_wire(g.to_json()) for g in CATALOGUE}
        self._all_games = dumps_wire({spec.FIELD_CONTENT: [g.to_json() for g in CATALOGUE]})
        self._selves = {
            a.username: dumps_wire(
                {
                    "allowedBrands": [{"id": b, "name": BRANDS[b]} for b in a.brand_ids],
                    "principalType": a.principal_type,
                }
            )
            for a in self.config.accounts.values()
        }
        self._configurations: dict[tuple[int, str | None, str | None], bytes] = {}
        self._brand_games: dict[tuple[int, str | None], bytes] = {}
        self._openapi: bytes | None = None

    def reset(self) -> None:
        """Forget requests, campaigns, participants, subscriptions, faults and rate windows."""
        with self.state.lock:
            self.state.clear()
            self.faults.clear()
            if self._limiter is not None:
                self._limiter.clear()

    # ----------------------------------------------------------------------------------
    # ASGI entry
    # ----------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one ASGI connection scope."""
        if scope["type"] != "http" or scope["path"].startswith("/_sandbox"):
            await self._inspection(
                scope, receive, send if scope["type"] != "http" else _dated(send)
            )
            return
        method: str = scope["method"]
        path: str = scope["path"]
        if path == OPENAPI_PATH and method == "GET":
            await self._describe(send)
            return
        body = await _read_body(receive)
        header = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                header = value
                break
        account = self._authenticate(header)
        raw_query: bytes = scope["query_string"]
        record = RecordedRequest(
            method,
            path,
            dict(parse_qsl(raw_query.decode("latin-1"), keep_blank_values=True))
            if raw_query
            else {},
            account.username if account else None,
            None,
            0,
            datetime.now(UTC),
            body,
            time.monotonic(),
        )
        headers: tuple[tuple[bytes, bytes], ...] = ()
        try:
            status, payload = await self._serve(record, account)
        except Refusal as refusal:
            status, payload, headers = (
                refusal.status,
                error_body(refusal.code, refusal.message, path),
                refusal.headers,
            )
        except _DropConnection:
            self._remember(record)
            await _drop(receive)
            return
        except Exception:
            logger.exception("sandbox handler failed on %s %s", method, path)
            status = 500
            payload = error_body(spec.CODE_UNKNOWN_ERROR, "unexpected failure in the sandbox", path)
        record.status = status
        self._remember(record)
        own_date = any(name == b"date" for name, _ in headers)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    *_JSON_HEADERS,
                    (b"content-length", str(len(payload)).encode()),
                    *(() if own_date else ((b"date", http_date()),)),
                    *headers,
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload})

    async def _describe(self, send: Send) -> None:
        """The API as gptools reads it (OpenAPI 3.1; no auth, no rate limit)."""
        if self._openapi is None:
            self._openapi = to_json(provider_openapi())
        headers = [
            *_JSON_HEADERS,
            (b"content-length", str(len(self._openapi)).encode()),
            (b"date", http_date()),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": self._openapi})

    def _remember(self, record: RecordedRequest) -> None:
        requests = self.state.requests
        with self.state.lock:
            requests.append(record)
            if len(requests) > self.config.max_recorded_requests:
                del requests[: len(requests) // 2]

    async def _serve(self, record: RecordedRequest, account: SandboxAccount | None) -> _Answer:
        method, path = record.method, record.path
        endpoint_class = spec.endpoint_class(method, path)
        if self._limiter is not None:
            with self.state.lock:
                refused = self._limiter.admit(
                    method,
                    spec.endpoint_of(method, path),
                    endpoint_class,
                    account.username if account else "",
                    record.monotonic,
                )
            if refused is not None:
                retry_after, tier = refused
                raise Refusal(
                    self.config.rate_limit_status,
                    spec.RATE_LIMIT_CODE,
                    f"rate limit exceeded: tier {tier.name} allows {tier.per_second} requests "
                    f"per {self.config.rate_window.total_seconds():g} s; "
                    f"retry after {retry_after} s",
                    ((b"retry-after", str(retry_after).encode()),),
                )
        if account is None:
            raise Refusal(
                401,
                spec.CODE_NOT_AUTHORIZED,
                "authentication failed: missing or wrong HTTP Basic credentials",
            )
        brand_segment, endpoint_path, handler, call_extra = _route(method, path)
        call = _Call(
            record, account, self._brand(account, brand_segment, endpoint_path), *call_extra
        )
        record.brand_id = call.brand_id if call.brand_id >= 0 else None

        rule = self.faults.pick(method, path, endpoint_path, endpoint_class)
        if rule is not None:
            if rule.latency_s:
                await asyncio.sleep(rule.latency_s)
            if rule.drop:
                raise _DropConnection
            if rule.status is not None:
                raise Refusal(
                    rule.status,
                    rule.error_code,
                    f"injected fault: {rule.endpoint} answers {rule.status}",
                    self._fault_headers(rule.status, rule.headers),
                )
        with self.state.lock:
            answer = handler(self, call)
        if rule is not None and rule.commit_then_fail:
            raise Refusal(
                504,
                rule.error_code,
                "the server did not respond within the expected time "
                "(injected after the change was applied)",
            )
        return answer

    def _fault_headers(
        self, status: int, given: tuple[tuple[str, str], ...]
    ) -> tuple[tuple[bytes, bytes], ...]:
        """The headers of an injected answer: the rule's, and for the rate-limit status a
        ``Retry-After: 1`` unless the rule gives its own (so it looks like a real one)."""
        headers = tuple((k.lower().encode(), v.encode("latin-1")) for k, v in given)
        if status == self.config.rate_limit_status and all(k != b"retry-after" for k, _ in headers):
            headers = ((b"retry-after", b"1"), *headers)
        return headers

    def _brand(self, account: SandboxAccount, segment: str | None, endpoint_path: str) -> int:
        """The brand a request acts on (Authentication rules 3-5); -1 for ``/self``."""
        if endpoint_path == "/self":
            return -1
        if segment is None:
            if (
                account.principal_type in spec.IMPLICIT_ALLOWED_PRINCIPALS
                and len(account.brand_ids) == 1
            ):
                return account.brand_ids[0]
            raise Refusal(
                400,
                spec.CODE_BRAND_REQUIRED,
                f"a {account.principal_type} account must name the brand: use "
                f"{spec.BRAND_PREFIX_TEMPLATE}{endpoint_path} with one of "
                f"{list(account.brand_ids)} (see GET {spec.SELF_PATH})",
            )
        brand_id = int(segment) if segment.isascii() and segment.isdigit() else None
        if brand_id is None or not spec.is_brand_id(brand_id):
            # Not an int32 integer: names no brand at all (spec.BRAND_ID_NOT_INT32, assumed).
            status, code = spec.BRAND_ID_NOT_INT32
            raise Refusal(
                status,
                code,
                f"brand {segment!r} is not an integer brand id "
                f"(int32); allowed brands: {list(account.brand_ids)}",
            )
        if brand_id not in account.brand_ids:
            raise Refusal(
                403,
                spec.CODE_BRAND_NOT_ALLOWED,
                f"brand {segment!r} is not covered by this account; allowed brands: "
                f"{list(account.brand_ids)}",
            )
        return brand_id

    # ----------------------------------------------------------------------------------
    # Handlers (run under the state lock, on the server's loop)
    # ----------------------------------------------------------------------------------

    def _self(self, call: _Call) -> _Answer:
        return 200, self._selves[call.account.username]

    def _game(self, call: _Call) -> _Answer:
        game_id = call.record.query.get(spec.QUERY_GAME_ID)
        offer = BRAND_OFFERS.get(call.brand_id)
        if offer is not None:
            return 200, self._offered_game(offer, game_id)
        if game_id is None:
            return 200, self._all_games
        body = self._games.get(game_id)
        if body is None:
            raise _game_not_found(game_id)
        return 200, body

    def _offered_game(self, offer: BrandOffer, game_id: str | None) -> bytes:
        """``GET game`` on a brand with an offer of its own: its games, its currencies."""
        if game_id is not None and not offer.offers(game_id):
            raise _game_not_found(game_id, offer)
        key = (offer.brand_id, game_id)
        body = self._brand_games.get(key)
        if body is None:
            games = [
                {**g.to_json(), "betSizes": {c: list(b) for c, b in g.bet_sizes.items()
                                             if offer.uses(c)}}
                for g in CATALOGUE
                if offer.offers(g.game_id) and (game_id is None or g.game_id == game_id)
            ]  # fmt: skip
            body = dumps_wire(games[0] if game_id is not None else {spec.FIELD_CONTENT: games})
            self._brand_games[key] = body
        return body

    def _configurations_of(self, call: _Call) -> _Answer:
        query = call.record.query
        game_id = query.get(spec.QUERY_GAME_ID)
        currency = query.get(spec.QUERY_CURRENCY_CODE)
        offer = BRAND_OFFERS.get(call.brand_id)
        if game_id is not None and (
            game_id not in GAMES or (offer is not None and not offer.offers(game_id))
        ):
            raise _game_not_found(game_id, offer)
        key = (call.brand_id if offer is not None else -1, game_id, currency)
        body = self._configurations.get(key)
        if body is None:
            content = [
                {"gameId": g, "bet": bet, "currencyCode": c}
                for g, bet, c in feature_costs(game_id, currency)
                if offer is None or (offer.offers(g) and offer.uses(c))
            ]
            body = self._configurations[key] = dumps_wire({spec.FIELD_CONTENT: content})
        return 200, body

    def _create_legacy_campaign(self, call: _Call) -> _Answer:
        # The legacy path is named for free rounds (spec.LEGACY_CAMPAIGN_TYPES, assumed).
        return self._create_campaign(call, types=self.config.legacy_campaign_types)

    def _create_campaign(self, call: _Call, types: tuple[str, ...] | None = None) -> _Answer:
        data = parse_json_object(call.record.body, "campaign")
        config = self.config
        validate_campaign(
            data,
            config.player_id_max_length,
            config.campaign_players_max_ids,
            types=types if types is not None else CAMPAIGN_TYPES,
            free_rounds_bet_is_base_bet=config.free_rounds_bet_is_base_bet,
        )
        offer = BRAND_OFFERS.get(call.brand_id)
        if offer is not None:
            _check_offered(offer, data)
        request_id: str | None = data.get("requestId")
        if request_id is not None:
            earlier = self.state.campaign_for_request_id(call.brand_id, request_id)
            if earlier is not None:
                if earlier.body != data:
                    raise Refusal(
                        spec.IDEMPOTENCY_CONFLICT_STATUS,
                        spec.IDEMPOTENCY_CONFLICT_CODE,
                        f"requestId {request_id!r} was already used for campaign "
                        f"{earlier.campaign_id} with a different body; use a new requestId "
                        f"for a different campaign",
                    )
                return _json(
                    spec.CAMPAIGN_REPLAY_STATUS,
                    {spec.FIELD_CAMPAIGN_ID: earlier.campaign_id, "requestId": request_id},
                )
        campaign = self.state.add_campaign(call.brand_id, request_id, data, call.record.at)
        players = data.get(spec.CAMPAIGN_PLAYERS_FIELD)
        if players:
            self.state.add_participants(campaign.campaign_id, players)
        answer: dict[str, Any] = {spec.FIELD_CAMPAIGN_ID: campaign.campaign_id}
        if request_id is not None:
            answer["requestId"] = request_id
        return _json(spec.CAMPAIGN_CREATED_STATUS, answer)

    def _add_participants(self, call: _Call) -> _Answer:
        campaign_id = call.campaign_id or ""
        campaign = self.state.campaigns.get(campaign_id)
        if campaign is None or campaign.brand_id != call.brand_id:
            raise Refusal(
                403,
                spec.CODE_INVALID_REQUEST,
                f"campaign id {campaign_id!r} is invalid or does not exist",
            )
        data = parse_json_object(call.record.body, "participant")
        config = self.config
        ids = validate_player_ids(
            data,
            config.batch_participant_max_ids if call.batch else config.participant_max_ids,
            config.player_id_max_length,
            call.batch,
        )
        if config.readd_participants_refused:
            # The other reading of spec.PARTICIPANT_ADDITION_IDEMPOTENT: a re-add is an error.
            known = self.state.participants(campaign_id)
            again = [p for p in dict.fromkeys(ids) if p in known]
            if again:
                shown = ", ".join(repr(p) for p in again[:10])
                more = f" and {len(again) - 10} more" if len(again) > 10 else ""
                raise Refusal(
                    spec.PARTICIPANT_EXISTS_STATUS,
                    spec.PARTICIPANT_EXISTS_CODE,
                    f"already participants of {campaign_id}: {shown}{more}; nothing was added",
                )
        new = self.state.add_participants(campaign_id, ids)
        return _json(
            200, {spec.FIELD_CAMPAIGN_ID: campaign_id, "added": len(ids), "newParticipants": new}
        )

    def _subscription_answer(self, status: int, brand_id: int) -> _Answer:
        stored = self.state.subscriptions[brand_id]
        answer = masked(stored)
        answer["brandId"] = brand_id
        wallet = self.state.wallet_url
        answer["deliveryUrl"] = stored.get("callbackUrl") or (
            wallet.rstrip("/") + spec.DEFAULT_WEBHOOK_PATH if wallet else None
        )
        return _json(status, answer)

    def _get_subscription(self, call: _Call) -> _Answer:
        if call.brand_id not in self.state.subscriptions:
            raise _no_subscription(call.brand_id)
        return self._subscription_answer(200, call.brand_id)

    def _create_subscription(self, call: _Call) -> _Answer:
        if call.brand_id in self.state.subscriptions:
            raise Refusal(
                spec.SUBSCRIPTION_EXISTS_STATUS,
                spec.SUBSCRIPTION_EXISTS_CODE,
                f"brand {call.brand_id} already has a webhook subscription; update it with PUT",
            )
        data = parse_json_object(call.record.body, "webhook subscription")
        self.state.subscriptions[call.brand_id] = validate_subscription(
            data, self.config.allow_insecure_callbacks
        )
        return self._subscription_answer(201, call.brand_id)

    def _update_subscription(self, call: _Call) -> _Answer:
        if call.brand_id not in self.state.subscriptions:
            raise _no_subscription(call.brand_id)
        data = parse_json_object(call.record.body, "webhook subscription")
        self.state.subscriptions[call.brand_id] = validate_subscription(
            data, self.config.allow_insecure_callbacks
        )
        return self._subscription_answer(200, call.brand_id)


def _game_not_found(game_id: str, offer: BrandOffer | None = None) -> Refusal:
    if offer is not None:
        return Refusal(
            spec.GAME_NOT_FOUND_STATUS,
            spec.GAME_NOT_FOUND_CODE,
            f"no game with gameId {game_id!r} on brand {offer.brand_id}; it offers: "
            f"{', '.join(offer.game_ids)}",
        )
    return Refusal(
        spec.GAME_NOT_FOUND_STATUS,
        spec.GAME_NOT_FOUND_CODE,
        f"no game with gameId {game_id!r}; known: {', '.join(GAMES)}",
    )


def _check_offered(offer: BrandOffer, data: dict[str, Any]) -> None:
    """Refuse a campaign (the validation error) naming a game or currency the brand does
    not offer (a body already checked against the catalogue)."""
    problems = [
        f"gameIds[{i}] {gid!r} is not offered on brand {offer.brand_id}"
        for i, gid in enumerate(data.get("gameIds") or ())
        if not offer.offers(gid)
    ]
    currency = data.get("currencyCode")
    if isinstance(currency, str) and not offer.uses(currency):
        problems.append(
            f"currencyCode {currency!r} is not used on brand {offer.brand_id}; "
            f"it uses {', '.join(offer.currencies)}"
        )
    if problems:
        raise Refusal(spec.VALIDATION_ERROR_STATUS, spec.VALIDATION_ERROR_CODE, "; ".join(problems))


def _no_subscription(brand_id: int) -> Refusal:
    return Refusal(
        spec.NOT_FOUND_STATUS,
        spec.NOT_FOUND_CODE,
        f"brand {brand_id} has no webhook subscription; create one with POST",
    )


_ROUTES: dict[str, dict[str, _Handler]] = {
    "/self": {"GET": SandboxApp._self},
    "/" + spec.ENDPOINT_GAME: {"GET": SandboxApp._game},
    "/" + spec.ENDPOINT_AWARDED_FEATURE_CONFIGURATIONS: {"GET": SandboxApp._configurations_of},
    "/" + spec.ENDPOINT_CAMPAIGN: {"POST": SandboxApp._create_campaign},
    "/" + spec.ENDPOINT_LEGACY_CAMPAIGN: {"POST": SandboxApp._create_legacy_campaign},
    "/" + spec.ENDPOINT_WEBHOOK_SUBSCRIPTION: {
        "GET": SandboxApp._get_subscription,
        "POST": SandboxApp._create_subscription,
        "PUT": SandboxApp._update_subscription,
    },
}
_PARTICIPANT_METHODS: dict[str, _Handler] = {"POST": SandboxApp._add_participants}


def _route(method: str, path: str) -> tuple[str | None, str, _Handler, tuple[str | None, bool]]:
    """Split a path into (brand segment, endpoint path, handler, (campaign id, batch))."""
    if not path.startswith(spec.API_PREFIX + "/"):
        raise _not_found(path)
    rest = path[len(spec.API_PREFIX) :]
    segment = None
    if rest.startswith("/brands/"):
        segment, _, tail = rest[len("/brands/") :].partition("/")
        rest = "/" + tail
    if len(rest) > 1 and rest.endswith("/"):
        rest = rest[:-1]
    extra: tuple[str | None, bool] = (None, False)
    methods = _ROUTES.get(rest)
    if methods is None or (segment is not None and rest == "/self"):
        match = _PARTICIPANT.match(rest)
        if match is None:
            raise _not_found(path)
        methods, extra = _PARTICIPANT_METHODS, (match.group(1), match.group(2) is not None)
    handler = methods.get(method)
    if handler is None:
        raise Refusal(
            spec.METHOD_NOT_ALLOWED_STATUS,
            spec.METHOD_NOT_ALLOWED_CODE,
            f"{method} is not allowed on {path}; allowed: {', '.join(methods)}",
        )
    return segment, rest, handler, extra


def _not_found(path: str) -> Refusal:
    return Refusal(spec.NOT_FOUND_STATUS, spec.NOT_FOUND_CODE, f"no API endpoint at {path}")


_date_cache: tuple[int, bytes] = (0, b"")


def http_date() -> bytes:
    """The ``Date`` header value of this second (the server adds none itself, so a fault
    rule can replace it; see :func:`~gptools.sandbox._server.uvicorn_config`)."""
    global _date_cache
    now = int(time.time())
    if _date_cache[0] != now:
        _date_cache = (now, formatdate(now, usegmt=True).encode())
    return _date_cache[1]


def _dated(send: Send) -> Send:
    """``send`` with a ``Date`` header added to the response start."""

    async def dated(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), (b"date", http_date())]}
        await send(message)

    return dated


async def _read_body(receive: Receive) -> bytes:
    message = await receive()
    body: bytes = message.get("body", b"")
    if not message.get("more_body", False):
        return body
    chunks = [body]
    while message.get("more_body", False):
        message = await receive()
        chunks.append(message.get("body", b""))
    return b"".join(chunks)


async def _drop(receive: Receive) -> None:
    """Close the connection without an HTTP answer.

    Raising from the app would make uvicorn answer 500, so the transport is closed
    directly: uvicorn's ``receive`` is a method of the request cycle, which holds it.
    Then wait until uvicorn has seen the disconnect, or it would answer a 500 for us.
    """
    transport = getattr(getattr(receive, "__self__", None), "transport", None)
    if transport is None:
        # Not under uvicorn (e.g. httpx.ASGITransport): an exception is the nearest thing.
        raise ConnectionAbortedError("sandbox fault: connection dropped without an answer")
    transport.close()
    async with asyncio.timeout(5):
        while (await receive())["type"] != "http.disconnect":
            pass


def create_app(
    config: SandboxConfig | None = None, *, routes: Sequence[BaseRoute] = ()
) -> SandboxApp:
    """Build the sandbox's ASGI application (serve it with any ASGI server)."""
    return SandboxApp(config, routes=routes)
