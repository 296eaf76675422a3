"""The HMAC keys of the evidence chain: a key ring of key id → key, and the current key id.

Appends MAC with the current key and store its id in the row; verification looks each row's key id
up in the ring, so entries written before a rotation keep verifying after it.

Where the keys come from:

- **AWS**: the Secrets Manager secret ``KEYSTONE_EVIDENCE_HMAC_SECRET_ARN``. The ``AWSCURRENT``
  version is the current key; every other version (``AWSPREVIOUS`` and deprecated ones, but not a
  rotation's ``AWSPENDING``) joins the ring for verification. Secrets Manager deletes deprecated
  versions beyond its version limit, so an operator who rotates often must keep old keys elsewhere
  before they age out, or entries written under them stop verifying.
- **Locally**: ``KEYSTONE_EVIDENCE_HMAC_KEY`` under the id ``KEYSTONE_EVIDENCE_KEY_ID``.

A secret version's string is either

- JSON ``{"keyId": "evidence-2025-01", "key": "<at least 32 bytes>"}``: the id travels with the key.
  Use this format to rotate: give every version a new ``keyId``.
- the raw key: its id is ``KEYSTONE_EVIDENCE_KEY_ID``, which must therefore stay unchanged while
  a raw version is in the secret. Fine for a secret that is never rotated, or as the version a
  rotation to the JSON format starts from. Two raw versions with different keys would claim one
  id; that is refused rather than guessed.

A key is the UTF-8 bytes of the string (surrounding whitespace removed) and must be at least 32
bytes: HMAC-SHA256 is no stronger than its key, and RFC 2104 asks for at least the hash's output
length. Generate one with
``python -c "import secrets; print(secrets.token_urlsafe(48))"``.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from aws_lambda_powertools import Logger

from context_ledger.settings import Settings, get_settings

logger = Logger(child=True)

MIN_KEY_BYTES = 32
#: How long a process trusts its ring before reading the secret again, so a rotation reaches
#: warm Lambda environments without a redeploy.
RING_MAX_AGE_SECONDS = 900.0

_KEY_ID = re.compile(r"^[\w.:-]{1,64}$")
_PENDING_ONLY = ["AWSPENDING"]


class KeyRingError(RuntimeError):
    """The evidence keys are missing, too short, malformed or ambiguous."""


@dataclass(frozen=True)
class KeyRing:
    """Key id → key bytes, and the id appends use. Keys never appear in ``repr``."""

    current_key_id: str
    keys: Mapping[str, bytes] = field(repr=False)

    def __post_init__(self) -> None:
        for key_id, key in self.keys.items():
            _check_key(key_id, key)
        if self.current_key_id not in self.keys:
            raise KeyRingError(f"the current key id {self.current_key_id!r} has no key")
        object.__setattr__(self, "keys", MappingProxyType(dict(self.keys)))

    @classmethod
    def single(cls, key_id: str, key: bytes) -> KeyRing:
        return cls(current_key_id=key_id, keys={key_id: key})

    @property
    def current_key(self) -> bytes:
        return self.keys[self.current_key_id]

    def get(self, key_id: str) -> bytes | None:
        return self.keys.get(key_id)


def load_key_ring(settings: Settings, *, secrets_client: Any = None) -> KeyRing:
    """Build the ring from Secrets Manager when a secret ARN is set, else from the local key."""
    if settings.evidence_hmac_secret_arn:
        if secrets_client is None:
            import boto3  # imported here: only AWS deployments read the secret

            secrets_client = boto3.client("secretsmanager")
        return _from_secrets_manager(
            secrets_client, settings.evidence_hmac_secret_arn, settings.evidence_key_id
        )
    if settings.evidence_hmac_key:
        key = settings.evidence_hmac_key.strip().encode()
        try:
            return KeyRing.single(settings.evidence_key_id, key)
        except KeyRingError as exc:
            raise KeyRingError(f"KEYSTONE_EVIDENCE_HMAC_KEY: {exc}") from None
    raise KeyRingError(
        "no evidence key configured: set KEYSTONE_EVIDENCE_HMAC_SECRET_ARN or "
        "KEYSTONE_EVIDENCE_HMAC_KEY"
    )


def parse_secret(secret: str, *, default_key_id: str) -> tuple[str, bytes]:
    """``(key id, key)`` from one secret version's string (JSON or raw, see the module doc)."""
    text = secret.strip()
    if not text.startswith("{"):
        key_id, key = default_key_id, text.encode()
    else:
        try:
            value = json.loads(text)
        except ValueError:
            raise KeyRingError("the secret looks like JSON but does not parse") from None
        if not (
            isinstance(value, dict)
            and isinstance(value.get("keyId"), str)
            and isinstance(value.get("key"), str)
        ):
            raise KeyRingError('a JSON secret must be {"keyId": "...", "key": "..."}')
        key_id, key = value["keyId"], value["key"].strip().encode()
    _check_key(key_id, key)
    return key_id, key


