"""Property: whatever a bearer token holds, the authorizer answers; it never raises (API Gateway
would answer 500) and never lets a malformed token through.

Two kinds of hostile tokens. Claim and header mutations are signed validly with the session's
key, so the signature passes and only the JSON is hostile: a field we read set to another type or
a hostile value (NUL, a newline, a lone surrogate, NaN, a huge number, nesting), or removed.
Raw mutations flip, insert and cut bytes of a valid token's text.

The oracle is docs/api.md's claim rules ("Identity and permissions") restated here,
independently of the verifier: a token the authorizer lets through must satisfy all of them, and
its principal must be exactly what its claims say.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from api_support import sign_jws
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context_ledger.auth import authorizer
from context_ledger.auth.authorizer import AUTH_ERROR_KEY, authorize
from context_ledger.auth.local_keys import LocalKeys
from context_ledger.auth.principal import Principal, PrincipalKind
from context_ledger.settings import get_settings

PROPERTY = settings(
    derandomize=True,
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
ORG = "11111111-1111-4111-8111-111111111111"
READ_CLAIMS = (
    "iss",
    "aud",
    "sub",
    "exp",
    "nbf",
    "iat",
    "org_id",
    "client_id",
    "azp",
    "scope",
    "scp",
    "groups",
    "principal_type",
)
HOSTILE_TEXT = [
    "",
    " ",
    "a b",
    "al\x00ice",
    "al\nice",
    "\ud800",
    "\x7f",
    "x" * 300,
    ORG,
    "service",
    "context:admin",
]
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([10**400, 253_402_300_800, -1, 0]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(HOSTILE_TEXT),
    st.text(max_size=12),
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=6,
)


@pytest.fixture(scope="module")
def keys(local_keys: LocalKeys) -> Iterator[LocalKeys]:
    """The authorizer reading the session's JWKS (the local runtime's, when it runs)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KEYSTONE_AUTH_JWKS_URL", local_keys.jwks_url)
        get_settings.cache_clear()
        authorizer._jwt_verifier.cache_clear()
        yield local_keys
    get_settings.cache_clear()
    authorizer._jwt_verifier.cache_clear()


def valid_claims() -> dict[str, Any]:
    settings = get_settings()
    now = int(time.time())
    return {
        "iss": settings.auth_issuer,
        "aud": settings.auth_audience,
        "sub": "alice",
        "org_id": ORG,
        "client_id": "editor",
        "scope": "context:admin audit:read",
        "groups": ["eng", "sre team"],
        "principal_type": "person",
        "iat": now,
        "exp": now + 600,
        "jti": uuid.uuid4().hex,
    }


def answer(token: str) -> dict[str, Any]:
    result = authorize({"headers": {"authorization": f"Bearer {token}"}})
    assert result["isAuthorized"] is True  # a refusal travels as authError (401 in the function)
    return result["context"]


def _is_text(value: Any) -> bool:
    return (
        isinstance(value, str)
        and 0 < len(value) <= 256
        and not any(
            ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F or 0xD800 <= ord(c) <= 0xDFFF for c in value
        )
    )


def _scope_list(value: Any) -> list[str] | None:
    items = value.split() if isinstance(value, str) else value
    if isinstance(items, list) and all(_is_text(i) and " " not in i for i in items):
        return items
    return None


def expected_principal(header: dict[str, Any], claims: Any) -> Principal | None:
    """What a token with this header and these claims may be let through as, or None."""
    settings = get_settings()
    if not isinstance(claims, dict) or header.get("alg") != "RS256" or "crit" in header:
        return None
    if claims.get("iss") != settings.auth_issuer:
        return None
    aud = claims.get("aud")
    if not (
        aud == settings.auth_audience
        or (
            isinstance(aud, list)
            and settings.auth_audience in aud
            and all(isinstance(a, str) for a in aud)
        )
    ):
        return None
    now = time.time()
    for name in ("exp", "nbf", "iat"):
        value = claims.get(name)
        if name in claims and (
            type(value) not in (int, float) or not 0 <= value <= 253_402_300_799
        ):
            return None
    if "exp" not in claims or claims["exp"] <= now - settings.auth_leeway_seconds:
        return None
    if not _is_text(claims.get("sub")) or not isinstance(claims.get("org_id"), str):
        return None
    try:
        org_id = uuid.UUID(claims["org_id"])
    except ValueError:
        return None
    scope_claim = "scope" if claims.get("scope") is not None else "scp"
    scopes = [] if claims.get(scope_claim) is None else _scope_list(claims[scope_claim])
    groups = claims.get("groups")
    groups = [] if groups is None else groups
    kind = claims.get("principal_type") or "person"
    clients = [claims.get(name) for name in ("client_id", "azp")]
    if (
        scopes is None
        or not isinstance(groups, list)
        or not all(_is_text(g) for g in groups)
        or kind not in ("person", "service")
        or not all(c in (None, "") or _is_text(c) for c in clients)
    ):
        return None
    return Principal(
        org_id=org_id,
        user_id=claims["sub"],
        client_id=next((c for c in clients if c), None),
        scopes=frozenset(scopes),
        groups=frozenset(groups),
        kind=PrincipalKind(kind),
    )


