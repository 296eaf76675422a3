"""DLP on every text a route serves, and on the full-text index, over HTTP.

Secrets are planted in a document's path, heading and content, in a source's name, in a Go
function's name and path (related code), and in a memory's content and metadata. Whatever route
serves them (retrieve with its ``sourcesSummary`` and related chunks, the sources API, the memory
API's writes, list, /relevant, access and revisions), the answer's whole body never holds them.
A full-text search for a redacted value finds exactly what a search for a wrong guess finds: the
index holds the redacted text and the query is searched redacted, so a value no detector finds in
the query matches nothing, and one it finds matches the placeholders of its kind, as any other
value of that kind would.
"""

from __future__ import annotations

import httpx
import pytest
from api_support import bearer, error_of

POLICY = "/api/v1/context/dlp/policy"
RETRIEVE = "/api/v1/context/retrieve"
SPACES = "/api/v1/context/spaces"
SOURCES = "/api/v1/context/sources"
MEMORIES = "/api/context"
PROJECT_KEY = "vault-ops"

PASSWORD = "Tr0ub4dorXyzzy77"
EMAIL = "jane.roe@example.com"
AWS_KEY = "AKIAQ3EGRTW5NB7XKP2M"
SECRETS = (PASSWORD, EMAIL, AWS_KEY)
#: Wrong guesses of the same kinds.
OTHER_EMAIL = "john.doe@example.org"
OTHER_AWS_KEY = "AKIAZ7XQ4MN2PLK8RT3W"

RUNBOOK_PATH = f"runbooks/{EMAIL}/password={PASSWORD}.md"
RUNBOOK = f"""# Rotation for password={PASSWORD}

The quarterly ledger rotation uses password={PASSWORD} and pages {EMAIL} when it is done.
"""
# Go: the call graph appends the callee, whose name is an AWS key id, as related code.
CALLER = """package billing

// Authorise approves a refund once the ledger check passed.
// It signs with password=Tr0ub4dorXyzzy77.
func Authorise(amount int) bool {
	return AKIAQ3EGRTW5NB7XKP2M(amount)
}
"""
CALLEE = f"""package billing

// Owned by {EMAIL}.
func AKIAQ3EGRTW5NB7XKP2M(amount int) bool {{
	return amount < 100
}}
"""
MEMORY = f"The vault rotation password={PASSWORD} is kept by {EMAIL}."


def assert_no_secret(response: httpx.Response) -> None:
    assert response.status_code in (200, 201), response.text
    leaked = [secret for secret in SECRETS if secret in response.text]
    assert leaked == [], f"{leaked} delivered in {response.request.url.path}"


class Planted:
    """A project space with a docs source, a Go codebase and a memory, all holding the secrets."""

    def __init__(self, api: httpx.Client, admin: dict[str, str]) -> None:
        self.api, self.admin = api, admin
        created = api.post(SPACES, headers=admin, json={"name": "Vault", "level": "project"})
        self.project = created.json()["id"]
        self.docs = self.source(f"Runbooks of {EMAIL}", "docs", RUNBOOK_PATH, RUNBOOK)
        self.code = self.source(
            "billing",
            "codebase",
            "billing/refunds.go",
            CALLER,
            (f"billing/password={PASSWORD}.go", CALLEE),
        )
        self.memory = api.post(
            f"{MEMORIES}/{PROJECT_KEY}",
            headers=admin,
            json={"content": MEMORY, "metadata": {"owner": EMAIL, "note": f"password={PASSWORD}"}},
        )

    def source(self, name: str, kind: str, path: str, text: str, *more: tuple[str, str]) -> str:
        body = {"kind": kind, "name": name}
        created = self.api.post(f"{SPACES}/{self.project}/sources", headers=self.admin, json=body)
        assert created.status_code == 201, created.text
        documents = [{"path": p, "content": c} for p, c in ((path, text), *more)]
        indexed = self.api.put(
            f"{SOURCES}/{created.json()['id']}/index",
            headers=self.admin,
            json={"documents": documents},
        )
        assert indexed.status_code == 200, indexed.text
        return created.json()["id"]

    def retrieve(self, query: str, space: str | None = None) -> httpx.Response:
        body = {"query": query, "spaceId": space or self.project}
        return self.api.post(RETRIEVE, headers=self.admin, json=body)

    def found(self, query: str, space: str | None = None) -> set[str]:
        response = self.retrieve(query, space)
        assert response.status_code == 200, response.text
        return {chunk["id"] for chunk in response.json()["chunks"]}

    def memory_space(self) -> str:
        spaces = self.api.get(SPACES, headers=self.admin).json()["spaces"]
        return next(s["id"] for s in spaces if s["key"] == PROJECT_KEY)


