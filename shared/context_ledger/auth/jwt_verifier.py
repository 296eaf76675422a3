"""RS256 JWT verification against a JWKS (an identity provider's URL, or a local file).

Claims we read (see README, "Tokens"):
``sub`` user id · ``org_id`` organisation UUID · ``client_id`` (or ``azp``) OAuth client ·
``scope`` space-separated scopes (or ``scp`` list) · ``groups`` list of group names ·
``principal_type`` ``person`` (default) or ``service``.
``iss``, ``aud`` and ``exp`` are required and checked.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import jwt

from context_ledger.auth.principal import AuthMethod, Principal, PrincipalKind
from context_ledger.errors import UnauthorizedError

_MAX_JWKS_BYTES = 1_000_000
_MIN_REFRESH_SECONDS = 30  # an unknown kid triggers at most one JWKS refetch per this period


class JwksUnavailableError(RuntimeError):
    """The JWKS could not be fetched or parsed."""


def _read_jwks(url: str) -> dict[str, Any]:
    try:
        if url.startswith("file://"):
            raw = Path(url.removeprefix("file://")).read_bytes()
        else:
            with urllib.request.urlopen(url, timeout=3) as response:  # noqa: S310 (http/https only)
                raw = response.read(_MAX_JWKS_BYTES + 1)
        if len(raw) > _MAX_JWKS_BYTES:
            raise JwksUnavailableError("JWKS document too large")
        return json.loads(raw)
    except (OSError, ValueError) as exc:
        raise JwksUnavailableError(f"cannot read JWKS: {type(exc).__name__}") from exc


class JwtVerifier:
    """Verifies tokens; caches the key set and refetches it when a new key id shows up."""

    def __init__(self, *, jwks_url: str, issuer: str, audience: str, leeway: int, cache_s: int):
        self._jwks_url = jwks_url
        self._issuer = issuer
        self._audience = audience
        self._leeway = leeway
        self._cache_s = cache_s
        self._keys: dict[str, jwt.PyJWK] = {}
        self._fetched_at = float("-inf")
        self._lock = threading.Lock()

    def _refresh(self) -> None:
        document = _read_jwks(self._jwks_url)
        keys = {}
        for entry in document.get("keys", []):
            if entry.get("kty") == "RSA" and entry.get("kid") and entry.get("use", "sig") == "sig":
                keys[entry["kid"]] = jwt.PyJWK(entry, algorithm="RS256")
        self._keys = keys
        self._fetched_at = time.monotonic()

    def _key(self, kid: str) -> jwt.PyJWK:
        with self._lock:
            age = time.monotonic() - self._fetched_at
            if age > self._cache_s or (kid not in self._keys and age > _MIN_REFRESH_SECONDS):
                self._refresh()
            key = self._keys.get(kid)
        if key is None:
            raise UnauthorizedError("token signed with an unknown key")
        return key

    def verify(self, token: str) -> Principal:
        """Return the token's principal, or raise UnauthorizedError saying what failed."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.DecodeError as exc:
            raise UnauthorizedError("malformed token") from exc
        if header.get("alg") != "RS256":
            raise UnauthorizedError("token algorithm not accepted (RS256 only)")
        kid = header.get("kid")
        if not isinstance(kid, str) or not kid:
            raise UnauthorizedError("token has no key id")
        try:
            claims = jwt.decode(
                token,
                self._key(kid),
                algorithms=["RS256"],
                audience=self._audience,
                issuer=self._issuer,
                leeway=self._leeway,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except jwt.ExpiredSignatureError as exc:
            raise UnauthorizedError("token expired") from exc
        except jwt.InvalidAudienceError as exc:
            raise UnauthorizedError("token audience not accepted") from exc
        except jwt.InvalidIssuerError as exc:
            raise UnauthorizedError("token issuer not accepted") from exc
        except jwt.InvalidSignatureError as exc:
            raise UnauthorizedError("token signature invalid") from exc
        except jwt.MissingRequiredClaimError as exc:
            raise UnauthorizedError(f"token lacks the {exc.claim} claim") from exc
        except jwt.InvalidTokenError as exc:
            raise UnauthorizedError("token invalid") from exc
        return principal_from_claims(claims)


def principal_from_claims(claims: dict[str, Any]) -> Principal:
    try:
        org_id = uuid.UUID(str(claims["org_id"]))
    except (KeyError, ValueError) as exc:
        raise UnauthorizedError("token lacks a valid org_id claim") from exc
    sub = claims.get("sub")
    if not isinstance(sub, str) or not sub or len(sub) > 256:
        raise UnauthorizedError("token lacks a valid sub claim")
    scopes = claims.get("scope", claims.get("scp", ""))
    scope_set = frozenset(scopes.split() if isinstance(scopes, str) else map(str, scopes))
    groups = claims.get("groups") or []
    if not isinstance(groups, list):
        raise UnauthorizedError("token groups claim must be a list")
    try:
        kind = PrincipalKind(claims.get("principal_type", PrincipalKind.PERSON))
    except ValueError as exc:
        raise UnauthorizedError("token principal_type must be person or service") from exc
    client_id = claims.get("client_id") or claims.get("azp")
    return Principal(
        org_id=org_id,
        user_id=sub,
        client_id=str(client_id) if client_id else None,
        scopes=scope_set,
        groups=frozenset(str(g) for g in groups if g),
        kind=kind,
        auth_method=AuthMethod.JWT,
    )
