"""The gateway's X-Keystone-* header rules, checked before anything is sent."""

from __future__ import annotations

import json

import pytest

from context_ledger.errors import InvalidRequestError
from context_ledger.model_gateway.headers import (
    CLIENT,
    CONTEXT_REQUEST_ID,
    METADATA,
    GatewayHeaders,
    parse_gateway_headers,
)


def parse(**headers: str | list[str]) -> GatewayHeaders:
    names = {"context": CONTEXT_REQUEST_ID, "metadata": METADATA, "client": CLIENT}
    return parse_gateway_headers(
        {names[k]: v if isinstance(v, list) else [v] for k, v in headers.items()}
    )


def metadata(**values: object) -> str:
    return json.dumps(values)


@pytest.mark.parametrize(
    "value",
    [
        "r",
        "req_01JH8Z3K4M5N6P7Q8R9S0T1V2W",
        "3c9d2e71-5b4a-4f8e-9d1c-7a6b5e4f3d21",
        "a.b_c:d-e",
        "9" * 128,
    ],
)
def test_a_valid_context_request_id_is_accepted(value: str) -> None:
    assert parse(context=value).context_request_id == value


@pytest.mark.parametrize(
    "value",
    ["", "_starts_with_underscore", "-dash", "has space", "slash/no", "comma,sep", "x" * 129, "é"],
)
def test_an_invalid_context_request_id_is_400(value: str) -> None:
    with pytest.raises(InvalidRequestError):
        parse(context=value)


def test_the_id_may_come_in_the_metadata_header() -> None:
    assert parse(metadata=metadata(context_request_id="req_1")).context_request_id == "req_1"


def test_the_same_id_in_both_headers_is_accepted() -> None:
    found = parse(context="req_1", metadata=metadata(context_request_id="req_1", team="x"))
    assert found.context_request_id == "req_1"


def test_two_different_ids_are_400() -> None:
    with pytest.raises(InvalidRequestError, match="differ"):
        parse(context="req_1", metadata=metadata(context_request_id="req_2"))


@pytest.mark.parametrize(
    "value",
    [
        "not json",
        "[]",
        '"req_1"',
        metadata(context_request_id=7),
        metadata(context_request_id=None),
        metadata(context_request_id="bad id"),
        metadata(pad="x" * 5000),
    ],
)
def test_malformed_metadata_is_400(value: str) -> None:
    with pytest.raises(InvalidRequestError):
        parse(metadata=value)


def test_metadata_without_the_key_names_no_retrieval() -> None:
    assert parse(metadata=metadata(team="payments")).context_request_id is None


def test_a_header_repeated_with_different_values_is_400() -> None:
    with pytest.raises(InvalidRequestError):
        parse(context=["req_1", "req_2"])


def test_the_client_header_is_recorded_and_a_malformed_one_dropped() -> None:
    assert parse(client="editor/1.4.2") == GatewayHeaders(None, "editor", "1.4.2")
    assert parse(client="no version") == GatewayHeaders(None)
    assert parse(client=["a/1", "b/2"]) == GatewayHeaders(None)


def test_no_headers_name_nothing() -> None:
    assert parse_gateway_headers({}) == GatewayHeaders(None)
