"""RS256 JWT verification against a JWKS (an identity provider's URL, or a local file).

Claims we read (see docs/api.md, "Identity and permissions"):
``sub`` user id · ``org_id`` organisation UUID · ``client_id`` (or ``azp``) OAuth client ·
``scope`` space-separated scopes (or ``scp``, a list or a string) · ``groups`` list of group
names · ``principal_type`` ``person`` (default) or ``service``.
``iss``, ``aud`` and ``exp`` are required and checked.

A token signed by a trusted key can still be malformed, and whatever it holds must answer 401,
never an exception (an authorizer that raises is API Gateway's ``500``). So the compact form is
checked before anything is decoded, a ``crit`` header is refused (we implement no JWS extension,
RFC 7515 §4.1.11), and every claim we read must have its type: text claims are 1-256 characters
without control characters (a NUL reaches PostgreSQL, a newline would split the authorizer
context's group list), ``exp``/``nbf``/``iat`` are JSON numbers of a representable date (PyJWT
takes ``"9999999999"`` and ``true``). ``tests/unit/test_authorizer_properties.py`` feeds the
authorizer validly signed tokens with hostile claims, and raw byte mutations.
"""

from __future__ import annotations

import json
import re
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
#: Above any token API Gateway passes on (an HTTP API takes 10 KB of request line and headers);
#: a longer one is refused before it is decoded.
MAX_TOKEN_CHARS = 16_384
#: JWS compact serialisation: three base64url segments without padding (RFC 7515 §7.1); only an
#: unsigned token's signature is empty, and its ``alg`` is refused by name.
_COMPACT = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")
#: C0 and C1 controls (NUL and newline among them) and lone surrogates (not UTF-8 encodable).
_UNSAFE_TEXT = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
MAX_CLAIM_CHARS = 256
#: 9999-12-31T23:59:59Z: the last instant a NumericDate can name as a calendar date.
_MAX_NUMERIC_DATE = 253_402_300_799


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
        if len(token) > MAX_TOKEN_CHARS or not _COMPACT.fullmatch(token):
            raise UnauthorizedError("malformed token")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:  # PyJWT refuses a non-string kid with InvalidTokenError
            raise UnauthorizedError("malformed token") from exc
        if header.get("alg") != "RS256":
            raise UnauthorizedError("token algorithm not accepted (RS256 only)")
        if "crit" in header:
            raise UnauthorizedError("token has critical header parameters (crit): not accepted")
        kid = header.get("kid")
        if not isinstance(kid, str) or not kid:
            raise UnauthorizedError("token has no key id")
        key = self._key(kid)
        try:
            claims = jwt.decode(
                token,
                key,
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
        _check_numeric_dates(claims)
        return principal_from_claims(claims)


def _check_numeric_dates(claims: dict[str, Any]) -> None:
    """``exp``, ``nbf`` and ``iat``, where present, are JSON numbers naming a date (RFC 7519 §2)."""
    for name in ("exp", "nbf", "iat"):
        if name not in claims:
            continue
        value = claims[name]
        # The comparisons also refuse NaN and infinity (json.loads reads both).
        if type(value) not in (int, float) or not 0 <= value <= _MAX_NUMERIC_DATE:
            raise UnauthorizedError(f"token {name} claim must be a number of seconds (a date)")


def _is_text(value: Any) -> bool:
    return (
        isinstance(value, str)
        and 0 < len(value) <= MAX_CLAIM_CHARS
        and not _UNSAFE_TEXT.search(value)
    )


def _text_claim(claims: dict[str, Any], name: str) -> str | None:
    """An optional text claim (absent, null or empty: None), or UnauthorizedError."""
    value = claims.get(name)
    if value is None or value == "":
        return None
    if not _is_text(value):
        raise UnauthorizedError(
            f"token {name} claim must be text of 1 to {MAX_CLAIM_CHARS} characters without"
            " control characters"
        )
    return value


def _scopes(claims: dict[str, Any]) -> frozenset[str]:
    """``scope``, else ``scp``: a space-separated string or a list of scopes."""
    name = "scope" if claims.get("scope") is not None else "scp"
    value = claims.get(name)
    if value is None:
        return frozenset()
    items = value.split() if isinstance(value, str) else value
    if not isinstance(items, list) or not all(
        _is_text(item) and item.split() == [item] for item in items
    ):
        raise UnauthorizedError(
            f"token {name} claim must be a space-separated string or a list of scopes"
        )
    return frozenset(items)


def _groups(claims: dict[str, Any]) -> frozenset[str]:
    value = claims.get("groups")
    if value is None:
        return frozenset()
    if not isinstance(value, list) or not all(_is_text(g) for g in value):
        raise UnauthorizedError(
            f"token groups claim must be a list of names of 1 to {MAX_CLAIM_CHARS} characters"
            " without control characters"
        )
    return frozenset(value)


def principal_from_claims(claims: dict[str, Any]) -> Principal:
    """The principal a verified token's claims name, or UnauthorizedError for a claim of the
    wrong type or value."""
    org_id = claims.get("org_id")
    try:
        org = uuid.UUID(org_id) if isinstance(org_id, str) else None
    except ValueError:
        org = None
    if org is None:
        raise UnauthorizedError("token lacks a valid org_id claim")
    sub = claims.get("sub")
    if not _is_text(sub):
        raise UnauthorizedError("token lacks a valid sub claim")
    kind = claims.get("principal_type")
    if kind is None:
        kind = PrincipalKind.PERSON
    elif kind not in (PrincipalKind.PERSON.value, PrincipalKind.SERVICE.value):
        raise UnauthorizedError("token principal_type must be person or service")
    client_id, azp = _text_claim(claims, "client_id"), _text_claim(claims, "azp")
    return Principal(
        org_id=org,
        user_id=sub,
        client_id=client_id or azp,
        scopes=_scopes(claims),
        groups=_groups(claims),
        kind=PrincipalKind(kind),
        auth_method=AuthMethod.JWT,
    )
