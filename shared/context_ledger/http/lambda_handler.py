"""Wrap an ASGI app (a function's FastAPI app, the MCP server) as a Lambda handler for HTTP API
events."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.logging import correlation_paths
from mangum import Mangum
from mangum.types import ASGI

from context_ledger.log import logger
from context_ledger.tracing import trace_handler

LambdaHandler = Callable[[dict[str, Any], Any], dict[str, Any]]


def lambda_handler(app: ASGI) -> LambdaHandler:
    """Mangum adapter with the API Gateway request id as every log line's correlation id, and
    each invocation an X-Ray subsegment (context_ledger.tracing)."""
    adapter = Mangum(app, lifespan="off")

    @logger.inject_lambda_context(
        correlation_id_path=correlation_paths.API_GATEWAY_HTTP, clear_state=True
    )
    @trace_handler
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return adapter(event, context)

    return handler
