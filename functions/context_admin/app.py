"""ContextAdminFunction: level weights, DLP policy, capabilities and status of the context API."""

from context_ledger.http import capabilities, dlp, weights
from context_ledger.http.app import create_app
from context_ledger.http.lambda_handler import lambda_handler
from context_ledger.settings import get_settings

get_settings()  # invalid configuration fails the cold start, naming the variable
handler = lambda_handler(create_app(weights.router, dlp.router, capabilities.router))
