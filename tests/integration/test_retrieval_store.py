"""The rows a retrieval delivers: those of the versions it searched, of its own organisation."""

from __future__ import annotations

import pytest
from api_support import current_chunks
from search_support import admin_of, publish_source

from context_ledger.db import connection
from context_ledger.sources import service
from context_ledger.sources.model import Document
from context_ledger.sources.store import chunks_by_id
from context_ledger.spaces.service import Organisation, create_organisation

DOCS = [Document("refunds.md", "Refunds need a receipt."), Document("a.md", "Holidays.")]


@pytest.fixture
def org(db) -> Organisation:
    with connection() as conn:
        return create_organisation(conn, name="Acme")


def test_the_rows_of_the_searched_versions_are_read(org) -> None:
    with connection() as conn:
        source = publish_source(conn, org, DOCS)
        ids = [row["id"] for row in current_chunks(conn, org_id=org.id, source_ids=[source])]

        rows = chunks_by_id(conn, org_id=org.id, ids=ids, versions={source: 1})

    assert set(rows) == set(ids)
    assert {row["path"] for row in rows.values()} == {"refunds.md", "a.md"}


def test_a_version_other_than_the_one_searched_is_left_out(org) -> None:
    with connection() as conn:
        source = publish_source(conn, org, DOCS)
    with connection() as conn:  # re-indexed after the search read version 1
        service.index_snapshot(conn, admin_of(org), source, DOCS[:1], embedder=None)
        ids = [row["id"] for row in current_chunks(conn, org_id=org.id, source_ids=[source])]

        assert chunks_by_id(conn, org_id=org.id, ids=ids, versions={source: 1}) == {}
        assert set(chunks_by_id(conn, org_id=org.id, ids=ids, versions={source: 2})) == set(ids)


def test_a_source_not_searched_and_another_organisation_read_nothing(org) -> None:
    with connection() as conn:
        source = publish_source(conn, org, DOCS)
        other = create_organisation(conn, name="Globex")
        ids = [row["id"] for row in current_chunks(conn, org_id=org.id, source_ids=[source])]

        assert chunks_by_id(conn, org_id=org.id, ids=ids, versions={}) == {}
        assert chunks_by_id(conn, org_id=other.id, ids=ids, versions={source: 1}) == {}
