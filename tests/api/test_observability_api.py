"""The evidence chain over HTTP: on-demand verification and the compliance-evidence listing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import pytest
from api_support import bearer, error_of, wait_for_attribution

from context_ledger.auth.principal import SCOPE_AUDIT_READ
from context_ledger.db import connection

RETRIEVE = "/api/v1/context/retrieve"
VERIFY = "/api/v1/observability/chain/verify"
EVIDENCE = "/api/v1/observability/compliance-evidence"


def retrieve(api: httpx.Client, headers: dict[str, str]) -> str:
    """Retrieve over the organisation chain; the attribution id once it is recorded."""
    response = api.post(RETRIEVE, headers=headers, json={"query": "refund approvals"})
    assert response.status_code == 200, response.text
    attribution_id = response.json()["attributionId"]
    wait_for_attribution(attribution_id)
    return attribution_id


@pytest.fixture
def auditor(org, token) -> dict[str, str]:
    return bearer(token(org, "auditor", SCOPE_AUDIT_READ))


@pytest.fixture
def evidence(api, org, token) -> None:
    """Three entries in the organisation's chain: alice's and bob's retrievals, and a link."""
    alice, bob = bearer(token(org, "alice")), bearer(token(org, "bob"))
    first = retrieve(api, alice)
    retrieve(api, bob)
    linked = api.post(
        f"/api/v1/context/attributions/{first}/links",
        headers=alice,
        json={"responseId": "chatcmpl-1"},
    )
    assert linked.status_code == 204


def tamper(org_id: object, seq: int) -> None:
    """Edit a stored record the way someone with database superuser rights could."""
    with connection() as conn:
        conn.execute("ALTER TABLE evidence_chain DISABLE TRIGGER evidence_chain_no_update")
        conn.execute(
            "UPDATE evidence_chain SET record = convert_to(replace(convert_from(record, 'UTF8'),"
            " '\"alice\"', '\"mallory\"'), 'UTF8') WHERE chain = %s AND seq = %s",
            (f"org:{org_id}", seq),
        )
        conn.execute("ALTER TABLE evidence_chain ENABLE TRIGGER evidence_chain_no_update")


def test_a_clean_chain_verifies_and_is_checkpointed(api, org, auditor, evidence) -> None:
    first = api.get(VERIFY, headers=auditor)
    again = api.get(VERIFY, headers=auditor)
    full = api.get(VERIFY, headers=auditor, params={"full": "true"})

    assert first.status_code == 200
    body = first.json()
    assert body.pop("checkpoint")["sequence"] == 3
    assert body == {
        "chain": f"org:{org.id}",
        "ok": True,
        "checked": 3,
        "firstBadSequence": None,
        "reason": None,
        "lookupProblems": [],
    }
    assert (again.json()["checked"], again.json()["checkpoint"]["sequence"]) == (0, 3)
    assert (full.json()["ok"], full.json()["checked"]) == (True, 3)


def test_a_context_admin_may_verify_an_empty_chain(api, admin_headers) -> None:
    response = api.get(VERIFY, headers=admin_headers)

    assert response.status_code == 200
    assert (response.json()["ok"], response.json()["checkpoint"]) == (True, None)


def test_a_tampered_record_fails_verification_at_its_sequence(api, org, auditor, evidence) -> None:
    assert api.get(VERIFY, headers=auditor).json()["ok"] is True
    tamper(org.id, 1)

    full = api.get(VERIFY, headers=auditor, params={"full": "true"})

    assert full.status_code == 200
    body = full.json()
    assert (body["ok"], body["firstBadSequence"], body["reason"]) == (False, 1, "mac mismatch")
    assert body["checkpoint"]["sequence"] == 3, "a failed run writes no checkpoint"


def test_without_a_checkpoint_the_default_check_finds_a_tampered_record(
    api, org, auditor, evidence
) -> None:
    tamper(org.id, 1)

    body = api.get(VERIFY, headers=auditor).json()

    assert (body["ok"], body["checked"], body["firstBadSequence"]) == (False, 0, 1)
    assert body["checkpoint"] is None


@pytest.mark.parametrize("path", [VERIFY, EVIDENCE])
def test_a_plain_user_gets_403(api, org, token, path) -> None:
    response = api.get(path, headers=bearer(token(org, "alice")))

    assert error_of(response) == (403, "forbidden")


def records(response: httpx.Response) -> list[dict]:
    assert response.status_code == 200, response.text
    return response.json()["records"]


def test_compliance_evidence_lists_the_organisations_entries_newest_first(
    api, org, other_org, token, auditor, evidence
) -> None:
    retrieve(api, bearer(token(other_org, "alice")))

    listed = records(api.get(EVIDENCE, headers=auditor))

    assert [r["sequence"] for r in listed] == [3, 2, 1]
    assert [r["category"] for r in listed] == [
        "context_attribution_link",
        "context_attribution",
        "context_attribution",
    ]
    assert listed[0]["record"]["responseId"] == "chatcmpl-1"
    assert listed[0]["record"]["linkedBy"] == "alice"
    assert set(listed[0]) == {"sequence", "category", "createdAt", "recordId", "record"}


def test_compliance_evidence_filters_by_category_and_subject_user(api, auditor, evidence) -> None:
    links = records(
        api.get(EVIDENCE, headers=auditor, params={"category": "context_attribution_link"})
    )
    bobs = records(api.get(EVIDENCE, headers=auditor, params={"subjectUser": "bob"}))

    assert [r["sequence"] for r in links] == [3]
    assert [r["record"]["userId"] for r in bobs] == ["bob"]


def test_compliance_evidence_filters_by_time_range(api, auditor, evidence) -> None:
    now = datetime.now(UTC)
    past, future = (now - timedelta(hours=1)).isoformat(), (now + timedelta(hours=1)).isoformat()

    assert (
        len(records(api.get(EVIDENCE, headers=auditor, params={"from": past, "to": future}))) == 3
    )
    assert records(api.get(EVIDENCE, headers=auditor, params={"from": future})) == []
    assert records(api.get(EVIDENCE, headers=auditor, params={"to": past})) == []


def test_the_cursor_pages_through_every_entry_once(api, auditor, evidence) -> None:
    seen, cursor = [], None
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        body = api.get(EVIDENCE, headers=auditor, params=params).json()
        assert len(body["records"]) <= 2
        seen += [r["sequence"] for r in body["records"]]
        cursor = body["nextCursor"]
        if cursor is None:
            break

    assert seen == [3, 2, 1]


def test_a_limit_above_500_is_lowered(api, auditor, evidence) -> None:
    assert len(records(api.get(EVIDENCE, headers=auditor, params={"limit": 10_000}))) == 3


def test_filtering_by_userid_is_refused_as_naming_another_identity(api, auditor) -> None:
    response = api.get(EVIDENCE, headers=auditor, params={"userId": "bob"})

    assert error_of(response) == (403, "forbidden")


@pytest.mark.parametrize(
    "params",
    [
        {"category": "model_call"},
        {"from": "yesterday"},
        {"to": "2026-13-01T00:00:00Z"},
        {"from": "2026-02-01T00:00:00Z", "to": "2026-01-01T00:00:00Z"},
        {"limit": 0},
        {"limit": "many"},
        {"cursor": "not-a-cursor"},
        {"cursor": "WyJ4IiwgMV0"},
        {"subjectUser": ""},
    ],
)
def test_invalid_compliance_evidence_parameters_are_422(api, auditor, params) -> None:
    assert error_of(api.get(EVIDENCE, headers=auditor, params=params)) == (
        422,
        "validation_failed",
    )
