"""Malformed credentials through the local HTTP edge: 401 with the service's error body, never
API Gateway's 500 (an authorizer that raises) and never a stack trace.

Each token but the last three is signed validly with the runtime's key: only its JSON is hostile.
"""

from __future__ import annotations

import time
import uuid

import pytest
from api_support import bearer, sign_jws

from context_ledger.auth.local_keys import LocalKeys
from context_ledger.settings import get_settings

SPACES = "/api/v1/context/spaces"


def _claims(**overrides: object) -> dict[str, object]:
    settings = get_settings()
    now = int(time.time())
    return {
        "iss": settings.auth_issuer,
        "aud": settings.auth_audience,
        "sub": "alice",
        "org_id": str(uuid.uuid4()),
        "iat": now,
        "exp": now + 600,
        **overrides,
    }


HOSTILE = {
    "crit header": ({"crit": ["exp"]}, {}),
    "numeric kid": ({"kid": 7}, {}),
    "object kid": ({"kid": {"id": "k"}}, {}),
    "numeric scope": ({}, {"scope": 5}),
    "scope list of objects": ({}, {"scp": [{"a": 1}]}),
    "object scope": ({}, {"scope": {"context:admin": True}}),
    "NUL in sub": ({}, {"sub": "al\x00ice"}),
    "newline in a group": ({}, {"groups": ["eng\nadmins"]}),
    "numeric iss": ({}, {"iss": 5}),
    "object aud": ({}, {"aud": {"aud": "x"}}),
    "exp as a string": ({}, {"exp": "9999999999"}),
    "alg none": ({"alg": "none"}, {}),
}


@pytest.mark.parametrize(("header", "claims"), HOSTILE.values(), ids=HOSTILE.keys())
def test_a_validly_signed_token_with_hostile_json_is_a_401(
    api, local_keys: LocalKeys, header: dict, claims: dict
) -> None:
    token = sign_jws(
        local_keys, {"alg": "RS256", "kid": local_keys.kid, **header}, _claims(**claims)
    )

    response = api.get(SPACES, headers=bearer(token))

    assert response.status_code == 401, response.text
    assert response.json()["error"]["code"] == "unauthorized"
    assert "Traceback" not in response.text


@pytest.mark.parametrize(
    "token",
    ["A" * 8_000 + ".e30.x", "!!!.@@@.###", "eyJhbGciOiJSUzI1NiJ9.\xff\xfe.sig"],
    ids=["huge segment", "not base64", "not ASCII"],
)
def test_a_token_that_is_no_jws_is_a_401(api, token: str) -> None:
    response = api.get(SPACES, headers={"Authorization": f"Bearer {token}".encode("latin-1")})

    assert response.status_code == 401, response.text
    assert response.json() == {"error": {"code": "unauthorized", "message": "malformed token"}}
