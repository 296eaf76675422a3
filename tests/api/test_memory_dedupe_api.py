"""Deduplication on write (issue 28, item 4): opt-in with ``"dedupe": true``; a live memory of the
same project and type whose content equals the new one, whitespace and case folded, is answered
(200, ``"duplicate": true``, untouched) instead of a second copy. Off by default: the spec's write
is unchanged."""

from __future__ import annotations

import httpx
from api_support import bearer, error_of
from memory_support import (
    BASE,
    LATENCY,
    POSTGRES,
    PROJECT,
    STORED_FIELDS,
    grant,
    project_space_id,
    require_review,
    write,
)

#: POSTGRES with its whitespace and case changed (a no-break space and a tab among them).
POSTGRES_AGAIN = "  we USE postgres,\u00a0not mongodb,\tbecause the\n ranking query needs joins. "


def dedupe(api: httpx.Client, headers: dict, content: str, **body) -> httpx.Response:
    return api.post(
        f"{BASE}/{PROJECT}", headers=headers, json={"content": content, "dedupe": True, **body}
    )


def revisions(api: httpx.Client, headers: dict, memory_id: str) -> list[int]:
    path = f"{BASE}/{PROJECT}/{memory_id}/revisions"
    return [r["revision"] for r in api.get(path, headers=headers).json()["revisions"]]


def test_an_equal_live_memory_is_answered_untouched_with_duplicate_true(api, admin_headers) -> None:
    kept = write(api, admin_headers, content=POSTGRES, type="decision", metadata={"a": 1})

    response = dedupe(api, admin_headers, POSTGRES_AGAIN, type="decision", metadata={"b": 2})

    assert response.status_code == 200
    assert list(response.json()) == [*STORED_FIELDS, "duplicate"]
    assert response.json() == kept | {"duplicate": True}, "updated_at and metadata untouched"
    assert [
        m["id"] for m in api.get(f"{BASE}/{PROJECT}", headers=admin_headers).json()["memories"]
    ] == [kept["id"]]
    assert revisions(api, admin_headers, kept["id"]) == [1]
    again = api.get(f"{BASE}/{PROJECT}/{kept['id']}", headers=admin_headers).json()
    assert again["updated_at"] == kept["updated_at"]


def test_a_new_memory_written_with_dedupe_says_duplicate_false(api, admin_headers) -> None:
    write(api, admin_headers, content=POSTGRES)

    response = dedupe(api, admin_headers, LATENCY)

    assert response.status_code == 201
    assert response.json()["duplicate"] is False
    assert response.json()["content"] == LATENCY


def test_without_dedupe_the_same_content_is_stored_twice_as_the_spec_writes(
    api, admin_headers
) -> None:
    first = write(api, admin_headers, content=POSTGRES)

    second = write(api, admin_headers, content=POSTGRES)
    off = write(api, admin_headers, content=POSTGRES, dedupe=False)

    assert len({first["id"], second["id"], off["id"]}) == 3
    assert list(second) == list(off) == STORED_FIELDS, "no duplicate field unless asked"


def test_another_type_another_project_or_other_words_are_no_duplicate(api, admin_headers) -> None:
    write(api, admin_headers, content=POSTGRES, type="decision")

    other_type = dedupe(api, admin_headers, POSTGRES, type="fact")
    other_words = dedupe(api, admin_headers, POSTGRES.replace("Postgres", "MySQL"), type="decision")
    other_project = api.post(
        f"{BASE}/other-project",
        headers=admin_headers,
        json={"content": POSTGRES, "type": "decision", "dedupe": True},
    )

    for response in (other_type, other_words, other_project):
        assert (response.status_code, response.json()["duplicate"]) == (201, False)


