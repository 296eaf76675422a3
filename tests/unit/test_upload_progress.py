"""`context-ledger ingest`'s progress: batches sized to take a couple of seconds, and the folder's
chunks extrapolated from those stored so far."""

from __future__ import annotations

import pytest

from context_ledger.sources.upload import (
    BATCH_SECONDS,
    MIN_BATCH_BYTES,
    BatchSizer,
    UploadProgress,
)


def test_the_first_batch_is_small_so_progress_starts_moving_at_once() -> None:
    assert BatchSizer(2_000_000)() == MIN_BATCH_BYTES
    assert BatchSizer(600)() == 600, "never above the caller's limit"


@pytest.mark.parametrize(
    ("rate", "expected"),
    [
        (10_000, MIN_BATCH_BYTES),  # embedding on a small machine: the floor
        (100_000, int(100_000 * BATCH_SECONDS)),
        (50_000_000, 2_000_000),  # full-text only: the whole limit
    ],
)
def test_the_next_batch_takes_what_the_last_one_stored_in_batch_seconds(rate, expected) -> None:
    sizer = BatchSizer(2_000_000)

    sizer.took(rate, 1.0)

    assert sizer() == expected


def progress(chunks: int, done: int, total: int) -> UploadProgress:
    return UploadProgress(1, 2, done, total, chunks, chunks)


def test_the_chunks_to_come_are_extrapolated_by_bytes() -> None:
    assert progress(chunks=30, done=25_000, total=100_000).expected_chunks == 120
    assert progress(chunks=0, done=0, total=100_000).expected_chunks == 0
