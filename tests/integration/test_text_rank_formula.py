"""The SQL BM25 rank (search/fulltext.py ``RANK``) is Okapi BM25 over the query's terms,
checked against the formula computed here in Python from the chunks' own tsvectors: term
frequencies above 1, several terms, chunks of different lengths, and terms a chunk lacks."""

from __future__ import annotations

import uuid

import pytest
from psycopg import sql
from search_support import publish_source, text_terms

from context_ledger.db import connection
from context_ledger.search import bm25
from context_ledger.search.fulltext import RANK
from context_ledger.search.query import SearchQuery
from context_ledger.sources.model import Document
from context_ledger.spaces.service import create_organisation

DOCS = [
    Document("a.md", "Refund the refund, then refund again: refunds need receipts."),
    Document("b.md", "A receipt proves a purchase; keep every receipt for the refund desk."),
    Document("c.md", "Chargebacks are forced refunds; the issuer decides, not the merchant."),
    Document("d.md", "Holidays: the office closes in August and reopens in September."),
]
QUERY = "refund receipt chargeback merchant"

_RANKS = sql.SQL("SELECT c.path, {rank} AS rank FROM chunks c WHERE c.source_id = %(source)s")
_TERM_COUNTS = """
SELECT c.path, u.lexeme, cardinality(u.positions) AS tf
FROM chunks c, unnest(c.tsv) AS u WHERE c.source_id = %(source)s
"""


@pytest.fixture
def source(db) -> tuple[uuid.UUID, uuid.UUID]:
    with connection() as conn:
        org = create_organisation(conn, name="Acme")
        created = publish_source(conn, org, DOCS)
    return org.id, created


def expected_ranks(rows: list[dict], lexemes: tuple[str, ...], weights, average: float) -> dict:
    """Okapi BM25 per chunk, from its term frequencies; None when it holds no query term."""
    weight = dict(zip(lexemes, weights, strict=True))
    # A chunk's length is its tokens, every lexeme's occurrences summed (Lucene's, bm25s's).
    length: dict[str, int] = {}
    for row in rows:
        length[row["path"]] = length.get(row["path"], 0) + max(row["tf"], 1)
    ranks: dict[str, float | None] = {}
    for row in rows:
        ranks.setdefault(row["path"], None)
        if row["lexeme"] not in weight:
            continue
        tf = max(row["tf"], 1)
        norm = bm25.K1 * (1 - bm25.B + bm25.B * length[row["path"]] / average)
        term = weight[row["lexeme"]] * tf * (bm25.K1 + 1) / (tf + norm)
        ranks[row["path"]] = (ranks[row["path"]] or 0.0) + term
    return ranks


def test_the_sql_rank_is_okapi_bm25_over_every_query_term(source) -> None:
    org_id, source_id = source
    with connection() as conn:
        query = SearchQuery(org_id, [source_id], QUERY, None, 10)
        terms = text_terms(conn, query)
        params = SearchQuery(org_id, [source_id], QUERY, None, 10, terms).params()
        ranks = {
            r["path"]: r["rank"]
            for r in conn.execute(_RANKS.format(rank=RANK), {**params, "source": source_id})
        }
        counts = conn.execute(_TERM_COUNTS, {"source": source_id}).fetchall()

    expected = expected_ranks(counts, terms.lexemes, terms.weights, terms.average_length)
    assert len(terms.lexemes) == 4, "every query word is a term of the source"
    tokens = sum(max(row["tf"], 1) for row in counts)
    assert terms.average_length == pytest.approx(tokens / len(DOCS)), "mean length in tokens"
    assert ranks["d.md"] is None, "no query term: no rank"
    for path in ["a.md", "b.md", "c.md"]:
        assert ranks[path] == pytest.approx(expected[path], rel=1e-12), path
    assert ranks["a.md"] > ranks["b.md"], "four refunds outweigh one"
