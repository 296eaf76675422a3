"""One answer delivers each text once: a chunk whose delivered text (after redaction) equals a
higher-ranked delivered one is skipped, spends no budget and is not in the evidence record."""

from __future__ import annotations

import hashlib
import json

import httpx
import pytest
from api_support import attribution_row

RETRIEVE = "/api/v1/context/retrieve"
SPACES = "/api/v1/context/spaces"
POLICY = "/api/v1/context/dlp/policy"

APPROVALS = "Refund approvals need a team lead."
ESCALATIONS = (
    "Refund escalations go to finance when the amount is large and the customer has waited "
    "for more than a month without an answer from the support team."
)


class Spaces:
    """Payments (team) > Billing (project), sources created by the organisation's admin."""

    def __init__(self, api: httpx.Client, admin: dict[str, str]) -> None:
        self.api, self.admin = api, admin
        self.team = self._space({"name": "Payments", "level": "team"})
        self.project = self._space({"name": "Billing", "level": "project", "parentId": self.team})

    def _space(self, body: dict) -> str:
        response = self.api.post(SPACES, headers=self.admin, json=body)
        assert response.status_code == 201, response.text
        return response.json()["id"]

    def source(self, space: str, name: str, documents: dict[str, str]) -> str:
        created = self.api.post(
            f"{SPACES}/{space}/sources", headers=self.admin, json={"kind": "docs", "name": name}
        )
        assert created.status_code == 201, created.text
        body = {"documents": [{"path": p, "content": c} for p, c in documents.items()]}
        indexed = self.api.put(
            f"/api/v1/context/sources/{created.json()['id']}/index", headers=self.admin, json=body
        )
        assert indexed.status_code == 200, indexed.text
        return created.json()["id"]

    def retrieve(self, **body) -> dict:
        response = self.api.post(
            RETRIEVE,
            headers=self.admin,
            json={"query": "refund approvals", "spaceId": self.project, "excludeRelated": True}
            | body,
        )
        assert response.status_code == 200, response.text
        return response.json()


@pytest.fixture
def spaces(api, admin_headers) -> Spaces:
    return Spaces(api, admin_headers)


def tokens_of(answer: dict) -> dict[str, int]:
    return {c["path"]: c["tokens"] for c in answer["chunks"]}


def test_the_same_doc_in_two_sources_is_delivered_once_and_spends_no_budget(spaces) -> None:
    """GIVEN the same page in the project's docs and the team's (the demo's docs indexed twice)
    and a longer one ranked below both; WHEN the budget holds the page and the longer one only;
    THEN both come, the team's copy is skipped, and the record lists what was delivered."""
    project_docs = spaces.source(spaces.project, "billing docs", {"approvals.md": APPROVALS})
    team_docs = spaces.source(
        spaces.team, "team docs", {"copy/approvals.md": APPROVALS, "escalations.md": ESCALATIONS}
    )
    sizes = tokens_of(spaces.retrieve(tokenBudget=32000))
    assert sizes["approvals.md"] < sizes["escalations.md"]  # so a copy would fit before it
    budget = sizes["approvals.md"] + sizes["escalations.md"]

    answer = spaces.retrieve(tokenBudget=budget)

    assert [(c["path"], c["sourceId"]) for c in answer["chunks"]] == [
        ("approvals.md", project_docs),
        ("escalations.md", team_docs),
    ]
    assert answer["tokensUsed"] == budget
    assert [(s["id"], s["chunks"]) for s in answer["sourcesSummary"]] == [
        (project_docs, 1),
        (team_docs, 1),
    ]
    row = attribution_row(answer["attributionId"])
    assert row is not None
    record = json.loads(bytes(row["record"]))
    assert [c["chunkId"] for c in record["chunks"]] == [c["id"] for c in answer["chunks"]]
    assert record["tokensUsed"] == budget


def test_texts_that_differ_only_in_what_is_redacted_are_one_delivered_text(
    api, spaces, admin_headers
) -> None:
    """The texts compared are those the caller receives: two addresses redact alike."""
    spaces.source(
        spaces.project,
        "runbooks",
        {
            "a.md": "Refund approvals: page oncall@example.com first.",
            "b.md": "Refund approvals: page billing@example.com first.",
        },
    )

    redacted = spaces.retrieve()["chunks"]
    allowed = api.put(POLICY, headers=admin_headers, json={"actions": {"internal": "allow"}})
    assert allowed.status_code == 200, allowed.text
    as_stored = spaces.retrieve()["chunks"]

    assert [c["content"] for c in redacted] == ["Refund approvals: page [REDACTED:email] first."]
    assert sorted(c["path"] for c in as_stored) == ["a.md", "b.md"]
    assert len({hashlib.sha256(c["content"].encode()).digest() for c in as_stored}) == 2
