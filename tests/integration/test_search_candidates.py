"""The search step against real PostgreSQL: chunks built by the real ingestion, searched by
full text (OR queries) and by both vector backends, only within the current index version of the
given sources."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence

import psycopg
import pytest
from psycopg.rows import dict_row
from search_support import admin_of, find_candidates, publish_source

from context_ledger.db import connection
from context_ledger.embeddings.client import EmbeddingsClient
from context_ledger.embeddings.similarity import cosine
from context_ledger.local.embeddings_server import StandInEmbeddingsServer, serve_embeddings
from context_ledger.search import pgvector_backend
from context_ledger.search.bm25 import K1, B, idf
from context_ledger.search.candidates import Candidate
from context_ledger.search.exact import pending_exact_search
from context_ledger.search.hybrid import rank
from context_ledger.search.query import SearchQuery
from context_ledger.search.vectors import index_name
from context_ledger.settings import DEFAULT_HNSW_EF_SEARCH, SearchBackend
from context_ledger.sources import service
from context_ledger.sources.model import Document, SourceKind
from context_ledger.spaces.levels import Level
from context_ledger.spaces.service import Organisation, create_organisation

DIMS = 64

REFUND_DOCS = [
    Document("refunds.md", "Refunds need a receipt and the approval of a team lead."),
    Document("chargebacks.md", "Chargebacks are disputes the card issuer raises for a customer."),
    Document("holidays.md", "The office is closed on public holidays."),
]

GO_REFUNDS = """package refunds

