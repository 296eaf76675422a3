"""`context-ledger ingest` end to end: a folder becomes one published index build over HTTP."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from context_ledger.db import connection
from context_ledger.sources.searchable import current_chunks
from context_ledger.sources.upload import UploadError, upload_folder


@pytest.fixture
def source(api, admin_headers) -> dict:
    team = api.post(
        "/api/v1/context/spaces", headers=admin_headers, json={"name": "Shop", "level": "team"}
    ).json()
    return api.post(
        f"/api/v1/context/spaces/{team['id']}/sources",
        headers=admin_headers,
        json={"kind": "codebase", "name": "shop"},
    ).json()


def write_repo(root: Path, files: int) -> None:
    (root / ".gitignore").write_text("*.tmp\n")
    (root / "scratch.tmp").write_text("ignored")
    for i in range(files):
        (root / f"mod{i}.py").write_text(f"def handler_{i}(event):\n    return {i}\n")


def test_a_folder_is_uploaded_in_batches_and_published(
    runtime, api, org, admin_headers, source, tmp_path
) -> None:
    write_repo(tmp_path, files=30)
    progress: list[int] = []

    report = upload_folder(
        tmp_path,
        source_id=uuid.UUID(source["id"]),
        url=runtime.url,
        token=admin_headers["Authorization"].removeprefix("Bearer "),
        batch_bytes=600,  # forces many batches
        progress=progress.append,
    )

    assert report.version == 1
    assert report.files == 31  # 30 modules and the .gitignore
    assert report.chunks >= 31
    assert len(progress) > 1
    assert sum(progress) == report.bytes
    with connection() as conn:
        rows = current_chunks(conn, org_id=org.id, source_ids=[uuid.UUID(source["id"])])
    assert {r["symbol"] for r in rows} >= {f"handler_{i}" for i in range(30)}
    assert not any(r["path"].endswith(".tmp") for r in rows)


def test_a_refused_upload_reports_the_services_message(
    runtime, source, tmp_path, token, other_org
) -> None:
    write_repo(tmp_path, files=1)

    with pytest.raises(UploadError, match="HTTP 404: source not found"):
        upload_folder(
            tmp_path,
            source_id=uuid.UUID(source["id"]),
            url=runtime.url,
            token=token(other_org, "mallory"),
        )
