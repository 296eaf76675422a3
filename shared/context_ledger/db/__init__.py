"""Connection pool, numbered SQL migrations and their runner."""

from context_ledger.db.pool import (
    autocommit,
    close_pool,
    connection,
    get_pool,
    spare_connection,
)

__all__ = ["autocommit", "close_pool", "connection", "get_pool", "spare_connection"]
