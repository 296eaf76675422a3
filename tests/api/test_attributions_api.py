"""Attribution records over HTTP: who sees a retrieval's record, and linking AI responses to it."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import httpx
import pytest
from api_support import bearer, error_of, wait_for_attribution

from context_ledger.auth.principal import SCOPE_AUDIT_READ, SCOPE_CONTEXT_ADMIN
from context_ledger.db import connection

RETRIEVE = "/api/v1/context/retrieve"
SPACES = "/api/v1/context/spaces"
SOURCES = "/api/v1/context/sources"
BY_REQUEST = "/api/v1/context/attributions"
BY_ID = "/api/v1/context/attribution"


@dataclass(frozen=True)
class Retrieval:
    request_id: str
    attribution_id: str


def retrieve(api: httpx.Client, headers: dict[str, str], **body: str) -> Retrieval:
    response = api.post(RETRIEVE, headers=headers, json={"query": "refund approvals", **body})
    assert response.status_code == 200, response.text
    answer = response.json()
    wait_for_attribution(answer["attributionId"])
    return Retrieval(answer["requestId"], answer["attributionId"])


@pytest.fixture
def team(api, admin_headers) -> str:
    """A team space with one indexed document, searchable by alice and bob, administered by
    carol."""
    created = api.post(SPACES, headers=admin_headers, json={"name": "Payments", "level": "team"})
    space = created.json()["id"]
    source = api.post(
        f"{SPACES}/{space}/sources", headers=admin_headers, json={"kind": "docs", "name": "docs"}
    ).json()["id"]
    indexed = api.put(
        f"{SOURCES}/{source}/index",
        headers=admin_headers,
        json={"documents": [{"path": "team.md", "content": "Refund approvals need a team lead."}]},
    )
    assert indexed.status_code == 200, indexed.text
    for subject, permission in [
        ("user:alice", "context:space:search"),
        ("user:bob", "context:space:search"),
        ("user:carol", "context:space:admin"),
    ]:
        granted = api.put(
            f"{SPACES}/{space}/grants",
            headers=admin_headers,
            json={"subject": subject, "permissions": [permission]},
        )
        assert granted.status_code == 204, granted.text
    return space


@pytest.fixture
def alice(org, token) -> dict[str, str]:
    return bearer(token(org, "alice"))


@pytest.fixture
def retrieval(api, team, alice) -> Retrieval:
    return retrieve(api, alice, spaceId=team)


def test_the_person_who_retrieved_sees_the_record_by_id_and_by_request(
    api, org, team, alice, retrieval
) -> None:
    by_id = api.get(f"{BY_ID}/{retrieval.attribution_id}", headers=alice)
    by_request = api.get(f"{BY_REQUEST}/{retrieval.request_id}", headers=alice)

    assert by_id.status_code == 200
    record = by_id.json()
    assert record.pop("createdAt")
    published = record.pop("record")
    assert record == {
        "attributionId": retrieval.attribution_id,
        "requestId": retrieval.request_id,
        "userId": "alice",
        "spaceId": team,
        "sequence": 1,
        "chain": f"org:{org.id}",
        "links": [],
    }
    assert published["requestId"] == retrieval.request_id
    assert published["attributionId"] == retrieval.attribution_id
    assert published["spaceId"] == team
    assert published["chunks"], "the team document was delivered and recorded"
    assert not {"chain", "category", "recordId", "orgId"} & set(published)
    assert by_request.status_code == 200
    assert by_request.json() == {"requestId": retrieval.request_id, "records": [by_id.json()]}


def test_a_space_admin_sees_the_record(api, org, token, retrieval) -> None:
    carol = bearer(token(org, "carol"))

    assert api.get(f"{BY_ID}/{retrieval.attribution_id}", headers=carol).status_code == 200
    assert api.get(f"{BY_REQUEST}/{retrieval.request_id}", headers=carol).status_code == 200


def test_a_searcher_without_admin_on_the_space_gets_404(api, org, token, retrieval) -> None:
    bob = bearer(token(org, "bob"))

    for path in (f"{BY_ID}/{retrieval.attribution_id}", f"{BY_REQUEST}/{retrieval.request_id}"):
        assert error_of(api.get(path, headers=bob)) == (404, "context.attribution.not_found")


def test_another_user_of_the_organisation_gets_404(api, org, token, retrieval) -> None:
    dave = bearer(token(org, "dave"))

    response = api.get(f"{BY_ID}/{retrieval.attribution_id}", headers=dave)

    assert error_of(response) == (404, "context.attribution.not_found")


def test_another_organisation_gets_404_even_as_the_same_user_with_every_scope(
    api, other_org, token, retrieval
) -> None:
    outsider = bearer(token(other_org, "alice", SCOPE_CONTEXT_ADMIN, SCOPE_AUDIT_READ))

    for path in (f"{BY_ID}/{retrieval.attribution_id}", f"{BY_REQUEST}/{retrieval.request_id}"):
        assert error_of(api.get(path, headers=outsider)) == (404, "context.attribution.not_found")


def test_a_service_with_the_owners_user_id_gets_404(api, org, token, retrieval) -> None:
    service = bearer(token(org, "alice", service=True))

    response = api.get(f"{BY_ID}/{retrieval.attribution_id}", headers=service)

    assert error_of(response) == (404, "context.attribution.not_found")


def test_an_audit_reader_of_the_same_organisation_sees_the_record(
    api, org, token, retrieval
) -> None:
    auditor = bearer(token(org, "auditor", SCOPE_AUDIT_READ))

    assert api.get(f"{BY_ID}/{retrieval.attribution_id}", headers=auditor).status_code == 200
    assert api.get(f"{BY_REQUEST}/{retrieval.request_id}", headers=auditor).status_code == 200


def _organisation_space(api: httpx.Client, admin: dict[str, str]) -> str:
    spaces = api.get(SPACES, headers=admin).json()["spaces"]
    return next(s["id"] for s in spaces if s["level"] == "organisation")


def test_an_organisation_chain_record_is_visible_to_its_owner_and_organisation_admins(
    api, org, team, alice, admin_headers, token
) -> None:
    """GIVEN an organisation-level retrieval (no spaceId), WHEN others read its record, THEN the
    context:admin scope and a context:space:admin of the organisation space by grant may; a
    team admin or a searcher of the organisation space may not."""
    granted = {"dana": "context:space:admin", "erin": "context:space:search"}
    for user, permission in granted.items():
        response = api.put(
            f"{SPACES}/{_organisation_space(api, admin_headers)}/grants",
            headers=admin_headers,
            json={"subject": f"user:{user}", "permissions": [permission]},
        )
        assert response.status_code == 204, response.text
    retrieval = retrieve(api, alice)
    by_id = f"{BY_ID}/{retrieval.attribution_id}"
    by_request = f"{BY_REQUEST}/{retrieval.request_id}"
    dana, erin, carol = (bearer(token(org, user)) for user in ("dana", "erin", "carol"))

    assert api.get(by_id, headers=alice).json()["spaceId"] is None
    for path in (by_id, by_request):
        assert api.get(path, headers=admin_headers).status_code == 200
        assert api.get(path, headers=dana).status_code == 200, "admin of the organisation space"
        assert error_of(api.get(path, headers=erin)) == (404, "context.attribution.not_found")
        assert error_of(api.get(path, headers=carol)) == (404, "context.attribution.not_found")
    link = f"{BY_REQUEST}/{retrieval.attribution_id}/links"
    assert api.post(link, headers=dana, json={"responseId": "r1"}).status_code == 204
    assert error_of(api.post(link, headers=erin, json={"responseId": "r2"})) == (
        404,
        "context.attribution.not_found",
    )


def test_a_record_of_personal_chunks_is_its_owners_alone(
    api, org, team, alice, admin_headers, token
) -> None:
    """GIVEN alice's organisation-level retrieval delivering a chunk of her personal space, WHEN
    an organisation admin or an auditor reads its record, THEN 404: the personal space is hers
    alone, and so are its source ids and content hashes."""
    personal = next(
        s["id"] for s in api.get(SPACES, headers=alice).json()["spaces"] if s["level"] == "personal"
    )
    notes = api.post(
        f"{SPACES}/{personal}/sources", headers=alice, json={"kind": "docs", "name": "notes"}
    ).json()["id"]
    indexed = api.put(
        f"{SOURCES}/{notes}/index",
        headers=alice,
        json={"documents": [{"path": "me.md", "content": "My refund approvals diary."}]},
    )
    assert indexed.status_code == 200, indexed.text
    retrieval = retrieve(api, alice)
    auditor = bearer(token(org, "audrey", SCOPE_AUDIT_READ))

    record = api.get(f"{BY_ID}/{retrieval.attribution_id}", headers=alice).json()["record"]
    assert notes in record["sourceIds"]
    for path in (f"{BY_ID}/{retrieval.attribution_id}", f"{BY_REQUEST}/{retrieval.request_id}"):
        assert error_of(api.get(path, headers=admin_headers)) == (
            404,
            "context.attribution.not_found",
        )
        assert error_of(api.get(path, headers=auditor)) == (404, "context.attribution.not_found")


@pytest.mark.parametrize(
    "path",
    [
        f"{BY_ID}/not-a-uuid",
        f"{BY_ID}/{uuid.uuid4()}",
        f"{BY_REQUEST}/-starts-with-a-dash",
        f"{BY_REQUEST}/{'r' * 129}",
        f"{BY_REQUEST}/has%20a%20space",
        f"{BY_REQUEST}/req_unknown",
    ],
)
def test_malformed_and_unknown_ids_are_404(api, alice, path) -> None:
    assert error_of(api.get(path, headers=alice)) == (404, "context.attribution.not_found")


def link(api: httpx.Client, headers: dict[str, str], attribution_id: str, response_id: object):
    return api.post(
        f"{BY_REQUEST}/{attribution_id}/links", headers=headers, json={"responseId": response_id}
    )


def _link_rows(attribution_id: str) -> tuple[int, int]:
    with connection() as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM attribution_links WHERE attribution_id = %(id)s)"
            " AS links,"
            " (SELECT count(*) FROM evidence_chain WHERE category = 'context_attribution_link'"
            "  AND convert_from(record, 'UTF8')::jsonb ->> 'attributionId' = %(id)s::text)"
            " AS entries",
            {"id": attribution_id},
        ).fetchone()
    return row["links"], row["entries"]


def test_linking_a_response_twice_keeps_one_row_and_one_chain_record(api, alice, retrieval) -> None:
    first = link(api, alice, retrieval.attribution_id, "chatcmpl-1")
    second = link(api, alice, retrieval.attribution_id, "chatcmpl-1")

    assert (first.status_code, first.content) == (204, b"")
    assert (second.status_code, second.content) == (204, b"")
    assert _link_rows(retrieval.attribution_id) == (1, 1)


def test_a_linked_response_shows_on_the_record_and_in_the_same_chain(
    api, org, alice, retrieval
) -> None:
    assert link(api, alice, retrieval.attribution_id, "chatcmpl-2").status_code == 204

    record = api.get(f"{BY_ID}/{retrieval.attribution_id}", headers=alice).json()

    assert [x["responseId"] for x in record["links"]] == ["chatcmpl-2"]
    assert record["links"][0]["createdAt"]
    with connection() as conn:
        entry = conn.execute(
            "SELECT chain, seq, record FROM evidence_chain"
            " WHERE category = 'context_attribution_link'"
        ).fetchone()
    assert (entry["chain"], entry["seq"]) == (f"org:{org.id}", 2)


def test_a_space_admin_may_link_but_a_searcher_or_an_auditor_gets_404(
    api, org, token, retrieval
) -> None:
    carol = bearer(token(org, "carol"))
    bob = bearer(token(org, "bob"))
    auditor = bearer(token(org, "auditor", SCOPE_AUDIT_READ))

    assert link(api, carol, retrieval.attribution_id, "by-carol").status_code == 204
    for headers in (bob, auditor):
        response = link(api, headers, retrieval.attribution_id, "by-someone-else")
        assert error_of(response) == (404, "context.attribution.not_found")


@pytest.mark.parametrize("response_id", ["", "r" * 257, None])
def test_a_response_id_must_be_1_to_256_characters_of_text(
    api, alice, retrieval, response_id
) -> None:
    response = link(api, alice, retrieval.attribution_id, response_id)

    assert error_of(response) == (422, "validation_failed")
    assert _link_rows(retrieval.attribution_id) == (0, 0)


def test_a_response_id_that_is_not_unicode_text_is_422(api, alice, retrieval) -> None:
    response = api.post(
        f"{BY_REQUEST}/{retrieval.attribution_id}/links",
        headers={**alice, "Content-Type": "application/json"},
        content=b'{"responseId": "\\ud800"}',
    )

    assert error_of(response) == (422, "validation_failed")


def test_a_response_id_of_256_characters_is_linked(api, alice, retrieval) -> None:
    assert link(api, alice, retrieval.attribution_id, "r" * 256).status_code == 204


def test_linking_an_unknown_or_malformed_attribution_is_404(api, alice) -> None:
    for attribution_id in (str(uuid.uuid4()), "not-a-uuid"):
        response = link(api, alice, attribution_id, "chatcmpl-3")
        assert error_of(response) == (404, "context.attribution.not_found")


def test_a_lookup_row_given_another_owner_hands_that_user_nothing_and_verify_reports_it(
    api, org, token, admin_headers, retrieval
) -> None:
    """Someone with the database edits the lookup row's owner to bob: the chain entry says
    alice, so bob gets the 404 of a record that does not exist, and verification names the row."""
    bob = bearer(token(org, "bob"))
    with connection() as conn:
        conn.execute(
            "UPDATE attributions SET user_id = 'bob' WHERE attribution_id = %s",
            (retrieval.attribution_id,),
        )

    by_id = api.get(f"{BY_ID}/{retrieval.attribution_id}", headers=bob)
    by_request = api.get(f"{BY_REQUEST}/{retrieval.request_id}", headers=bob)
    verified = api.get(
        "/api/v1/observability/chain/verify", headers=admin_headers, params={"full": "true"}
    ).json()

    assert error_of(by_id) == (404, "context.attribution.not_found")
    assert error_of(by_request) == (404, "context.attribution.not_found")
    assert "bob" not in by_id.text
    assert (verified["ok"], verified["firstBadSequence"]) == (False, 1)
    assert verified["lookupProblems"] == [
        {
            "table": "attributions",
            "key": retrieval.attribution_id,
            "sequence": 1,
            "problem": "the row's userId differs from the entry's",
        }
    ]
