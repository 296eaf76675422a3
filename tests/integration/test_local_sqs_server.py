"""The local runtime's SQS (local/sqs_server.py): moto's SQS answers, over a connection botocore
keeps for every request, and a body without a length is refused rather than misread."""

from __future__ import annotations

import http.client
import threading
import time
from collections.abc import Iterator

import boto3
import pytest
from botocore.exceptions import ClientError

from context_ledger.local.sqs_server import SqsServer, serve_sqs


@pytest.fixture
def server() -> Iterator[SqsServer]:
    with serve_sqs() as running:
        yield running


def _client(server: SqsServer):
    return boto3.client(
        "sqs",
        endpoint_url=server.url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def test_messages_sent_are_received(server: SqsServer) -> None:
    sqs = _client(server)
    queue = sqs.create_queue(QueueName="local-sqs-round-trip")["QueueUrl"]

    sent = [sqs.send_message(QueueUrl=queue, MessageBody=f"évidence {n}") for n in range(3)]
    received = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10)["Messages"]

    assert queue.startswith(server.url)
    assert sorted(m["Body"] for m in received) == ["évidence 0", "évidence 1", "évidence 2"]
    assert {m["MessageId"] for m in received} == {s["MessageId"] for s in sent}


def test_one_connection_serves_every_request(server: SqsServer) -> None:
    sqs = _client(server)
    queue = sqs.create_queue(QueueName="local-sqs-keep-alive")["QueueUrl"]

    for n in range(20):
        sqs.send_message(QueueUrl=queue, MessageBody=str(n))

    assert server.connections == 1


def test_errors_are_sqs_errors(server: SqsServer) -> None:
    sqs = _client(server)

    with pytest.raises(ClientError) as raised:
        sqs.send_message(QueueUrl=f"{server.url}/123456789012/no-such-queue", MessageBody="x")

    assert raised.value.response["Error"]["Code"] == "AWS.SimpleQueueService.NonExistentQueue"


def test_a_chunked_body_is_refused_with_411(server: SqsServer) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=5)
    connection.request("POST", "/", body=iter([b"Action=ListQueues"]), encode_chunked=True)

    assert connection.getresponse().status == 411


def test_stopping_ends_the_connections_clients_keep_alive() -> None:
    before = set(threading.enumerate())
    with serve_sqs() as running:
        sqs = _client(running)  # keeps its connection open after the request
        sqs.list_queues()
        # This server's threads: others of the process (a long poll on the tests' moto server)
        # may start meanwhile.
        ours = {"sqs", f"sqs:{running.server_address[1]}"}
        serving = {t for t in set(threading.enumerate()) - before if t.name in ours}

    deadline = time.monotonic() + 5
    while any(t.is_alive() for t in serving) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(serving) == 2, "the server's thread and the connection's"
    assert not any(t.is_alive() for t in serving)
