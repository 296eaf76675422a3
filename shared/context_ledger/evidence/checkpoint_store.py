"""Signed checkpoints kept outside the database: an S3 bucket in AWS, a directory locally.

A chain that only checks itself cannot see its own tail cut off, nor the whole database restored
from an older backup (chain, head and checkpoint tables together): what is left is a shorter,
perfectly linked chain. So each verification run, and the writer every
``KEYSTONE_EVIDENCE_CHECKPOINT_EVERY`` appends, also writes the head it knows (chain, seq, MAC,
key id, time) to a store the database cannot reach, signed with the evidence key, and the next
verification compares the chain against the newest one (see evidence.anchor).

Each checkpoint is its own object, never overwritten (``If-None-Match: *``), named
``<chain>/<2**63 - 1 - seq, 19 digits>-<seq>.json``: names sort newest first, so the newest is
one ``ListObjectsV2`` call with ``MaxKeys=1``, concurrent writers cannot regress it, and the
bucket (versioned, deletes denied) keeps the whole history.

The signature is ``HMAC-SHA256(key, "context-ledger/checkpoint/v1" 0x00 ‖ RFC 8785 payload)``
with a key of the evidence key ring: the domain prefix keeps a checkpoint signature from ever
being mistaken for an entry MAC. Someone who can write to the bucket cannot forge one, someone who
can write to the database cannot remove one.
"""

from __future__ import annotations

import binascii
import functools
import hashlib
import hmac
import json
import os
import re
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from aws_lambda_powertools import Logger

from context_ledger.evidence.canonical import (
    CanonicalEncodingError,
    canonical_bytes,
    format_timestamp,
)
from context_ledger.evidence.keys import KeyRing
from context_ledger.settings import Environment, get_settings

logger = Logger(child=True)

SIGNATURE_DOMAIN = b"context-ledger/checkpoint/v1\x00"

#: Written by a verification run (the entries up to ``seq`` were checked) or by the writer (the
#: head it appended, not verified).
VERIFIED = "verified"
APPENDED = "appended"

_MAX_SEQ = 2**63 - 1  # PostgreSQL bigint
_NAME = re.compile(r"^(\d{19})-(\d{1,19})\.json$")


class CheckpointStoreError(RuntimeError):
    """The external checkpoint store could not be read or written."""


class InvalidCheckpointError(CheckpointStoreError):
    """A stored checkpoint does not parse, or its name disagrees with its content."""


@dataclass(frozen=True)
class SignedCheckpoint:
    chain: str
    seq: int
    mac: bytes
    key_id: str
    created_at: str
    kind: str
    signature: bytes

    def payload(self) -> dict[str, Any]:
        """The signed fields, as stored (wire names, MACs in hex)."""
        return {
            "chain": self.chain,
            "seq": self.seq,
            "mac": self.mac.hex(),
            "keyId": self.key_id,
            "createdAt": self.created_at,
            "kind": self.kind,
        }

    def to_bytes(self) -> bytes:
        return canonical_bytes({**self.payload(), "signature": self.signature.hex()})

    @classmethod
    def from_bytes(cls, data: bytes) -> SignedCheckpoint:
        try:
            value = json.loads(data)
            checkpoint = cls(
                chain=value["chain"],
                seq=value["seq"],
                mac=bytes.fromhex(value["mac"]),
                key_id=value["keyId"],
                created_at=value["createdAt"],
                kind=value["kind"],
                signature=bytes.fromhex(value["signature"]),
            )
        except (ValueError, KeyError, TypeError, binascii.Error):
            raise InvalidCheckpointError("a stored checkpoint does not parse") from None
        if not (
            isinstance(checkpoint.seq, int)
            and not isinstance(checkpoint.seq, bool)
            and all(
                isinstance(text, str)
                for text in (checkpoint.chain, checkpoint.key_id, checkpoint.created_at)
            )
        ):
            raise InvalidCheckpointError("a stored checkpoint has fields of the wrong type")
        return checkpoint

    def signature_valid(self, keys: KeyRing) -> bool:
        """True when a key of ``keys`` with this checkpoint's key id made its signature."""
        key = keys.get(self.key_id)
        if key is None:
            return False
        try:
            expected = _sign(key, self.payload())
        except CanonicalEncodingError:
            return False
        return hmac.compare_digest(expected, self.signature)


