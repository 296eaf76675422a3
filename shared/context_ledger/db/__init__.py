"""Connection pool, numbered SQL migrations and their runner."""

from context_ledger.db.pool import close_pool, connection, get_pool

__all__ = ["close_pool", "connection", "get_pool"]
