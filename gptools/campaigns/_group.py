"""Apply a multi-brand plan exactly once, and record the promotion as one group.

:func:`apply_brands` creates one campaign per brand and currency, each with the
deterministic ``requestId`` of its content and brand. Before anything is sent the group and
every member it will have are written to the campaign register (``pending``); each member
is then marked ``created`` (with its campaign id, and the campaign recorded as
``apply_plan`` records one) or ``failed`` (with the reason) as its answer comes. So at any
moment, a crash included, the register says which members exist; running the same plan
again skips the members already created (no request is sent twice) and sends the others
with the same requestIds (a campaign the server made before a crash is found again, never
made twice).

One brand failing never stops the others: every member is tried, and
:class:`GroupIncompleteError` then names the failed ones with their reasons and how many
exist. A member of an earlier version of the plan (its content changed, so its requestId)
stays in the group as ``superseded`` when it had been created, so no campaign the server
holds is forgotten.

The client's rate limiting holds for the account as a whole: every brand's call goes
through the one client (``brand=``), whose tiers are per user, and the credentials are one
user whatever the brand.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Final, Literal, Protocol

import pandas as pd

from gptools._register_file import RegisterError, iso, reading, tables, writing
from gptools.campaigns._apply import AppliedCampaign, ApplyResult, CampaignClient
from gptools.campaigns._brands import BrandsPlan
from gptools.campaigns._brands_review import BrandsClient, BrandsReview, check_brands
from gptools.campaigns._register import (
    CampaignRegister,
    NotRecordedError,
    as_register,
    server_identity,
)
from gptools.errors import GptoolsError
from gptools.models import CampaignRequest

#: A member's state: ``pending`` (recorded, not answered yet), ``created`` (the server
#: gave its campaign id), ``failed`` (the server or the connection refused; the reason is
#: kept), ``superseded`` (created for an earlier version of the plan).
MemberStatus = Literal["pending", "created", "failed", "superseded"]
MEMBER_STATUSES: Final = ("pending", "created", "failed", "superseded")


@dataclass(frozen=True, slots=True)
class GroupMember:
    """One campaign of a group: its brand, currency, requestId, the server's campaign id
    (once created), its :data:`MemberStatus` and, when it failed, why."""

    brand: int
    currency: str
    request_id: str
    campaign_id: str | None = None
    status: MemberStatus = "pending"
    error: str | None = None


@dataclass(frozen=True, slots=True)
class GroupResult:
    """A multi-brand promotion as the register holds it (or as :func:`apply_brands` left
    it): its name, server, brands and members (the superseded ones included)."""

    name: str
    server: str
    brands: tuple[int, ...]
    members: tuple[GroupMember, ...]

    def _with(self, status: str) -> tuple[GroupMember, ...]:
        return tuple(m for m in self.members if m.status == status)

    @property
    def created(self) -> tuple[GroupMember, ...]:
        """The members the server created."""
        return self._with("created")

    @property
    def failed(self) -> tuple[GroupMember, ...]:
        """The members the server or the connection refused."""
        return self._with("failed")

    @property
    def pending(self) -> tuple[GroupMember, ...]:
        """The members recorded but not answered (an apply that stopped mid-way)."""
        return self._with("pending")

    @property
    def complete(self) -> bool:
        """Whether every current member exists at the server."""
        return not self.failed and not self.pending

    def brands_in(self, status: MemberStatus) -> tuple[int, ...]:
        """The brands with a member in ``status``, in the group's order."""
        return tuple(b for b in self.brands if any(m.brand == b for m in self._with(status)))

    def applied(self, brand: int) -> ApplyResult:
        """One brand's created campaigns as :func:`~gptools.campaigns.apply_plan` returns
        them (for the participant loader)."""
        return ApplyResult(
            self.name,
            tuple(
                AppliedCampaign(m.currency, m.request_id, m.campaign_id or "")
                for m in self.created
                if m.brand == brand
            ),
        )

    def to_frame(self) -> pd.DataFrame:
        """One row per member: brand, currency, request_id, campaign_id, status, error."""
        return pd.DataFrame(
            [
                (m.brand, m.currency, m.request_id, m.campaign_id, m.status, m.error)
                for m in self.members
            ],
            columns=["brand", "currency", "request_id", "campaign_id", "status", "error"],
        )


class GroupClient(BrandsClient, CampaignClient, Protocol):
    """What applying a multi-brand plan needs: :class:`gptools.client.Client`."""


