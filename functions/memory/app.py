"""MemoryFunction: the memory API under /api/context/{project_id} (memories, /relevant)."""

from context_ledger.http.api import function_app
from context_ledger.http.lambda_handler import lambda_handler
from context_ledger.settings import get_settings

get_settings()  # invalid configuration fails the cold start, naming the variable
handler = lambda_handler(function_app("memory"))
