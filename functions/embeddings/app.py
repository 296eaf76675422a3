"""EmbeddingsFunction: POST /api/v1/embeddings (OpenAI wire format) from inside the deployment."""

from context_ledger.embeddings.serving import get_embeddings_service
from context_ledger.http.embeddings import create_embeddings_app
from context_ledger.http.lambda_handler import lambda_handler
from context_ledger.settings import get_settings

get_settings()  # invalid configuration fails the cold start, naming the variable
get_embeddings_service()  # so do missing model files; a warm function reuses the loaded model
handler = lambda_handler(create_embeddings_app())