// parseRefund reads an amount in cents from a request body.
func parseRefund(body string) (int, error) {
	return strconv.Atoi(body)
}
"""

# Forty short documents on a few overlapping topics: enough for rankings to differ in detail.
TOPICS = ["refund", "invoice", "ledger", "payment", "customer", "receipt", "audit", "tax"]
SMALL_SET = [
    Document(
        f"notes/{i:02d}.md",
        f"Note {i} on the {TOPICS[i % 8]} process: every {TOPICS[(i * 3) % 8]} is checked"
        f" against the {TOPICS[(i * 5 + 1) % 8]} records before the {TOPICS[(i + 2) % 8]} closes.",
    )
    for i in range(40)
]


@pytest.fixture
def org(db) -> Organisation:
    with connection() as conn:
        return create_organisation(conn, name="Acme")


@pytest.fixture
def stand_in() -> Iterator[StandInEmbeddingsServer]:
    with serve_embeddings(dims=DIMS) as server:
        yield server


@pytest.fixture
def embedder(stand_in: StandInEmbeddingsServer) -> EmbeddingsClient:
    return EmbeddingsClient(stand_in.url, f"hashing-{DIMS}", dimensions=DIMS)


def indexed_source(
    org: Organisation,
    documents: list[Document],
    embedder: EmbeddingsClient | None = None,
    kind: SourceKind = SourceKind.DOCS,
) -> uuid.UUID:
    """A new source of ``org`` with ``documents`` published as its current index version."""
    with connection() as conn:
        return publish_source(conn, org, documents, embedder=embedder, kind=kind)


def build_in_progress(
    org: Organisation,
    source: uuid.UUID,
    documents: list[Document],
    embedder: EmbeddingsClient | None = None,
) -> int:
    """A new build of ``source`` holding ``documents``, left unpublished; its version."""
    admin = admin_of(org)
    with connection() as conn:
        version = service.open_build(conn, admin, source)["version"]
        service.add_build_documents(conn, admin, source, version, documents, embedder=embedder)
    return version


def search(
    org: Organisation,
    source_ids: Sequence[uuid.UUID],
    query: str,
    *,
    embedder: EmbeddingsClient | None = None,
    backend: SearchBackend = SearchBackend.EXACT,
    limit: int = 100,
    ef_search: int = DEFAULT_HNSW_EF_SEARCH,
    side_connection: psycopg.Connection | None = None,
) -> list[Candidate]:
    vector = embedder.embed([query])[0] if embedder else None
    with connection() as conn:
        return find_candidates(
            conn,
            org_id=org.id,
            source_ids=source_ids,
            query=query,
            query_vector=vector,
            backend=backend,
            limit=limit,
            ef_search=ef_search,
            side_connection=side_connection,
        )


class NoDatabase:
    """A connection that fails the test if the code under test uses it."""

    def __getattr__(self, name: str):
        raise AssertionError(f"the database was used ({name})")


def test_no_sources_means_no_candidates_and_no_query() -> None:
    found = find_candidates(
        NoDatabase(),  # type: ignore[arg-type]
        org_id=uuid.uuid4(),
        source_ids=[],
        query="refund",
        query_vector=[0.1, 0.2],
        backend=SearchBackend.PGVECTOR,
    )

    assert found == []


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        find_candidates(
            NoDatabase(),  # type: ignore[arg-type]
            org_id=uuid.uuid4(),
            source_ids=[uuid.uuid4()],
            query="refund",
            query_vector=None,
            backend=SearchBackend.EXACT,
            limit=0,
        )


def bm25(
    tf: dict[str, int],
    length: int,
    frequencies: dict[str, int],
    *,
    chunks: int,
    mean_length: float,
) -> float:
    """BM25 of one chunk, from its term frequencies and its length in tokens."""
    norm = K1 * (1 - B + B * length / mean_length)
    return sum(idf(frequencies[t], chunks) * n * (K1 + 1) / (n + norm) for t, n in tf.items())


def paths(candidates: list[Candidate]) -> set[str]:
    with connection() as conn:
        rows = conn.execute(
            "SELECT path FROM chunks WHERE id = ANY(%s)", ([c.chunk_id for c in candidates],)
        ).fetchall()
    return {row["path"] for row in rows}


def contents(candidates: list[Candidate]) -> set[str]:
    with connection() as conn:
        rows = conn.execute(
            "SELECT content FROM chunks WHERE id = ANY(%s)", ([c.chunk_id for c in candidates],)
        ).fetchall()
    return {row["content"] for row in rows}


# --- full text -------------------------------------------------------------------------------


def test_a_chunk_matching_one_of_several_query_words_is_found(org) -> None:
    source = indexed_source(org, REFUND_DOCS)

    found = search(org, [source], "where do I put the receipt for my expenses report")

    assert paths(found) == {"refunds.md"}
    assert all(c.found_by_text and not c.found_by_vector for c in found)


def test_parse_refund_finds_the_go_function_parse_refund(org) -> None:
    source = indexed_source(
        org, [*REFUND_DOCS, Document("refunds.go", GO_REFUNDS)], kind=SourceKind.CODEBASE
    )

    by_words = search(org, [source], "parse refund")
    by_name = search(org, [source], "parseRefund")

    top_words = rank(by_words, lambda _: 1.0)[0].candidate
    top_name = rank(by_name, lambda _: 1.0)[0].candidate
    assert paths([top_words]) == paths([top_name]) == {"refunds.go"}


PY_FOLDERS = """def ensure_folder(path):
    \"\"\"Create the folder unless it is there.\"\"\"
    if not os.path.exists(path):
        os.makedirs(path)
"""

PY_REFUNDS = """def parse_refund(body):
    \"\"\"Read an amount in cents from a request body.\"\"\"
    return int(body)
