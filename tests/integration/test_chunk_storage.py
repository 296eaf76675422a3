"""Where PostgreSQL keeps a chunk's values (migrations 0012, 0013): the tsvector and pgvector's
copy of the embedding stay in the row, which the searches read for every chunk they match or
score; the content and the real[] embedding are what move to TOAST when the row is too large."""

from __future__ import annotations

import random
import string

from search_support import publish_source

from context_ledger.db import connection
from context_ledger.sources.model import Document
from context_ledger.sources.store import store_embeddings
from context_ledger.spaces.service import create_organisation

_STORAGE = """
SELECT id,
       pg_column_toast_chunk_id(tsv) IS NOT NULL AS tsv_toasted,
       pg_column_toast_chunk_id(content) IS NOT NULL AS content_toasted,
       pg_column_toast_chunk_id(embedding) IS NOT NULL AS embedding_toasted,
       pg_column_toast_chunk_id(embedding_vector) IS NOT NULL AS vector_toasted
FROM chunks WHERE source_id = %s
"""


def _many_distinct_words(count: int) -> str:
    """Words no stemmer shortens and pglz cannot compress: a tsvector of ~2 kB."""
    letters = random.Random(12).choices
    return " ".join("".join(letters(string.ascii_lowercase, k=9)) for _ in range(count)) + "."


def test_a_large_chunk_keeps_its_tsvector_in_the_row(db) -> None:
    with connection() as conn:
        org = create_organisation(conn, name="Acme")
        source = publish_source(conn, org, [Document("words.md", _many_distinct_words(120))])
        rows = conn.execute(_STORAGE, (source,)).fetchall()

    assert rows
    assert not any(r["tsv_toasted"] for r in rows)
    assert any(r["content_toasted"] for r in rows), "the row was over the TOAST threshold"


def test_an_embedded_chunk_keeps_its_vector_and_tsvector_in_the_row(db) -> None:
    rng = random.Random(7)
    with connection() as conn:
        org = create_organisation(conn, name="Acme")
        source = publish_source(conn, org, [Document("words.md", _many_distinct_words(120))])
        ids = [r["id"] for r in conn.execute(_STORAGE, (source,)).fetchall()]
        # 384 dimensions of noise: nothing to compress, as with a language model's vectors
        store_embeddings(conn, [(i, [rng.gauss(0, 1) for _ in range(384)]) for i in ids], "m")
        rows = conn.execute(_STORAGE, (source,)).fetchall()

    assert not any(r["vector_toasted"] or r["tsv_toasted"] for r in rows)
    assert all(r["embedding_toasted"] for r in rows), "the real[] copy left the row first"
