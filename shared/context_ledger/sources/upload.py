"""``context-ledger ingest``: send a folder to a source as one index build, over the HTTP API.

The folder is listed, then read once and sent in batches to an open build, and the build is
published at the end, so searches switch from the old snapshot to the new one at once. Any failure
once the build is open (the service refusing a batch, the service unreachable, an interrupt) aborts
the build (``POST .../abort``: its rows are deleted) before the error goes on: the previous version
stays served, and no build is left ``building`` for ever.

A batch is answered once its chunks are stored, embeddings included, so the time a batch takes is
what progress and its ETA are measured in. Batches are sized to take about
:data:`BATCH_SECONDS` at the rate the last one went, between :data:`MIN_BATCH_BYTES` and
``batch_bytes``: without embeddings a batch is the whole 2 MB (a request is a transaction on the
source), with them (MiniLM stores ~10 KB of code a second per core) it is a few dozen KB, so the
progress moves every few seconds instead of once a folder.
"""

from __future__ import annotations

import itertools
import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from context_ledger.sources.walk import (
    DEFAULT_MAX_FILE_BYTES,
    WalkReport,
    candidate_files,
    iter_text_files,
)

DEFAULT_BATCH_BYTES = 2_000_000
MAX_BATCH_DOCUMENTS = 500
#: How long a batch should take; its size follows from the rate of the batch before.
BATCH_SECONDS = 2.0
#: The first batch's size and the smallest one (a few small files, or one chunky one).
MIN_BATCH_BYTES = 32_000


class UploadError(RuntimeError):
    """The service refused a step; the message is the service's own error."""


@dataclass(frozen=True)
class UploadProgress:
    """Where an upload stands once a batch is stored. ``files`` and ``bytes`` count the listed
    files handled so far, sent or skipped (binary, too large), out of ``total_files`` and
    ``total_bytes``; ``chunks`` and ``embedded`` what the service stored of them."""

    files: int
    total_files: int
    bytes: int
    total_bytes: int
    chunks: int
    embedded: int

    @property
    def expected_chunks(self) -> int:
        """The chunks of the whole folder, extrapolated by bytes from those stored so far."""
        if not self.bytes:
            return 0
        return round(self.chunks * self.total_bytes / self.bytes)


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
    files: Iterator[tuple[str, str]], batch_bytes: Callable[[], int]
) -> Iterator[tuple[list[dict[str, Any]], int]]:
    """Documents grouped so each request body stays under ``batch_bytes()`` (asked again for
    each batch); with their size."""
    batch: list[dict[str, Any]] = []
    size = 0
    limit = batch_bytes()
    for path, text in files:
        document = {"path": path, "content": text}
        doc_size = len(json.dumps(document))
        if batch and (size + doc_size > limit or len(batch) >= MAX_BATCH_DOCUMENTS):
            yield batch, size
            batch, size = [], 0
            limit = batch_bytes()
        batch.append(document)
        size += doc_size
    if batch:
        yield batch, size


class _Listing:
    """The folder's files in path order with their sizes, to count progress in."""

    def __init__(self, root: Path, max_file_bytes: int) -> None:
        self.paths = candidate_files(root)
        self._position = {path: i for i, path in enumerate(self.paths)}
        sizes = [_size(root / path, max_file_bytes) for path in self.paths]
        self._handled_bytes = list(itertools.accumulate(sizes, initial=0))

    @property
    def total_bytes(self) -> int:
        return self._handled_bytes[-1]

    def handled(self, last_path: str) -> tuple[int, int]:
        """(files, bytes) handled once ``last_path`` is: the files are read in path order, so
        every file listed before it was sent or skipped."""
        files = self._position[last_path] + 1
        return files, self._handled_bytes[files]


def _size(path: Path, max_file_bytes: int) -> int:
    """What a file weighs in the progress: a file skipped unread for its size weighs nothing."""
    try:
        size = path.stat().st_size
    except OSError:
        return 0
    return size if size <= max_file_bytes else 0


class BatchSizer:
    """The next batch's size: what the last one stored in :data:`BATCH_SECONDS`."""

    def __init__(self, most: int) -> None:
        self.most = most
        self.next = min(most, MIN_BATCH_BYTES)

    def __call__(self) -> int:
        return self.next

    def took(self, size: int, seconds: float) -> None:
        rate = size / max(seconds, 1e-3)
        self.next = min(self.most, max(MIN_BATCH_BYTES, int(rate * BATCH_SECONDS)))


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
    progress: Callable[[UploadProgress], None] = lambda _: None,
) -> UploadReport:
    """Build and publish a new index version of ``source_id`` from the files under ``root``.

    ``progress`` is called once the folder is listed, after each stored batch and once all of
    it is sent.
    """
    started = time.perf_counter()
    report = UploadReport()
    listing = _Listing(root, max_file_bytes)
    chunks = embedded = 0

    def tell(files: int, handled_bytes: int) -> None:
        total = (len(listing.paths), listing.total_bytes)
        progress(UploadProgress(files, total[0], handled_bytes, total[1], chunks, embedded))

    sizer = BatchSizer(batch_bytes)
    headers = {"Authorization": f"Bearer {token}"}
    base = f"/api/v1/context/sources/{source_id}/index-versions"
    with httpx.Client(base_url=url, headers=headers, timeout=300) as client:
        report.version = _call(client, "POST", base)["version"]
        build = f"{base}/{report.version}"
        try:
            tell(0, 0)
            files = iter_text_files(
                root, max_bytes=max_file_bytes, report=report.skipped, paths=listing.paths
            )
            for documents, size in _batches(files, sizer):
                sent = time.perf_counter()
                stats = _call(client, "POST", f"{build}/documents", json={"documents": documents})
                sizer.took(size, time.perf_counter() - sent)
                report.files += stats["documents"]
                # The files' bytes, as the progress counts them; ``size`` is the request's JSON,
                # where a non-ASCII character takes six.
                report.bytes += sum(len(d["content"].encode()) for d in documents)
                chunks, embedded = chunks + stats["chunks"], embedded + stats["embedded"]
                tell(*listing.handled(documents[-1]["path"]))
            tell(len(listing.paths), listing.total_bytes)
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
