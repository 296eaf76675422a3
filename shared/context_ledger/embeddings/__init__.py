"""Embeddings: the OpenAI-compatible client, endpoint locality, and the local hashing provider.

Source content reaches the client only through the DLP gate (``context_ledger.dlp.gate``). The
client and :class:`~context_ledger.embeddings.hashing.HashingEmbeddingProvider` share one method,
``embed(texts) -> list[list[float]]``, so an evaluation can swap one for the other.
"""