@st.composite
def hostile_tokens(draw: st.DrawFn, keys: LocalKeys) -> tuple[dict[str, Any], Any, str]:
    """(header, claims, token): a valid token with some header fields and claims mutated, then
    signed validly."""
    header: dict[str, Any] = {"alg": "RS256", "typ": "JWT", "kid": keys.kid}
    for name in draw(
        st.lists(st.sampled_from(["alg", "kid", "crit", "typ", "b64", "jku"]), max_size=2)
    ):
        header[name] = draw(JSON_VALUES | st.sampled_from(["RS256", "HS256", "none", keys.kid]))
    claims: Any = valid_claims()
    for name in draw(
        st.lists(st.sampled_from([*READ_CLAIMS, "jti", "extra"]), min_size=1, max_size=3)
    ):
        if draw(st.booleans()):
            claims.pop(name, None)
        else:
            claims[name] = draw(JSON_VALUES)
    if draw(st.integers(0, 19)) == 0:
        claims = draw(JSON_VALUES)  # the payload itself is no object
    # NaN and Infinity as Python's json writes them (and json.loads reads them back); lone
    # surrogates as \ud800 escapes
    payload = json.dumps(claims, allow_nan=True).encode()
    return header, claims, sign_jws(keys, header, payload)


@PROPERTY
@given(data=st.data())
def test_a_validly_signed_token_with_hostile_claims_is_answered_and_never_let_through_malformed(
    keys: LocalKeys, data: st.DataObject
) -> None:
    header, claims, token = data.draw(hostile_tokens(keys))

    context = answer(token)

    expected = expected_principal(header, claims)
    if AUTH_ERROR_KEY not in context:
        assert expected is not None, f"let through: {header} {claims!r}"
        assert Principal.from_authorizer_context(context) == expected


@st.composite
def mutated(draw: st.DrawFn, token: str) -> str:
    raw = bytearray(token.encode())
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(raw)))
        kind = draw(st.sampled_from(["flip", "insert", "cut", "repeat"]))
        if kind == "flip" and at < len(raw):
            raw[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "insert":
            raw[at:at] = draw(st.binary(min_size=1, max_size=8) | st.just(b"A" * 20_000))
        elif kind == "cut":
            del raw[at : at + draw(st.integers(1, 40))]
        else:
            raw[at:at] = raw[: draw(st.integers(1, len(raw)))]
    # HTTP header values arrive as latin-1 text
    return raw.decode("latin-1")


@PROPERTY
@given(data=st.data())
def test_a_token_with_mutated_bytes_is_answered_and_names_nobody_else(
    keys: LocalKeys, data: st.DataObject
) -> None:
    original = sign_jws(keys, {"alg": "RS256", "typ": "JWT", "kid": keys.kid}, valid_claims())
    expected = Principal.from_authorizer_context(answer(original))

    context = answer(data.draw(mutated(original)))

    # Only a mutation the signature covers for (base64's spare bits) may still pass, as itself.
    if AUTH_ERROR_KEY not in context:
        assert Principal.from_authorizer_context(context) == expected


@pytest.mark.parametrize("key", ["ctxl_\ud800", "ctxl_" + "\x00" * 43, "ctxl_" + "x" * 200])
def test_an_api_key_of_the_wrong_shape_is_refused_without_a_lookup(key: str) -> None:
    # No database in this test: a lookup would fail, not answer.
    assert AUTH_ERROR_KEY in answer(key)
