"""What the memory API's tests share: the spec's example memories and the calls most tests
make."""

from __future__ import annotations

import httpx

BASE = "/api/context"
PROJECT = "billing-service"
POSTGRES = "We use Postgres, not MongoDB, because the ranking query needs joins."
LATENCY = "The retrieval endpoint must answer in under 200 ms at p95."
QUERY = "which database did we pick"
STORED_FIELDS = [
    "id",
    "org_id",
    "project_id",
    "agent_key",
    "type",
    "content",
    "confidence",
    "importance",
    "access_count",
    "last_accessed_at",
    "created_at",
    "updated_at",
    "metadata",
]


def write(api: httpx.Client, headers: dict, project: str = PROJECT, **body) -> dict:
    response = api.post(f"{BASE}/{project}", headers=headers, json=body)
    assert response.status_code == 201, response.text
    return response.json()


def project_space_id(api: httpx.Client, admin: dict, key: str = PROJECT) -> str:
    spaces = api.get("/api/v1/context/spaces", headers=admin).json()["spaces"]
    return next(s["id"] for s in spaces if s["key"] == key)


def grant(api: httpx.Client, admin: dict, space_id: str, user: str, *permissions: str) -> None:
    response = api.put(
        f"/api/v1/context/spaces/{space_id}/grants",
        headers=admin,
        json={"subject": f"user:{user}", "permissions": list(permissions)},
    )
    assert response.status_code == 204, response.text


def require_review(api: httpx.Client, headers: dict, required: bool = True) -> None:
    response = api.put(f"{BASE}/{PROJECT}/review", headers=headers, json={"required": required})
    assert response.json() == {"project_id": PROJECT, "review_required": required}
