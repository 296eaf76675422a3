"""`context-ledger ingest` end to end: a folder becomes one published index build over HTTP."""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

import pytest
from api_support import current_chunks

from context_ledger.cli import main
from context_ledger.db import connection
from context_ledger.sources.upload import UploadError, UploadProgress, upload_folder


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
    progress: list[UploadProgress] = []

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
    assert len(progress) > 3
    # The totals are known from the start: the folder is listed first (scratch.tmp is ignored).
    sizes = sum(p.stat().st_size for p in tmp_path.iterdir() if p.suffix != ".tmp")
    assert {(p.total_files, p.total_bytes) for p in progress} == {(31, sizes)}
    assert (progress[0].files, progress[0].bytes, progress[0].chunks) == (0, 0, 0)
    assert [p.files for p in progress] == sorted(p.files for p in progress)
    assert (progress[-1].files, progress[-1].bytes) == (31, sizes)
    assert (progress[-1].chunks, progress[-1].embedded) == (report.chunks, report.embedded)
    with connection() as conn:
        rows = current_chunks(conn, org_id=org.id, source_ids=[uuid.UUID(source["id"])])
    assert {r["symbol"] for r in rows} >= {f"handler_{i}" for i in range(30)}
    assert not any(r["path"].endswith(".tmp") for r in rows)


def test_the_report_counts_the_bytes_of_the_files_whatever_their_script(
    runtime, api, admin_headers, source, tmp_path
) -> None:
    (tmp_path / "greek.md").write_text("Καλημέρα, κόσμε. " * 200)
    (tmp_path / "cjk.md").write_text("退款需要收据。" * 300)
    (tmp_path / "plain.md").write_text("Refunds need a receipt. " * 50)

    report = upload_folder(
        tmp_path,
        source_id=uuid.UUID(source["id"]),
        url=runtime.url,
        token=admin_headers["Authorization"].removeprefix("Bearer "),
    )

    assert report.bytes == sum(p.stat().st_size for p in tmp_path.iterdir())


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


def versions(api, admin_headers, source) -> list[tuple[int, str]]:
    listed = api.get(
        f"/api/v1/context/sources/{source['id']}/index-versions", headers=admin_headers
    ).json()["versions"]
    return [(v["version"], v["state"]) for v in listed]


def test_a_file_named_with_bytes_that_are_not_utf8_is_skipped_and_reported(
    runtime, api, admin_headers, source, tmp_path, capsys
) -> None:
    write_repo(tmp_path, files=2)
    fd = os.open(os.fsencode(tmp_path) + b"/bad\xff.py", os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"def hidden():\n    return 1\n")
    os.close(fd)
    token = admin_headers["Authorization"].removeprefix("Bearer ")

    code = main(
        ["ingest", str(tmp_path), "--source", source["id"], "--url", runtime.url, "--token", token]
    )

    out = capsys.readouterr().out
    assert code == 0, out
    assert "published index version 1: 3 files" in out
    assert "1 with a name that is not UTF-8" in out
    assert "skipped for its name: bad\\xff.py" in out
    assert versions(api, admin_headers, source) == [(1, "published")]


def test_a_batch_the_service_refuses_aborts_the_build_and_the_next_ingest_works(
    runtime, api, admin_headers, source, tmp_path
) -> None:
    write_repo(tmp_path, files=2)
    token = admin_headers["Authorization"].removeprefix("Bearer ")
    ingest = {"source_id": uuid.UUID(source["id"]), "url": runtime.url, "token": token}
    upload_folder(tmp_path, **ingest)
    # Over the service's 2,000,000 characters per document (the walker's limit is raised): the
    # first batch is stored, the second refused with a 422.
    (tmp_path / "zz_huge.txt").write_text("word " * 500_000)

    with pytest.raises(UploadError, match=r"HTTP 422: .*index version 2 aborted"):
        upload_folder(tmp_path, **ingest, max_file_bytes=3_000_000)

    assert versions(api, admin_headers, source) == [(1, "published"), (2, "aborted")]
    with connection() as conn:
        row = conn.execute(
            "SELECT count(*) AS n FROM chunks WHERE source_id = %s AND index_version = 2",
            (source["id"],),
        ).fetchone()
    assert row["n"] == 0
    (tmp_path / "zz_huge.txt").unlink()
    assert upload_folder(tmp_path, **ingest).version == 3


def test_an_exception_on_the_clients_side_aborts_the_build(
    runtime, api, admin_headers, source, tmp_path
) -> None:
    write_repo(tmp_path, files=30)

    def interrupted(_: UploadProgress) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as raised:
        upload_folder(
            tmp_path,
            source_id=uuid.UUID(source["id"]),
            url=runtime.url,
            token=admin_headers["Authorization"].removeprefix("Bearer "),
            batch_bytes=600,
            progress=interrupted,
        )

    assert raised.value.__notes__ == [
        "index version 1 aborted; the source's published version is unchanged"
    ]
    assert versions(api, admin_headers, source) == [(1, "aborted")]


def test_the_ingest_shows_a_total_and_an_eta_in_files_and_chunks(
    runtime, admin_headers, source, tmp_path, capsys
) -> None:
    write_repo(tmp_path, files=30)
    token = admin_headers["Authorization"].removeprefix("Bearer ")

    code = main(
        ["ingest", str(tmp_path), "--source", source["id"], "--url", runtime.url, "--token", token]
    )

    captured = capsys.readouterr()
    assert code == 0, captured.err
    chunks = int(
        re.search(r"published index version 1: 31 files .*, (\d+) chunks", captured.out)[1]
    )
    states = [s for s in captured.err.replace("\r", "\n").split("\n") if "files" in s]
    # tqdm's [elapsed<remaining, ...]: the folder's size and file count are known before a batch
    assert re.fullmatch(
        r"indexing: +0%\|.*\| 0\.00B/[\d.]+kB \[00:00<\?, 0/31 files, .*", states[0]
    )
    last = [s for s in states if s.startswith("indexing: 100%")][-1]
    assert re.fullmatch(
        rf"indexing: 100%\|█+\| ([\d.]+kB)/\1 \[\d\d:\d\d<00:00, 31/31 files, {chunks} chunks, "
        r"0 embedded\] *",
        last,
    ), last
