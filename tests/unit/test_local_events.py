"""Events have the shape AWS sends, and function results map to HTTP as API Gateway maps them."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime

import pytest

from context_ledger.local.events import (
    ApiInfo,
    HttpRequest,
    HttpResponse,
    InvalidResponseError,
    Stamp,
    authorizer_event,
    http_event,
    http_response,
    scheduled_event,
    sqs_record,
)

API = ApiInfo(api_id="a1b2c3d4e5", region="eu-west-1")
STAMP = Stamp(request_id="Wr1GFhQJoAMEbSg=", epoch_ms=1767225600123, trace_id="Root=1-abc")
CONTEXT = {"orgId": "org-1", "userId": "alice", "scopes": "a b", "principalKind": "person"}
BINARY = bytes(range(250, 256)) + b"\x00\x01"


def sample_request(body: bytes = BINARY) -> HttpRequest:
    return HttpRequest(
        method="POST",
        target="/api/v1/things/a%20b/parts?tag=x&tag=y&empty&q=caf%C3%A9+au+lait",
        headers=[
            ("Host", "127.0.0.1:3000"),
            ("User-Agent", "tester/1.0"),
            ("X-Keystone-Client", "editor/1.0"),
            ("Accept", "application/json"),
            ("Accept", "text/plain"),
            ("Cookie", "a=1; b=2"),
            ("Connection", "keep-alive"),
            ("Authorization", "Bearer t"),
        ],
        body=body,
        source_ip="10.0.0.7",
        server_port=3000,
        scheme="http",
    )


def test_http_event_is_payload_2_0_with_base64_body_and_joined_repeats() -> None:
    event = http_event(
        sample_request(),
        route_key="POST /api/v1/things/{thingId}/parts",
        path_parameters={"thingId": "a b"},
        api=API,
        stamp=STAMP,
        authorizer_context=CONTEXT,
    )

    assert event == {
        "version": "2.0",
        "routeKey": "POST /api/v1/things/{thingId}/parts",
        "rawPath": "/api/v1/things/a b/parts",
        "rawQueryString": "tag=x&tag=y&empty&q=caf%C3%A9+au+lait",
        "cookies": ["a=1", "b=2"],
        "headers": {
            "host": "127.0.0.1:3000",
            "user-agent": "tester/1.0",
            "x-keystone-client": "editor/1.0",
            "accept": "application/json,text/plain",
            "authorization": "Bearer t",
            "x-forwarded-for": "10.0.0.7",
            "x-forwarded-port": "3000",
            "x-forwarded-proto": "http",
            "x-amzn-trace-id": "Root=1-abc",
        },
        "queryStringParameters": {"tag": "x,y", "empty": "", "q": "café+au+lait"},
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "a1b2c3d4e5",
            "domainName": "127.0.0.1",
            "domainPrefix": "127",
            "http": {
                "method": "POST",
                "path": "/api/v1/things/a b/parts",
                "protocol": "HTTP/1.1",
                "sourceIp": "10.0.0.7",
                "userAgent": "tester/1.0",
            },
            "requestId": "Wr1GFhQJoAMEbSg=",
            "routeKey": "POST /api/v1/things/{thingId}/parts",
            "stage": "$default",
            "time": "01/Jan/2026:00:00:00 +0000",
            "timeEpoch": 1767225600123,
            "authorizer": {"lambda": CONTEXT},
        },
        "body": base64.b64encode(BINARY).decode(),
        "pathParameters": {"thingId": "a b"},
        "isBase64Encoded": True,
    }


def test_text_body_is_sent_as_text() -> None:
    event = http_event(
        sample_request('{"name": "Zoë"}'.encode()),
        route_key="POST /x",
        path_parameters={},
        api=API,
        stamp=STAMP,
    )

    assert (event["body"], event["isBase64Encoded"]) == ('{"name": "Zoë"}', False)


def test_request_without_body_query_cookies_or_parameters_leaves_those_fields_out() -> None:
    request = HttpRequest(method="GET", target="/health", headers=[("Host", "localhost")])

    event = http_event(request, route_key="GET /health", path_parameters={}, api=API, stamp=STAMP)

    absent = {"body", "cookies", "queryStringParameters", "pathParameters", "stageVariables"}
    assert absent.isdisjoint(event)
    assert "authorizer" not in event["requestContext"]
    assert (event["rawQueryString"], event["isBase64Encoded"]) == ("", False)


def test_client_forwarded_for_is_kept_and_the_source_ip_appended() -> None:
    request = HttpRequest(
        method="GET",
        target="/",
        headers=[("X-Forwarded-For", "198.51.100.1")],
        source_ip="10.0.0.2",
    )

    event = http_event(request, route_key="GET /", path_parameters={}, api=API, stamp=STAMP)

    assert event["headers"]["x-forwarded-for"] == "198.51.100.1, 10.0.0.2"


def test_authorizer_event_is_a_payload_2_0_request_event() -> None:
    event = authorizer_event(
        sample_request(),
        route_key="POST /api/v1/things/{thingId}/parts",
        path_parameters={"thingId": "a b"},
        identity_source=["Bearer t"],
        api=API,
        stamp=STAMP,
    )

    route_event = http_event(
        sample_request(),
        route_key="POST /api/v1/things/{thingId}/parts",
        path_parameters={"thingId": "a b"},
        api=API,
        stamp=STAMP,
    )
    assert event == {
        "version": "2.0",
        "type": "REQUEST",
        "routeArn": "arn:aws:execute-api:eu-west-1:123456789012:a1b2c3d4e5"
        "/$default/POST/api/v1/things/a b/parts",
        "identitySource": ["Bearer t"],
        "routeKey": "POST /api/v1/things/{thingId}/parts",
        "rawPath": "/api/v1/things/a b/parts",
        "rawQueryString": "tag=x&tag=y&empty&q=caf%C3%A9+au+lait",
        "cookies": ["a=1", "b=2"],
        "headers": route_event["headers"],
        "queryStringParameters": route_event["queryStringParameters"],
        "requestContext": route_event["requestContext"],
        "pathParameters": {"thingId": "a b"},
    }


def test_proxy_result_maps_status_headers_cookies_and_base64_body() -> None:
    result = {
        "statusCode": 201,
        "headers": {"content-type": "application/octet-stream", "x-count": 3},
        "multiValueHeaders": {"x-tag": ["a", "b"]},
        "cookies": ["s=1; HttpOnly", "t=2"],
        "body": base64.b64encode(b"\x00\xff").decode(),
        "isBase64Encoded": True,
    }

    assert http_response(result) == HttpResponse(
        201,
        [
            ("content-type", "application/octet-stream"),
            ("x-count", "3"),
            ("x-tag", "a"),
            ("x-tag", "b"),
            ("set-cookie", "s=1; HttpOnly"),
            ("set-cookie", "t=2"),
        ],
        b"\x00\xff",
    )


def test_result_without_status_code_is_a_200_json_body() -> None:
    assert http_response({"ok": True}) == HttpResponse(
        200, [("content-type", "application/json")], b'{"ok": true}'
    )
    assert http_response("hi").body == b'"hi"'


def test_result_without_body_has_an_empty_body() -> None:
    assert http_response({"statusCode": 204}) == HttpResponse(204)


@pytest.mark.parametrize(
    "result",
    [
        {"statusCode": "teapot"},
        {"statusCode": 99},
        {"statusCode": 200, "body": {"not": "a string"}},
        {"statusCode": 200, "body": "%%%", "isBase64Encoded": True},
    ],
)
def test_malformed_result_is_an_invalid_response(result: dict) -> None:
    with pytest.raises(InvalidResponseError):
        http_response(result)


def test_sqs_record_has_lambdas_shape() -> None:
    message = {
        "MessageId": "m-1",
        "ReceiptHandle": "rh-1",
        "MD5OfBody": "md5",
        "Body": '{"recordId": "r"}',
        "Attributes": {
            "SenderId": "AIDA",
            "SentTimestamp": "1",
            "ApproximateReceiveCount": "2",
            "ApproximateFirstReceiveTimestamp": "3",
            "DeadLetterQueueSourceArn": "not passed on",
        },
        "MD5OfMessageAttributes": "md5-attrs",
        "MessageAttributes": {
            "kind": {"StringValue": "attribution", "DataType": "String"},
            "raw": {"BinaryValue": b"\x01", "DataType": "Binary"},
        },
    }

    assert sqs_record(
        message, queue_arn="arn:aws:sqs:eu-west-1:123456789012:q", region="eu-west-1"
    ) == {
        "messageId": "m-1",
        "receiptHandle": "rh-1",
        "body": '{"recordId": "r"}',
        "attributes": {
            "ApproximateReceiveCount": "2",
            "SentTimestamp": "1",
            "SenderId": "AIDA",
            "ApproximateFirstReceiveTimestamp": "3",
        },
        "messageAttributes": {
            "kind": {
                "stringValue": "attribution",
                "stringListValues": [],
                "binaryListValues": [],
                "dataType": "String",
            },
            "raw": {
                "binaryValue": "AQ==",
                "stringListValues": [],
                "binaryListValues": [],
                "dataType": "Binary",
            },
        },
        "md5OfBody": "md5",
        "md5OfMessageAttributes": "md5-attrs",
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:eu-west-1:123456789012:q",
        "awsRegion": "eu-west-1",
    }


def test_scheduled_event_has_eventbridges_shape() -> None:
    event = scheduled_event(
        rule_arn="arn:aws:events:eu-west-1:123456789012:rule/Nightly",
        region="eu-west-1",
        now=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        event_id="e-1",
    )

    assert json.loads(json.dumps(event)) == {
        "version": "0",
        "id": "e-1",
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": "123456789012",
        "time": "2026-01-02T03:04:05Z",
        "region": "eu-west-1",
        "resources": ["arn:aws:events:eu-west-1:123456789012:rule/Nightly"],
        "detail": {},
    }


def test_new_stamps_have_unique_request_ids_shaped_like_api_gateways() -> None:
    ids = {Stamp.new().request_id for _ in range(100)}

    assert len(ids) == 100
    assert all(len(i) == 16 and i.endswith("=") for i in ids)
