"""Signed checkpoints kept outside the database: an S3 bucket in AWS, a directory locally.

A chain that only checks itself cannot see its own tail cut off, nor the whole database restored
from an older backup (chain, head and checkpoint tables together): what is left is a shorter,
perfectly linked chain. So each verification run, and the writer (every
``KEYSTONE_EVIDENCE_CHECKPOINT_EVERY`` appends, and at most
``KEYSTONE_EVIDENCE_CHECKPOINT_SECONDS`` after its last checkpoint of a chain), also writes the
head it knows (chain, seq, MAC, key id, time) to a store the database cannot reach, signed with
the evidence key, and the next verification compares the chain against the newest one (see
evidence.anchor). Entries newer than the newest checkpoint can still be cut undetected: that is
the window, as CloudTrail's digest interval is its own.

Each checkpoint is its own object, never overwritten (``If-None-Match: *``), named
``<chain>/<2**63 - 1 - seq, 19 digits>-<seq>.json``: names sort newest first, so the newest is
one ``ListObjectsV2`` call with ``MaxKeys=1``, concurrent writers cannot regress it, and the
bucket (versioned, deletes denied) keeps the whole history. A verification's checkpoint is also
stored under ``<chain>/verified/`` (same naming): the newest one there is where the next
incremental verification starts. The writer's checkpoints only anchor (they vouch for a head, not
for the entries before it), and the database's own checkpoint table, which anyone who can write to
the database can edit, decides nothing.

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
import threading
import time
import uuid
from collections.abc import Callable
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

#: The sub-folder of a chain's folder holding the copies of verification checkpoints.
VERIFIED_FOLDER = "verified"

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


def object_name(chain: str, seq: int, *, verified: bool = False) -> str:
    """``<chain>/<inverted seq>-<seq>.json`` (under ``verified/`` for a verification's copy):
    lexical order is newest first."""
    if not 0 < seq <= _MAX_SEQ:
        raise ValueError("a checkpoint seq is a positive bigint")
    return f"{_prefix(chain, verified)}{_MAX_SEQ - seq:019d}-{seq}.json"


def _prefix(chain: str, verified: bool) -> str:
    return f"{chain}/{VERIFIED_FOLDER}/" if verified else f"{chain}/"


def _names(checkpoint: SignedCheckpoint) -> list[str]:
    """Where a checkpoint is stored: its position, and the verified copy for a verification's."""
    names = [object_name(checkpoint.chain, checkpoint.seq)]
    if checkpoint.kind == VERIFIED:
        names.append(object_name(checkpoint.chain, checkpoint.seq, verified=True))
    return names


def _seq_of(name: str) -> int:
    match = _NAME.fullmatch(name)
    if match is None or _MAX_SEQ - int(match[1]) != int(match[2]):
        raise InvalidCheckpointError(f"{name!r} is not a checkpoint name")
    return int(match[2])


def _checked(data: bytes, *, chain: str, name: str, verified: bool) -> SignedCheckpoint:
    """The checkpoint in ``data``, which must be the one its name promises."""
    checkpoint = SignedCheckpoint.from_bytes(data)
    if checkpoint.chain != chain or checkpoint.seq != _seq_of(name):
        raise InvalidCheckpointError(f"checkpoint {chain}/{name} holds another chain position")
    if verified and checkpoint.kind != VERIFIED:
        raise InvalidCheckpointError(f"checkpoint {chain}/{name} is not a verification's")
    return checkpoint


class CheckpointStore(Protocol):
    """Where signed checkpoints live; write-once per (chain, seq)."""

    def put(self, checkpoint: SignedCheckpoint) -> None:
        """Store it; a checkpoint already stored at its seq is left as it is."""

    def latest(self, chain: str, *, verified: bool = False) -> SignedCheckpoint | None:
        """The checkpoint with the highest seq of ``chain`` (of a verification, when
        ``verified``), or None."""

    def chains(self) -> list[str]:
        """Every chain with a checkpoint."""


class FileCheckpointStore:
    """Local mode: one file per checkpoint under ``directory/<chain>/``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def put(self, checkpoint: SignedCheckpoint) -> None:
        for name in _names(checkpoint):
            self._put(self.directory / name, checkpoint.to_bytes())

    @staticmethod
    def _put(path: Path, data: bytes) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # O_EXCL: write-once, like the bucket's If-None-Match; a partial file is never read
            # as a checkpoint because the content goes to a temporary name first.
            temporary = path.with_name(f"{path.name}.{uuid.uuid4().hex}.tmp")
            temporary.write_bytes(data)
            try:
                os.link(temporary, path)
            except FileExistsError:
                pass
            finally:
                temporary.unlink()
        except OSError as exc:
            raise CheckpointStoreError(f"cannot write checkpoint: {exc.strerror}") from None

    def latest(self, chain: str, *, verified: bool = False) -> SignedCheckpoint | None:
        folder = self.directory / _prefix(chain, verified)
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
        return _checked(data, chain=chain, name=names[0], verified=verified)

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

        for key in _names(checkpoint):
            try:
                self.client.put_object(
                    Bucket=self.bucket,
                    Key=key,
                    Body=checkpoint.to_bytes(),
                    ContentType="application/json",
                    IfNoneMatch="*",
                )
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") == "PreconditionFailed":
                    continue  # this seq is checkpointed already
                raise CheckpointStoreError(f"cannot write checkpoint: {_code(exc)}") from None
            except BotoCoreError as exc:
                raise CheckpointStoreError(
                    f"cannot write checkpoint: {type(exc).__name__}"
                ) from None

    def latest(self, chain: str, *, verified: bool = False) -> SignedCheckpoint | None:
        from botocore.exceptions import BotoCoreError, ClientError

        prefix = _prefix(chain, verified)
        try:
            # Under "<chain>/", position names (digits) sort before the "verified/" folder.
            page = self.client.list_objects_v2(Bucket=self.bucket, Prefix=prefix, MaxKeys=1)
            if not page.get("Contents"):
                return None
            key = page["Contents"][0]["Key"]
            data = self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except ClientError as exc:
            raise CheckpointStoreError(f"cannot read checkpoint: {_code(exc)}") from None
        except BotoCoreError as exc:
            raise CheckpointStoreError(f"cannot read checkpoint: {type(exc).__name__}") from None
        return _checked(data, chain=chain, name=key.removeprefix(prefix), verified=verified)

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


#: chain -> monotonic time of this process's last checkpoint of it (see checkpoint_if_due)
_last_written: dict[str, float] = {}
_last_written_lock = threading.Lock()


def checkpoint_if_due(
    *,
    chain: str,
    seq: int,
    mac: bytes,
    keys: KeyRing,
    mac_at: Callable[[int], bytes | None],
    store: CheckpointStore | None = None,
    now: Callable[[], float] = time.monotonic,
) -> bool:
    """After a committed append: store a checkpoint of entry ``seq`` when ``seq`` is a multiple
    of ``KEYSTONE_EVIDENCE_CHECKPOINT_EVERY``, or when this process has not checkpointed the
    chain for ``KEYSTONE_EVIDENCE_CHECKPOINT_SECONDS`` (a new process does at its first append);
    True when it was stored.

    So a busy chain is checkpointed every N appends and at least every S seconds of appending.
    The last append before a quiet spell is covered by the next verification run (the minutely
    sweep, evidence.verify_job.verify_recent_chains), not by this.

    The writer vouches only for a chain that still holds the store's newest checkpoint
    (``mac_at(seq)``: the chain's MAC at ``seq``, None without such an entry): after a cut tail
    refilled by new appends, a checkpoint of the new head would become the newest and hide the
    cut from every later verification. Such a chain gets no checkpoint, and an ERROR says why.

    Call it only after the commit, or a rolled-back append would leave a checkpoint the chain
    never held. A redelivered message reaches here again with the same seq, so a store that was
    down is retried. A failure is logged and swallowed: the entry is committed, and the next
    verification checkpoints the chain anyway.
    """
    settings = get_settings()
    moment = now()
    with _last_written_lock:
        last = _last_written.get(chain)
        due = seq % settings.evidence_checkpoint_every == 0 or (
            last is None or moment - last >= settings.evidence_checkpoint_seconds
        )
        if not due:
            return False
        _last_written[chain] = moment  # claimed: a concurrent append of this chain waits S
    try:
        store = store if store is not None else get_checkpoint_store()
        if not _holds_newest(store, chain=chain, seq=seq, keys=keys, mac_at=mac_at):
            return False
        store.put(
            sign_checkpoint(
                chain=chain, seq=seq, mac=mac, kind=APPENDED, keys=keys, now=datetime.now(UTC)
            )
        )
    except CheckpointStoreError as exc:
        with _last_written_lock:
            if _last_written.get(chain) == moment:
                _last_written.pop(chain)  # not written: the next append tries again
        logger.error("append checkpoint not written", chain=chain, seq=seq, error=str(exc))
        return False
    return True


def _holds_newest(
    store: CheckpointStore,
    *,
    chain: str,
    seq: int,
    keys: KeyRing,
    mac_at: Callable[[int], bytes | None],
) -> bool:
    """Whether a checkpoint of entry ``seq`` may be stored: the chain still holds the newest
    (validly signed) checkpoint, which is older than ``seq``. One that does not parse or verify
    says nothing of the chain and is passed over (the next verification reports it)."""
    try:
        newest = store.latest(chain)
    except InvalidCheckpointError:
        return True
    if newest is None or not newest.signature_valid(keys):
        return True
    try:
        held = mac_at(newest.seq)
    except Exception:  # the chain could not be read: skip; a later append or run checkpoints
        logger.exception("chain not readable to check its newest checkpoint", chain=chain)
        return False
    if held is None or not hmac.compare_digest(held, newest.mac):
        logger.error(
            "the chain disagrees with its newest external checkpoint; not checkpointed",
            chain=chain,
            seq=seq,
            checkpointSeq=newest.seq,
        )
        return False
    return newest.seq < seq  # else another writer checkpointed a later head already
