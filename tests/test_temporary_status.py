"""One rule for which HTTP statuses are temporary, and the client and the loader both keep it."""

from __future__ import annotations

import pytest

from gptools._temporary import is_temporary_status
from gptools.client._base import should_retry
from gptools.errors import ApiError
from gptools.participants._loader import RESEND, verdict


def test_temporary_statuses_are_5xx_408_and_425() -> None:
    temporary = {s for s in range(100, 700) if is_temporary_status(s)}
    assert temporary == set(range(500, 600)) | {408, 425}


@pytest.mark.parametrize("status", [400, 404, 408, 409, 422, 425, 429, 500, 503, 504, 599])
def test_the_client_and_the_loader_agree_on_every_status(status: int) -> None:
    """A status the loader sends again is one the client retries (an idempotent request),
    and the other way round; the rate-limit answer is told apart by both before this."""
    client_retries = should_retry(status, rate_limited=False, idempotent=True)
    error = ApiError(f"HTTP {status}", status=status, code=None, body="")
    assert client_retries is is_temporary_status(status)
    assert (verdict(error) == RESEND) is is_temporary_status(status)
