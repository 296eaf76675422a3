"""POST /api/v1/context/retrieve over HTTP: chain, permissions, ranking, budget, related code,
cache, attribution."""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path

import httpx
import pytest
from api_support import attribution_row, bearer, error_of

from context_ledger.auth.principal import SCOPE_CONTEXT_ADMIN
from context_ledger.errors import UNSHOWN_NAME
from context_ledger.settings import get_settings

RETRIEVE = "/api/v1/context/retrieve"
SPACES = "/api/v1/context/spaces"
SOURCES = "/api/v1/context/sources"
GO_PACKAGE = Path(__file__).resolve().parents[1] / "fixtures" / "code_graph" / "go"


class World:
    """An organisation with a hierarchy, sources on every level and alice's grants."""

    def __init__(self, api: httpx.Client, admin: dict[str, str]) -> None:
        self.api, self.admin = api, admin
        self.dept = self.space("Engineering", "department")
        self.team = self.space("Payments", "team", self.dept)
        self.project = self.space("Billing", "project", self.team)
        self.sources: dict[str, str] = {}

    def space(self, name: str, level: str, parent: str | None = None) -> str:
        body = {"name": name, "level": level, **({"parentId": parent} if parent else {})}
        response = self.api.post(SPACES, headers=self.admin, json=body)
        assert response.status_code == 201, response.text
        return response.json()["id"]

    def source(
        self,
        space: str,
        name: str,
        documents: list[dict],
        kind: str = "docs",
        headers: dict[str, str] | None = None,
    ) -> str:
        headers = headers or self.admin
        created = self.api.post(
            f"{SPACES}/{space}/sources", headers=headers, json={"kind": kind, "name": name}
        )
        assert created.status_code == 201, created.text
        source_id = created.json()["id"]
        indexed = self.api.put(
            f"{SOURCES}/{source_id}/index", headers=headers, json={"documents": documents}
        )
        assert indexed.status_code == 200, indexed.text
        self.sources[name] = source_id
        return source_id

    def grant(self, space: str, subject: str, permission: str = "context:space:search") -> None:
        response = self.api.put(
            f"{SPACES}/{space}/grants",
            headers=self.admin,
            json={"subject": subject, "permissions": [permission]},
        )
        assert response.status_code == 204


def doc(path: str, text: str) -> dict:
    return {"path": path, "content": text}


@pytest.fixture
def world(api, admin_headers) -> World:
    w = World(api, admin_headers)
    w.source(w.dept, "dept-docs", [doc("dept.md", "Refund escalation policy for the department.")])
    w.source(w.team, "team-docs", [doc("team.md", "Refund approvals need a team lead.")])
    w.source(
        w.project, "billing-docs", [doc("billing.md", "Refund approvals in billing use receipts.")]
    )
    go = [
        doc(str(p.relative_to(GO_PACKAGE)), p.read_text())
        for p in sorted(GO_PACKAGE.rglob("*"))
        if p.is_file()
    ]
    w.source(w.project, "shop", go, kind="codebase")
    w.grant(w.team, "user:alice")
    return w


@pytest.fixture
def alice(org, token) -> dict[str, str]:
    return bearer(token(org, "alice"))


def retrieve(api, headers, **body) -> httpx.Response:
    return api.post(RETRIEVE, headers=headers, json={"query": "refund approvals", **body})


def paths(response: httpx.Response) -> list[str]:
    return [c["path"] for c in response.json()["chunks"]]


def test_a_retrieval_searches_the_space_and_the_ancestors_the_caller_may_search(
    api, world, alice
) -> None:
    response = retrieve(api, alice, spaceId=world.project, excludeRelated=True)

    assert response.status_code == 200
    found = paths(response)
    assert "billing.md" in found
    assert "team.md" in found
    assert "dept.md" not in found, "alice holds no context:space:search on the department"
    levels = {c["path"]: c["level"] for c in response.json()["chunks"]}
    assert (levels["billing.md"], levels["team.md"]) == ("project", "team")


