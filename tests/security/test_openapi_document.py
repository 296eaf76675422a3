"""The served OpenAPI document against what the stack really routes: template.yaml's HttpApi
routes, each function's routers in the registry (http/api.py), and the errors the matrix expects.

Path parameter names differ between the template and the routers (``{spaceId}`` and
``{space_id}``; API Gateway allows one name per position), so paths are compared by shape.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import httpx
import pytest
from api_support import bearer
from security_support import Expected, load_matrix, token_maker

from context_ledger.auth.local_keys import LocalKeys
from context_ledger.http import api
from context_ledger.http.openapi import (
    ERROR_SCHEMA,
    GATEWAY_ERROR_SCHEMA,
    GATEWAY_STATUSES,
    OPENAI_ERROR_SCHEMA,
    openapi_document,
)
from context_ledger.local.runtime import LocalRuntime
from context_ledger.local.template import read_template
from context_ledger.spaces.service import Organisation

TEMPLATE = read_template(Path(__file__).resolve().parents[2] / "template.yaml")
DOCUMENT = openapi_document()


def _shape(method: str, path: str) -> tuple[str, str]:
    return method.upper(), re.sub(r"\{[^}]+\}", "{}", path)


def _template_routes(folder: str | None = None) -> set[tuple[str, str]]:
    """The REST API's routes (the MCP server's ``/mcp`` speaks MCP: api.OTHER_PROTOCOLS)."""
    return {
        _shape(route.method, route.path)
        for function in TEMPLATE.functions.values()
        if (folder is None or function.folder == folder)
        and function.folder not in api.OTHER_PROTOCOLS
        for route in function.routes
    }


def _operations() -> list[tuple[str, str, dict]]:
    return [
        (method, path, operation)
        for path, item in DOCUMENT["paths"].items()
        for method, operation in item.items()
    ]


def test_the_runtime_serves_the_document_to_any_valid_credential(
    runtime: LocalRuntime, local_keys: LocalKeys
) -> None:
    # The authorizer verifies the token alone: the organisation need not exist for this route.
    anyone = Organisation(id=uuid.uuid4(), name="Any", space_id=uuid.uuid4())
    headers = bearer(token_maker(local_keys)(anyone, "reader"))

    response = httpx.get(f"{runtime.url}/api/v1/openapi.json", headers=headers, timeout=30)

    assert response.status_code == 200, response.text
    assert response.json() == DOCUMENT


def test_the_document_has_exactly_the_routes_of_the_template() -> None:
    documented = {_shape(method, path) for method, path, _ in _operations()}

    assert documented - _template_routes() == set(), "documented but not routed"
    assert _template_routes() - documented == set(), "routed but not documented"


@pytest.mark.parametrize("folder", sorted(api.FUNCTIONS))
def test_each_function_serves_the_routes_the_template_sends_it(folder: str) -> None:
    served = {
        _shape(method, route.path)
        for router in api.routers(folder)
        for route in router.routes
        for method in route.methods
    }

    assert served == _template_routes(folder)


def test_every_routed_function_is_in_the_registry() -> None:
    routed = {f.folder for f in TEMPLATE.functions.values() if f.routes}

    assert routed == set(api.FUNCTIONS) | api.OTHER_PROTOCOLS
    assert not api.OTHER_PROTOCOLS & set(api.FUNCTIONS)


@pytest.mark.parametrize(("method", "path", "operation"), _operations())
def test_every_error_answer_is_declared_with_the_error_body(
    method: str, path: str, operation: dict
) -> None:
    schema = OPENAI_ERROR_SCHEMA if path == "/api/v1/embeddings" else ERROR_SCHEMA
    errors = {s: r for s, r in operation["responses"].items() if int(s) >= 400}

    assert {"401", "403"} <= set(errors)
    for status, response in errors.items():
        body = {"$ref": f"#/components/schemas/{schema}"}
        if int(status) in GATEWAY_STATUSES:
            body = {"anyOf": [body, {"$ref": f"#/components/schemas/{GATEWAY_ERROR_SCHEMA}"}]}
        assert response["content"]["application/json"]["schema"] == body
    assert "HTTPValidationError" not in DOCUMENT["components"]["schemas"]


def test_every_error_the_matrix_expects_is_declared_by_its_operation() -> None:
    undeclared = set()
    for operation, spec in load_matrix()["operations"].items():
        method, path = operation.split(" ", 1)
        declared = DOCUMENT["paths"][path][method.lower()]["responses"]
        for text in spec["expect"].values():
            expected = Expected.parse(text)
            if expected.status >= 400 and str(expected.status) not in declared:
                undeclared.add((operation, expected.status))

    assert undeclared == set()