def sign_checkpoint(
    *, chain: str, seq: int, mac: bytes, kind: str, keys: KeyRing, now: datetime
) -> SignedCheckpoint:
    """A checkpoint of entry ``seq`` (whose MAC is ``mac``), signed with the current key."""
    unsigned = SignedCheckpoint(
        chain=chain,
        seq=seq,
        mac=mac,
        key_id=keys.current_key_id,
        created_at=format_timestamp(now),
        kind=kind,
        signature=b"",
    )
    return replace(unsigned, signature=_sign(keys.current_key, unsigned.payload()))


def _sign(key: bytes, payload: dict[str, Any]) -> bytes:
    return hmac.new(key, SIGNATURE_DOMAIN + canonical_bytes(payload), hashlib.sha256).digest()


def object_name(chain: str, seq: int) -> str:
    """``<chain>/<inverted seq>-<seq>.json``: lexical order is newest first."""
    if not 0 < seq <= _MAX_SEQ:
        raise ValueError("a checkpoint seq is a positive bigint")
    return f"{chain}/{_MAX_SEQ - seq:019d}-{seq}.json"


def _seq_of(name: str) -> int:
    match = _NAME.fullmatch(name)
    if match is None or _MAX_SEQ - int(match[1]) != int(match[2]):
        raise InvalidCheckpointError(f"{name!r} is not a checkpoint name")
    return int(match[2])


def _checked(data: bytes, *, chain: str, name: str) -> SignedCheckpoint:
    """The checkpoint in ``data``, which must be the one its name promises."""
    checkpoint = SignedCheckpoint.from_bytes(data)
    if checkpoint.chain != chain or checkpoint.seq != _seq_of(name):
        raise InvalidCheckpointError(f"checkpoint {chain}/{name} holds another chain position")
    return checkpoint


class CheckpointStore(Protocol):
    """Where signed checkpoints live; write-once per (chain, seq)."""

    def put(self, checkpoint: SignedCheckpoint) -> None:
        """Store it; a checkpoint already stored at its seq is left as it is."""

    def latest(self, chain: str) -> SignedCheckpoint | None:
        """The checkpoint with the highest seq of ``chain``, or None."""

    def chains(self) -> list[str]:
        """Every chain with a checkpoint."""