def test_without_a_space_the_organisation_chain_is_searched(api, org, world, alice, token) -> None:
    personal = next(
        s["id"] for s in api.get(SPACES, headers=alice).json()["spaces"] if s["level"] == "personal"
    )
    world.source(
        personal, "notes", [doc("mine.md", "My refund approvals checklist.")], headers=alice
    )
    world.source(
        _org_space(api, world.admin), "org-docs", [doc("org.md", "Refund approvals, org-wide.")]
    )

    mine = paths(retrieve(api, alice))
    admins = paths(retrieve(api, world.admin))

    assert mine == ["mine.md"], "alice has no grant on the organisation space"
    assert "org.md" in admins
    assert "mine.md" not in admins, "a personal space is its owner's alone"


def _org_space(api, admin) -> str:
    return next(
        s["id"]
        for s in api.get(SPACES, headers=admin).json()["spaces"]
        if s["level"] == "organisation"
    )


@pytest.mark.parametrize(
    "space_id",
    [
        "billing",
        "1234",
        str(uuid.uuid4()),
        pytest.param("b" * 65, id="65-characters"),
        pytest.param("x" * 10_000, id="10000-characters"),
        str(uuid.uuid4()) + "-and-more",
        12345,
        0,
        1.5,
        True,
        False,
        [],
        [str(uuid.uuid4())],
        {},
        {"id": str(uuid.uuid4())},
    ],
)
def test_a_space_id_that_is_not_a_known_uuid_is_404_whatever_its_length_or_type(
    api, world, alice, space_id
) -> None:
    assert error_of(retrieve(api, alice, spaceId=space_id)) == (404, "context.space.not_found")


@pytest.mark.parametrize("space_id", ["", None])
def test_an_empty_or_null_space_id_is_the_organisation_chain(api, world, alice, space_id) -> None:
    assert retrieve(api, alice, spaceId=space_id).status_code == 200


def test_a_space_the_caller_cannot_see_is_404(api, world, alice) -> None:
    assert error_of(retrieve(api, alice, spaceId=world.dept)) == (404, "context.space.not_found")


def test_another_organisations_space_is_404(api, world, other_org, token) -> None:
    foreign = bearer(token(other_org, "root", SCOPE_CONTEXT_ADMIN))

    assert error_of(retrieve(api, foreign, spaceId=world.project)) == (
        404,
        "context.space.not_found",
    )


def test_a_body_naming_another_organisation_is_refused(api, world, alice) -> None:
    response = retrieve(api, alice, spaceId=world.project, orgId=str(uuid.uuid4()))

    assert error_of(response) == (403, "forbidden")


@pytest.mark.parametrize(
    "body",
    [
        {"tokenBudget": -1},
        {"sourceKinds": ["wiki"]},
        {"maxPerLevel": 0},
        {"query": ""},
        {"score": 1},
    ],
)
def test_invalid_fields_are_422(api, world, alice, body) -> None:
    assert error_of(retrieve(api, alice, **body)) == (422, "validation_failed")


def test_an_unknown_field_named_like_a_key_is_refused_without_echoing_the_key(
    api, world, alice
) -> None:
    """Names no detector knows (a password pasted where a key goes) are not repeated either:
    only names shaped like the API's fields (letters, '_', '-') are."""
    keys = ["AKIAQ3EGRTW5NB7XKP2M", "Ldap!Bind2023", "SECRET_KEY_BASE=a3f9c8e1d2"]

    answer = retrieve(api, alice, **dict.fromkeys(keys, "y"), spaceID="typo")

    assert error_of(answer) == (422, "validation_failed")
    message = answer.json()["error"]["message"]
    for key in keys:
        assert key not in answer.text
    assert message.count(f"{UNSHOWN_NAME}: Extra inputs are not permitted") == 3
    assert "spaceID: Extra inputs are not permitted" in message, "a plain name is still named"


def test_the_answer_has_every_field_of_the_spec(api, world, alice) -> None:
    body = retrieve(api, alice, spaceId=world.project, excludeRelated=True).json()

    spec_fields = {"chunks", "sourcesSummary", "tokensUsed", "attributionId", "requestId"}
    assert set(body) == spec_fields | {"searchMode", "warnings"}  # ours: how it was searched
    chunk = body["chunks"][0]
    assert set(chunk) == {
        "id",
        "sourceId",
        "spaceId",
        "level",
        "kind",
        "path",
        "title",
        "content",
        "score",
        "tokens",
        "metadata",
    }
    assert body["tokensUsed"] == sum(c["tokens"] for c in body["chunks"])
    assert uuid.UUID(body["attributionId"])
    summary = {s["name"]: s for s in body["sourcesSummary"]}
    assert summary["billing-docs"]["chunks"] == sum(
        1 for c in body["chunks"] if c["sourceId"] == summary["billing-docs"]["id"]
    )
    scores = [c["score"] for c in body["chunks"]]
    assert scores == sorted(scores, reverse=True)


