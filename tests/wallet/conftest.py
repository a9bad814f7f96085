"""The wallet tests share the campaigns tests' fixtures (a client on a fresh sandbox, the
register in tmp_path)."""

from tests.campaigns.conftest import *  # noqa: F403