"""


def test_a_word_of_a_dotted_name_finds_the_code_using_it(org) -> None:
    # PostgreSQL's parser reads "os.path.exists" as one host name; its parts are indexed too.
    source = indexed_source(
        org, [Document("folders.py", PY_FOLDERS), *REFUND_DOCS], kind=SourceKind.CODEBASE
    )

    assert paths(search(org, [source], "exists")) == {"folders.py"}


def test_a_query_naming_a_language_prefers_code_in_that_language(org) -> None:
    source = indexed_source(
        org,
        [Document("refunds.go", GO_REFUNDS), Document("refunds.py", PY_REFUNDS)],
        kind=SourceKind.CODEBASE,
    )

    found = rank(search(org, [source], "python parse refund"), lambda _: 1.0)

    assert paths([found[0].candidate]) == {"refunds.py"}
    assert paths([r.candidate for r in found]) == {"refunds.go", "refunds.py"}


def test_the_top_text_hit_scores_1_and_the_others_a_fraction_of_it(org) -> None:
    source = indexed_source(org, SMALL_SET)

    found = search(org, [source], "refund receipt audit")

    scores = sorted((c.text_score for c in found), reverse=True)
    assert len(scores) > 3
    assert scores[0] == 1.0
    assert all(0 < s <= 1 for s in scores)
    assert all(c.vector_score == 0 for c in found), "no query vector: full text only"


@pytest.mark.parametrize("query", ["", "   ", "the of and", "?!"])
def test_a_query_without_search_words_finds_no_text(org, embedder, query) -> None:
    source = indexed_source(org, REFUND_DOCS, embedder)
    # The stand-in refuses empty input; any vector shows the vector search still runs.
    vector = embedder.embed(["refund"])[0]

    with connection() as conn:
        with_vector = find_candidates(
            conn,
            org_id=org.id,
            source_ids=[source],
            query=query,
            query_vector=vector,
            backend=SearchBackend.EXACT,
        )

    assert search(org, [source], query) == []
    assert with_vector
    assert all(c.found_by_vector and not c.found_by_text for c in with_vector)
    assert all(c.text_score == 0 for c in with_vector)


def test_user_text_with_tsquery_syntax_is_only_words(org) -> None:
    source = indexed_source(org, REFUND_DOCS)

    found = search(org, [source], "receipt' | !(holidays & <-> :* \\ ''")

    assert paths(found) == {"refunds.md", "holidays.md"}


# --- what is searched ------------------------------------------------------------------------


@pytest.mark.parametrize("backend", list(SearchBackend))
def test_only_the_current_index_version_is_searched(org, embedder, backend) -> None:
    admin = admin_of(org)
    source = indexed_source(org, [Document("a.md", "Refund policy, first edition.")], embedder)
    version = build_in_progress(
        org, source, [Document("a.md", "Refund policy, second edition.")], embedder
    )

    before = search(org, [source], "refund policy edition", embedder=embedder, backend=backend)
    with connection() as conn:
        service.publish_build(conn, admin, source, version)
    after = search(org, [source], "refund policy edition", embedder=embedder, backend=backend)

    assert contents(before) == {"Refund policy, first edition."}
    assert {(c.index_version, c.found_by_text, c.found_by_vector) for c in before} == {
        (1, True, True)
    }
    assert contents(after) == {"Refund policy, second edition."}
    assert {c.index_version for c in after} == {version}


@pytest.mark.parametrize("backend", list(SearchBackend))
def test_each_source_is_searched_at_its_own_current_version(org, embedder, backend) -> None:
    """Source a is at version 1 with version 2 being built; source b is at version 2. A search
    of both finds a's version 1 and b's version 2, never a's build of version 2."""
    admin = admin_of(org)
    a = indexed_source(org, [Document("a.md", "Refund policy of team a, in force.")], embedder)
    b = indexed_source(org, [Document("b.md", "Refund policy of team b, replaced.")], embedder)
    with connection() as conn:
        service.index_snapshot(
            conn,
            admin,
            b,
            [Document("b.md", "Refund policy of team b, in force.")],
            embedder=embedder,
        )
    build = build_in_progress(
        org, a, [Document("a.md", "Refund policy of team a, being drafted.")], embedder
    )

    found = search(org, [a, b], "refund policy team", embedder=embedder, backend=backend)

    assert build == 2
    assert contents(found) == {
        "Refund policy of team a, in force.",
        "Refund policy of team b, in force.",
    }
    assert {(c.source_id, c.index_version) for c in found} == {(a, 1), (b, 2)}


