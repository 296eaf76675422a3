"""DLP over HTTP: the policy API, and what retrieval delivers of each classification."""

from __future__ import annotations

import hashlib
import json

import httpx
import pytest
from api_support import attribution_row, bearer, error_of

from context_ledger.auth.principal import SCOPE_CONTEXT_ADMIN
from context_ledger.errors import UNSHOWN_NAME

POLICY = "/api/v1/context/dlp/policy"
RETRIEVE = "/api/v1/context/retrieve"
SPACES = "/api/v1/context/spaces"
SOURCES = "/api/v1/context/sources"
AWS_KEY = "AKIAQ3EGRTW5NB7XKP2M"
DEFAULTS = {
    "public": "redact",
    "internal": "redact",
    "confidential": "drop",
    "restricted": "drop",
    "regulated": "block_source",
}


def test_the_default_policy_is_shown_to_a_context_admin(api, admin_headers) -> None:
    response = api.get(POLICY, headers=admin_headers)

    assert response.status_code == 200
    assert response.json() == {
        "defaults": DEFAULTS,
        "overrides": {},
        "effective": DEFAULTS,
        "patterns": [],
        "withheld": [],
    }


def test_a_replacement_is_kept_and_an_empty_body_resets_it(api, admin_headers) -> None:
    body = {
        "actions": {"internal": "allow", "confidential": "redact"},
        "patterns": [{"name": "ticket", "pattern": "TICKET-[0-9]{4}"}],
    }
    put = api.put(POLICY, headers=admin_headers, json=body)

    assert put.status_code == 200
    assert put.json()["overrides"] == {"internal": "allow", "confidential": "redact"}
    shown = api.get(POLICY, headers=admin_headers).json()
    assert shown["effective"] == {**DEFAULTS, "internal": "allow", "confidential": "redact"}
    assert shown["patterns"] == body["patterns"]

    reset = api.put(POLICY, headers=admin_headers, json={})

    assert reset.json()["overrides"] == {}
    assert reset.json()["patterns"] == []
    assert api.get(POLICY, headers=admin_headers).json()["effective"] == DEFAULTS


@pytest.mark.parametrize("method", ["GET", "PUT"])
def test_a_space_admin_or_auditor_without_context_admin_is_refused(
    api, classified, org, token, method: str
) -> None:
    classified.grant("bob", "context:space:admin")
    bob = bearer(token(org, "bob", "audit:read"))

    response = api.request(method, POLICY, headers=bob, json={} if method == "PUT" else None)

    assert error_of(response) == (403, "forbidden")


def test_without_a_token_the_policy_is_401(api) -> None:
    assert api.get(POLICY).status_code == 401


def test_each_organisation_has_its_own_policy(api, org, other_org, token) -> None:
    ours = bearer(token(org, "root", SCOPE_CONTEXT_ADMIN))
    theirs = bearer(token(other_org, "root", SCOPE_CONTEXT_ADMIN))

    api.put(POLICY, headers=ours, json={"actions": {"regulated": "drop"}})

    assert api.get(POLICY, headers=theirs).json()["overrides"] == {}
    assert api.get(POLICY, headers=ours).json()["overrides"] == {"regulated": "drop"}


@pytest.mark.parametrize(
    "body",
    [
        {"actions": {"secret": "allow"}},
        {"actions": {"internal": "show"}},
        {"actions": {"internal": 1}},
        {"actions": ["internal"]},
        {"patterns": [{"name": "t", "pattern": "(unclosed"}]},
        {"patterns": [{"name": "t", "pattern": r"(a)\1"}]},
        {"patterns": [{"name": "Bad Name", "pattern": "x"}]},
        {"patterns": [{"name": "t"}]},
        {"patterns": [{"name": "t", "pattern": "x", "flags": "i"}]},
        {"patterns": [{"name": f"p{i}", "pattern": "x"} for i in range(51)]},
        {"patterns": [{"name": "t", "pattern": "x" * 1001}]},
        {"actions": {}, "orgLevel": "everything"},
        {"withheld": ["secret"]},
        {"withheld": "regulated"},
        {"withheld": [1]},
    ],
)
def test_an_invalid_policy_is_422_and_changes_nothing(api, admin_headers, body: dict) -> None:
    api.put(POLICY, headers=admin_headers, json={"actions": {"internal": "allow"}})

    response = api.put(POLICY, headers=admin_headers, json=body)

    assert error_of(response) == (422, "validation_failed")
    assert api.get(POLICY, headers=admin_headers).json()["overrides"] == {"internal": "allow"}


