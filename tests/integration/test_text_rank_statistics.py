"""BM25 statistics (migration 0009): kept exact by the database for every writer of chunks, and
summed over the searched sources' current versions by the query terms' lookup."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest
from search_support import admin_of, publish_source, text_terms

from context_ledger.db import connection
from context_ledger.search.bm25 import idf
from context_ledger.search.fulltext import text_search
from context_ledger.search.query import SearchQuery
from context_ledger.sources import service
from context_ledger.sources.model import Document
from context_ledger.spaces.service import Organisation, create_organisation

DOCS = [
    Document("refunds.md", "Refunds need a receipt and the approval of a team lead."),
    Document("receipts.md", "Keep every receipt: refunds are refused without one."),
    Document("holidays.md", "The office is closed on public holidays."),
]

# What the statistics must equal: a recount from the chunks table itself.
_RECOUNT_VERSIONS = """
SELECT source_id, index_version, count(*) AS chunks,
       sum((SELECT coalesce(sum(greatest(cardinality(positions), 1)), 0) FROM unnest(tsv)))
           AS tokens
FROM chunks GROUP BY 1, 2 ORDER BY 1, 2
"""
_RECOUNT_LEXEMES = """
SELECT c.source_id, c.index_version, l.lexeme, count(*) AS chunks
FROM chunks c, unnest(tsvector_to_array(c.tsv)) AS l(lexeme)
GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
"""
_KEPT_VERSIONS = """
SELECT source_id, index_version, chunks, tokens FROM text_rank_versions ORDER BY 1, 2
"""
_KEPT_LEXEMES = """
SELECT source_id, index_version, lexeme, chunks FROM text_rank_lexemes ORDER BY 1, 2, 3
"""


@pytest.fixture
def org(db) -> Organisation:
    with connection() as conn:
        return create_organisation(conn, name="Acme")


def indexed_source(org: Organisation, documents: list[Document]) -> uuid.UUID:
    with connection() as conn:
        return publish_source(conn, org, documents)


def assert_statistics_match_the_chunks() -> None:
    with connection() as conn:
        assert conn.execute(_KEPT_VERSIONS).fetchall() == conn.execute(_RECOUNT_VERSIONS).fetchall()
        assert conn.execute(_KEPT_LEXEMES).fetchall() == conn.execute(_RECOUNT_LEXEMES).fetchall()


def test_an_index_build_records_counts_lengths_and_document_frequencies(org) -> None:
    indexed_source(org, DOCS)

    assert_statistics_match_the_chunks()
    with connection() as conn:
        kept = {r["lexeme"]: r["chunks"] for r in conn.execute(_KEPT_LEXEMES)}
    assert kept["receipt"] == 2
    assert kept["holiday"] == 1


def test_a_rebuild_keeps_the_new_version_and_forgets_the_dropped_one(org) -> None:
    admin = admin_of(org)
    source = indexed_source(org, DOCS)

    with connection() as conn:
        service.index_snapshot(conn, admin, source, DOCS[:1], embedder=None)
    with connection() as conn:
        service.drop_superseded(conn, source_id=source)

    assert_statistics_match_the_chunks()
    with connection() as conn:
        versions = [r["index_version"] for r in conn.execute(_KEPT_VERSIONS)]
    assert versions == [2]


def test_chunks_written_outside_index_builds_are_counted_too(org) -> None:
    # The memory API inserts, edits and deletes chunks of a published version directly.
    source = indexed_source(org, DOCS)
    with connection() as conn:
        conn.execute(
            "INSERT INTO chunks (org_id, source_id, index_version, ordinal, path, content,"
            " content_sha256, token_count, tsv)"
            " SELECT org_id, id, index_version, 0, 'memory.md', 'Refund receipts by email.',"
            " sha256('x'), 4, to_tsvector('english', 'Refund receipts by email.')"
            " FROM sources WHERE id = %s",
            (source,),
        )
    assert_statistics_match_the_chunks()

    with connection() as conn:
        conn.execute(
            "UPDATE chunks SET tsv = to_tsvector('english', 'Holiday email') WHERE path = %s",
            ("memory.md",),
        )
    assert_statistics_match_the_chunks()

    with connection() as conn:
        conn.execute("UPDATE chunks SET embedding = '{1, 0}' WHERE path = 'memory.md'")
        conn.execute("DELETE FROM chunks WHERE path IN ('memory.md', 'holidays.md')")
    assert_statistics_match_the_chunks()
    with connection() as conn:
        kept = {r["lexeme"] for r in conn.execute(_KEPT_LEXEMES)}
    assert "holiday" not in kept
    assert "email" not in kept


def test_deleting_a_source_deletes_its_statistics(org) -> None:
    admin = admin_of(org)
    source = indexed_source(org, DOCS)

    with connection() as conn:
        service.delete_source(conn, admin, source)

    with connection() as conn:
        assert conn.execute(_KEPT_VERSIONS).fetchall() == []
        assert conn.execute(_KEPT_LEXEMES).fetchall() == []


def test_query_terms_weigh_by_the_searched_sources_together(org) -> None:
    first = indexed_source(org, DOCS)
    second = indexed_source(org, DOCS[2:])
    with connection() as conn:
        other_org = create_organisation(conn, name="Other")
    foreign = indexed_source(other_org, DOCS)

    with connection() as conn:
        both = text_terms(conn, SearchQuery(org.id, [first, second], "receipt holidays", None, 10))
        smuggled = text_terms(conn, SearchQuery(org.id, [foreign], "receipt holidays", None, 10))

    # 4 chunks in all: receipt in 2 of them, holiday in 2 (one per source).
    weights = dict(zip(both.lexemes, both.weights, strict=True))
    assert weights == {"receipt": pytest.approx(idf(2, 4)), "holiday": pytest.approx(idf(2, 4))}
    assert set(both.match) == {"'receipt'", "'holiday'"}
    assert smuggled.lexemes == ()


def test_a_term_weighs_as_many_times_as_the_query_repeats_it(org) -> None:
    source = indexed_source(org, DOCS)

    with connection() as conn:
        terms = text_terms(
            conn,
            SearchQuery(org.id, [source], "Receipts? A receipt, the receipt: holidays", None, 10),
        )

    # BM25 sums over the query's terms with their repeats (as Lucene and bm25s): 3 x receipt.
    weights = dict(zip(terms.lexemes, terms.weights, strict=True))
    assert weights == {
        "receipt": pytest.approx(3 * idf(2, 3)),
        "holiday": pytest.approx(idf(1, 3)),
    }


def test_a_repeated_term_lifts_the_chunk_that_holds_it(org) -> None:
    source = indexed_source(
        org,
        [
            Document("refunds.md", "Refunds are paid within five days."),
            Document("invoices.md", "Invoices are paid within five days."),
        ],
    )

    def ranked(text: str) -> list[str]:
        with connection() as conn:
            query = SearchQuery(org.id, [source], text, None, 10)
            query = replace(query, terms=text_terms(conn, query))
            hits = text_search(conn, query, similarity=None)
            paths = {
                row["id"]: row["path"]
                for row in conn.execute(
                    "SELECT id, path FROM chunks WHERE source_id = %s", (source,)
                )
            }
        return [paths[hit.chunk_id] for hit in hits]

    # Both terms are equally rare, so once each they tie (and the chunk id decides); the query
    # that says "refund" twice ranks the refunds first, whatever the ids.
    assert ranked("refund refunds invoice") == ["refunds.md", "invoices.md"]
    assert ranked("invoice invoices refund") == ["invoices.md", "refunds.md"]


def test_the_parts_of_an_identifier_add_no_repeats(org) -> None:
    source = indexed_source(org, DOCS)

    with connection() as conn:
        terms = text_terms(conn, SearchQuery(org.id, [source], "refundReceipt receipt", None, 10))

    # Split for matching (refund, receipt), but the words as written hold receipt once.
    weights = dict(zip(terms.lexemes, terms.weights, strict=True))
    assert weights["receipt"] == pytest.approx(idf(2, 3))
    assert weights["refund"] == pytest.approx(idf(2, 3))
