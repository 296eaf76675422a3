"""ModelGatewayFunction: /api/v1/models (OpenAI-compatible proxy, links, call logs)."""

from context_ledger.http.app import create_app
from context_ledger.http.gateway import MAX_BODY_BYTES, router
from context_ledger.http.lambda_handler import lambda_handler
from context_ledger.settings import get_settings

get_settings()  # invalid configuration fails the cold start, naming the variable
handler = lambda_handler(create_app(router, max_body_bytes=MAX_BODY_BYTES))
