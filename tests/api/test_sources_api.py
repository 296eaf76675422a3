"""Sources and index builds over HTTP: permissions, versions, visibility, limits."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest
from api_support import bearer, current_chunks, error_of

from context_ledger.auth.principal import SCOPE_CONTEXT_ADMIN
from context_ledger.db import connection

SPACES = "/api/v1/context/spaces"
SOURCES = "/api/v1/context/sources"


@pytest.fixture
def team(api, admin_headers) -> dict:
    response = api.post(SPACES, headers=admin_headers, json={"name": "Payments", "level": "team"})
    return response.json()


def create_source(api, headers, space_id: str, **body) -> httpx.Response:
    body = {"kind": "docs", "name": "Handbook", **body}
    return api.post(f"{SPACES}/{space_id}/sources", headers=headers, json=body)


@pytest.fixture
def source(api, admin_headers, team) -> dict:
    return create_source(api, admin_headers, team["id"]).json()


def searchable_contents(org, source_id: str) -> list[str]:
    with connection() as conn:
        rows = current_chunks(conn, org_id=org.id, source_ids=[uuid.UUID(source_id)])
    return [row["content"] for row in rows]


def put_index(api, headers, source_id: str, documents: list[dict]) -> httpx.Response:
    return api.put(f"{SOURCES}/{source_id}/index", headers=headers, json={"documents": documents})


def test_a_new_source_answers_201_at_index_version_0(api, admin_headers, team) -> None:
    response = create_source(api, admin_headers, team["id"], kind="codebase", name=" Shop ")

    assert response.status_code == 201
    body = response.json()
    assert uuid.UUID(body.pop("id"))
    assert body.pop("createdAt")
    assert body.pop("updatedAt")
    assert body == {
        "spaceId": team["id"],
        "kind": "codebase",
        "name": "Shop",
        "classification": "internal",
        "indexVersion": 0,
    }


@pytest.mark.parametrize(
    "kind",
    ["codebase", "docs", "conversations", "issues", "workspace_live", "regulatory", "custom"],
)
def test_every_kind_of_the_spec_is_accepted(api, admin_headers, team, kind) -> None:
    assert create_source(api, admin_headers, team["id"], kind=kind).status_code == 201


@pytest.mark.parametrize(
    "body",
    [{"kind": "wiki"}, {"classification": "secret"}, {"name": ""}, {"indexVersion": 3}],
)
def test_an_invalid_source_is_422(api, admin_headers, team, body) -> None:
    assert error_of(create_source(api, admin_headers, team["id"], **body)) == (
        422,
        "validation_failed",
    )


def test_managing_sources_needs_space_admin(api, org, admin_headers, team, source, token) -> None:
    api.put(
        f"{SPACES}/{team['id']}/grants",
        headers=admin_headers,
        json={"subject": "user:reader", "permissions": ["context:space:search"]},
    )
    reader, stranger = bearer(token(org, "reader")), bearer(token(org, "stranger"))
    docs = [{"path": "a.md", "content": "alpha"}]

    assert error_of(create_source(api, reader, team["id"])) == (403, "forbidden")
    assert error_of(put_index(api, reader, source["id"], docs)) == (403, "forbidden")
    assert error_of(api.delete(f"{SOURCES}/{source['id']}", headers=reader)) == (403, "forbidden")
    assert api.get(f"{SOURCES}/{source['id']}", headers=reader).status_code == 200
    assert error_of(api.get(f"{SOURCES}/{source['id']}", headers=stranger)) == (
        404,
        "context.source.not_found",
    )
    assert error_of(create_source(api, stranger, team["id"])) == (404, "context.space.not_found")


def test_sources_of_another_organisation_are_404(api, other_org, team, source, token) -> None:
    foreign = bearer(token(other_org, "root", SCOPE_CONTEXT_ADMIN))

    assert error_of(api.get(f"{SOURCES}/{source['id']}", headers=foreign))[0] == 404
    assert error_of(api.delete(f"{SOURCES}/{source['id']}", headers=foreign))[0] == 404
    assert error_of(put_index(api, foreign, source["id"], []))[0] == 404
    assert error_of(api.get(f"{SPACES}/{team['id']}/sources", headers=foreign))[0] == 404
    assert error_of(api.get(f"{SOURCES}/not-a-uuid", headers=foreign)) == (
        404,
        "context.source.not_found",
    )


def test_sources_are_listed_per_space(api, admin_headers, team, source) -> None:
    other = create_source(api, admin_headers, team["id"], name="Runbooks").json()

    listed = api.get(f"{SPACES}/{team['id']}/sources", headers=admin_headers).json()["sources"]

    assert [s["id"] for s in listed] == [source["id"], other["id"]]


def test_searches_see_only_the_published_version(api, org, admin_headers, source) -> None:
    first = put_index(api, admin_headers, source["id"], [{"path": "a.md", "content": "alpha"}])
    assert searchable_contents(org, source["id"]) == ["alpha"]

    second = put_index(api, admin_headers, source["id"], [{"path": "b.md", "content": "beta"}])

    assert (first.status_code, first.json()["version"]) == (200, 1)
    assert second.json()["version"] == 2
    assert second.json()["state"] == "published"
    assert searchable_contents(org, source["id"]) == ["beta"]
    assert api.get(f"{SOURCES}/{source['id']}", headers=admin_headers).json()["indexVersion"] == 2
    with connection() as conn:
        versions = conn.execute(
            "SELECT DISTINCT index_version FROM chunks WHERE source_id = %s", (source["id"],)
        ).fetchall()
    assert [row["index_version"] for row in versions] == [2]


def test_an_unpublished_build_is_invisible(api, org, admin_headers, source) -> None:
    put_index(api, admin_headers, source["id"], [{"path": "a.md", "content": "alpha"}])
    build = api.post(f"{SOURCES}/{source['id']}/index-versions", headers=admin_headers).json()
    added = api.post(
        f"{SOURCES}/{source['id']}/index-versions/{build['version']}/documents",
        headers=admin_headers,
        json={"documents": [{"path": "b.md", "content": "beta"}]},
    )

    assert (build["version"], build["state"]) == (2, "building")
    assert added.json()["chunks"] == 1
    assert searchable_contents(org, source["id"]) == ["alpha"]


def test_a_large_build_is_filled_in_batches_and_published(api, org, admin_headers, source) -> None:
    base = f"{SOURCES}/{source['id']}/index-versions"
    version = api.post(base, headers=admin_headers).json()["version"]
    for documents in (
        [{"path": "a.md", "content": "first draft"}, {"path": "b.md", "content": "beta"}],
        [{"path": "a.md", "content": "alpha, final"}],  # a path sent again replaces its chunks
    ):
        api.post(
            f"{base}/{version}/documents", headers=admin_headers, json={"documents": documents}
        )

    published = api.post(f"{base}/{version}/publish", headers=admin_headers)

    assert published.status_code == 200
    body = published.json()
    assert (body["state"], body["documents"], body["chunks"]) == ("published", 2, 2)
    assert sorted(searchable_contents(org, source["id"])) == ["alpha, final", "beta"]
    listed = api.get(base, headers=admin_headers).json()["versions"]
    assert [(v["version"], v["state"]) for v in listed] == [(1, "published")]


def test_a_published_or_unknown_build_refuses_more_documents(api, admin_headers, source) -> None:
    base = f"{SOURCES}/{source['id']}/index-versions"
    version = api.post(base, headers=admin_headers).json()["version"]
    api.post(f"{base}/{version}/publish", headers=admin_headers)
    docs = {"documents": [{"path": "a.md", "content": "late"}]}

    assert error_of(api.post(f"{base}/{version}/documents", headers=admin_headers, json=docs)) == (
        409,
        "context.index_version.conflict",
    )
    assert error_of(api.post(f"{base}/{version}/publish", headers=admin_headers))[0] == 409
    for unknown in ("99", "x", "-1"):
        assert error_of(api.post(f"{base}/{unknown}/publish", headers=admin_headers)) == (
            404,
            "context.index_version.not_found",
        )


def test_an_older_build_cannot_replace_a_newer_published_one(api, admin_headers, source) -> None:
    base = f"{SOURCES}/{source['id']}/index-versions"
    older = api.post(base, headers=admin_headers).json()["version"]
    newer = api.post(base, headers=admin_headers).json()["version"]
    api.post(f"{base}/{newer}/publish", headers=admin_headers)

    assert error_of(api.post(f"{base}/{older}/publish", headers=admin_headers)) == (
        409,
        "context.index_version.conflict",
    )


def test_deleting_a_source_hides_its_chunks_at_once(api, org, admin_headers, source) -> None:
    put_index(api, admin_headers, source["id"], [{"path": "a.md", "content": "alpha"}])

    deleted = api.delete(f"{SOURCES}/{source['id']}", headers=admin_headers)

    assert deleted.status_code == 204
    assert searchable_contents(org, source["id"]) == []
    assert api.get(f"{SOURCES}/{source['id']}", headers=admin_headers).status_code == 404


def test_an_oversized_snapshot_is_413(api, admin_headers, source) -> None:
    body = json.dumps({"documents": [{"path": "big.md", "content": "x" * 6_100_000}]})

    response = api.put(
        f"{SOURCES}/{source['id']}/index",
        content=body,
        headers={**admin_headers, "Content-Type": "application/json"},
    )

    assert error_of(response) == (413, "payload_too_large")


@pytest.mark.parametrize(
    "document",
    [
        {"path": "", "content": "x"},
        {"path": "a\u0000b", "content": "x"},
        {"content": "x"},
        {"path": "a.md", "content": "x", "language": "no spaces allowed"},
    ],
)
def test_an_invalid_document_is_422(api, admin_headers, source, document) -> None:
    assert error_of(put_index(api, admin_headers, source["id"], [document])) == (
        422,
        "validation_failed",
    )


def test_chunks_carry_code_metadata_and_full_text(api, org, admin_headers, team) -> None:
    code = create_source(api, admin_headers, team["id"], kind="codebase", name="shop").json()
    go = (
        "package refunds\n\n// Authorise checks a refund.\n"
        "func parseRefund(id string) int {\n\treturn len(id)\n}\n"
    )

    put_index(api, admin_headers, code["id"], [{"path": "refunds/parse.go", "content": go}])

    with connection() as conn:
        row = conn.execute(
            "SELECT path, language, symbol, start_line, end_line, token_count,"
            " length(content_sha256) AS sha_len, tsv @@ to_tsquery('english', 'refund') AS hit"
            " FROM chunks WHERE source_id = %s AND symbol IS NOT NULL",
            (code["id"],),
        ).fetchone()
    assert row["path"] == "refunds/parse.go"
    assert (row["language"], row["symbol"]) == ("go", "parseRefund")
    assert (row["start_line"], row["end_line"]) == (3, 6)
    assert row["token_count"] > 0
    assert row["sha_len"] == 32
    assert row["hit"], "the split identifier parseRefund → parse, refund is searchable"


def test_a_document_with_a_lone_surrogate_is_422(api, admin_headers, source) -> None:
    body = '{"documents": [{"path": "a.md", "content": "bad \\ud800 text"}]}'

    response = api.put(
        f"{SOURCES}/{source['id']}/index",
        content=body,
        headers={**admin_headers, "Content-Type": "application/json"},
    )

    assert error_of(response) == (422, "validation_failed")


def test_an_aborted_build_is_never_served_and_cannot_be_published(
    api, org, admin_headers, source
) -> None:
    put_index(api, admin_headers, source["id"], [{"path": "a.md", "content": "alpha"}])
    base = f"{SOURCES}/{source['id']}/index-versions"
    version = api.post(base, headers=admin_headers).json()["version"]
    docs = {"documents": [{"path": "b.md", "content": "beta"}]}
    api.post(f"{base}/{version}/documents", headers=admin_headers, json=docs)

    aborted = api.post(f"{base}/{version}/abort", headers=admin_headers)

    assert aborted.status_code == 200, aborted.text
    assert (aborted.json()["version"], aborted.json()["state"]) == (2, "aborted")
    assert error_of(api.post(f"{base}/{version}/publish", headers=admin_headers)) == (
        409,
        "context.index_version.conflict",
    )
    assert error_of(api.post(f"{base}/{version}/abort", headers=admin_headers))[0] == 409
    assert error_of(api.post(f"{base}/1/abort", headers=admin_headers))[0] == 409  # published
    assert searchable_contents(org, source["id"]) == ["alpha"]
    with connection() as conn:
        left = conn.execute(
            "SELECT count(*) AS n FROM chunks WHERE source_id = %s AND index_version = %s",
            (source["id"], version),
        ).fetchone()
    assert left["n"] == 0
    listed = api.get(base, headers=admin_headers).json()["versions"]
    assert [(v["version"], v["state"]) for v in listed] == [(1, "published"), (2, "aborted")]


@pytest.mark.parametrize("route", ["snapshot", "batch"])
def test_two_documents_of_one_path_in_one_request_are_422(
    api, admin_headers, source, route
) -> None:
    documents = [
        {"path": "a.md", "content": "alpha"},
        {"path": "b.md", "content": "beta"},
        {"path": "a.md", "content": "alpha, again"},
    ]
    if route == "snapshot":
        response = put_index(api, admin_headers, source["id"], documents)
    else:
        base = f"{SOURCES}/{source['id']}/index-versions"
        version = api.post(base, headers=admin_headers).json()["version"]
        response = api.post(
            f"{base}/{version}/documents", headers=admin_headers, json={"documents": documents}
        )

    assert error_of(response) == (422, "validation_failed")
    assert "documents 0 and 2 have the same path 'a.md'" in response.json()["error"]["message"]
