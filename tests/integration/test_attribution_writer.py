"""The attribution writer on real SQS batches (moto) and a real PostgreSQL."""

from __future__ import annotations

import importlib.util
import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import boto3
import psycopg
import pytest
from evidence_support import key_ring_from_env
from psycopg.rows import dict_row

from context_ledger.evidence.chain import org_chain, verify
from context_ledger.evidence.keys import KeyRing

HANDLER = Path(__file__).parents[2] / "functions" / "attribution_writer" / "app.py"
KEY = "writer-test-key-" + "w" * 32


@pytest.fixture
def keys(db: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[KeyRing]:
    """The service reads its HMAC key from the environment, as in local mode."""
    with key_ring_from_env(
        monkeypatch,
        KEYSTONE_EVIDENCE_HMAC_KEY=KEY,
        KEYSTONE_EVIDENCE_KEY_ID="writer-1",
        KEYSTONE_EVIDENCE_HMAC_SECRET_ARN=None,
    ) as ring:
        yield ring


@pytest.fixture
def org_id(db: str) -> uuid.UUID:
    with psycopg.connect(db) as conn:
        return conn.execute(
            "INSERT INTO organisations (name) VALUES ('Acme') RETURNING id"
        ).fetchone()[0]


@pytest.fixture
def handler() -> Callable[[dict, Any], dict]:
    """The function's handler, imported from its file the way the Lambda runtime does."""
    spec = importlib.util.spec_from_file_location("attribution_writer_app", HANDLER)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.handler


@pytest.fixture
def queue(sqs_endpoint: str) -> tuple[Any, str]:
    sqs = boto3.client("sqs")
    url = sqs.create_queue(QueueName=f"attribution-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    return sqs, url


LAMBDA_CONTEXT = SimpleNamespace(
    function_name="AttributionWriterFunction",
    memory_limit_in_mb="256",
    invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:AttributionWriterFunction",
    aws_request_id="00000000-0000-4000-8000-000000000000",
)


def _event(org_id: uuid.UUID, request_id: str = "req-1", **record: Any) -> dict[str, Any]:
    return {
        "recordId": str(uuid.uuid4()),
        "category": "context_attribution",
        "orgId": str(org_id),
        "record": {
            "requestId": request_id,
            "attributionId": str(uuid.uuid4()),
            "userId": "user-1",
            "spaceId": str(uuid.uuid4()),
            "sourceIds": [str(uuid.uuid4())],
            **record,
        },
    }


def _sqs_batch(queue: tuple[Any, str], bodies: list[str]) -> dict[str, Any]:
    """Send ``bodies``, receive them back, and shape them as Lambda's SQS event source does."""
    sqs, url = queue
    for body in bodies:
        sqs.send_message(QueueUrl=url, MessageBody=body)
    messages: list[dict[str, Any]] = []
    while len(messages) < len(bodies):
        messages += sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"]
        ).get("Messages", [])
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]
    return {
        "Records": [
            {
                "messageId": message["MessageId"],
                "receiptHandle": message["ReceiptHandle"],
                "body": message["Body"],
                "attributes": message["Attributes"],
                "messageAttributes": {},
                "md5OfBody": message["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": arn["QueueArn"],
                "awsRegion": "us-east-1",
            }
            for message in messages
        ]
    }


def _rows(db: str, sql: str) -> list[dict[str, Any]]:
    with psycopg.connect(db, row_factory=dict_row) as conn:
        return conn.execute(sql).fetchall()


def test_a_batch_commits_its_good_events_and_reports_only_the_poison_message(
    db: str,
    keys: KeyRing,
    org_id: uuid.UUID,
    handler: Callable,
    queue: tuple[Any, str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    good = [_event(org_id, request_id=f"req-{i}") for i in range(3)]
    poison = json.dumps({"recordId": "not-a-uuid", "secretQuery": "payroll of the board"})
    batch = _sqs_batch(
        queue, [json.dumps(good[0]), poison, json.dumps(good[1]), json.dumps(good[2])]
    )
    poison_id = next(r["messageId"] for r in batch["Records"] if r["body"] == poison)

    response = handler(batch, LAMBDA_CONTEXT)

    assert response == {"batchItemFailures": [{"itemIdentifier": poison_id}]}
    attributions = _rows(
        db, "SELECT attribution_id, request_id, org_id, chain, seq FROM attributions"
    )
    assert sorted(row["request_id"] for row in attributions) == ["req-0", "req-1", "req-2"]
    assert {row["chain"] for row in attributions} == {org_chain(org_id)}
    assert sorted(row["seq"] for row in attributions) == [1, 2, 3]
    entries = _rows(db, "SELECT record_id, category, org_id, key_id FROM evidence_chain")
    assert {str(row["record_id"]) for row in entries} == {event["recordId"] for event in good}
    assert {(row["category"], row["org_id"], row["key_id"]) for row in entries} == {
        ("context_attribution", org_id, "writer-1")
    }
    poison_logs = [r for r in caplog.records if r.getMessage() == "poison attribution message"]
    assert [r.messageId for r in poison_logs] == [poison_id]
    # Field names may be logged, values never.
    assert "secretQuery" in poison_logs[0].problems
    assert all("payroll" not in str(vars(r)) for r in caplog.records)


def test_a_redelivered_message_adds_no_second_entry(
    db: str, keys: KeyRing, org_id: uuid.UUID, handler: Callable, queue: tuple[Any, str]
) -> None:
    batch = _sqs_batch(queue, [json.dumps(_event(org_id)), json.dumps(_event(org_id))])

    assert handler(batch, LAMBDA_CONTEXT) == {"batchItemFailures": []}
    # The function crashed after its commit; SQS hands the same messages out again.
    assert handler(batch, LAMBDA_CONTEXT) == {"batchItemFailures": []}

    assert len(_rows(db, "SELECT 1 FROM evidence_chain")) == 2
    assert len(_rows(db, "SELECT 1 FROM attributions")) == 2
    with psycopg.connect(db, row_factory=dict_row) as conn:
        assert verify(conn, chain=org_chain(org_id), keys=keys).ok


def test_the_entry_and_its_lookup_row_commit_together(
    db: str, keys: KeyRing, org_id: uuid.UUID, handler: Callable, queue: tuple[Any, str]
) -> None:
    unknown_org = _event(uuid.uuid4())  # the lookup row's organisation does not exist
    batch = _sqs_batch(queue, [json.dumps(unknown_org), json.dumps(_event(org_id))])
    failed_id = next(
        r["messageId"] for r in batch["Records"] if r["body"] == json.dumps(unknown_org)
    )

    assert handler(batch, LAMBDA_CONTEXT) == {"batchItemFailures": [{"itemIdentifier": failed_id}]}

    entries = _rows(db, "SELECT org_id FROM evidence_chain")
    assert [row["org_id"] for row in entries] == [org_id]
    assert (
        _rows(db, "SELECT 1 FROM evidence_chain_heads WHERE chain LIKE 'org:%' AND seq = 0") == []
    )


def test_each_organisation_gets_its_own_chain(
    db: str, keys: KeyRing, handler: Callable, queue: tuple[Any, str]
) -> None:
    orgs = _rows(db, "INSERT INTO organisations (name) VALUES ('A'), ('B') RETURNING id")
    org_ids = [row["id"] for row in orgs]
    batch = _sqs_batch(queue, [json.dumps(_event(org)) for org in org_ids + org_ids])

    assert handler(batch, LAMBDA_CONTEXT) == {"batchItemFailures": []}

    heads = _rows(db, "SELECT chain, seq FROM evidence_chain_heads ORDER BY chain")
    assert heads == sorted(
        ({"chain": org_chain(org), "seq": 2} for org in org_ids), key=lambda head: head["chain"]
    )
