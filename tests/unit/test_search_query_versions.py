"""The sources' current versions as the HNSW statement binds them (search/fulltext.py,
search/pgvector_backend.py): one group per version, each a constant list of sources."""

from __future__ import annotations

import uuid

from context_ledger.search.fulltext import SearchQuery
from context_ledger.search.pgvector_backend import _current_versions

A, B, C = (uuid.UUID(int=n) for n in (1, 2, 3))


def query(versions: dict[uuid.UUID, int]) -> SearchQuery:
    return SearchQuery(uuid.UUID(int=9), list(versions), "refund", [0.1], 10, versions=versions)


def test_sources_are_grouped_by_version_in_version_order() -> None:
    assert query({A: 3, B: 1, C: 3}).version_groups() == [(1, [B]), (3, [A, C])]


def test_each_group_is_bound_as_a_version_and_its_sources() -> None:
    params = query({A: 3, B: 1, C: 3}).params()
    assert (params["version_1"], params["version_sources_1"]) == (1, [B])
    assert (params["version_2"], params["version_sources_2"]) == (3, [A, C])
    assert "version_3" not in params


def test_no_versions_bind_nothing() -> None:
    assert not [name for name in query({}).params() if name.startswith("version")]


def test_the_filter_has_one_alternative_per_group() -> None:
    text = _current_versions(2).as_string(None)
    assert text == (
        "((c.index_version = %(version_1)s::int"
        " AND c.source_id = ANY(%(version_sources_1)s::uuid[]))"
        " OR (c.index_version = %(version_2)s::int"
        " AND c.source_id = ANY(%(version_sources_2)s::uuid[])))"
    )
