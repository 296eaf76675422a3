"""Connection pool, numbered SQL migrations and their runner."""

from context_ledger.db.pool import close_pool, connection, get_pool, spare_connection

__all__ = ["close_pool", "connection", "get_pool", "spare_connection"]
