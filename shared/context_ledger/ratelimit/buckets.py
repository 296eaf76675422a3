"""What a request is counted against, each limit as a GCRA bucket.

GCRA (the generic cell rate algorithm: a token bucket kept as one timestamp per key) with a rate of
``per_minute`` and a burst of ``burst_seconds`` admits ``per_minute * burst_seconds / 60`` requests
at once (at least one), then one every ``60 / per_minute`` seconds. Unlike fixed windows it never
admits twice the limit across a window edge.

Keys are SHA-256 digests of what is counted, never a credential: the organisation; the API key
(a bearer token has no key bucket: its organisation's bucket is its limit); and, for the memory
API, the credential its spec counts (the API key, or a token's user and OAuth client, so that a
freshly issued token does not start afresh).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from enum import StrEnum

from context_ledger.auth.principal import AuthMethod, Principal
from context_ledger.settings import Settings

#: The memory spec's limit is "N requests per minute": all N may arrive at once, as they could in
#: its original fixed 60-second window.
CREDENTIAL_BURST_SECONDS = 60.0


class BucketKind(StrEnum):
    """What a bucket limits: names the limit in a 429's message and in the logs."""

    ORGANISATION = "organisation"
    API_KEY = "api_key"
    CREDENTIAL = "credential"


@dataclass(frozen=True)
class Bucket:
    """One limit a request counts against."""

    kind: BucketKind
    key: bytes
    per_minute: int
    burst_seconds: float

    @property
    def emission_seconds(self) -> float:
        """How far each admitted request pushes the bucket's theoretical arrival time."""
        return 60.0 / self.per_minute

    @property
    def tolerance_seconds(self) -> float:
        """How far ahead of now the theoretical arrival time may be: the burst, at least one
        request's worth so that every positive rate admits something."""
        return self.charge(1)[1]

    def charge(self, cost: int) -> tuple[float, float]:
        """(emission, tolerance) for a request that counts ``cost`` times (an embeddings call
        counts each input). The tolerance is at least the request's own emission, so a request
        worth more than the burst is still admitted once the bucket is rested; it leaves the
        bucket in debt, and the next requests wait that much longer."""
        emission = self.emission_seconds * cost
        return emission, max(self.burst_seconds, emission)


def _digest(*parts: str) -> bytes:
    # JSON keeps the parts apart whatever characters a user or client id holds.
    return hashlib.sha256(json.dumps(parts).encode()).digest()


def organisation_key(org_id: uuid.UUID) -> bytes:
    return _digest("organisation", str(org_id))


def api_key_key(api_key: str) -> bytes:
    return _digest("api_key", api_key)


def credential_key(principal: Principal, credential: str) -> bytes:
    """The memory API's count: the API key itself, or the token's user and client."""
    if principal.auth_method is AuthMethod.API_KEY:
        return _digest("credential", "api_key", credential)
    return _digest(
        "credential", "token", str(principal.org_id), principal.user_id, principal.client_id or ""
    )


def request_buckets(
    principal: Principal, credential: str, settings: Settings, *, credential_per_minute: int = 0
) -> list[Bucket]:
    """The buckets one request of ``principal`` (authenticated with the bearer ``credential``)
    counts against; a limit of 0 is off and has no bucket."""
    burst = settings.rate_limit_burst_seconds
    org_rate = settings.rate_limit_org_overrides.get(
        principal.org_id, settings.rate_limit_org_per_minute
    )
    buckets = []
    if org_rate:
        key = organisation_key(principal.org_id)
        buckets.append(Bucket(BucketKind.ORGANISATION, key, org_rate, burst))
    key_rate = settings.rate_limit_api_key_per_minute
    if principal.auth_method is AuthMethod.API_KEY and key_rate:
        buckets.append(Bucket(BucketKind.API_KEY, api_key_key(credential), key_rate, burst))
    if credential_per_minute:
        key = credential_key(principal, credential)
        buckets.append(
            Bucket(BucketKind.CREDENTIAL, key, credential_per_minute, CREDENTIAL_BURST_SECONDS)
        )
    return buckets