def test_the_token_budget_is_never_exceeded(api, world, alice) -> None:
    full = retrieve(api, alice, spaceId=world.project, excludeRelated=True).json()
    smallest = min(c["tokens"] for c in full["chunks"])

    tight = retrieve(api, alice, spaceId=world.project, tokenBudget=smallest, excludeRelated=True)
    nothing = retrieve(api, alice, spaceId=world.project, tokenBudget=0)

    assert tight.json()["tokensUsed"] <= smallest
    assert len(tight.json()["chunks"]) >= 1, (
        "a chunk that fits is delivered even if bigger ones do not"
    )
    assert nothing.json()["chunks"] == []
    assert nothing.json()["tokensUsed"] == 0


def test_results_are_capped_per_level(api, world, alice) -> None:
    body = retrieve(api, alice, spaceId=world.project, maxPerLevel=1, excludeRelated=True).json()

    levels = [c["level"] for c in body["chunks"]]
    assert len(levels) == len(set(levels))


def test_source_kinds_restrict_the_sources(api, world, alice) -> None:
    body = retrieve(api, alice, spaceId=world.project, sourceKinds=["codebase"]).json()

    assert body["chunks"]
    assert {c["kind"] for c in body["chunks"]} == {"codebase"}


def test_the_project_level_outweighs_the_team_level_for_the_same_text(api, world, alice) -> None:
    # The same words (equal scores before weights), not the same text: an identical copy would
    # be delivered once (test_retrieve_duplicates_api.py).
    same = "Chargeback windows close after ninety days"
    world.source(world.team, "team-faq", [doc("team-faq.md", same + ".")])
    world.source(world.project, "project-faq", [doc("project-faq.md", same + "!")])

    body = retrieve(
        api, alice, spaceId=world.project, query="chargeback windows", excludeRelated=True
    ).json()

    ranked = [c for c in body["chunks"] if c["path"].endswith("faq.md")]
    assert [c["path"] for c in ranked] == ["project-faq.md", "team-faq.md"]
    assert ranked[0]["score"] == pytest.approx(ranked[1]["score"] * 1.20 / 1.00, rel=1e-3)


def test_related_code_follows_the_ranked_chunks(api, world, alice) -> None:
    body = retrieve(
        api,
        alice,
        spaceId=world.project,
        query="Authorise refund request",
        sourceKinds=["codebase"],
        tokenBudget=32000,
    ).json()

    related = [c for c in body["chunks"] if "relatedTo" in c["metadata"]]
    ranked = [c for c in body["chunks"] if "relatedTo" not in c["metadata"]]
    assert related, "callers, callees or tests of the top code chunks are appended"
    assert body["chunks"] == ranked + related
    assert all(c["score"] == 0 for c in related)
    assert len(related) <= 6
    assert {c["metadata"]["relatedRelation"] for c in related} <= {
        "calls",
        "called_by",
        "tested_by",
    }
    top3 = {c["id"] for c in ranked[:3]}
    assert {c["metadata"]["relatedTo"] for c in related} <= top3


CROSSING = {
    "go.mod": "module example.com/zoo\n\ngo 1.21\n",
    "crossing/crossing.go": (
        "package crossing\n\n"
        "// Toll charges the zebra crossing fee for one animal.\n"
        'func Toll(animal string) int {\n\tif animal == "" {\n\t\treturn 0\n\t}\n'
        "\treturn 3\n}\n\n"
        "// Gate lets a herd through.\n"
        "func Gate(herd []string) int {\n\ttotal := 0\n\tfor _, a := range herd {\n"
        "\t\ttotal += Toll(a)\n\t}\n\treturn total\n}\n"
    ),
    "crossing/crossing_test.go": (
        'package crossing\n\nimport "testing"\n\n'
        'func TestToll(t *testing.T) {\n\tif Toll("okapi") != 3 {\n'
        '\t\tt.Fatal("wrong")\n\t}\n}\n\n'
        'func TestNobodyPays(t *testing.T) {\n\tif Toll("") != 0 {\n'
        '\t\tt.Fatal("wrong")\n\t}\n}\n'
    ),
}


