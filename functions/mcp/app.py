"""McpFunction: /mcp, the MCP tools over streamable HTTP (stateless, JSON answers)."""

from context_ledger.http.lambda_handler import lambda_handler
from context_ledger.mcp.http_app import create_mcp_app
from context_ledger.settings import get_settings

get_settings()  # invalid configuration fails the cold start, naming the variable
handler = lambda_handler(create_mcp_app())
