"""The local runtime end to end: real HTTP on loopback, moto's SQS, the fixture template's handlers.

The fixture (tests/fixtures/local_runtime/) has an echo function behind a Lambda authorizer, a
consumer that reports {"recordId": "fail"} as a batch item failure and raises on "raise", with a
1 s visibility timeout and maxReceiveCount 2, and a daily schedule that ``LocalFireAtStart`` lists.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest

from context_ledger.local.runtime import LocalRuntime

TEMPLATE = Path(__file__).resolve().parents[1] / "fixtures" / "local_runtime" / "template.yaml"
ALLOW = {"Authorization": "Bearer allow"}


@pytest.fixture(scope="module")
def records_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("local-runtime") / "deliveries.jsonl"
    path.touch()
    return path


@pytest.fixture(scope="module")
def runtime(records_file: Path, sqs_endpoint: str) -> Iterator[LocalRuntime]:
    # The session's SQS server (which sets AWS_ENDPOINT_URL_SQS) starts first; this runtime
    # still starts its own and points the environment at it.
    with LocalRuntime(TEMPLATE, port=0, env={"FIXTURE_RECORDS": str(records_file)}) as running:
        yield running


@pytest.fixture
def client(runtime: LocalRuntime) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=runtime.url, timeout=10) as http:
        yield http


def sqs_client(endpoint: str) -> Any:
    return boto3.client(
        "sqs",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def deliveries(records_file: Path, record_id: str) -> list[dict[str, Any]]:
    lines = records_file.read_text(encoding="utf-8").splitlines()
    return [d for d in map(json.loads, lines) if d["recordId"] == record_id]


def wait_for(condition: Callable[[], Any], timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


def drain_bodies(sqs: Any, queue_url: str) -> set[str]:
    """Bodies currently in a queue (received and deleted)."""
    response = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
    messages = response.get("Messages", [])
    for m in messages:
        sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=m["ReceiptHandle"])
    return {json.loads(m["Body"])["recordId"] for m in messages}


def test_stop_frees_the_port_joins_its_threads_deletes_its_queues_and_restores_env(
    records_file: Path, sqs_endpoint: str
) -> None:
    # First in the module, so no other runtime's threads start while this one runs.
    threads_before = set(threading.enumerate())
    os.environ.pop("GREETING", None)
    local = LocalRuntime(TEMPLATE, port=0, env={"FIXTURE_RECORDS": str(records_file)})
    local.start()
    url, queue = local.url, local.queue_url("WorkQueue")
    assert httpx.get(f"{url}/public").status_code == 200
    assert os.environ["GREETING"] == "hello"
    own_threads = set(threading.enumerate()) - threads_before

    local.stop()

    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/public")
    assert wait_for(lambda: not any(t.is_alive() for t in own_threads), timeout=5)
    assert "GREETING" not in os.environ
    # moto keeps one store per process: the session's server sees the stopped runtime's queues.
    sqs = sqs_client(sqs_endpoint)
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.get_queue_url(QueueName=queue.rsplit("/", 1)[1])


def test_http_request_round_trips_through_a_payload_2_0_event(client: httpx.Client) -> None:
    body = b"\xff\xfe binary"

    response = client.post(
        "/echo/a%20b?tag=x&tag=y",
        content=body,
        headers=[*ALLOW.items(), ("X-Multi", "1"), ("X-Multi", "2"), ("Cookie", "c=1; d=2")],
    )

    assert response.status_code == 200
    assert response.headers["x-echo"] == "yes"
    assert response.headers.get_list("set-cookie") == ["seen=1; Path=/", "theme=dark"]
    assert response.headers["apigw-requestid"]
    answer = response.json()
    event = answer["event"]
    assert event["routeKey"] == "ANY /echo/{name}"
    assert (event["rawPath"], event["rawQueryString"]) == ("/echo/a b", "tag=x&tag=y")
    assert event["pathParameters"] == {"name": "a b"}
    assert event["queryStringParameters"] == {"tag": "x,y"}
    assert event["headers"]["x-multi"] == "1,2"
    assert event["cookies"] == ["c=1", "d=2"]
    assert (base64.b64decode(event["body"]), event["isBase64Encoded"]) == (body, True)
    assert event["requestContext"]["requestId"] == response.headers["apigw-requestid"]
    assert event["requestContext"]["http"]["method"] == "POST"
    assert event["requestContext"]["authorizer"]["lambda"]["userId"] == "user-1"
    assert event["requestContext"]["authorizer"]["lambda"]["groups"] == "eng\nops"
    assert (answer["greeting"], answer["mode"]) == ("hello", "local-mode")
    assert (answer["functionName"], answer["memoryLimitInMb"]) == ("EchoFunction", "256")
    assert 0 < answer["remainingMs"] <= 5000


def test_greedy_route_receives_the_rest_of_the_path(client: httpx.Client) -> None:
    response = client.get("/files/docs/2026/report.txt", headers=ALLOW)

    assert response.json()["event"]["pathParameters"] == {"proxy": "docs/2026/report.txt"}


@pytest.mark.parametrize(
    ("path", "headers", "status", "message"),
    [
        ("/echo/x", {}, 401, "Unauthorized"),
        ("/echo/x", {"Authorization": "Bearer deny"}, 403, "Forbidden"),
        ("/echo/x", {"Authorization": "Bearer boom"}, 500, "Internal Server Error"),
        ("/echo/boom", ALLOW, 500, "Internal Server Error"),
        ("/nowhere", ALLOW, 404, "Not Found"),
    ],
)
def test_gateway_answers_like_api_gateway(
    client: httpx.Client, path: str, headers: dict[str, str], status: int, message: str
) -> None:
    response = client.get(path, headers=headers)

    assert (response.status_code, response.json()) == (status, {"message": message})


def test_route_with_auth_none_needs_no_token(client: httpx.Client) -> None:
    response = client.get("/public")

    assert response.status_code == 200
    assert "authorizer" not in response.json()["event"]["requestContext"]


def test_body_over_10_mb_is_refused_with_413_before_it_is_read(runtime: LocalRuntime) -> None:
    port = int(runtime.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(
            b"POST /echo/x HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer allow\r\n"
            b"Content-Length: 10485761\r\n\r\n"
        )
        reply = b"".join(iter(lambda: conn.recv(4096), b"")).decode()  # until the server closes

    assert reply.startswith("HTTP/1.1 413")
    assert reply.endswith('{"message":"Request Entity Too Large"}')


def test_partial_batch_failure_leaves_only_the_failed_message_until_the_dlq(
    runtime: LocalRuntime, records_file: Path
) -> None:
    sqs = sqs_client(runtime.sqs_endpoint)
    queue = runtime.queue_url("WorkQueue")
    for record_id in ("ok-1", "fail", "ok-2"):
        sqs.send_message(QueueUrl=queue, MessageBody=json.dumps({"recordId": record_id}))

    # maxReceiveCount 2: two failed deliveries, then SQS moves the message to the DLQ.
    assert wait_for(lambda: "fail" in drain_bodies(sqs, runtime.queue_url("WorkDLQ")))

    assert [d["receiveCount"] for d in deliveries(records_file, "fail")] == ["1", "2"]
    assert [d["receiveCount"] for d in deliveries(records_file, "ok-1")] == ["1"]
    assert [d["receiveCount"] for d in deliveries(records_file, "ok-2")] == ["1"]


def test_consumer_that_raises_gets_the_batch_again_until_the_dlq(
    runtime: LocalRuntime, records_file: Path
) -> None:
    sqs = sqs_client(runtime.sqs_endpoint)
    sqs.send_message(QueueUrl=runtime.queue_url("WorkQueue"), MessageBody='{"recordId": "raise"}')

    assert wait_for(lambda: "raise" in drain_bodies(sqs, runtime.queue_url("WorkDLQ")))

    assert [d["receiveCount"] for d in deliveries(records_file, "raise")] == ["1", "2"]


def test_schedule_fires_on_demand_with_a_scheduled_event(runtime: LocalRuntime) -> None:
    result = runtime.fire("tick")

    assert result == {
        "detailType": "Scheduled Event",
        "resources": [
            "arn:aws:scheduler:us-east-1:123456789012:schedule/default/TickFunctionDaily"
        ],
    }
    assert runtime.fire("TickFunction", "Daily") == result


def test_invoke_finds_functions_by_logical_id_or_folder(runtime: LocalRuntime) -> None:
    event = {"identitySource": ["Bearer deny"]}

    assert runtime.invoke("authorizer", event) == {"isAuthorized": False}
    assert runtime.invoke("AuthorizerFunction", event) == {"isAuthorized": False}


def test_functions_see_the_resolved_template_environment(runtime: LocalRuntime) -> None:
    assert os.environ["GREETING"] == "hello"
    assert os.environ["WORK_QUEUE_URL"] == runtime.queue_url("WorkQueue")
    assert os.environ["WORK_DLQ_ARN"].startswith("arn:aws:sqs:us-east-1:123456789012:")
    assert os.environ["AWS_ENDPOINT_URL_SQS"] == runtime.sqs_endpoint
    assert os.environ["KEYSTONE_ENVIRONMENT"] == "local"  # from the test session, not the template
    assert "FIXTURE_REGION" not in os.environ  # !Sub ${AWS::Region} is only known in AWS
    assert "FIXTURE_JWKS_URL" not in os.environ  # a parameter without a default


def test_a_variable_set_in_the_shell_wins_over_the_templates_parameter_default(
    runtime: LocalRuntime, records_file: Path, sqs_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GREETING", "from the shell")
    with LocalRuntime(
        TEMPLATE, port=0, env={"FIXTURE_RECORDS": str(records_file)}, sqs_endpoint=sqs_endpoint
    ):
        assert os.environ["GREETING"] == "from the shell"

    assert os.environ["GREETING"] == "from the shell", "stop restores what the shell had"


def test_two_runtimes_on_different_ports_do_not_collide(
    runtime: LocalRuntime, records_file: Path, sqs_endpoint: str
) -> None:
    sqs = sqs_client(sqs_endpoint)
    with LocalRuntime(
        TEMPLATE, port=0, env={"FIXTURE_RECORDS": str(records_file)}, sqs_endpoint=sqs_endpoint
    ) as second:
        assert second.url != runtime.url
        assert second.queue_url("WorkQueue") != runtime.queue_url("WorkQueue")
        sqs.send_message(QueueUrl=second.queue_url("WorkQueue"), MessageBody='{"recordId": "2nd"}')
        (delivery,) = wait_for(lambda: deliveries(records_file, "2nd"))
        second_arn = sqs.get_queue_attributes(
            QueueUrl=second.queue_url("WorkQueue"), AttributeNames=["QueueArn"]
        )["Attributes"]["QueueArn"]
        assert delivery["eventSourceARN"] == second_arn
        assert httpx.get(f"{second.url}/public").status_code == 200

    assert httpx.get(f"{runtime.url}/public").status_code == 200
    assert os.environ["AWS_ENDPOINT_URL_SQS"] == runtime.sqs_endpoint


def test_a_schedule_listed_to_fire_at_start_fires_once_when_a_serving_runtime_starts(
    runtime: LocalRuntime, records_file: Path, sqs_endpoint: str
) -> None:
    before = len(deliveries(records_file, "tick"))
    env = {"FIXTURE_RECORDS": str(records_file)}
    with LocalRuntime(TEMPLATE, port=0, env=env, sqs_endpoint=sqs_endpoint, start_up=True):
        (tick,) = wait_for(lambda: deliveries(records_file, "tick")[before:])

    assert tick["resources"] == [
        "arn:aws:scheduler:us-east-1:123456789012:schedule/default/TickFunctionDaily"
    ]


def test_a_runtime_that_does_not_serve_fires_nothing_at_start(
    runtime: LocalRuntime, records_file: Path, sqs_endpoint: str
) -> None:
    before = len(deliveries(records_file, "tick"))
    env = {"FIXTURE_RECORDS": str(records_file)}
    with LocalRuntime(TEMPLATE, port=0, env=env, sqs_endpoint=sqs_endpoint):  # as invoke runs
        time.sleep(1.0)

    assert deliveries(records_file, "tick")[before:] == []
