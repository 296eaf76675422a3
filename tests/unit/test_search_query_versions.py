"""The sources' current versions and levels as the HNSW statement binds them (search/fulltext.py,
search/pgvector_backend.py): one group per level and version, each a constant list of sources,
and one index scan per level."""

from __future__ import annotations

import uuid

from context_ledger.search.pgvector_backend import _current_versions, _nearest
from context_ledger.search.query import SearchQuery
from context_ledger.spaces.levels import Level

A, B, C, D = (uuid.UUID(int=n) for n in (1, 2, 3, 4))
PROJECT, TEAM = Level.PROJECT, Level.TEAM


def query(
    versions: dict[uuid.UUID, int], levels: dict[uuid.UUID, Level] | None = None
) -> SearchQuery:
    levels = levels if levels is not None else dict.fromkeys(versions, PROJECT)
    return SearchQuery(
        uuid.UUID(int=9), list(versions), "refund", [0.1], 10, versions=versions, levels=levels
    )


def test_sources_are_grouped_by_version_in_version_order() -> None:
    assert query({A: 3, B: 1, C: 3}).version_groups() == [(PROJECT, 1, [B]), (PROJECT, 3, [A, C])]


def test_sources_of_two_levels_at_one_version_are_two_groups() -> None:
    groups = query({A: 1, B: 1, C: 2}, {A: TEAM, B: PROJECT, C: TEAM}).version_groups()

    assert groups == [(PROJECT, 1, [B]), (TEAM, 1, [A]), (TEAM, 2, [C])]


def test_each_group_is_bound_as_a_version_and_its_sources() -> None:
    params = query({A: 3, B: 1, C: 3}).params()
    assert (params["version_1"], params["version_sources_1"]) == (1, [B])
    assert (params["version_2"], params["version_sources_2"]) == (3, [A, C])
    assert "version_3" not in params


def test_no_versions_bind_nothing() -> None:
    assert not [name for name in query({}).params() if name.startswith("version")]


def test_the_filter_has_one_alternative_per_group() -> None:
    text = _current_versions([1, 2]).as_string(None)
    assert text == (
        "((c.index_version = %(version_1)s::int"
        " AND c.source_id = ANY(%(version_sources_1)s::uuid[]))"
        " OR (c.index_version = %(version_2)s::int"
        " AND c.source_id = ANY(%(version_sources_2)s::uuid[])))"
    )


def test_one_level_is_one_scan_of_its_own_index() -> None:
    text = _nearest(query({A: 1, B: 2}), 8).as_string(None)

    assert text.count("ORDER BY") == 1
    assert '"c"."space_level" = \'project\'' in text
    assert "UNION ALL" not in text


def test_each_level_is_scanned_in_its_own_index_and_the_nearest_of_all_kept() -> None:
    text = _nearest(query({A: 1, B: 1, C: 2}, {A: TEAM, B: PROJECT, C: TEAM}), 8).as_string(None)

    project, team = text.split("UNION ALL")
    assert [t for t in ("'project'", "%(version_1)s") if t not in project] == []
    assert "'team'" not in project
    assert [t for t in ("'team'", "%(version_2)s", "%(version_3)s") if t not in team] == []
    assert text.rstrip().endswith("ORDER BY similarity DESC NULLS LAST LIMIT %(limit)s")
