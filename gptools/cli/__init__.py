"""The ``gptools`` command: one entry point, subcommands grouped by capability.

Contract (docs/design.md, "The command line"): every reporting subcommand takes ``--json``
and then prints exactly one JSON document on stdout; exit code 0 on success, 2 on bad input,
1 on failure, 3 when a server command cannot listen on its address, 130 when interrupted
(the README lists them).
"""

from gptools.cli import (  # noqa: F401  (importing registers the commands)
    _analyze,
    _campaigns,
    _costs,
    _notebooks,
    _participants,
    _reconcile,
    _sandbox,
    _support,
    _webhooks,
)
from gptools.cli._main import cli, main

__all__ = ["cli", "main"]