@pytest.fixture
def planted(api, admin_headers) -> Planted:
    return Planted(api, admin_headers)


def test_retrieve_redacts_paths_titles_headings_and_source_names_not_only_content(
    planted,
) -> None:
    response = planted.retrieve("quarterly ledger rotation")

    assert_no_secret(response)
    body = response.json()
    runbook = next(c for c in body["chunks"] if c["sourceId"] == planted.docs)
    assert runbook["path"] == "runbooks/[REDACTED:email]/password=[REDACTED:password]"
    assert runbook["title"] == "Rotation for password=[REDACTED:password]"
    summary = next(s for s in body["sourcesSummary"] if s["id"] == planted.docs)
    assert summary["name"] == "Runbooks of [REDACTED:email]"


def test_related_code_is_delivered_with_its_symbol_and_path_redacted(planted) -> None:
    response = planted.retrieve("authorise refund once the ledger check passed")

    assert_no_secret(response)
    related = [c for c in response.json()["chunks"] if c["metadata"].get("relatedRelation")]
    assert [c["metadata"]["relatedRelation"] for c in related] == ["calls"]
    assert related[0]["title"] == "[REDACTED:aws_access_key]"
    assert related[0]["metadata"]["symbol"] == "[REDACTED:aws_access_key]"


def test_the_sources_api_serves_source_names_redacted_like_the_sources_summary(planted) -> None:
    listed = planted.api.get(f"{SPACES}/{planted.project}/sources", headers=planted.admin)
    one = planted.api.get(f"{SOURCES}/{planted.docs}", headers=planted.admin)

    assert_no_secret(listed)
    assert_no_secret(one)
    assert one.json()["name"] == "Runbooks of [REDACTED:email]"


def test_every_memory_route_serves_the_memory_redacted_as_retrieve_does(planted) -> None:
    api, admin = planted.api, planted.admin
    memory_id = planted.memory.json()["id"]
    changed = api.patch(
        f"{MEMORIES}/{PROJECT_KEY}/{memory_id}",
        headers=admin,
        json={"content": f"{MEMORY} Rotated quarterly."},
    )

    answers = [
        planted.memory,
        changed,
        api.get(f"{MEMORIES}/{PROJECT_KEY}", headers=admin),
        api.get(f"{MEMORIES}/{PROJECT_KEY}/{memory_id}", headers=admin),
        api.get(f"{MEMORIES}/{PROJECT_KEY}/relevant", headers=admin, params={"query": "vault"}),
        api.get(f"{MEMORIES}/{PROJECT_KEY}/{memory_id}/revisions", headers=admin),
        api.post(f"{MEMORIES}/{PROJECT_KEY}/{memory_id}/access", headers=admin),
        planted.retrieve("vault rotation", planted.memory_space()),
    ]

    for answer in answers:
        assert_no_secret(answer)
    listed = answers[2].json()["memories"][0]
    chunk = answers[-1].json()["chunks"][0]
    assert listed["content"] == chunk["content"], "same chunk, same policy"
    assert listed["metadata"] == {
        "owner": "[REDACTED:email]",
        "note": "password=[REDACTED:password]",
    }
    assert answers[3].json() == listed
    revisions = answers[5].json()["revisions"]
    assert [r["content"].count("[REDACTED:") for r in revisions] == [2, 2]