def test_a_test_that_calls_the_anchor_is_related_as_tested_by_not_called_by(
    api, world, alice
) -> None:
    """GIVEN Toll, called by Gate and by two tests, WHEN Toll is the top code chunk, THEN the
    tests come as its tests and Gate as its caller. (With the caller queue first, one test at
    least was a caller whatever the chunk ids' order.)"""
    world.source(
        world.project, "zoo", [doc(p, text) for p, text in CROSSING.items()], kind="codebase"
    )

    body = retrieve(
        api, alice, spaceId=world.project, query="zebra fee", sourceKinds=["codebase"]
    ).json()

    anchor = body["chunks"][0]
    assert anchor["title"] == "Toll"
    related = [c for c in body["chunks"] if c["metadata"].get("relatedTo") == anchor["id"]]
    relations = {c["title"]: c["metadata"]["relatedRelation"] for c in related}
    assert relations == {
        "TestToll": "tested_by",
        "TestNobodyPays": "tested_by",
        "Gate": "called_by",
    }


def test_exclude_related_turns_related_code_off(api, world, alice) -> None:
    body = retrieve(
        api,
        alice,
        spaceId=world.project,
        query="Authorise refund request",
        sourceKinds=["codebase"],
        excludeRelated=True,
    ).json()

    assert all("relatedTo" not in c["metadata"] for c in body["chunks"])


def test_a_reindexed_source_is_not_served_from_the_cache(api, world, alice) -> None:
    first = paths(retrieve(api, alice, spaceId=world.project, excludeRelated=True))
    assert "billing.md" in first
    api.put(
        f"{SOURCES}/{world.sources['billing-docs']}/index",
        headers=world.admin,
        json={"documents": [doc("billing-v2.md", "Refund approvals, second edition.")]},
    )

    second = paths(retrieve(api, alice, spaceId=world.project, excludeRelated=True))

    assert "billing-v2.md" in second
    assert "billing.md" not in second


def test_a_source_without_hits_republished_is_not_served_from_the_cache(api, world, alice) -> None:
    """GIVEN a cached search in which team-docs had no hit, WHEN team-docs is republished with
    a match, THEN the next search (within the 60 s) finds it."""
    query = {"query": "chargeback windows", "excludeRelated": True}
    assert "team-v2.md" not in paths(retrieve(api, alice, spaceId=world.project, **query))
    republished = api.put(
        f"{SOURCES}/{world.sources['team-docs']}/index",
        headers=world.admin,
        json={"documents": [doc("team-v2.md", "Chargeback windows close after ninety days.")]},
    )
    assert republished.status_code == 200

    assert "team-v2.md" in paths(retrieve(api, alice, spaceId=world.project, **query))


def test_a_deleted_source_is_not_served_from_the_cache(api, world, alice) -> None:
    retrieve(api, alice, spaceId=world.project, excludeRelated=True)
    api.delete(f"{SOURCES}/{world.sources['billing-docs']}", headers=world.admin)

    assert "billing.md" not in paths(retrieve(api, alice, spaceId=world.project))


def test_a_revoked_grant_applies_even_to_a_cached_search(api, world, alice) -> None:
    assert paths(retrieve(api, alice, spaceId=world.project, excludeRelated=True))
    api.put(
        f"{SPACES}/{world.team}/grants",
        headers=world.admin,
        json={"subject": "user:alice", "permissions": []},
    )

    assert error_of(retrieve(api, alice, spaceId=world.project)) == (404, "context.space.not_found")


def test_every_retrieval_is_recorded_in_the_evidence_chain(api, world, alice) -> None:
    response = api.post(
        RETRIEVE,
        headers={**alice, "X-Keystone-Client": "editor/1.4.2"},
        json={"query": "refund approvals", "spaceId": world.project, "lensId": "lens-1"},
    )
    body = response.json()

    row = attribution_row(body["attributionId"])

    assert row is not None, "the writer appended the record within 15 s"
    assert row["request_id"] == body["requestId"]
    assert row["user_id"] == "alice"
    record = json.loads(bytes(row["record"]))
    assert record["lensId"] == "lens-1"
    assert record["client"]["clientName"] == "editor"
    assert record["client"]["clientVersion"] == "1.4.2"
    assert record["client"]["clientId"] == "api-tests"
    assert [c["chunkId"] for c in record["chunks"]] == [c["id"] for c in body["chunks"]]
    delivered = {c["id"]: hashlib.sha256(c["content"].encode()).hexdigest() for c in body["chunks"]}
    assert {c["chunkId"]: c["sha256"] for c in record["chunks"]} == delivered


