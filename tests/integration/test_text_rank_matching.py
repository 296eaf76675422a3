"""The text search matches the query's rarest terms and ranks by BM25 over all of them; a chunk
holding only common terms keeps its rank when the vector search brings it in."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from search_support import find_candidates, publish_source

from context_ledger.db import connection
from context_ledger.embeddings.client import EmbeddingsClient
from context_ledger.local.embeddings_server import serve_embeddings
from context_ledger.search import bm25
from context_ledger.settings import SearchBackend
from context_ledger.sources.model import Document
from context_ledger.spaces.service import create_organisation

# "refund" is in four chunks, "chargeback" in one.
DOCS = [
    *(Document(f"refund-{i}.md", f"Refund rule {i}: a refund needs a receipt.") for i in range(4)),
    Document("chargeback.md", "A chargeback is a refund the card issuer forces."),
]


@pytest.fixture
def embedder() -> Iterator[EmbeddingsClient]:
    with serve_embeddings(dims=64) as server:
        yield EmbeddingsClient(server.url, "hashing-64", dimensions=64)


@pytest.fixture
def searched(db, embedder):
    with connection() as conn:
        org = create_organisation(conn, name="Acme")
        source = publish_source(conn, org, DOCS, embedder=embedder)
        paths = {r["id"]: r["path"] for r in conn.execute("SELECT id, path FROM chunks")}
    return org, source, paths


def search(org, source_id, query: str, vector=None):
    with connection() as conn:
        return find_candidates(
            conn,
            org_id=org.id,
            source_ids=[source_id],
            query=query,
            query_vector=vector,
            backend=SearchBackend.EXACT,
        )


def test_only_chunks_holding_the_rarest_terms_are_matched(searched, monkeypatch) -> None:
    org, source_id, paths = searched
    monkeypatch.setattr(bm25, "MATCH_POSTINGS", 1)  # room for "chargeback" (1 chunk) only

    found = search(org, source_id, "refund chargeback")

    assert [paths[c.chunk_id] for c in found] == ["chargeback.md"]
    assert found[0].text_score == 1.0


def test_with_room_for_every_term_all_chunks_holding_one_are_matched(searched) -> None:
    org, source_id, paths = searched

    found = search(org, source_id, "refund chargeback")

    assert {paths[c.chunk_id] for c in found} == set(paths.values())
    best = max(found, key=lambda c: c.text_score)
    assert paths[best.chunk_id] == "chargeback.md"  # the rare term weighs most


def test_beside_a_vector_search_the_text_search_matches_within_the_hybrid_bound(
    searched, embedder, monkeypatch
) -> None:
    org, source_id, paths = searched
    monkeypatch.setattr(bm25, "HYBRID_MATCH_POSTINGS", 1)  # "chargeback" only, with a vector
    vector = embedder.embed(["refund chargeback"])[0]

    alone = search(org, source_id, "refund chargeback")
    hybrid = search(org, source_id, "refund chargeback", vector)

    assert {paths[c.chunk_id] for c in alone if c.found_by_text} == set(paths.values())
    assert {paths[c.chunk_id] for c in hybrid if c.found_by_text} == {"chargeback.md"}
    # The chunks the narrower match left out still come in through the vector search, with the
    # BM25 rank they have for the whole query.
    refund = {paths[c.chunk_id]: c for c in hybrid}["refund-0.md"]
    assert refund.found_by_vector
    assert 0 < refund.text_score < 1


def test_a_vector_hit_holding_only_unmatched_terms_gets_its_bm25_rank(
    searched, embedder, monkeypatch
) -> None:
    org, source_id, paths = searched
    monkeypatch.setattr(bm25, "HYBRID_MATCH_POSTINGS", 1)
    vector = embedder.embed([DOCS[0].content])[0]

    found = {paths[c.chunk_id]: c for c in search(org, source_id, "refund chargeback", vector)}

    refund = found["refund-0.md"]
    assert refund.found_by_vector
    assert not refund.found_by_text
    assert 0 < refund.text_score < 1


def _published(docs: list[Document]):
    with connection() as conn:
        org = create_organisation(conn, name="Acme")
        source = publish_source(conn, org, docs)
        paths = {r["id"]: r["path"] for r in conn.execute("SELECT id, path FROM chunks")}
    return org, source, paths


def test_contraction_tails_in_a_query_match_nothing(db) -> None:
    # "I'd" and "I'm" once made lexemes d and m: each matched the chunks holding that letter as
    # a name, though the query was about neither.
    org, source, paths = _published(
        [
            Document("matrix.md", "The matrix D times the vector m, as we'll show."),
            Document("sorting.md", "Sorting networks compared by their depth."),
        ]
    )

    found = search(org, source, "I'd like papers on sorting; I'm reading a survey, you'll see")

    assert [paths[c.chunk_id] for c in found] == ["sorting.md"]


def test_letters_with_dots_match_nothing_unless_they_spell_an_acronym(db) -> None:
    org, source, paths = _published(
        [
            Document("reading.md", "Reading lists, e.g. for the holidays, i.e. in August."),
            Document("sorting.md", "Sorting networks compared by their depth."),
            Document("exports.md", "Exports to the U.S.A. grew."),
        ]
    )

    assert [paths[c.chunk_id] for c in search(org, source, "sorting, e.g. networks")] == [
        "sorting.md"
    ]
    assert [paths[c.chunk_id] for c in search(org, source, "USA")] == ["exports.md"]
    assert [paths[c.chunk_id] for c in search(org, source, "U.S.A.")] == ["exports.md"]


def test_a_letter_standing_alone_stays_a_term(db) -> None:
    org, source, paths = _published(
        [
            Document("d.md", "Vitamin D deficiency in winter."),
            Document("c.md", "Vitamin C deficiency at sea."),
            Document("k.md", "An injection of vitamin K. It helps newborns."),
        ]
    )

    found = search(org, source, "vitamin D deficiency")

    best = max(found, key=lambda c: c.text_score)
    assert paths[best.chunk_id] == "d.md"
    assert {paths[c.chunk_id] for c in found} == {"d.md", "c.md", "k.md"}
    # a letter ending a sentence is a term too, in the text and in the query
    found = search(org, source, "vitamin K.")
    assert paths[max(found, key=lambda c: c.text_score).chunk_id] == "k.md"
