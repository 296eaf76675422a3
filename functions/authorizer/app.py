"""AuthorizerFunction: the HTTP API's Lambda authorizer (JWT via JWKS, or API key)."""

from typing import Any

from context_ledger.auth.authorizer import authorize
from context_ledger.log import logger
from context_ledger.settings import get_settings
from context_ledger.tracing import trace_handler

get_settings()  # invalid configuration fails the cold start, naming the variable


@logger.inject_lambda_context(clear_state=True)
@trace_handler
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return authorize(event)
