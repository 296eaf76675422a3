"""The external checkpoint stores: a real directory, and an S3 bucket on moto's server."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

from context_ledger.evidence.checkpoint_store import (
    APPENDED,
    VERIFIED,
    CheckpointStore,
    CheckpointStoreError,
    FileCheckpointStore,
    InvalidCheckpointError,
    S3CheckpointStore,
    SignedCheckpoint,
    get_checkpoint_store,
    object_name,
    sign_checkpoint,
)
from context_ledger.evidence.keys import KeyRing
from context_ledger.settings import get_settings

KEYS = KeyRing.single("k1", b"1" * 32)
CHAIN = "org:00000000-0000-4000-8000-0000000000aa"


def s3_client(endpoint: str) -> Any:
    return boto3.client("s3", endpoint_url=endpoint, config=Config(s3={"addressing_style": "path"}))


def versioned_bucket(client: Any) -> str:
    bucket = f"checkpoints-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=bucket)
    client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    return bucket


@pytest.fixture(params=["file", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> CheckpointStore:
    if request.param == "file":
        return FileCheckpointStore(tmp_path / "checkpoints")
    client = s3_client(request.getfixturevalue("sqs_endpoint"))  # moto serves every service
    return S3CheckpointStore(versioned_bucket(client), client)


def _checkpoint(seq: int, *, chain: str = CHAIN, kind: str = VERIFIED) -> SignedCheckpoint:
    return sign_checkpoint(
        chain=chain,
        seq=seq,
        mac=seq.to_bytes(32, "big"),
        kind=kind,
        keys=KEYS,
        now=datetime.now(UTC),
    )


def test_an_empty_store_has_no_checkpoint_and_no_chains(store: CheckpointStore) -> None:
    assert store.latest(CHAIN) is None
    assert store.chains() == []


def test_the_latest_checkpoint_is_the_highest_seq_whatever_the_write_order(
    store: CheckpointStore,
) -> None:
    for seq in (5, 1000, 20, 999):
        store.put(_checkpoint(seq))
    store.put(_checkpoint(3, chain="org:other"))

    latest = store.latest(CHAIN)

    assert latest is not None
    assert (latest.seq, latest.mac) == (1000, (1000).to_bytes(32, "big"))
    assert latest.signature_valid(KEYS)
    assert store.chains() == sorted([CHAIN, "org:other"])


def test_a_checkpoint_is_written_once_per_seq(store: CheckpointStore) -> None:
    first = _checkpoint(7, kind=APPENDED)
    store.put(first)

    store.put(_checkpoint(7, kind=VERIFIED))

    assert store.latest(CHAIN) == first


def test_concurrent_writers_never_make_the_latest_go_back(store: CheckpointStore) -> None:
    seqs = list(range(1, 41))

    def write(part: list[int]) -> None:
        for seq in part:
            store.put(_checkpoint(seq))

    threads = [threading.Thread(target=write, args=(seqs[i::4],)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    latest = store.latest(CHAIN)
    assert latest is not None
    assert latest.seq == 40


def test_a_checkpoint_stored_under_another_seq_name_is_invalid(
    store: CheckpointStore, tmp_path: Path
) -> None:
    """Copying an old checkpoint over a newer name does not pass for the newer one."""
    old = _checkpoint(3)
    name = object_name(CHAIN, 9)
    if isinstance(store, FileCheckpointStore):
        (store.directory / CHAIN).mkdir(parents=True)
        (store.directory / name).write_bytes(old.to_bytes())
    else:
        assert isinstance(store, S3CheckpointStore)
        store.client.put_object(Bucket=store.bucket, Key=name, Body=old.to_bytes())

    with pytest.raises(InvalidCheckpointError):
        store.latest(CHAIN)


def test_s3_checkpoints_are_json_objects_named_newest_first(sqs_endpoint: str) -> None:
    client = s3_client(sqs_endpoint)
    store = S3CheckpointStore(versioned_bucket(client), client)
    store.put(_checkpoint(12))

    keys = [o["Key"] for o in client.list_objects_v2(Bucket=store.bucket)["Contents"]]
    head = client.head_object(Bucket=store.bucket, Key=keys[0])

    assert keys == [object_name(CHAIN, 12), object_name(CHAIN, 12, verified=True)]
    assert head["ContentType"] == "application/json"


def test_an_unreachable_bucket_is_a_store_error(sqs_endpoint: str) -> None:
    store = S3CheckpointStore("no-such-bucket-here", s3_client(sqs_endpoint))

    with pytest.raises(CheckpointStoreError):
        store.latest(CHAIN)
    with pytest.raises(CheckpointStoreError):
        store.put(_checkpoint(1))


@pytest.fixture
def settings_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    yield monkeypatch
    monkeypatch.undo()
    get_settings.cache_clear()


def test_local_mode_keeps_checkpoints_under_the_home(
    settings_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    settings_env.setenv("CONTEXT_LEDGER_HOME", str(tmp_path))
    settings_env.delenv("KEYSTONE_EVIDENCE_CHECKPOINT_DIR", raising=False)
    settings_env.delenv("KEYSTONE_EVIDENCE_CHECKPOINT_BUCKET", raising=False)
    get_settings.cache_clear()

    store = get_checkpoint_store()

    assert isinstance(store, FileCheckpointStore)
    assert store.directory == tmp_path / "checkpoints"


def test_a_bucket_setting_selects_s3(settings_env: pytest.MonkeyPatch) -> None:
    settings_env.setenv("KEYSTONE_EVIDENCE_CHECKPOINT_BUCKET", "ledger-checkpoints")
    get_settings.cache_clear()

    store = get_checkpoint_store()

    assert isinstance(store, S3CheckpointStore)
    assert store.bucket == "ledger-checkpoints"
