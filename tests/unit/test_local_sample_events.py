"""The sample events in events/ are what the runtime (and AWS) send to the project's functions.

Each HTTP sample is rebuilt from the request it describes with the runtime's own event builders
and must come out identical, so the samples cannot drift from the events functions really get.
"""

from __future__ import annotations

import base64
import json
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from context_ledger.local.events import (
    ApiInfo,
    HttpRequest,
    Stamp,
    authorizer_event,
    http_event,
    scheduled_event,
    sqs_record,
)
from context_ledger.local.template import Template, read_template

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "events"
AUTHORIZER_CONTEXT_KEYS = {
    "orgId",
    "userId",
    "clientId",
    "scopes",
    "groups",
    "principalKind",
    "authMethod",
}


def load(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / name).read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def template() -> Template:
    return read_template(ROOT / "template.yaml")


def request_of(sample: dict[str, Any]) -> tuple[HttpRequest, Stamp, ApiInfo]:
    """The request a sample describes, and the values API Gateway made up for it."""
    headers = dict(sample["headers"])
    trace_id = headers.pop("x-amzn-trace-id")
    port, scheme = headers.pop("x-forwarded-port"), headers.pop("x-forwarded-proto")
    headers.pop("x-forwarded-for")
    http = sample["requestContext"]["http"]
    body = sample.get("body", "")
    query = sample["rawQueryString"]
    request = HttpRequest(
        method=http["method"],
        target=quote(sample["rawPath"]) + (f"?{query}" if query else ""),
        headers=list(headers.items()),
        body=base64.b64decode(body) if sample.get("isBase64Encoded") else body.encode(),
        source_ip=http["sourceIp"],
        server_port=int(port),
        scheme=scheme,
        protocol=http["protocol"],
    )
    context = sample["requestContext"]
    region = context["domainName"].split(".")[2]
    stamp = Stamp(context["requestId"], context["timeEpoch"], trace_id)
    return request, stamp, ApiInfo(context["apiId"], region, context["accountId"])


def route_keys(template: Template, folder: str) -> set[str]:
    return {route.route_key for route in template.function(folder).routes}


def all_route_keys(template: Template) -> set[str]:
    return {route.route_key for f in template.functions.values() for route in f.routes}


#: Every HTTP API sample (payload 2.0 route events; the authorizer's REQUEST event has a "type").
HTTP_SAMPLES = sorted(
    path.name
    for path in EVENTS.glob("*.json")
    if (event := json.loads(path.read_text(encoding="utf-8"))).get("version") == "2.0"
    and "routeKey" in event
    and "type" not in event
)


def test_every_api_route_has_a_sample_event(template: Template) -> None:
    sampled = {load(name)["routeKey"] for name in HTTP_SAMPLES}

    assert sampled >= all_route_keys(template) - {"ANY /{proxy+}"}


@pytest.mark.parametrize("name", HTTP_SAMPLES)
def test_http_samples_are_the_events_the_runtime_builds(name: str, template: Template) -> None:
    sample = load(name)
    request, stamp, api = request_of(sample)

    rebuilt = http_event(
        request,
        route_key=sample["routeKey"],
        path_parameters=sample.get("pathParameters", {}),
        api=api,
        stamp=stamp,
        authorizer_context=sample["requestContext"]["authorizer"]["lambda"],
    )

    assert rebuilt == sample
    assert sample["routeKey"] in all_route_keys(template)
    assert set(sample["requestContext"]["authorizer"]["lambda"]) == AUTHORIZER_CONTEXT_KEYS


def test_authorizer_sample_is_the_request_event_the_runtime_builds(template: Template) -> None:
    sample = load("authorizer-request.json")
    request, stamp, api = request_of(sample)

    rebuilt = authorizer_event(
        request,
        route_key=sample["routeKey"],
        path_parameters=sample.get("pathParameters", {}),
        identity_source=sample["identitySource"],
        api=api,
        stamp=stamp,
    )

    assert rebuilt == sample
    assert sample["identitySource"] == [sample["headers"]["authorization"]]
    assert sample["routeKey"] in route_keys(template, "spaces")


def test_attribution_batch_sample_is_an_sqs_event_from_the_writers_queue(
    template: Template,
) -> None:
    sample = load("attribution-writer-batch.json")
    (source,) = template.function("attribution_writer").sqs_sources

    for record in sample["Records"]:
        message = {
            "MessageId": record["messageId"],
            "ReceiptHandle": record["receiptHandle"],
            "Body": record["body"],
            "MD5OfBody": record["md5OfBody"],
            "Attributes": record["attributes"],
        }
        rebuilt = sqs_record(
            message, queue_arn=record["eventSourceARN"], region=record["awsRegion"]
        )
        assert rebuilt == record
        assert source.queue in record["eventSourceARN"]
        assert "recordId" in json.loads(record["body"])


def test_chain_verify_sample_is_the_scheduled_event_of_its_schedule(template: Template) -> None:
    sample = load("chain-verify-schedule.json")
    function = template.function("chain_verify")
    (schedule,) = [s for s in function.schedules if s.input is None]

    rebuilt = scheduled_event(
        rule_arn=sample["resources"][0],
        region=sample["region"],
        now=datetime.fromisoformat(sample["time"]),
        event_id=sample["id"],
    )

    assert rebuilt == sample
    kind = "scheduler" if schedule.scheduler else "events"
    assert sample["resources"][0].startswith(f"arn:aws:{kind}:")
    assert sample["resources"][0].endswith(f"{function.logical_id}{schedule.event}")


def test_chain_verify_sweep_sample_is_the_input_of_the_minutely_schedule(
    template: Template,
) -> None:
    (sweep,) = [s for s in template.function("chain_verify").schedules if s.input is not None]

    assert load("chain-verify-sweep.json") == sweep.input == {"scope": "recent"}
    assert sweep.expression == "rate(1 minute)"


def test_migrate_sample_is_a_custom_resource_create_request(template: Template) -> None:
    sample = load("migrate-create.json")

    assert sample["RequestType"] == "Create"
    assert sample["ResourceType"] == "Custom::DatabaseMigrations"
    required = {"ServiceToken", "ResponseURL", "StackId", "RequestId", "LogicalResourceId"}
    assert required <= set(sample)
    assert template.function("migrate").handler_file.is_file()


def test_memory_reembed_sample_is_the_scheduled_event_of_its_sweep(template: Template) -> None:
    sample = load("memory-reembed-sweep.json")
    function = template.function("memory_reembed")
    (sweep,) = function.schedules

    rebuilt = scheduled_event(
        rule_arn=sample["resources"][0],
        region=sample["region"],
        now=datetime.fromisoformat(sample["time"]),
        event_id=sample["id"],
    )

    assert rebuilt == sample
    assert sample["resources"][0] == (
        f"arn:aws:scheduler:us-east-1:123456789012:schedule/default/"
        f"{function.logical_id}{sweep.event}"
    )
    # the deploy's custom resource starts it in AWS; `context-ledger dev` at its start
    assert sweep.at_start
