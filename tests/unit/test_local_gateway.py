"""Authorizer emulation and dispatch: what an HTTP API does before and after the function.

The functions are fakes standing in for the Lambda side; the gateway itself is the real one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from context_ledger.local.events import ApiInfo, HttpRequest, HttpResponse, Stamp
from context_ledger.local.gateway import Gateway
from context_ledger.local.routes import RouteTable
from context_ledger.local.template import Authorizer, HttpApi, HttpRoute

API = HttpApi(
    "HttpApi",
    {"Auth": Authorizer("Auth", "AuthFunction", ("Authorization",), ())},
    default_authorizer="Auth",
)
STAMP = Stamp(request_id="req-1", epoch_ms=0, trace_id="Root=1-0")
CONTEXT = {"orgId": "org-1", "userId": "alice", "authError": "token expired"}


class FakeLambda:
    """Records invocations; answers with what each function is given to answer."""

    def __init__(self, answers: dict[str, Callable[[Any], Any]]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, Any]] = []

    def __call__(self, function: str, event: Any) -> Any:
        self.calls.append((function, event))
        return self.answers[function](event)

    def called(self, function: str) -> list[Any]:
        return [event for name, event in self.calls if name == function]


def echo(event: Any) -> dict[str, Any]:
    return {"statusCode": 200, "body": json.dumps(event)}


def gateway(fake: FakeLambda) -> Gateway:
    routes = RouteTable(
        [
            (HttpRoute("GET", "/things/{id}", "Auth"), "Things"),
            (HttpRoute("GET", "/health", None), "Things"),
        ]
    )
    return Gateway(API, routes, fake, ApiInfo("a1b2c3d4e5", "us-east-1"))


def get(path: str, **headers: str) -> HttpRequest:
    return HttpRequest("GET", path, list(headers.items()))


def message(response: HttpResponse) -> tuple[int, Any]:
    return response.status, json.loads(response.body)


def allow(event: Any) -> dict[str, Any]:
    return {"isAuthorized": True, "context": CONTEXT}


@pytest.mark.parametrize("headers", [{}, {"Authorization": ""}])
def test_missing_identity_header_is_401_without_calling_the_authorizer(
    headers: dict[str, str],
) -> None:
    fake = FakeLambda({"AuthFunction": allow, "Things": echo})

    response = gateway(fake).handle(get("/things/1", **headers))

    assert message(response) == (401, {"message": "Unauthorized"})
    assert fake.calls == []


def test_authorizer_saying_no_is_403_and_the_route_is_not_called() -> None:
    fake = FakeLambda({"AuthFunction": lambda e: {"isAuthorized": False}, "Things": echo})

    response = gateway(fake).handle(get("/things/1", Authorization="Bearer x"))

    assert message(response) == (403, {"message": "Forbidden"})
    assert fake.called("Things") == []


def test_authorizer_context_reaches_the_route_as_request_context_authorizer_lambda() -> None:
    fake = FakeLambda({"AuthFunction": allow, "Things": echo})

    response = gateway(fake).handle(get("/things/1", Authorization="Bearer x"), STAMP)

    assert response.status == 200
    (auth_event,) = fake.called("AuthFunction")
    assert (auth_event["type"], auth_event["identitySource"]) == ("REQUEST", ["Bearer x"])
    assert auth_event["routeKey"] == "GET /things/{id}"
    (event,) = fake.called("Things")
    assert event["requestContext"]["authorizer"] == {"lambda": CONTEXT}
    assert event["pathParameters"] == {"id": "1"}


@pytest.mark.parametrize(
    "answer",
    [
        lambda e: (_ for _ in ()).throw(RuntimeError("authorizer crashed")),
        lambda e: {"isAuthorized": "yes"},
        lambda e: None,
        lambda e: {"isAuthorized": True, "context": ["not", "a", "map"]},
    ],
)
def test_failing_or_malformed_authorizer_is_500(answer: Callable[[Any], Any]) -> None:
    fake = FakeLambda({"AuthFunction": answer, "Things": echo})

    response = gateway(fake).handle(get("/things/1", Authorization="Bearer x"))

    assert message(response) == (500, {"message": "Internal Server Error"})
    assert fake.called("Things") == []


def test_route_without_authorizer_is_called_without_one() -> None:
    fake = FakeLambda({"Things": echo})

    response = gateway(fake).handle(get("/health"))

    assert response.status == 200
    (event,) = fake.called("Things")
    assert "authorizer" not in event["requestContext"]


def test_unknown_route_is_404_like_api_gateway() -> None:
    response = gateway(FakeLambda({})).handle(get("/nowhere"))

    assert message(response) == (404, {"message": "Not Found"})


def test_function_error_or_invalid_result_is_500() -> None:
    def crash(event: Any) -> Any:
        raise ValueError("bug")

    for answer in (crash, lambda e: {"statusCode": "bad"}):
        response = gateway(FakeLambda({"Things": answer})).handle(get("/health"))
        assert message(response) == (500, {"message": "Internal Server Error"})


def test_every_answer_carries_the_api_gateway_request_id() -> None:
    fake = FakeLambda({"Things": echo})

    ok = gateway(fake).handle(get("/health"), STAMP)
    missing = gateway(fake).handle(get("/nowhere"), STAMP)

    assert ("apigw-requestid", "req-1") in ok.headers
    assert ("apigw-requestid", "req-1") in missing.headers
    assert json.loads(ok.body)["requestContext"]["requestId"] == "req-1"
