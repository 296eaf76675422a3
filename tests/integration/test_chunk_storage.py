"""Where PostgreSQL keeps a chunk's values (migration 0012): the tsvector stays in the row, which
the text search reads for every chunk it matches; the content is what moves to TOAST when the row
is too large, read only for the chunks an answer delivers."""

from __future__ import annotations

import random
import string

from search_support import publish_source

from context_ledger.db import connection
from context_ledger.sources.model import Document
from context_ledger.spaces.service import create_organisation

_STORAGE = """
SELECT pg_column_toast_chunk_id(tsv) IS NOT NULL AS tsv_toasted,
       pg_column_toast_chunk_id(content) IS NOT NULL AS content_toasted
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
