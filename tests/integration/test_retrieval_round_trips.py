"""How many round trips a retrieval makes to PostgreSQL, counted from libpq's trace: reads that do
not depend on each other travel together (db/pending.py), and a pipeline is read after its block,
which synchronises it once (a read inside it would cost a second round trip)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest
from protocol_trace import count, traced
from psycopg.rows import dict_row
from search_support import admin_of, find_candidates, publish_source

from context_ledger.auth.principal import Principal
from context_ledger.db import autocommit, connection
from context_ledger.embeddings.client import EmbeddingsClient
from context_ledger.http.ratelimit import Quota, RateLimitedError
from context_ledger.http.retrieve import RetrieveRequest
from context_ledger.local.embeddings_server import serve_embeddings
from context_ledger.ratelimit.buckets import request_buckets
from context_ledger.retrieval.cache import SearchCache
from context_ledger.retrieval.service import Dependencies, retrieve
from context_ledger.search.candidates import with_terms
from context_ledger.search.hybrid import rank
from context_ledger.search.query import SearchQuery
from context_ledger.settings import SearchBackend, load_settings
from context_ledger.sources.model import Document
from context_ledger.spaces.levels import Level
from context_ledger.spaces.permissions import Permission
from context_ledger.spaces.service import (
    Organisation,
    create_organisation,
    create_space,
    set_grants,
)

DIMS = 32
SEARCH = Permission.SEARCH
#: Each holds one term of "refund receipt": their text scores' ratio is that of the terms' weights.
TWO_TERMS = [
    Document("refunds.md", "Refunds are paid within a week."),
    Document("receipts.md", "Keep the receipt of every purchase."),
]
DOCS = [
    Document("refunds.md", "Refunds need a receipt and the approval of a team lead."),
    Document("holidays.md", "The office is closed on public holidays."),
]

# The request's connection, after the rate limit: the chain with its sources, the query's terms
# over them, the DLP policy and the level weights; the text search; the delivered chunks' rows.
REQUEST_ROUND_TRIPS = 3


@pytest.fixture
def org(db) -> Organisation:
    with connection() as conn:
        return create_organisation(conn, name="Acme")


@pytest.fixture
def embedder() -> Iterator[EmbeddingsClient]:
    with serve_embeddings(dims=DIMS) as server:
        yield EmbeddingsClient(server.url, f"hashing-{DIMS}", dimensions=DIMS)


def retrieve_traced(
    principal: Principal,
    body: dict,
    *,
    embedder: EmbeddingsClient | None = None,
    backend: str = "exact",
    side: psycopg.Connection | None = None,
    cache: SearchCache | None = None,
    quota: Quota | None = None,
):
    """The retrieval's answer and the trace of the request's connection."""

    @contextmanager
    def side_connection() -> Iterator[psycopg.Connection | None]:
        yield side

    deps = Dependencies(
        settings=load_settings(KEYSTONE_CONTEXT_SEARCH_BACKEND=backend),
        cache=cache or SearchCache(),
        embedder=embedder,
        side_connection=side_connection,
        count_request=quota.send if quota else None,
    )
    request = RetrieveRequest.model_validate({"excludeRelated": True, **body}).to_query()
    with connection() as conn, autocommit(conn), unprepared(conn), traced(conn) as trace:
        answer = retrieve(conn, principal, request, client_header=None, deps=deps)
    return answer, trace


@contextmanager
def unprepared(conn: psycopg.Connection) -> Iterator[None]:
    """psycopg prepares a statement on its fifth execution on a connection, a round trip once
    per statement and connection; pooled connections reach it at different times, so the counts
    are taken without it."""
    threshold = conn.prepare_threshold
    conn.prepare_threshold = None
    try:
        yield
    finally:
        conn.prepare_threshold = threshold


def test_a_retrieval_from_a_space_reads_in_three_round_trips(org) -> None:
    with connection() as conn:
        publish_source(conn, org, DOCS)

    answer, trace = retrieve_traced(
        admin_of(org), {"query": "refund receipt", "spaceId": str(org.space_id)}
    )

    assert answer.chunks, "the retrieval found something, so every step ran"
    assert trace.round_trips == REQUEST_ROUND_TRIPS


def test_without_a_space_the_personal_space_travels_with_the_organisation_chain(org) -> None:
    with connection() as conn:
        publish_source(conn, org, DOCS)
    person = admin_of(org)
    assert person.is_person

    answer, trace = retrieve_traced(person, {"query": "refund receipt"})

    assert answer.chunks
    assert trace.round_trips == REQUEST_ROUND_TRIPS
    with connection() as conn:  # created on first use, in that same round trip
        personal = conn.execute(
            "SELECT count(*) AS n FROM spaces WHERE org_id = %s AND level = 'personal'",
            (org.id,),
        ).fetchone()
    assert personal["n"] == 1


def test_an_unknown_space_is_still_a_404_when_its_chain_is_read_after_the_pipeline(org) -> None:
    from context_ledger.errors import SpaceNotFoundError

    with pytest.raises(SpaceNotFoundError):
        retrieve_traced(
            admin_of(org), {"query": "refund", "spaceId": "00000000-0000-4000-8000-000000000000"}
        )


@pytest.mark.parametrize("backend", ["exact", "pgvector"])
def test_a_hybrid_retrieval_embeds_the_query_between_the_same_round_trips(
    org, embedder, database_url, backend: str
) -> None:
    with connection() as conn:
        publish_source(conn, org, DOCS, embedder=embedder)
    body = {"query": "refund receipt", "spaceId": str(org.space_id)}
    with psycopg.connect(database_url, row_factory=dict_row) as side:
        retrieve_traced(admin_of(org), body, embedder=embedder, backend=backend, side=side)
        with unprepared(side), traced(side) as side_trace:  # the HNSW index is ensured by now
            answer, trace = retrieve_traced(
                admin_of(org), body, embedder=embedder, backend=backend, side=side
            )

    assert answer.chunks[0].row["path"] == "refunds.md"
    assert trace.round_trips == REQUEST_ROUND_TRIPS
    # The vector search beside it: for HNSW its settings and the search together.
    assert side_trace.round_trips == 1


@pytest.mark.parametrize("backend", ["exact", "pgvector"])
def test_without_a_spare_connection_both_searches_share_one_round_trip(
    org, embedder, backend: str
) -> None:
    with connection() as conn:
        publish_source(conn, org, DOCS, embedder=embedder)
    body = {"query": "refund receipt", "spaceId": str(org.space_id)}
    retrieve_traced(admin_of(org), body, embedder=embedder, backend=backend)  # index ensured

    answer, trace = retrieve_traced(admin_of(org), body, embedder=embedder, backend=backend)

    assert answer.chunks[0].row["path"] == "refunds.md"
    assert answer.search_mode == "hybrid"
    assert trace.round_trips == REQUEST_ROUND_TRIPS


def test_a_cached_search_costs_the_chain_and_the_rows_only(org) -> None:
    with connection() as conn:
        publish_source(conn, org, DOCS)
    body = {"query": "refund receipt", "spaceId": str(org.space_id)}
    cache = SearchCache()
    first, _ = retrieve_traced(admin_of(org), body, cache=cache)

    again, trace = retrieve_traced(admin_of(org), body, cache=cache)

    assert [c.row["id"] for c in again.chunks] == [c.row["id"] for c in first.chunks]
    assert trace.round_trips == 2, "the sources' versions came with the chain"


def test_a_source_of_the_chain_not_searched_leaves_the_terms_without_another_round_trip(
    org,
) -> None:
    """The chain's terms count every source of the chain; when the caller may not search one,
    they are counted again over the sources searched (one more round trip), so a source the
    caller cannot read does not move the scores of those it can."""
    admin = admin_of(org)
    with connection() as conn:
        team = create_space(conn, admin, name="Payments", level=Level.TEAM, parent_id=None)
        set_grants(conn, admin, space_id=team.id, subject="user:ann", permissions=[SEARCH])
    with connection() as conn:
        hidden = [Document(f"hidden-{n}.md", f"Refund number {n} was paid.") for n in range(5)]
        publish_source(conn, org, hidden)
    with connection() as conn:
        searched = publish_source(conn, org, TWO_TERMS, space_id=team.id)
        alone = find_candidates(
            conn,
            org_id=org.id,
            source_ids=[searched],
            query="refund receipt",
            query_vector=None,
            backend=SearchBackend.EXACT,
        )
    ann = Principal(org_id=org.id, user_id="ann", client_id="t", scopes=frozenset())

    answer, trace = retrieve_traced(ann, {"query": "refund receipt", "spaceId": str(team.id)})

    assert {c.source.id for c in answer.chunks} == {searched}
    assert len(answer.chunks) == 2
    assert [c.row["id"] for c in answer.chunks] == [c.chunk_id for c in alone]
    team_weight = load_settings().effective_level_weights[Level.TEAM]
    assert [c.score for c in answer.chunks] == [r.score for r in rank(alone, lambda c: team_weight)]
    # The terms are counted per source with the chain: the searched ones are summed in Python.
    assert trace.round_trips == REQUEST_ROUND_TRIPS


def org_limit(org: Organisation, per_minute: int) -> Quota:
    """One request's count against ``org``'s limit of ``per_minute`` (no burst beyond it)."""
    settings = load_settings(KEYSTONE_RATE_LIMIT_ORG_OVERRIDES=f"{org.id}={per_minute}")
    return Quota(admin_of(org), request_buckets(admin_of(org), "", settings))


def test_the_rate_limit_travels_with_the_chain(org) -> None:
    with connection() as conn:
        publish_source(conn, org, DOCS)
    body = {"query": "refund receipt", "spaceId": str(org.space_id)}
    quota = org_limit(org, 1)

    answer, trace = retrieve_traced(admin_of(org), body, quota=quota)

    assert answer.chunks
    assert quota.taken
    assert trace.round_trips == REQUEST_ROUND_TRIPS
    with pytest.raises(RateLimitedError):  # it was counted: the limit is used up
        retrieve_traced(admin_of(org), body, quota=org_limit(org, 1))


def test_a_refused_retrieval_goes_no_further_than_its_first_round_trip(org) -> None:
    with connection() as conn:
        publish_source(conn, org, DOCS)
    body = {"query": "refund receipt", "spaceId": str(org.space_id)}
    retrieve_traced(admin_of(org), body, quota=org_limit(org, 1))
    deps = Dependencies(
        settings=load_settings(),
        cache=SearchCache(),
        embedder=None,
        count_request=org_limit(org, 1).send,
    )
    request = RetrieveRequest.model_validate(body).to_query()

    refused = pytest.raises(RateLimitedError)
    with connection() as conn, autocommit(conn), unprepared(conn), traced(conn) as trace, refused:
        retrieve(conn, admin_of(org), request, client_header=None, deps=deps)

    assert trace.round_trips == 1


def test_terms_and_versions_come_back_in_one_round_trip(org) -> None:
    with connection() as conn:
        source = publish_source(conn, org, DOCS)
        search = SearchQuery(org.id, [source], "refund receipt", [0.1] * DIMS, 10)
        with traced(conn) as trace:
            found = with_terms(conn, search, versions=True)

    assert found.terms.lexemes
    assert found.versions == {source: 1}
    assert trace.round_trips == 1


def test_a_round_trip_is_each_time_the_client_asks_for_answers() -> None:
    statement = ["F\t16\tParse\t x", "F\t14\tBind\t x", "F\t6\tDescribe\t P", "F\t9\tExecute\t x"]
    answers = ["B\t4\tParseComplete", "B\t4\tBindComplete", "B\t11\tDataRow\t 1"]
    ready = "B\t5\tReadyForQuery\t I"
    one_statement = [*statement, "F\t4\tSync", *answers, ready]
    # Two statements in a pipeline, the first answered while the second is sent, read after it.
    pipeline = [*statement, *answers, *statement, "F\t4\tSync", "F\t4\tFlush", *answers, ready]
    # The same, the first read inside the pipeline: a Flush, then the block's Sync.
    read_inside = [*statement, *statement, "F\t4\tFlush", *answers, *answers]
    read_inside += ["F\t4\tSync", "F\t4\tFlush", ready]
    simple = ["F\t13\tQuery\t x", ready]

    assert count("\n".join(one_statement)).round_trips == 1
    assert count("\n".join(pipeline)).round_trips == 1
    assert count("\n".join(read_inside)).round_trips == 2
    assert count("\n".join(simple)).round_trips == 1
    assert count("\n".join(simple)).sent == ["Query"]