class GroupIncompleteError(GptoolsError, RuntimeError):
    """Some members of a group could not be created; the others were. ``result`` holds
    every member; the message names the failed ones with their reasons, the brands whose
    campaigns exist, and the remedy (apply the same plan again: it creates the rest)."""

    def __init__(self, result: GroupResult) -> None:
        failed = "; ".join(
            f"brand {m.brand} {m.currency}: {m.error}" for m in result.failed + result.pending
        )
        super().__init__(
            f"group {result.name!r}: {len(result.failed) + len(result.pending)} campaign(s) "
            f"not created ({failed}); {len(result.created)} exist (brands "
            f"{', '.join(str(b) for b in result.brands_in('created')) or 'none'}). Apply the "
            "same plan again to create the rest: what exists is not sent again."
        )
        self.result = result


class BrandGroups:
    """The groups of the campaign register at ``path`` (default: the register's file)."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.register = CampaignRegister(path)

    def __repr__(self) -> str:
        return f"BrandGroups({str(self.register.path)!r})"

    def begin(self, server: str, plan: BrandsPlan, members: Sequence[GroupMember]) -> GroupResult:
        """Record the group and its ``members`` before anything is sent (one transaction):
        a member already created keeps its campaign id; one of an earlier version of the
        plan becomes ``superseded`` if it was created and is dropped otherwise."""
        moment = iso(datetime.now(UTC))
        wanted = {m.request_id for m in members}
        content = plan.model_dump_json()
        digest = hashlib.sha256(content.encode()).hexdigest()
        brands = sorted({m.brand for m in members}, key=[m.brand for m in members].index)
        with writing(self.register.path) as db:
            db.execute(
                "INSERT INTO brand_groups VALUES (?,?,?,?,?,?,?) ON CONFLICT (server, name) "
                "DO UPDATE SET plan_hash = excluded.plan_hash, plan_json = excluded.plan_json, "
                "brands = excluded.brands, updated_at = excluded.updated_at",
                (server, plan.name, digest, content, json.dumps(brands), moment, moment),
            )
            for row in db.execute(
                "SELECT request_id, status FROM brand_group_members WHERE server = ? AND name = ?",
                (server, plan.name),
            ).fetchall():
                if row["request_id"] in wanted:
                    continue
                if row["status"] in ("created", "superseded"):
                    db.execute(
                        "UPDATE brand_group_members SET status = 'superseded', updated_at = ? "
                        "WHERE server = ? AND name = ? AND request_id = ?",
                        (moment, server, plan.name, row["request_id"]),
                    )
                else:
                    db.execute(
                        "DELETE FROM brand_group_members "
                        "WHERE server = ? AND name = ? AND request_id = ?",
                        (server, plan.name, row["request_id"]),
                    )
            db.executemany(
                "INSERT INTO brand_group_members VALUES (?,?,?,?,?,?,?,?,?) "
                "ON CONFLICT (server, name, request_id) DO NOTHING",
                [
                    (server, plan.name, m.brand, m.currency, m.request_id, None, "pending",
                     None, moment)
                    for m in members
                ],
            )  # fmt: skip
        return self.group(plan.name, server=server)

    def settle(self, server: str, name: str, member: GroupMember) -> None:
        """Record one member's answer (created with its campaign id, or failed)."""
        with writing(self.register.path) as db:
            db.execute(
                "UPDATE brand_group_members SET campaign_id = ?, status = ?, error = ?, "
                "updated_at = ? WHERE server = ? AND name = ? AND request_id = ?",
                (member.campaign_id, member.status, member.error, iso(datetime.now(UTC)),
                 server, name, member.request_id),
            )  # fmt: skip

    def names(self, *, server: str | None = None) -> list[tuple[str, str]]:
        """(server, name) of every group recorded (of ``server`` when given), oldest first."""
        where, args = ("WHERE server = ?", (server,)) if server is not None else ("", ())
        with reading(self.register.path) as db:
            if db is None or "brand_groups" not in tables(db):
                return []
            rows = db.execute(
                f"SELECT server, name FROM brand_groups {where} ORDER BY recorded_at, name", args
            ).fetchall()
        return [(r[0], r[1]) for r in rows]

    def group(self, name: str, *, server: str | None = None) -> GroupResult:
        """The group ``name`` (of ``server``; without it, the one most recently updated);
        :class:`RegisterError` when the register has no such group."""
        with reading(self.register.path) as db:
            found = None
            if db is not None and "brand_groups" in tables(db):
                where = "name = ?" + (" AND server = ?" if server is not None else "")
                args: tuple[str, ...] = (name,) if server is None else (name, server)
                found = db.execute(
                    f"SELECT * FROM brand_groups WHERE {where} ORDER BY updated_at DESC LIMIT 1",
                    args,
                ).fetchone()
            if found is None:
                known = ", ".join(n for _, n in self.names(server=server)) or "none"
                raise RegisterError(
                    f"no group {name!r} in the register {self.register.path}"
                    + (f" for the server {server}" if server is not None else "")
                    + f" (groups: {known})"
                )
            assert db is not None
            rows = db.execute(
                "SELECT * FROM brand_group_members WHERE server = ? AND name = ?",
                (found["server"], name),
            ).fetchall()
        brands = tuple(json.loads(found["brands"]))
        order = {b: i for i, b in enumerate(brands)}
        members = sorted(
            (GroupMember(r["brand"], r["currency"], r["request_id"], r["campaign_id"],
                         r["status"], r["error"]) for r in rows),
            key=lambda m: (m.status == "superseded", order.get(m.brand, len(order)),
                           m.currency, m.request_id),
        )  # fmt: skip
        return GroupResult(name, found["server"], brands, tuple(members))


