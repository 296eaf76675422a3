"""Connection pool, numbered SQL migrations and their runner."""

# Imported with the package, so its dumper is registered before the pool opens any connection:
# psycopg copies the global adapters into a connection when it is created.
from context_ledger.db.float4_array import Float4Array
from context_ledger.db.pool import (
    autocommit,
    close_pool,
    connection,
    get_pool,
    spare_connection,
)

__all__ = [
    "Float4Array",
    "autocommit",
    "close_pool",
    "connection",
    "get_pool",
    "spare_connection",
]
