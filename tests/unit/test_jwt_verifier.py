"""Token verification: only RS256 tokens signed by a JWKS key, for our issuer and audience."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import jwt
import pytest
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