def apply_brands(
    client: GroupClient,
    plan: BrandsPlan | BrandsReview,
    *,
    now: datetime | None = None,
    register: CampaignRegister | str | os.PathLike[str] | None = None,
    on_member: Callable[[GroupMember], object] | None = None,
) -> GroupResult:
    """Create the campaigns of a multi-brand plan, each once, and record them as a group.

    ``plan`` is checked against the server first (:func:`~gptools.campaigns.check_brands`;
    a :class:`BrandsReview` already made is used as it is): with an error nothing is sent
    and :class:`~gptools.campaigns.PlanInvalidError` lists every problem with its brand.
    The register is checked before anything is sent; the group and its members are
    recorded first, then each member's answer as it comes (``on_member`` is called after
    each, for progress). Members already created are not sent again. When some member
    fails, the others are still tried and :class:`GroupIncompleteError` is raised at the
    end; should the register fail meanwhile, :class:`NotRecordedError` names what was
    created.
    """
    reg = as_register(register)
    reg.check_writable("nothing was created")
    reviewed = plan if isinstance(plan, BrandsReview) else check_brands(client, plan, now=now)
    reviewed.validation.raise_for_errors()
    server = server_identity(client)
    groups = BrandGroups(reg.path)
    members = [
        GroupMember(brand, currency, request.request_id or "")
        for (brand, currency), request in reviewed.campaign_requests.items()
    ]
    state = groups.begin(server, reviewed.plan, members)
    done = {m.request_id: m for m in state.created}
    created: list[GroupMember] = list(state.created)
    for (brand, currency), request in reviewed.campaign_requests.items():
        rid = request.request_id or ""
        if rid in done:
            continue
        member = GroupMember(brand, currency, rid)
        try:
            campaign_id = _create(client, request, brand)
        except GptoolsError as exc:
            member = replace(member, status="failed", error=str(exc))
        else:
            member = replace(member, status="created", campaign_id=campaign_id)
        _settle(groups, reg, reviewed, server, member, created)
        if member.status == "created":
            created.append(member)
        if on_member is not None:
            on_member(member)
    result = groups.group(reviewed.plan.name, server=server)
    if not result.complete:
        raise GroupIncompleteError(result)
    return result


def _create(client: CampaignClient, request: CampaignRequest, brand: int) -> str:
    return client.create_campaign(request, brand=brand).campaign_id


def _settle(
    groups: BrandGroups,
    reg: CampaignRegister,
    reviewed: BrandsReview,
    server: str,
    member: GroupMember,
    created: list[GroupMember],
) -> None:
    """Record a member's answer, and a created campaign as ``apply_plan`` records one."""
    try:
        if member.status == "created":
            assert member.campaign_id is not None
            applied = ApplyResult(
                reviewed.plan.name,
                (AppliedCampaign(member.currency, member.request_id, member.campaign_id),),
            )
            reg.record(reviewed.plans[member.brand], applied, server=server)
        groups.settle(server, reviewed.plan.name, member)
    except RegisterError as exc:
        made = {
            f"brand {m.brand} {m.currency}": m.campaign_id or ""
            for m in (*created, member)
            if m.status == "created"
        }
        raise NotRecordedError(
            str(exc), made, "Apply the same plan again to record them."
        ) from None