def test_the_memory_list_substring_filter_matches_the_delivered_text_only(planted) -> None:
    def listed(q: str) -> list[str]:
        response = planted.api.get(
            f"{MEMORIES}/{PROJECT_KEY}", headers=planted.admin, params={"q": q}
        )
        assert response.status_code == 200, response.text
        return [m["id"] for m in response.json()["memories"]]

    assert listed(PASSWORD) == listed("Hunter2Wrong99") == []
    assert listed("rotation") == [planted.memory.json()["id"]]


def test_a_text_search_for_a_redacted_value_finds_nothing_an_ordinary_word_still_finds(
    planted,
) -> None:
    memories = planted.memory_space()

    assert planted.found(PASSWORD) == set()
    assert planted.found(PASSWORD, memories) == set()
    assert planted.found("xyzzy77") == set(), "nor the parts code chunks index of identifiers"
    assert len(planted.found("quarterly")) == 1
    assert planted.found("approves") != set()
    assert len(planted.found("vault", memories)) == 1


def test_a_text_search_for_a_redacted_value_finds_what_a_wrong_guess_of_its_kind_finds(
    planted,
) -> None:
    memories = planted.memory_space()

    assert planted.found(EMAIL) == planted.found(OTHER_EMAIL)
    assert planted.found(AWS_KEY) == planted.found(OTHER_AWS_KEY)
    assert planted.found(f"password={PASSWORD}") == planted.found("password=Hunter2Wrong99")
    assert planted.found(EMAIL, memories) == planted.found(OTHER_EMAIL, memories)


def test_a_pattern_added_after_indexing_keeps_a_search_from_confirming_its_matches(
    planted,
) -> None:
    code = "orchid4711"
    planted.source("Lockers", "docs", "lockers.md", f"The spare locker opens with {code}.")
    put = planted.api.put(
        POLICY,
        headers=planted.admin,
        json={"patterns": [{"name": "locker", "pattern": "orchid[0-9]{4}"}]},
    )
    assert put.status_code == 200, put.text

    assert planted.found(code) == planted.found("orchid9999")
    assert code not in planted.retrieve("spare locker").text, "delivery applies it at once"


def test_a_searcher_gets_the_same_redacted_answers(planted, org, token) -> None:
    grant = planted.api.put(
        f"{SPACES}/{planted.project}/grants",
        headers=planted.admin,
        json={"subject": "user:alice", "permissions": ["context:space:search"]},
    )
    assert grant.status_code == 204
    alice = bearer(token(org, "alice"))

    response = planted.api.post(
        RETRIEVE, headers=alice, json={"query": "quarterly", "spaceId": planted.project}
    )

    assert_no_secret(response)
    assert len(response.json()["chunks"]) == 1


def test_a_scan_failure_while_indexing_indexes_nothing(planted, break_scans_of) -> None:
    created = planted.api.post(
        f"{SPACES}/{planted.project}/sources",
        headers=planted.admin,
        json={"kind": "docs", "name": "Broken"},
    ).json()["id"]
    break_scans_of("scan-breaker")

    indexed = planted.api.put(
        f"{SOURCES}/{created}/index",
        headers=planted.admin,
        json={"documents": [{"path": "broken.md", "content": "Marigold notes scan-breaker"}]},
    )

    assert error_of(indexed) == (503, "context.dlp.scan_failed")
    source = planted.api.get(f"{SOURCES}/{created}", headers=planted.admin).json()
    assert source["indexVersion"] == 0
    assert planted.found("marigold") == set()


def test_a_scan_failure_while_delivering_a_memory_delivers_nothing(
    api, admin_headers, break_scans_of
) -> None:
    written = api.post(
        f"{MEMORIES}/{PROJECT_KEY}", headers=admin_headers, json={"content": "Marigold notes."}
    )
    assert written.status_code == 201, written.text
    break_scans_of("Marigold")

    listed = api.get(f"{MEMORIES}/{PROJECT_KEY}", headers=admin_headers)

    assert error_of(listed) == (503, "context.dlp.scan_failed")
    assert "Marigold" not in listed.text
