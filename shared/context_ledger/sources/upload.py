"""``context-ledger ingest``: send a folder to a source as one index build, over the HTTP API.

The folder is read once, sent in batches of at most ``batch_bytes`` of JSON to an open build, and
the build is published at the end, so searches switch from the old snapshot to the new one at once.
Any failure once the build is open (the service refusing a batch, the service unreachable, an
interrupt) aborts the build (``POST .../abort``: its rows are deleted) before the error goes on:
the previous version stays served, and no build is left ``building`` for ever.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from context_ledger.sources.walk import DEFAULT_MAX_FILE_BYTES, WalkReport, iter_text_files

DEFAULT_BATCH_BYTES = 2_000_000
MAX_BATCH_DOCUMENTS = 500


class UploadError(RuntimeError):
    """The service refused a step; the message is the service's own error."""


@dataclass
class UploadReport:
    version: int = 0
    files: int = 0
    bytes: int = 0
    chunks: int = 0
    tokens: int = 0
    edges: int = 0
    embedded: int = 0
    seconds: float = 0.0
    skipped: WalkReport = field(default_factory=WalkReport)


def _batches(
    files: Iterator[tuple[str, str]], batch_bytes: int
) -> Iterator[tuple[list[dict[str, Any]], int]]:
    """Documents grouped so each request body stays under ``batch_bytes``; with their size."""
    batch: list[dict[str, Any]] = []
    size = 0
    for path, text in files:
        document = {"path": path, "content": text}
        doc_size = len(json.dumps(document))
        if batch and (size + doc_size > batch_bytes or len(batch) >= MAX_BATCH_DOCUMENTS):
            yield batch, size
            batch, size = [], 0
        batch.append(document)
        size += doc_size
    if batch:
        yield batch, size


def _call(client: httpx.Client, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
    try:
        response = client.request(method, path, **kwargs)
    except httpx.HTTPError as exc:
        raise UploadError(f"{method} {path}: {type(exc).__name__}: {exc}") from exc
    if response.is_error:
        try:
            message = response.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = response.text[:200]
        raise UploadError(f"{method} {path}: HTTP {response.status_code}: {message}")
    return response.json()


def upload_folder(
    root: Path,
    *,
    source_id: uuid.UUID,
    url: str,
    token: str,
    batch_bytes: int = DEFAULT_BATCH_BYTES,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    progress: Callable[[int], None] = lambda _: None,
) -> UploadReport:
    """Build and publish a new index version of ``source_id`` from the files under ``root``.

    ``progress`` is called with the bytes of each batch once it is stored.
    """
    started = time.perf_counter()
    report = UploadReport()
    headers = {"Authorization": f"Bearer {token}"}
    base = f"/api/v1/context/sources/{source_id}/index-versions"
    with httpx.Client(base_url=url, headers=headers, timeout=300) as client:
        report.version = _call(client, "POST", base)["version"]
        build = f"{base}/{report.version}"
        try:
            files = iter_text_files(root, max_bytes=max_file_bytes, report=report.skipped)
            for documents, size in _batches(files, batch_bytes):
                stats = _call(client, "POST", f"{build}/documents", json={"documents": documents})
                report.files += stats["documents"]
                report.bytes += size
                progress(size)
            published = _call(client, "POST", f"{build}/publish")
        except BaseException as exc:
            outcome = _abort(client, build, report.version)
            if isinstance(exc, UploadError):
                raise UploadError(f"{exc}; {outcome}") from exc
            exc.add_note(outcome)
            raise
    report.chunks = published["chunks"]
    report.tokens = published["tokens"]
    report.edges = published["edges"]
    report.embedded = published["embedded"]
    report.seconds = time.perf_counter() - started
    return report


def _abort(client: httpx.Client, build: str, version: int) -> str:
    """Abort the open build; what became of it, for the error message."""
    try:
        _call(client, "POST", f"{build}/abort")
    except UploadError as exc:
        return f"index version {version} could not be aborted ({exc}); it stays unpublished"
    return f"index version {version} aborted; the source's published version is unchanged"
