"""The retrieve answer explains an empty answer in ``warnings``: nothing searched, no space the
caller may search, a budget too small for any chunk; never naming a space the caller may not
search."""

from __future__ import annotations

import httpx
import pytest
from api_support import bearer

RETRIEVE = "/api/v1/context/retrieve"
SPACES = "/api/v1/context/spaces"


def space(api: httpx.Client, admin: dict[str, str], name: str, level: str, parent=None) -> str:
    body = {"name": name, "level": level, **({"parentId": parent} if parent else {})}
    response = api.post(SPACES, headers=admin, json=body)
    assert response.status_code == 201, response.text
    return response.json()["id"]


def source(api: httpx.Client, admin: dict[str, str], space_id: str, name: str, text: str) -> None:
    created = api.post(
        f"{SPACES}/{space_id}/sources", headers=admin, json={"kind": "docs", "name": name}
    )
    assert created.status_code == 201, created.text
    indexed = api.put(
        f"/api/v1/context/sources/{created.json()['id']}/index",
        headers=admin,
        json={"documents": [{"path": f"{name}.md", "content": text}]},
    )
    assert indexed.status_code == 200, indexed.text


def grant(api: httpx.Client, admin: dict[str, str], space_id: str, subject: str) -> None:
    response = api.put(
        f"{SPACES}/{space_id}/grants",
        headers=admin,
        json={"subject": subject, "permissions": ["context:space:search"]},
    )
    assert response.status_code == 204, response.text


@pytest.fixture
def hierarchy(api, admin_headers) -> dict[str, str]:
    """Secret Plans (department) > Payments (team) > Billing (project); alice may search the
    team (and so the project). Only the department holds a source."""
    dept = space(api, admin_headers, "Secret Plans", "department")
    team = space(api, admin_headers, "Payments", "team", dept)
    project = space(api, admin_headers, "Billing", "project", team)
    source(api, admin_headers, dept, "merger", "Refund approvals after the merger.")
    grant(api, admin_headers, team, "user:alice")
    return {"dept": dept, "team": team, "project": project}


def retrieve(api: httpx.Client, headers: dict[str, str], **body) -> dict:
    response = api.post(RETRIEVE, headers=headers, json={"query": "refund approvals", **body})
    assert response.status_code == 200, response.text
    return response.json()


def test_without_a_space_id_an_empty_chain_says_what_was_searched_and_suggests_space_id(
    api, org, token, hierarchy
) -> None:
    answer = retrieve(api, bearer(token(org, "alice")))

    assert answer["chunks"] == []
    assert answer["warnings"] == [
        "no source was searched: the spaces searched (personal) hold no published source; "
        "without spaceId a retrieval searches the organisation space and your personal space "
        "only: pass spaceId to search a team's or project's space and the spaces above it"
    ]


def test_the_levels_named_are_those_the_caller_may_search_never_a_name_or_a_hidden_level(
    api, org, token, hierarchy
) -> None:
    answer = retrieve(api, bearer(token(org, "alice")), spaceId=hierarchy["project"])

    assert answer["chunks"] == []
    assert answer["warnings"] == [
        "no source was searched: the spaces searched (project and team) hold no published source"
    ]
    text = " ".join(answer["warnings"])
    for hidden in ("department", "Secret", "merger", "Payments", "Billing"):
        assert hidden not in text


def test_the_kinds_asked_are_named_when_they_emptied_the_chain(
    api, org, token, admin_headers, hierarchy
) -> None:
    source(api, admin_headers, hierarchy["team"], "handbook", "Refund approvals need a lead.")

    answer = retrieve(
        api, bearer(token(org, "alice")), spaceId=hierarchy["project"], sourceKinds=["codebase"]
    )

    assert answer["warnings"] == [
        "no source was searched: the spaces searched (project and team) hold no published "
        "source of the kinds asked (codebase)"
    ]


def test_a_caller_who_may_search_no_space_of_the_chain_is_told_so(
    api, org, token, hierarchy
) -> None:
    """A service has no personal space; without a grant on the organisation space it may search
    nothing of the organisation chain."""
    answer = retrieve(api, bearer(token(org, "indexer", service=True)))

    assert answer["chunks"] == []
    assert answer["warnings"] == [
        "no space was searched: without spaceId a retrieval searches the organisation space and "
        "your personal space only, and you may search neither; pass the spaceId of a space you "
        "hold context:space:search on to search it and the spaces above it"
    ]


def test_a_budget_smaller_than_every_chunk_found_says_so(api, admin_headers, hierarchy) -> None:
    everything = retrieve(api, admin_headers, spaceId=hierarchy["dept"])
    smallest = min(c["tokens"] for c in everything["chunks"])

    answer = retrieve(api, admin_headers, spaceId=hierarchy["dept"], tokenBudget=smallest - 1)

    assert (answer["chunks"], answer["tokensUsed"]) == ([], 0)
    assert answer["warnings"] == [
        f"tokenBudget {smallest - 1} is smaller than every chunk found (the smallest takes "
        f"{smallest} tokens); nothing was delivered: raise tokenBudget"
    ]
    assert everything["warnings"] == []


def test_a_query_without_any_term_says_so_and_one_matching_nothing_does_not(
    api, admin_headers, hierarchy
) -> None:
    # full-text only (no embeddings endpoint): stop words, punctuation and fragments are no terms
    termless = retrieve(api, admin_headers, spaceId=hierarchy["dept"], query="I'm ... e.g. the?")
    unmatched = retrieve(api, admin_headers, spaceId=hierarchy["dept"], query="zebra crossings")
    found = retrieve(api, admin_headers, spaceId=hierarchy["dept"], query="I'd like refunds")

    assert termless["chunks"] == []
    assert termless["searchMode"] == "full_text"
    assert termless["warnings"] == [
        'the query has no word full-text search can match (stop words such as "what" or "the", '
        'punctuation and fragments such as "I\'m" or "e.g." are left out), and no embeddings '
        "endpoint searched it by meaning: ask with the words of what you need"
    ]
    assert (unmatched["chunks"], unmatched["warnings"]) == ([], [])
    assert len(found["chunks"]) == 1
    assert found["warnings"] == []
