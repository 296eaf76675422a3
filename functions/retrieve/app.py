"""RetrieveFunction: POST /api/v1/context/retrieve."""

from context_ledger.http.api import function_app
from context_ledger.http.lambda_handler import lambda_handler
from context_ledger.settings import get_settings
from context_ledger.text.tokens import encoding

get_settings()  # invalid configuration fails the cold start, naming the variable
# The tokenizer counts a redacted chunk's tokens. Loaded here (~0.15 s) it lengthens the cold
# start instead of the first retrieval that delivers a redacted chunk (docs/decisions.md).
encoding()
handler = lambda_handler(function_app("retrieve"))