@pytest.mark.parametrize("backend", list(SearchBackend))
def test_only_the_given_sources_of_the_organisation_are_searched(org, embedder, backend) -> None:
    searched = indexed_source(org, REFUND_DOCS, embedder)
    same_org_other_source = indexed_source(org, REFUND_DOCS, embedder)
    with connection() as conn:
        other_org = create_organisation(conn, name="Other")
    foreign = indexed_source(other_org, REFUND_DOCS, embedder)

    found = search(org, [searched], "refund receipt", embedder=embedder, backend=backend)
    # An id of another organisation's source is ignored, not searched.
    smuggled = search(org, [foreign], "refund receipt", embedder=embedder, backend=backend)

    assert found
    assert {c.source_id for c in found} == {searched}
    assert same_org_other_source not in {c.source_id for c in found}
    assert smuggled == []


def test_no_sources_means_no_candidates(org, embedder) -> None:
    assert search(org, [], "refund", embedder=embedder) == []


# --- both searches, one candidate list -------------------------------------------------------


@pytest.mark.parametrize("backend", list(SearchBackend))
def test_each_search_fills_in_the_other_score_of_its_single_hit(org, embedder, backend) -> None:
    # GIVEN a chunk that is the best text match and another that is the nearest vector
    # ("the" and "of" count for the hashing embedder, not for English full text)
    source = indexed_source(
        org,
        [
            Document("text.md", "Refund refund receipt receipt."),
            Document("vector.md", "The top of the receipt is the part of the page."),
        ],
        embedder,
    )
    query = "the refund of the receipt"
    query_vector = embedder.embed([query])[0]
    with connection() as conn:
        stored = {
            row["path"]: row for row in conn.execute("SELECT id, path, embedding FROM chunks")
        }
    text, vector = stored["text.md"], stored["vector.md"]
    # BM25 by hand: text.md holds refund and receipt twice each (4 tokens), vector.md receipt
    # once among top, part, page (4 tokens); 2 chunks, mean length 4.
    frequencies = {"refund": 1, "receipt": 2}
    text_rank = bm25({"refund": 2, "receipt": 2}, 4, frequencies, chunks=2, mean_length=4)
    vector_rank = bm25({"receipt": 1}, 4, frequencies, chunks=2, mean_length=4)

    # WHEN each search keeps one hit
    hits = search(org, [source], query, embedder=embedder, backend=backend, limit=1)
    found = {c.chunk_id: c for c in hits}

    # THEN each candidate carries the score the other search would have given it
    assert found[text["id"]] == Candidate(
        chunk_id=text["id"],
        source_id=source,
        index_version=1,
        text_score=1.0,
        vector_score=pytest.approx(cosine(text["embedding"], query_vector)),
        found_by_text=True,
        found_by_vector=False,
    )
    assert found[vector["id"]] == Candidate(
        chunk_id=vector["id"],
        source_id=source,
        index_version=1,
        text_score=pytest.approx(vector_rank / text_rank),
        vector_score=pytest.approx(cosine(vector["embedding"], query_vector)),
        found_by_text=False,
        found_by_vector=True,
    )
    assert 0 < found[vector["id"]].text_score < 1
    assert found[text["id"]].vector_score < found[vector["id"]].vector_score


def test_exact_and_pgvector_rank_the_same_top_results_on_a_small_set(org, embedder) -> None:
    source = indexed_source(org, SMALL_SET, embedder)
    queries = ["refund receipt", "audit of the ledger", "tax payment records", "customer invoice"]

    for query in queries:
        exact = search(org, [source], query, embedder=embedder, backend=SearchBackend.EXACT)
        hnsw = search(org, [source], query, embedder=embedder, backend=SearchBackend.PGVECTOR)

        top = [r.candidate.chunk_id for r in rank(exact, lambda _: 1.0)[:10]]
        assert [r.candidate.chunk_id for r in rank(hnsw, lambda _: 1.0)[:10]] == top
        exact_scores = {c.chunk_id: (c.text_score, c.vector_score) for c in exact}
        for c in hnsw:
            assert exact_scores[c.chunk_id] == pytest.approx((c.text_score, c.vector_score))