def test_a_malformed_client_header_is_dropped_not_an_error(api, world, alice) -> None:
    response = api.post(
        RETRIEVE,
        headers={**alice, "X-Keystone-Client": "not a client"},
        json={"query": "refund approvals"},
    )

    assert response.status_code == 200
    row = attribution_row(response.json()["attributionId"])
    assert row is not None
    client = json.loads(bytes(row["record"]))["client"]
    assert (client["clientName"], client["clientVersion"]) == (None, None)


def test_when_the_event_cannot_be_queued_nothing_is_delivered(api, world, alice, runtime) -> None:
    previous = os.environ["KEYSTONE_ATTRIBUTION_QUEUE_URL"]
    os.environ["KEYSTONE_ATTRIBUTION_QUEUE_URL"] = previous + "-missing"
    get_settings.cache_clear()
    try:
        response = retrieve(api, alice, spaceId=world.project)
    finally:
        os.environ["KEYSTONE_ATTRIBUTION_QUEUE_URL"] = previous
        get_settings.cache_clear()

    assert error_of(response) == (503, "context.attribution.failed")
    assert "chunks" not in response.json()


@pytest.mark.parametrize(
    "body",
    [b'{"query": "refund', b'{"query": "\xff\xfe refund"}', b"\xff\xfe\x00{", b"[1, 2"],
    ids=["cut short", "not utf-8 inside", "not utf-8", "cut array"],
)
def test_a_body_that_is_not_json_is_400_invalid_request(api, world, alice, body: bytes) -> None:
    """Bytes no JSON parser reads (cut short, or not UTF-8) are the client's mistake in the
    body's form, not a rule of a field: 400, as docs/api.md lists it, never 422 or 500."""
    headers = {**alice, "Content-Type": "application/json"}

    answer = api.post(RETRIEVE, headers=headers, content=body)

    assert error_of(answer) == (400, "invalid_request")
    assert "\\xff" not in answer.text


@pytest.mark.parametrize(
    "content_type", [None, "application/x-www-form-urlencoded", "text/plain"], ids=repr
)
def test_a_body_not_sent_as_json_is_400_saying_how_to_send_it(
    api, world, alice, content_type: str | None
) -> None:
    """``curl -d`` sends a form's media type, and a client may send none: the body is then not
    read as JSON, which is the request's form, not a field's rule (never 'a valid dictionary')."""
    headers = {**alice, **({"Content-Type": content_type} if content_type else {})}

    answer = api.post(RETRIEVE, headers=headers, content=b'{"query": "refund approvals"}')

    assert error_of(answer) == (400, "invalid_request")
    assert "application/json" in answer.json()["error"]["message"]


@pytest.mark.parametrize("field", ["lensId", "sessionId"])
@pytest.mark.parametrize(
    "value", ["AKIAQ3EGRTW5NB7XKP2M", "ghp_" + "aB3" * 12], ids=["aws key", "github token"]
)
def test_a_lens_or_session_id_holding_a_credential_is_422_and_never_echoed(
    api, world, alice, field: str, value: str
) -> None:
    """Both are recorded in the evidence chain, which keeps them for good and shows them to
    whoever may read the record: like an agent key, one holding a credential is refused."""
    answer = retrieve(api, alice, spaceId=world.project, **{field: value})

    assert error_of(answer) == (422, "validation_failed")
    assert value not in answer.text
    assert field in answer.json()["error"]["message"]


@pytest.mark.parametrize(
    "value", ["lens-1", "9b2f4c1e-8d7a-4e3b-a1c2-5f6e7d8c9b0a", "sess_01HZX3K9Q2W8E7R6T5Y4U3I2O1"]
)
def test_lens_and_session_ids_that_name_things_are_accepted(api, world, alice, value) -> None:
    answer = retrieve(api, alice, spaceId=world.project, lensId=value, sessionId=value)

    assert answer.status_code == 200
