"""HTTP inspection paths under ``/_sandbox/`` (no authentication, no rate limits).

================================================  ============================================
``GET /_sandbox/accounts``                        the demo accounts, with their passwords
``GET /_sandbox/identity``                        the state's identity (new after a reset)
``GET /_sandbox/requests``                        recorded API requests (``?limit=N``), masked
``GET /_sandbox/campaigns``                       stored campaigns
``GET /_sandbox/campaigns/{id}/participants``     player id -> times added
``GET /_sandbox/campaigns/{id}/play``             how its participants play it (the player
                                                  model, ``?seed=&accept=&finish=``): the
                                                  truth per player and the events
``GET /_sandbox/campaigns/{id}/wallet``          what the operator's wallet records of that
                                                  play (``?seed=&accept=&finish=&wallet_seed=``):
                                                  the ledger's rows, the events delivered, the
                                                  truth the reconciliation must find
``POST /_sandbox/campaigns/{id}/paid-play``      its participants' and a holdout group's paid
                                                  play (``{"holdout": [...], "seed",
                                                  "effect", "activeShare", "roundsMean"}``):
                                                  the true effect, each player's truth, the
                                                  events and the wallet rows
``GET /_sandbox/subscriptions``                   webhook subscriptions per brand, secrets masked
``GET|POST|DELETE /_sandbox/faults``              list, add (a FaultRule as JSON), clear
``POST /_sandbox/reset``                          forget everything (as ``RunningSandbox.reset``)
================================================  ============================================
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any, Protocol

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from gptools import spec
from gptools.models import dumps_wire, loads_wire
from gptools.sandbox._config import SandboxConfig
from gptools.sandbox._faults import FaultRule, Faults
from gptools.sandbox._paid_play import MAX_PLAYERS, PaidPlayModel, play_paid
from gptools.sandbox._players import (
    DEFAULT_ACCEPT_SHARE,
    DEFAULT_FINISH_SHARE,
    CampaignNotPlayableError,
    PlayerModel,
    play_campaign,
)
from gptools.sandbox._refusal import error_body
from gptools.sandbox._state import SandboxState, masked, masked_body
from gptools.sandbox._wallet import WalletModel, wallet_side


class InspectedSandbox(Protocol):
    """What the inspection paths read and change of the sandbox's app (``_app.SandboxApp``
    has it): a protocol, so that this module needs nothing of ``_app``, which imports it."""

    state: SandboxState
    config: SandboxConfig
    faults: Faults

    def reset(self) -> None:
        """Forget requests, campaigns, participants, subscriptions, faults and rate windows."""
        ...


PREFIX = "/_sandbox"


def _answer(payload: Any, status: int = 200) -> Response:
    return Response(dumps_wire(payload), status, media_type="application/json")


def _refuse(request: Request, message: str) -> Response:
    return Response(
        error_body(spec.VALIDATION_ERROR_CODE, message, request.url.path),
        400,
        media_type="application/json",
    )


def _no_campaign(request: Request, campaign_id: str) -> Response:
    """The 404 of an inspection endpoint asked about a campaign the sandbox does not hold."""
    return Response(
        error_body(spec.NOT_FOUND_CODE, f"no campaign {campaign_id!r}", request.url.path),
        404,
        media_type="application/json",
    )


def build_inspection_app(app: InspectedSandbox, extra: Sequence[BaseRoute]) -> Starlette:
    """The Starlette application serving the inspection paths of ``app``."""
    state = app.state

    async def accounts(request: Request) -> Response:
        return _answer(
            [
                {
                    "key": a.key,
                    "username": a.username,
                    "password": a.password,
                    "principalType": a.principal_type,
                    "brandIds": list(a.brand_ids),
                }
                for a in app.config.accounts.values()
            ]
        )

    async def identity(request: Request) -> Response:
        return _answer({"identity": state.identity})

    async def requests(request: Request) -> Response:
        try:
            limit = int(request.query_params.get("limit", "0"))
        except ValueError:
            return _refuse(
                request, f"limit must be an integer, got {request.query_params['limit']!r}"
            )
        with state.lock:
            records = list(state.requests[-limit:] if limit > 0 else state.requests)
        return _answer(
            [
                {
                    "method": r.method,
                    "path": r.path,
                    "query": r.query,
                    "username": r.username,
                    "brandId": r.brand_id,
                    "status": r.status,
                    "at": r.at.isoformat(),
                    "body": masked_body(r.body),
                }
                for r in records
            ]
        )

    async def campaigns(request: Request) -> Response:
        with state.lock:
            stored = list(state.campaigns.values())
        return _answer(
            [
                {
                    "campaignId": c.campaign_id,
                    "brandId": c.brand_id,
                    "requestId": c.request_id,
                    "createdAt": c.created_at.isoformat(),
                    "body": c.body,
                }
                for c in stored
            ]
        )

    async def participants(request: Request) -> Response:
        campaign_id = request.path_params["campaign_id"]
        if campaign_id not in state.campaigns:
            return _no_campaign(request, campaign_id)
        return _answer(state.participants(campaign_id))

    async def play(request: Request) -> Response:
        campaign_id = request.path_params["campaign_id"]
        with state.lock:
            stored = state.campaigns.get(campaign_id)
        if stored is None:
            return _no_campaign(request, campaign_id)
        q = request.query_params
        try:
            model = PlayerModel(
                seed=int(q.get("seed", "0")),
                accept_share=float(q.get("accept", DEFAULT_ACCEPT_SHARE)),
                finish_share=float(q.get("finish", DEFAULT_FINISH_SHARE)),
            )
            played = play_campaign(campaign_id, stored.body, state.participants(campaign_id), model)
        except (ValueError, CampaignNotPlayableError) as exc:
            return _refuse(request, str(exc))
        if request.url.path.endswith("/wallet"):
            try:
                wallet = wallet_side(
                    played, stored.body, WalletModel(seed=int(q.get("wallet_seed", "0")))
                )
            except ValueError as exc:
                return _refuse(request, str(exc))
            return _answer(
                {
                    "truth": wallet.truth(),
                    "rows": list(wallet.rows),
                    "delivered": [loads_wire(e.to_wire()) for e in wallet.delivered],
                }
            )
        return _answer(played.to_json())

    async def paid_play(request: Request) -> Response:
        campaign_id = request.path_params["campaign_id"]
        with state.lock:
            stored = state.campaigns.get(campaign_id)
        if stored is None:
            return _no_campaign(request, campaign_id)
        try:
            ask = loads_wire(await request.body() or b"{}")
            if not isinstance(ask, dict):
                raise ValueError("the body must be a JSON object")
            holdout = ask.get("holdout", [])
            if not isinstance(holdout, list) or not all(isinstance(p, str) for p in holdout):
                raise ValueError("holdout must be a list of player ids")
            if len(holdout) > MAX_PLAYERS:
                raise ValueError(f"holdout lists {len(holdout):,} players, at most {MAX_PLAYERS:,}")
            base = PaidPlayModel()
            model = PaidPlayModel(
                seed=int(ask.get("seed", base.seed)),
                active_share=float(ask.get("activeShare", base.active_share)),
                rounds_mean=float(ask.get("roundsMean", base.rounds_mean)),
                effect=float(ask.get("effect", base.effect)),
            )
            played = play_paid(
                campaign_id, stored.body, state.participants(campaign_id), holdout, model
            )
        except (ValueError, TypeError, CampaignNotPlayableError) as exc:
            return _refuse(request, str(exc))
        return _answer(played.to_json())

    async def subscriptions(request: Request) -> Response:
        with state.lock:
            return _answer({str(b): masked(s) for b, s in state.subscriptions.items()})

    async def faults(request: Request) -> Response:
        if request.method == "DELETE":
            app.faults.clear()
        elif request.method == "POST":
            try:
                app.faults.add(FaultRule.from_json(loads_wire(await request.body())))
            except (ValueError, TypeError) as exc:
                return _refuse(request, str(exc))
        # Fault rules hold floats (rate, latency), which dumps_wire rightly refuses.
        return JSONResponse([asdict(r) for r in app.faults.rules])

    async def reset(request: Request) -> Response:
        app.reset()
        return _answer({"reset": True})

    routes: list[BaseRoute] = [
        Route(f"{PREFIX}/accounts", accounts),
        Route(f"{PREFIX}/identity", identity),
        Route(f"{PREFIX}/requests", requests),
        Route(f"{PREFIX}/campaigns", campaigns),
        Route(f"{PREFIX}/campaigns/{{campaign_id}}/participants", participants),
        Route(f"{PREFIX}/campaigns/{{campaign_id}}/play", play),
        Route(f"{PREFIX}/campaigns/{{campaign_id}}/wallet", play),
        Route(f"{PREFIX}/campaigns/{{campaign_id}}/paid-play", paid_play, methods=["POST"]),
        Route(f"{PREFIX}/subscriptions", subscriptions),
        Route(f"{PREFIX}/faults", faults, methods=["GET", "POST", "DELETE"]),
        Route(f"{PREFIX}/reset", reset, methods=["POST"]),
        *extra,
    ]
    return Starlette(routes=routes)
