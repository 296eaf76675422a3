"""Where the deployed MCP server sends its API calls: the configured URL, else the URL the request
came in on, read from the Lambda event API Gateway (or the local runtime) sent."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from context_ledger.mcp.http_app import api_url
from context_ledger.settings import get_settings

SAMPLE = json.loads(
    (Path(__file__).resolve().parents[2] / "events/mcp-tools-list.json").read_text()
)


@pytest.fixture(autouse=True)
def fresh_settings(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("KEYSTONE_MCP_API_URL", raising=False)
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def scope(domain: str, proto: str, port: str) -> dict[str, Any]:
    headers = {"x-forwarded-proto": proto, "x-forwarded-port": port}
    return {"aws.event": {"headers": headers, "requestContext": {"domainName": domain}}}


def test_in_aws_it_is_the_api_gateway_domain_the_request_reached() -> None:
    assert (
        api_url({"aws.event": SAMPLE}) == "https://a1b2c3d4e5.execute-api.us-east-1.amazonaws.com"
    )


@pytest.mark.parametrize(
    ("proto", "port", "url"),
    [
        ("http", "3000", "http://127.0.0.1:3000"),
        ("http", "80", "http://127.0.0.1"),
        ("https", "8443", "https://127.0.0.1:8443"),
    ],
)
def test_locally_it_is_the_runtimes_own_address(proto: str, port: str, url: str) -> None:
    assert api_url(scope("127.0.0.1", proto, port)) == url


def test_the_setting_wins_over_the_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEYSTONE_MCP_API_URL", "https://context.example.com/")
    get_settings.cache_clear()

    assert api_url({"aws.event": SAMPLE}) == "https://context.example.com"