def test_the_sql_function_and_pgvector_compute_the_same_exact_hits(org, embedder) -> None:
    source = indexed_source(org, SMALL_SET, embedder)
    query = "audit of the ledger"
    vector = embedder.embed([query])[0]
    scope = SearchQuery(org.id, [source], query, vector, limit=10)

    with connection() as conn:
        by_function = pending_exact_search(conn, scope, pgvector=False).result()
        by_pgvector = pending_exact_search(conn, scope, pgvector=True).result()

    assert len(by_function) == 10
    assert {h.chunk_id for h in by_function} == {h.chunk_id for h in by_pgvector}
    similarity = {h.chunk_id: h.similarity for h in by_pgvector}
    for hit in by_function:
        assert hit.similarity == pytest.approx(similarity[hit.chunk_id], abs=1e-6)


@pytest.mark.parametrize("ef_search", [1, 64, 1000])
@pytest.mark.parametrize("beside", [False, True], ids=["one connection", "side connection"])
def test_the_hnsw_scan_explores_the_configured_candidate_list(
    org, embedder, monkeypatch, database_url, ef_search: int, beside: bool
) -> None:
    source = indexed_source(org, SMALL_SET, embedder)
    shown: list[psycopg.Cursor] = []
    real_send = pgvector_backend.pending_search

    def send_and_look(conn, statement, query):  # type: ignore[no-untyped-def]
        # Sent with the search in its pipeline, and read after it as the hits are: a read of its
        # own would end the side connection's implicit transaction, and the settings with it.
        shown.append(conn.execute("SHOW hnsw.ef_search"))
        return real_send(conn, statement, query)

    monkeypatch.setattr(pgvector_backend, "pending_search", send_and_look)
    with psycopg.connect(database_url, row_factory=dict_row) as side:
        found = search(
            org,
            [source],
            "audit",
            embedder=embedder,
            backend=SearchBackend.PGVECTOR,
            limit=10,
            ef_search=ef_search,
            side_connection=side if beside else None,
        )
        if beside:  # handed back as it came: idle, transactional, the default list
            assert side.info.transaction_status is psycopg.pq.TransactionStatus.IDLE
            assert not side.autocommit
            assert side.execute("SHOW hnsw.ef_search").fetchone()["hnsw.ef_search"] == "40"

    assert [cursor.fetchone()["hnsw.ef_search"] for cursor in shown] == [str(ef_search)]
    # The iterative scan goes on past a short list: the search still finds its `limit` hits.
    assert sum(c.found_by_vector for c in found) == 10
    with connection() as conn:  # the setting was the search's transaction's only
        assert conn.execute("SHOW hnsw.ef_search").fetchone()["hnsw.ef_search"] == "40"


def test_the_pgvector_backend_builds_its_index_once_per_dimension(
    org, embedder, monkeypatch
) -> None:
    source = indexed_source(org, SMALL_SET, embedder)
    calls: list[int] = []
    real_ensure = pgvector_backend.ensure_vector_index

    def counting_ensure(conn, dimensions: int) -> str:
        calls.append(dimensions)
        return real_ensure(conn, dimensions)

    monkeypatch.setattr(pgvector_backend, "ensure_vector_index", counting_ensure)
    monkeypatch.setattr(pgvector_backend, "_indexed", set())

    for query in ["refund", "ledger", "audit"]:
        search(org, [source], query, embedder=embedder, backend=SearchBackend.PGVECTOR)

    assert calls == [DIMS]
    with connection() as conn:
        built = conn.execute(
            "SELECT count(*) FROM pg_indexes WHERE indexname = ANY(%s)",
            ([index_name(DIMS, level) for level in Level],),
        ).fetchone()["count"]
    assert built == len(Level)
