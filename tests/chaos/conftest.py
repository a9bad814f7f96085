"""The chaos tests share the receiver tests' fixtures: a PostgreSQL schema per test and
PostgreSQL restarts that always leave the server running."""

from tests.webhooks.conftest import pg_url, postgres_restarts

__all__ = ["pg_url", "postgres_restarts"]
