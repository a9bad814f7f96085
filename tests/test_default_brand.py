"""The brand a request acts on when none is named is the library's rule
(``SelfInfo.default_brand``), which every CLI command's ``--brand`` default uses (issue 36
item 7)."""

from __future__ import annotations

import pytest

from gptools import spec
from gptools.models import SelfInfo


def _info(principal: str, brands: list[int]) -> SelfInfo:
    return SelfInfo.model_validate(
        {"principalType": principal, "allowedBrands": [{"id": b, "name": f"b{b}"} for b in brands]}
    )


def test_an_implicit_brand_is_none_and_a_single_one_is_it() -> None:
    assert _info(spec.PRINCIPAL_INDIVIDUAL, [7, 8]).default_brand() is None
    assert _info("PARTNER", [201]).default_brand() == 201


@pytest.mark.parametrize("brands", [[202, 201], []], ids=["several", "none"])
def test_several_or_no_brands_name_the_choices(brands: list[int]) -> None:
    with pytest.raises(ValueError) as caught:
        _info("PARTNER", brands).default_brand()
    assert str(caught.value) == f"the account (PARTNER) may act on brands {sorted(brands)}"