def test_a_deleted_or_pending_memory_is_not_live(api, admin_headers) -> None:
    gone = write(api, admin_headers, content=POSTGRES)
    api.delete(f"{BASE}/{PROJECT}/{gone['id']}", headers=admin_headers)

    after_delete = dedupe(api, admin_headers, POSTGRES)
    require_review(api, admin_headers)
    proposed = dedupe(api, admin_headers, LATENCY)
    proposed_again = dedupe(api, admin_headers, LATENCY)
    live_one = dedupe(api, admin_headers, POSTGRES)

    assert (after_delete.status_code, after_delete.json()["duplicate"]) == (201, False)
    assert [r.status_code for r in (proposed, proposed_again)] == [202, 202]
    assert proposed.json() == {
        "id": proposed.json()["id"],
        "project_id": PROJECT,
        "revision": 1,
        "state": "pending",
        "duplicate": False,
    }
    assert proposed_again.json()["id"] != proposed.json()["id"]
    assert live_one.status_code == 200, "a live memory answers even where review is required"
    assert live_one.json()["id"] == after_delete.json()["id"]


def test_a_searcher_proposing_under_review_gets_the_live_memory(
    api, org, token, admin_headers
) -> None:
    kept = write(api, admin_headers, content=POSTGRES)
    grant(api, admin_headers, project_space_id(api, admin_headers), "alice", "context:space:search")
    require_review(api, admin_headers)
    alice = bearer(token(org, "alice"))

    response = dedupe(api, alice, POSTGRES_AGAIN)
    refused = dedupe(api, bearer(token(org, "mallory")), POSTGRES)

    assert (response.status_code, response.json()["id"]) == (200, kept["id"])
    assert error_of(refused) == (404, "memory.project.not_found"), "no probing without access"


def test_a_memory_delivered_redacted_is_never_confirmed_as_a_duplicate(api, admin_headers) -> None:
    secret = "The vault rotation password=Tr0ub4dorXyzzy77 is kept by ops."
    first = write(api, admin_headers, content=secret)

    response = dedupe(api, admin_headers, secret)

    assert response.status_code == 201, "a 200 would confirm the guessed password"
    assert response.json()["duplicate"] is False
    assert response.json()["id"] != first["id"]
    assert "Tr0ub4dorXyzzy77" not in response.text


def test_a_batch_dedupes_against_live_memories_and_its_own_earlier_items(
    api, admin_headers
) -> None:
    kept = write(api, admin_headers, content=POSTGRES)
    items = [
        {"content": POSTGRES_AGAIN, "dedupe": True},
        {"content": LATENCY},
        {"content": LATENCY.upper(), "dedupe": True},
        {"content": POSTGRES},  # no dedupe: stored again
    ]

    response = api.post(f"{BASE}/{PROJECT}/batch", headers=admin_headers, json={"memories": items})

    assert response.status_code == 201
    ids = response.json()["ids"]
    assert ids[0] == kept["id"]
    assert ids[2] == ids[1] != kept["id"]
    assert ids[3] not in (kept["id"], ids[1])
    assert (response.json()["duplicates"], response.json()["pending"]) == ([0, 2], [])
    listed = api.get(f"{BASE}/{PROJECT}", headers=admin_headers).json()["memories"]
    assert [m["id"] for m in listed] == [ids[3], ids[1], kept["id"]]


def test_a_batch_of_duplicates_only_stores_nothing_and_answers_200(api, admin_headers) -> None:
    kept = write(api, admin_headers, content=POSTGRES)
    items = [{"content": POSTGRES_AGAIN, "dedupe": True}, {"content": POSTGRES, "dedupe": True}]

    response = api.post(f"{BASE}/{PROJECT}/batch", headers=admin_headers, json={"memories": items})

    assert response.status_code == 200
    assert response.json() == {
        "project_id": PROJECT,
        "ids": [kept["id"], kept["id"]],
        "duplicates": [0, 1],
        "pending": [],
    }


def test_the_key_follows_the_served_revision(api, admin_headers) -> None:
    memory = write(api, admin_headers, content=POSTGRES)
    changed = api.patch(
        f"{BASE}/{PROJECT}/{memory['id']}", headers=admin_headers, json={"content": LATENCY}
    )
    assert changed.status_code == 200

    now_equal = dedupe(api, admin_headers, LATENCY)
    formerly_equal = dedupe(api, admin_headers, POSTGRES)

    assert (now_equal.status_code, now_equal.json()["id"]) == (200, memory["id"])
    assert (formerly_equal.status_code, formerly_equal.json()["duplicate"]) == (201, False)
