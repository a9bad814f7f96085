"""A griffe extension for the documentation site: docstrings' reStructuredText, as Markdown.

The package's docstrings cite names as ``:func:`gptools.spec.canonical_action_id``` (read by
people in the source and by ``help()``); Markdown would show the role's name literally. Each
role becomes an inline code span of its target (``~a.b.c`` shows ``c``, as Sphinx does), and
the ``::`` that opens a literal block goes (the indented block is code in Markdown too).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|data|attr|exc|obj|const|ref):`(~?)([^`]+)`")
#: reStructuredText's literal-block marker: a line of its own, or ending a paragraph.
_LITERAL_ALONE = re.compile(r"^[ \t]*::[ \t]*$", re.MULTILINE)
_LITERAL_END = re.compile(r"(\S)::[ \t]*$", re.MULTILINE)


def _code(match: re.Match[str]) -> str:
    target = match.group(2)
    return f"`{target.rsplit('.', 1)[-1] if match.group(1) else target}`"


class SphinxRolesToCode(griffe.Extension):
    """Rewrite every object's docstring once, as it is loaded."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Replace the roles of ``obj``'s docstring by code spans."""
        if obj.docstring is not None:
            text = _ROLE.sub(_code, obj.docstring.value)
            text = _LITERAL_END.sub(r"\1:", _LITERAL_ALONE.sub("", text))
            obj.docstring.value = text
