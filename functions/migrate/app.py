"""MigrateFunction: the DatabaseMigrations custom resource (the SQL migrations on every deploy),
and the first organisation's bootstrap on demand (``aws lambda invoke``, docs/deploy.md)."""

from typing import Any

from context_ledger.bootstrap.handler import handler as bootstrap
from context_ledger.db.custom_resource import handler as custom_resource
from context_ledger.tracing import trace_handler


@trace_handler
def handler(event: Any, context: Any) -> Any:
    # CloudFormation's events carry the pre-signed URL it waits on; anything else is an
    # operator's, and gets an answer saying what it lacks.
    if isinstance(event, dict) and "ResponseURL" in event:
        return custom_resource(event, context)
    return bootstrap(event, context)
