"""The currencies a mistyped code most likely meant come from the library
(``gptools.costs.currency_suggestions``), which ``--currency``'s refusal quotes (issue 36
item 7)."""

from __future__ import annotations

from gptools.costs import currency_suggestions


def test_close_codes_of_the_same_first_letter_closest_first() -> None:
    assert currency_suggestions("EUT") == ["EUR", "ETB"]
    assert currency_suggestions("EUT", limit=1) == ["EUR"]
    assert currency_suggestions(" kwdd ") == ["KWD"]


def test_metals_funds_and_other_first_letters_are_never_suggested() -> None:
    # XBT is near XBA, XBB, ... (bond units, not money): nothing is suggested.
    assert currency_suggestions("XBT") == []
    # DUR is near EUR, but a typo keeps the first letter.
    assert currency_suggestions("DUR") == []
    # XAX is near XAF (money) and XAG, XAU (metals): only the money.
    assert currency_suggestions("XAX") == ["XAF"]