class Classified:
    """A project with one source per classification, each holding the same planted secret."""

    def __init__(self, api: httpx.Client, admin: dict[str, str]) -> None:
        self.api, self.admin = api, admin
        created = api.post(SPACES, headers=admin, json={"name": "Vault", "level": "project"})
        self.project = created.json()["id"]
        self.sources: dict[str, str] = {}
        for classification in DEFAULTS:
            text = (
                f"Ledger rotation runbook ({classification}): run with aws_access_key_id="
                f"{AWS_KEY} and page oncall@example.com."
            )
            source = api.post(
                f"{SPACES}/{self.project}/sources",
                headers=admin,
                json={"kind": "docs", "name": classification, "classification": classification},
            ).json()["id"]
            indexed = api.put(
                f"{SOURCES}/{source}/index",
                headers=admin,
                json={"documents": [{"path": f"{classification}.md", "content": text}]},
            )
            assert indexed.status_code == 200, indexed.text
            self.sources[classification] = source

    def grant(self, user: str, permission: str) -> None:
        response = self.api.put(
            f"{SPACES}/{self.project}/grants",
            headers=self.admin,
            json={"subject": f"user:{user}", "permissions": [permission]},
        )
        assert response.status_code == 204

    def retrieve(self, headers: dict[str, str]) -> dict:
        response = self.api.post(
            RETRIEVE,
            headers=headers,
            json={"query": "ledger rotation runbook", "spaceId": self.project},
        )
        assert response.status_code == 200, response.text
        return response.json()

    def delivered(self, headers: dict[str, str]) -> dict[str, str]:
        """classification → delivered content."""
        names = {v: k for k, v in self.sources.items()}
        return {names[c["sourceId"]]: c["content"] for c in self.retrieve(headers)["chunks"]}


@pytest.fixture
def classified(api, admin_headers) -> Classified:
    return Classified(api, admin_headers)


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({"actions": {AWS_KEY: "allow"}}, f"actions.{UNSHOWN_NAME}: unknown classification"),
        ({"patterns": [{"name": AWS_KEY, "pattern": "abc"}]}, "a custom pattern's name must"),
        ({"patterns": [{"name": "x", "pattern": f"({AWS_KEY}"}]}, "[REDACTED:aws_access_key]"),
    ],
    ids=["a classification", "a pattern's name", "a pattern's text"],
)
def test_a_refused_policy_never_repeats_a_key_it_was_sent(
    api, admin_headers, body: dict, said: str
) -> None:
    """A classification or a pattern name that breaks its rule is not repeated at all (it can
    be any value pasted there, one no detector knows); a pattern's text, the admin's own
    expression, is repeated redacted."""
    response = api.put(POLICY, headers=admin_headers, json=body)

    assert error_of(response) == (422, "validation_failed")
    assert AWS_KEY not in response.text
    assert said in response.json()["error"]["message"]


def test_a_searcher_gets_every_classification_redacted_drop_and_block_source_included(
    classified, org, token
) -> None:
    """Spec: drop and block_source sources "are searchable through full-text only" - a caller
    who may search the space receives them, redacted, not silently nothing."""
    classified.grant("alice", "context:space:search")

    answer = classified.retrieve(bearer(token(org, "alice")))
    delivered = classified.delivered(bearer(token(org, "alice")))

    assert set(delivered) == set(DEFAULTS)
    assert answer["warnings"] == []
    for content in delivered.values():
        assert AWS_KEY not in content
        assert "oncall@example.com" not in content
        assert "[REDACTED:aws_access_key]" in content
        assert "[REDACTED:email]" in content


def test_a_withheld_classification_reaches_no_one_and_the_answer_says_so(
    api, classified, admin_headers, org, token
) -> None:
    classified.grant("alice", "context:space:search")
    put = api.put(POLICY, headers=admin_headers, json={"withheld": ["regulated", "restricted"]})
    assert put.json()["withheld"] == ["regulated", "restricted"]

    for headers in (bearer(token(org, "alice")), admin_headers):
        answer = classified.retrieve(headers)
        names = {v: k for k, v in classified.sources.items()}
        assert {names[c["sourceId"]] for c in answer["chunks"]} == {
            "public",
            "internal",
            "confidential",
        }
        assert answer["warnings"] == [
            "2 source(s) in the searched spaces are withheld from every caller by the "
            "organisation's DLP policy (regulated, restricted); nothing of them was searched"
        ]


def test_allow_delivers_as_stored_and_every_other_action_redacted(
    api, classified, admin_headers, org, token
) -> None:
    classified.grant("alice", "context:space:search")
    api.put(
        POLICY,
        headers=admin_headers,
        json={"actions": {"internal": "allow", "regulated": "redact"}},
    )

    delivered = classified.delivered(bearer(token(org, "alice")))

    assert set(delivered) == set(DEFAULTS)
    assert AWS_KEY in delivered["internal"], "allow delivers the chunk as stored"
    assert AWS_KEY not in delivered["regulated"]
    assert AWS_KEY not in delivered["public"]


def test_custom_patterns_redact_at_delivery(api, classified, admin_headers) -> None:
    api.put(
        POLICY,
        headers=admin_headers,
        json={"patterns": [{"name": "runbook", "pattern": "runbook"}]},
    )

    delivered = classified.delivered(admin_headers)

    assert "[REDACTED:custom_runbook]" in delivered["public"]


def test_the_evidence_records_the_hash_and_tokens_of_what_was_delivered(
    classified, org, token
) -> None:
    classified.grant("alice", "context:space:search")
    body = classified.retrieve(bearer(token(org, "alice")))

    row = attribution_row(body["attributionId"])

    assert row is not None, "the writer appended the record"
    recorded = {c["chunkId"]: c for c in json.loads(bytes(row["record"]))["chunks"]}
    for chunk in body["chunks"]:
        assert "[REDACTED:" in chunk["content"]
        assert (
            recorded[chunk["id"]]["sha256"] == hashlib.sha256(chunk["content"].encode()).hexdigest()
        )
        assert recorded[chunk["id"]]["tokens"] == chunk["tokens"]
    assert body["tokensUsed"] == sum(c["tokens"] for c in body["chunks"])