_cache_lock = threading.Lock()
_cached: tuple[float, KeyRing] | None = None


def get_key_ring() -> KeyRing:
    """The process-wide ring from the settings, reloaded after ``RING_MAX_AGE_SECONDS``."""
    with _cache_lock:
        if _cached is not None and time.monotonic() - _cached[0] < RING_MAX_AGE_SECONDS:
            return _cached[1]
        return _reload()


def refresh_key_ring() -> KeyRing:
    """Read the keys again now (verification met a key id the cached ring does not know)."""
    with _cache_lock:
        return _reload()


def clear_key_ring_cache() -> None:
    """Forget the cached ring (tests and the local runtime, after the settings changed)."""
    global _cached
    with _cache_lock:
        _cached = None


def _reload() -> KeyRing:
    global _cached
    ring = load_key_ring(get_settings())
    _cached = (time.monotonic(), ring)
    return ring


def _check_key(key_id: str, key: bytes) -> None:
    if not _KEY_ID.fullmatch(key_id):
        raise KeyRingError("a key id is 1 to 64 characters of letters, digits, '_', '.', ':', '-'")
    if len(key) < MIN_KEY_BYTES:
        raise KeyRingError(f"the key {key_id!r} is shorter than {MIN_KEY_BYTES} bytes")


def _from_secrets_manager(client: Any, secret_id: str, default_key_id: str) -> KeyRing:
    current = client.get_secret_value(SecretId=secret_id)  # AWSCURRENT
    current_key_id, current_key = parse_secret(
        current["SecretString"], default_key_id=default_key_id
    )
    keys = {current_key_id: current_key}
    for version_id in _previous_version_ids(client, secret_id, current["VersionId"]):
        try:
            secret = client.get_secret_value(SecretId=secret_id, VersionId=version_id)
            key_id, key = parse_secret(secret["SecretString"], default_key_id=default_key_id)
        except KeyRingError as exc:
            # An unusable version never served as AWSCURRENT (appends refuse it), so no entry
            # was written under it: skipping it loses nothing.
            logger.warning(
                "skipping an unusable evidence key version", versionId=version_id, reason=str(exc)
            )
            continue
        except client.exceptions.ResourceNotFoundException:
            continue  # deleted between listing and reading
        if keys.setdefault(key_id, key) != key:
            raise KeyRingError(
                f"two versions of the evidence key secret claim key id {key_id!r}; "
                'rotate with the JSON format {"keyId": "<new id>", "key": "..."}'
            )
    return KeyRing(current_key_id=current_key_id, keys=keys)


def _previous_version_ids(client: Any, secret_id: str, current_version_id: str) -> list[str]:
    version_ids: list[str] = []
    request: dict[str, Any] = {"SecretId": secret_id, "IncludeDeprecated": True}
    while True:
        page = client.list_secret_version_ids(**request)
        version_ids += [
            version["VersionId"]
            for version in page["Versions"]
            if version["VersionId"] != current_version_id
            and version.get("VersionStages") != _PENDING_ONLY
        ]
        if not page.get("NextToken"):
            return version_ids
        request["NextToken"] = page["NextToken"]
