"""Token verification: only RS256 tokens signed by a JWKS key, for our issuer and audience."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
import uuid
from pathlib import Path

import jwt
import pytest
from api_support import sign_jws
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from context_ledger.auth.jwt_verifier import JwtVerifier
from context_ledger.auth.local_keys import ensure_local_keys, issue_token
from context_ledger.auth.principal import AuthMethod, PrincipalKind
from context_ledger.errors import UnauthorizedError

ISSUER, AUDIENCE = "https://idp.test", "context-ledger"
ORG = uuid.UUID("11111111-1111-4111-8111-111111111111")


@pytest.fixture
def keys(tmp_path: Path):
    return ensure_local_keys(tmp_path)


@pytest.fixture
def verifier(keys) -> JwtVerifier:
    return JwtVerifier(
        jwks_url=keys.jwks_url, issuer=ISSUER, audience=AUDIENCE, leeway=0, cache_s=300
    )


def _claims(**overrides) -> dict:
    now = int(time.time())
    claims = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": "alice",
        "org_id": str(ORG),
        "exp": now + 600,
        "iat": now,
    }
    claims.update(overrides)
    return {k: v for k, v in claims.items() if v is not None}


def _sign(keys, claims: dict, *, kid: str | None = None, key=None) -> str:
    private = key or keys.private_key_path.read_bytes()
    return jwt.encode(claims, private, algorithm="RS256", headers={"kid": kid or keys.kid})


def test_a_valid_token_yields_its_principal(keys, verifier) -> None:
    token = issue_token(
        keys,
        issuer=ISSUER,
        audience=AUDIENCE,
        org_id=ORG,
        user_id="alice",
        client_id="editor",
        scopes=frozenset({"context:admin"}),
        groups=frozenset({"eng"}),
    )

    principal = verifier.verify(token)

    assert principal.org_id == ORG
    assert principal.user_id == "alice"
    assert principal.client_id == "editor"
    assert principal.scopes == {"context:admin"}
    assert principal.groups == {"eng"}
    assert principal.kind is PrincipalKind.PERSON
    assert principal.auth_method is AuthMethod.JWT


def test_a_service_token_is_not_a_person(keys, verifier) -> None:
    token = issue_token(
        keys, issuer=ISSUER, audience=AUDIENCE, org_id=ORG, user_id="ci-bot", service=True
    )

    assert verifier.verify(token).is_person is False


def test_a_token_signed_by_another_key_is_refused(keys, verifier) -> None:
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    with pytest.raises(UnauthorizedError, match="signature invalid"):
        verifier.verify(_sign(keys, _claims(), key=other))


def test_an_expired_token_is_refused(keys, verifier) -> None:
    with pytest.raises(UnauthorizedError, match="expired"):
        verifier.verify(_sign(keys, _claims(exp=int(time.time()) - 5)))


def test_a_token_for_another_audience_is_refused(keys, verifier) -> None:
    with pytest.raises(UnauthorizedError, match="audience"):
        verifier.verify(_sign(keys, _claims(aud="someone-else")))


def test_a_token_from_another_issuer_is_refused(keys, verifier) -> None:
    with pytest.raises(UnauthorizedError, match="issuer"):
        verifier.verify(_sign(keys, _claims(iss="https://evil.test")))


def test_a_token_with_an_unknown_key_id_is_refused(keys, verifier) -> None:
    with pytest.raises(UnauthorizedError, match="unknown key"):
        verifier.verify(_sign(keys, _claims(), kid="not-in-the-jwks"))


@pytest.mark.parametrize("missing", ["exp", "aud", "sub"])
def test_a_token_without_a_required_claim_is_refused(keys, verifier, missing: str) -> None:
    with pytest.raises(UnauthorizedError):
        verifier.verify(_sign(keys, _claims(**{missing: None})))


def test_a_token_without_an_organisation_is_refused(keys, verifier) -> None:
    with pytest.raises(UnauthorizedError, match="org_id"):
        verifier.verify(_sign(keys, _claims(org_id="not-a-uuid")))


def test_unsigned_and_symmetric_tokens_are_refused(keys, verifier) -> None:
    unsigned = jwt.encode(_claims(), None, algorithm="none", headers={"kid": keys.kid})
    hmac_signed = jwt.encode(_claims(), "x" * 32, algorithm="HS256", headers={"kid": keys.kid})

    for token in (unsigned, hmac_signed):
        with pytest.raises(UnauthorizedError, match="RS256 only"):
            verifier.verify(token)


def test_garbage_is_a_malformed_token(verifier) -> None:
    with pytest.raises(UnauthorizedError, match="malformed"):
        verifier.verify("not.a.jwt")


def test_a_rotated_key_is_picked_up_after_the_refresh_interval(keys, tmp_path: Path) -> None:
    verifier = JwtVerifier(
        jwks_url=keys.jwks_url, issuer=ISSUER, audience=AUDIENCE, leeway=0, cache_s=0
    )
    verifier.verify(_sign(keys, _claims()))
    new_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(new_key.public_key()))
    jwk.update(kid="rotated", use="sig")
    document = json.loads(keys.jwks_path.read_text())
    keys.jwks_path.write_text(json.dumps({"keys": [*document["keys"], jwk]}))

    principal = verifier.verify(_sign(keys, _claims(), kid="rotated", key=new_key))

    assert principal.user_id == "alice"


def _header(keys, **overrides) -> dict:
    return {"alg": "RS256", "typ": "JWT", "kid": keys.kid, **overrides}


@pytest.mark.parametrize(
    "header",
    [
        {"crit": ["exp"]},
        {"crit": ["b64"], "b64": True},
        {"crit": "x"},
        {"kid": 5},
        {"kid": {"id": "k"}},
        {"kid": ["k"]},
        {"kid": ""},
        {"alg": "none"},
        {"alg": ["RS256"]},
    ],
    ids=repr,
)
def test_a_validly_signed_token_with_a_hostile_header_is_refused(keys, verifier, header) -> None:
    token = sign_jws(keys, _header(keys, **header), _claims())

    with pytest.raises(UnauthorizedError):
        verifier.verify(token)


@pytest.mark.parametrize(
    "claims",
    [
        {"scope": 5},
        {"scope": {"context:admin": True}},
        {"scp": [5]},
        {"scp": [{"a": 1}]},
        {"scp": ["context:admin audit:read"]},
        {"scope": "context:admin\x00"},
        {"sub": "al\x00ice"},
        {"sub": "al\nice"},
        {"sub": "\ud800"},
        {"sub": 5},
        {"sub": ["alice"]},
        {"org_id": 0x11111111111111111111111111111111},
        {"org_id": {"id": str(ORG)}},
        {"groups": "eng"},
        {"groups": [5]},
        {"groups": [{"name": "eng"}]},
        {"groups": ["eng\nadmins"]},
        {"groups": [""]},
        {"client_id": {"id": "editor"}},
        {"client_id": "edi\x00tor"},
        {"azp": ["editor"]},
        {"principal_type": {"kind": "service"}},
        {"principal_type": ["service"]},
        {"iss": 5},
        {"iss": [ISSUER]},
        {"iss": {"iss": ISSUER}},
        {"aud": 5},
        {"aud": {"aud": AUDIENCE}},
        {"aud": [5]},
        {"exp": str(int(time.time()) + 600)},
        {"exp": True},
        {"exp": 10**400},
        {"exp": [int(time.time()) + 600]},
        {"nbf": str(int(time.time()) - 5)},
        {"iat": True},
    ],
    ids=repr,
)
def test_a_validly_signed_token_with_a_claim_of_the_wrong_type_is_refused(
    keys, verifier, claims
) -> None:
    token = sign_jws(keys, _header(keys), _claims(**claims))

    with pytest.raises(UnauthorizedError):
        verifier.verify(token)


@pytest.mark.parametrize(
    "payload",
    [b'{"exp": Infinity}', b'{"exp": NaN}', b'{"exp": 1e999}', b"[1]", b'"x"', b"\xff\xfe"],
    ids=repr,
)
def test_a_validly_signed_payload_that_is_no_claims_object_is_refused(
    keys, verifier, payload: bytes
) -> None:
    with pytest.raises(UnauthorizedError):
        verifier.verify(sign_jws(keys, _header(keys), payload))


def test_a_token_signed_hs256_with_the_public_key_is_refused(keys, verifier) -> None:
    public_pem = (
        serialization.load_pem_private_key(keys.private_key_path.read_bytes(), password=None)
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    header = _segment_json(_header(keys, alg="HS256"))
    payload = _segment_json(_claims())
    mac = hmac.new(public_pem, f"{header}.{payload}".encode(), hashlib.sha256).digest()

    with pytest.raises(UnauthorizedError, match="RS256 only"):
        verifier.verify(f"{header}.{payload}.{_b64(mac)}")


@pytest.mark.parametrize(
    "token",
    ["a" * 20_000 + ".b.c", "!!!.@@@.###", "é.é.é", "\ud800.a.b", "a.b", "a.b.c.d", "a..c", ""],
    ids=lambda t: repr(t[:20]),
)
def test_a_token_that_is_no_compact_jws_is_malformed(verifier, token: str) -> None:
    with pytest.raises(UnauthorizedError, match="malformed"):
        verifier.verify(token)


def test_a_valid_token_with_scp_as_a_list_and_an_empty_client_id(keys, verifier) -> None:
    claims = _claims(scp=["context:admin", "audit:read"], client_id="", azp="editor", groups=None)

    principal = verifier.verify(sign_jws(keys, _header(keys), claims))

    assert principal.scopes == {"context:admin", "audit:read"}
    assert principal.client_id == "editor"
    assert principal.groups == frozenset()


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _segment_json(value: dict) -> str:
    return _b64(json.dumps(value).encode())