class FileCheckpointStore:
    """Local mode: one file per checkpoint under ``directory/<chain>/``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def put(self, checkpoint: SignedCheckpoint) -> None:
        path = self.directory / object_name(checkpoint.chain, checkpoint.seq)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # O_EXCL: write-once, like the bucket's If-None-Match; a partial file is never read
            # as a checkpoint because the content goes to a temporary name first.
            temporary = path.with_name(f"{path.name}.{uuid.uuid4().hex}.tmp")
            temporary.write_bytes(checkpoint.to_bytes())
            try:
                os.link(temporary, path)
            except FileExistsError:
                pass
            finally:
                temporary.unlink()
        except OSError as exc:
            raise CheckpointStoreError(f"cannot write checkpoint: {exc.strerror}") from None

    def latest(self, chain: str) -> SignedCheckpoint | None:
        folder = self.directory / chain
        try:
            names = sorted(name for name in os.listdir(folder) if name.endswith(".json"))
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise CheckpointStoreError(f"cannot list checkpoints: {exc.strerror}") from None
        if not names:
            return None
        try:
            data = (folder / names[0]).read_bytes()
        except OSError as exc:
            raise CheckpointStoreError(f"cannot read checkpoint: {exc.strerror}") from None
        return _checked(data, chain=chain, name=names[0])

    def chains(self) -> list[str]:
        try:
            return sorted(entry.name for entry in self.directory.iterdir() if entry.is_dir())
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise CheckpointStoreError(f"cannot list checkpoints: {exc.strerror}") from None


class S3CheckpointStore:
    """AWS: one object per checkpoint in a versioned bucket."""

    def __init__(self, bucket: str, client: Any) -> None:
        self.bucket = bucket
        self.client = client

    def put(self, checkpoint: SignedCheckpoint) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.client.put_object(
                Bucket=self.bucket,
                Key=object_name(checkpoint.chain, checkpoint.seq),
                Body=checkpoint.to_bytes(),
                ContentType="application/json",
                IfNoneMatch="*",
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "PreconditionFailed":
                return  # this seq is checkpointed already
            raise CheckpointStoreError(f"cannot write checkpoint: {_code(exc)}") from None
        except BotoCoreError as exc:
            raise CheckpointStoreError(f"cannot write checkpoint: {type(exc).__name__}") from None

    def latest(self, chain: str) -> SignedCheckpoint | None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            page = self.client.list_objects_v2(Bucket=self.bucket, Prefix=f"{chain}/", MaxKeys=1)
            if not page.get("Contents"):
                return None
            key = page["Contents"][0]["Key"]
            data = self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except ClientError as exc:
            raise CheckpointStoreError(f"cannot read checkpoint: {_code(exc)}") from None
        except BotoCoreError as exc:
            raise CheckpointStoreError(f"cannot read checkpoint: {type(exc).__name__}") from None
        return _checked(data, chain=chain, name=key.removeprefix(f"{chain}/"))

    def chains(self) -> list[str]:
        from botocore.exceptions import BotoCoreError, ClientError

        chains: list[str] = []
        try:
            paginator = self.client.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=self.bucket, Delimiter="/"):
                chains += [p["Prefix"].rstrip("/") for p in page.get("CommonPrefixes", [])]
        except ClientError as exc:
            raise CheckpointStoreError(f"cannot list checkpoints: {_code(exc)}") from None
        except BotoCoreError as exc:
            raise CheckpointStoreError(f"cannot list checkpoints: {type(exc).__name__}") from None
        return sorted(chains)


def _code(exc: Any) -> str:
    return str(exc.response.get("Error", {}).get("Code", "error"))


def get_checkpoint_store() -> CheckpointStore:
    """The store the current settings name: the bucket, else (local mode only) the directory."""
    settings = get_settings()
    if settings.evidence_checkpoint_bucket:
        return _s3_store(settings.evidence_checkpoint_bucket)
    if settings.environment is not Environment.LOCAL:
        raise CheckpointStoreError("KEYSTONE_EVIDENCE_CHECKPOINT_BUCKET must be set outside local")
    return FileCheckpointStore(settings.evidence_checkpoint_dir or settings.home / "checkpoints")


@functools.cache
def _s3_store(bucket: str) -> S3CheckpointStore:
    import boto3  # imported here: only deployments with a bucket talk to S3

    return S3CheckpointStore(bucket, boto3.client("s3"))


def checkpoint_if_due(
    *, chain: str, seq: int, mac: bytes, keys: KeyRing, store: CheckpointStore | None = None
) -> bool:
    """After a committed append: store a checkpoint of entry ``seq`` when ``seq`` is a multiple
    of ``KEYSTONE_EVIDENCE_CHECKPOINT_EVERY``; True when it was stored.

    Call it only after the commit, or a rolled-back append would leave a checkpoint the chain
    never held. A redelivered message reaches here again with the same seq, so a store that was
    down is retried. A failure is logged and swallowed: the entry is committed, and the next
    verification checkpoints the chain anyway.
    """
    if seq % get_settings().evidence_checkpoint_every:
        return False
    try:
        store = store if store is not None else get_checkpoint_store()
        store.put(
            sign_checkpoint(
                chain=chain, seq=seq, mac=mac, kind=APPENDED, keys=keys, now=datetime.now(UTC)
            )
        )
    except CheckpointStoreError as exc:
        logger.error("append checkpoint not written", chain=chain, seq=seq, error=str(exc))
        return False
    return True
