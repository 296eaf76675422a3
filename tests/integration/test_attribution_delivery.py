"""Delivery campaign: attribution events through the template's real queue (moto SQS, with its
dead-letter queue and maxReceiveCount) into the writer function's handler, under redelivery,
poison messages, crashes between commit and acknowledgement, and concurrent writers.

``Mapping`` plays Lambda's SQS event source mapping one step at a time, so each test decides
exactly which deliveries happen: receive a batch, invoke the handler, delete what succeeded, and
let the rest become visible again (what the visibility timeout does, without waiting for it).
"""

from __future__ import annotations

import importlib.util
import json
import random
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import boto3
import psycopg
import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
from evidence_support import key_ring_from_env
from psycopg.rows import dict_row

from context_ledger.attribution.publisher import publish_attribution
from context_ledger.evidence.chain import org_chain, verify
from context_ledger.evidence.keys import KeyRing
from context_ledger.local.events import sqs_record
from context_ledger.local.queues import LocalQueue, create_queues, delete_queues
from context_ledger.local.template import read_template
from context_ledger.settings import get_settings

ROOT = Path(__file__).resolve().parents[2]
HANDLER = ROOT / "functions" / "attribution_writer" / "app.py"
TEMPLATE = read_template(ROOT / "template.yaml")
MAX_RECEIVE_COUNT = TEMPLATE.queues["AttributionQueue"].max_receive_count
LAMBDA_CONTEXT = SimpleNamespace(
    function_name="AttributionWriterFunction",
    memory_limit_in_mb="1024",
    invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:AttributionWriterFunction",
    aws_request_id="00000000-0000-4000-8000-0000000000dd",
)


@pytest.fixture
def keys(db: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[KeyRing]:
    with key_ring_from_env(
        monkeypatch,
        KEYSTONE_EVIDENCE_HMAC_KEY="delivery-test-key-" + "d" * 32,
        KEYSTONE_EVIDENCE_CHECKPOINT_DIR=str(tmp_path / "checkpoints"),
    ) as ring:
        yield ring


@pytest.fixture
def handler() -> Callable[[dict, Any], dict]:
    spec = importlib.util.spec_from_file_location("attribution_writer_delivery", HANDLER)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.handler


@pytest.fixture
def queues(sqs_endpoint: str) -> Iterator[dict[str, LocalQueue]]:
    """The template's attribution queue and dead-letter queue, as the template declares them."""
    client = boto3.client("sqs")
    created = create_queues(client, TEMPLATE, suffix=uuid.uuid4().hex[:8])
    yield created
    delete_queues(client, created)


@pytest.fixture
def org_id(db: str) -> uuid.UUID:
    with psycopg.connect(db) as conn:
        row = conn.execute("INSERT INTO organisations (name) VALUES ('Acme') RETURNING id")
        return row.fetchone()[0]


#: moto's SQS backend takes no lock: two receives at once can hand one message to both, and a
#: receive moving messages to the dead-letter queue can make another request's lookup miss a
#: message; real SQS does neither. The workers' queue calls take turns; their handler
#: invocations, which are what the concurrency tests exercise, do not.
_QUEUE_CALLS = threading.Lock()


@dataclass
class Mapping:
    """Lambda's SQS event source mapping, one explicit step at a time."""

    queue: LocalQueue
    handler: Callable[[dict, Any], dict]
    client: Any = field(default_factory=lambda: boto3.client("sqs"))
    delivered: Counter = field(default_factory=Counter)  # record id → times handed to the handler

    def receive(self, count: int = 10) -> list[dict[str, Any]]:
        with _QUEUE_CALLS:
            return self.client.receive_message(
                QueueUrl=self.queue.url,
                MaxNumberOfMessages=count,
                MessageSystemAttributeNames=["All"],
            ).get("Messages", [])

    def invoke(self, messages: list[dict[str, Any]]) -> set[str]:
        """The handler's answer for ``messages``: the message ids it reported as failed."""
        for message in messages:
            self.delivered[_record_id(message["Body"])] += 1
        event = {
            "Records": [
                sqs_record(m, queue_arn=self.queue.arn, region="us-east-1") for m in messages
            ]
        }
        try:
            answer = self.handler(event, LAMBDA_CONTEXT)
        except BatchProcessingError:  # Powertools raises when every record failed
            return {m["MessageId"] for m in messages}  # Lambda: the invocation failed
        return {item["itemIdentifier"] for item in answer["batchItemFailures"]}

    def acknowledge(self, messages: list[dict[str, Any]]) -> None:
        if not messages:
            return
        with _QUEUE_CALLS:
            self.client.delete_message_batch(
                QueueUrl=self.queue.url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                    for i, m in enumerate(messages)
                ],
            )

    def release(self, messages: list[dict[str, Any]]) -> None:
        """Let ``messages`` be received again now (their visibility timeout ran out)."""
        for message in messages:
            with _QUEUE_CALLS:
                self.client.change_message_visibility(
                    QueueUrl=self.queue.url,
                    ReceiptHandle=message["ReceiptHandle"],
                    VisibilityTimeout=0,
                )

    def step(self, *, crash_before_ack: Callable[[], bool] = lambda: False) -> int:
        """One poll: invoke, then acknowledge the successes (unless the worker "crashes" after
        the handler committed) and release the failures. Returns the batch size."""
        messages = self.receive()
        if not messages:
            return 0
        failed = self.invoke(messages)
        if crash_before_ack():
            self.release(messages)
            return len(messages)
        self.acknowledge([m for m in messages if m["MessageId"] not in failed])
        self.release([m for m in messages if m["MessageId"] in failed])
        return len(messages)

    def drain(self, **kwargs: Any) -> None:
        while self.step(**kwargs):
            pass


def _record_id(body: str) -> str:
    try:
        return str(json.loads(body).get("recordId"))
    except (ValueError, AttributeError):
        return "unparseable"


def _event(org_id: uuid.UUID, n: int) -> dict[str, Any]:
    """An attribution event shaped as the retrieve function publishes it."""
    return {
        "recordId": str(uuid.uuid4()),
        "category": "context_attribution",
        "orgId": str(org_id),
        "record": {
            "requestId": f"req-{n}",
            "attributionId": str(uuid.uuid4()),
            "userId": f"user-{n % 5}",
            "spaceId": str(uuid.uuid4()),
            "sourceIds": [str(uuid.uuid4())],
            "chunks": [{"chunkId": str(uuid.uuid4()), "sha256": f"{n:064x}", "indexVersion": 1}],
        },
    }


def _send(queue: LocalQueue, bodies: list[str]) -> None:
    client = boto3.client("sqs")
    for start in range(0, len(bodies), 10):
        client.send_message_batch(
            QueueUrl=queue.url,
            Entries=[
                {"Id": str(i), "MessageBody": body}
                for i, body in enumerate(bodies[start : start + 10])
            ],
        )


def _dead_letters(queues: dict[str, LocalQueue]) -> list[str]:
    client, bodies = boto3.client("sqs"), []
    while messages := client.receive_message(
        QueueUrl=queues["AttributionDLQ"].url, MaxNumberOfMessages=10, VisibilityTimeout=60
    ).get("Messages", []):
        bodies += [m["Body"] for m in messages]
    return bodies


def _chain_state(db: str, chain: str, keys: KeyRing) -> tuple[list[int], list[str], bool]:
    """(seqs, record ids, verifies) of ``chain``."""
    with psycopg.connect(db, row_factory=dict_row) as conn:
        rows = conn.execute(
            "SELECT seq, record_id FROM evidence_chain WHERE chain = %s ORDER BY seq", (chain,)
        ).fetchall()
        verified = verify(conn, chain=chain, keys=keys)
    return [r["seq"] for r in rows], [str(r["record_id"]) for r in rows], verified.ok


def _attribution_count(db: str, org_id: uuid.UUID) -> int:
    """The organisation's records (the session's local runtime may be writing others')."""
    with psycopg.connect(db) as conn:
        query = "SELECT count(*) FROM attributions WHERE org_id = %s"
        return conn.execute(query, (org_id,)).fetchone()[0]


def test_every_message_delivered_two_or_three_times_is_recorded_exactly_once(
    db: str, keys: KeyRing, org_id: uuid.UUID, handler: Callable, queues: dict
) -> None:
    rng = random.Random(2)
    events = [_event(org_id, n) for n in range(60)]
    target = {e["recordId"]: rng.choice((2, 3)) for e in events}
    _send(queues["AttributionQueue"], [json.dumps(e) for e in events])
    mapping = Mapping(queues["AttributionQueue"], handler)

    # The handler commits every time; the acknowledgement is lost until a message has been
    # delivered its 2 or 3 times (a lost DeleteMessageBatch, an expired visibility timeout).
    while messages := mapping.receive():
        assert mapping.invoke(messages) == set()
        done = [
            m
            for m in messages
            if mapping.delivered[_record_id(m["Body"])] >= target[_record_id(m["Body"])]
        ]
        mapping.acknowledge(done)
        mapping.release([m for m in messages if m not in done])

    assert dict(mapping.delivered) == target
    seqs, record_ids, verifies = _chain_state(db, org_chain(org_id), keys)
    assert sorted(record_ids) == sorted(target)  # 0 missing, 0 duplicates
    assert seqs == list(range(1, 61))
    assert verifies
    assert _attribution_count(db, org_id) == 60
    print(f"{sum(target.values())} deliveries of {len(events)} messages: 0 duplicates, 0 missing")


def test_a_poison_message_in_a_batch_of_ten_ends_in_the_dead_letter_queue(
    db: str, keys: KeyRing, org_id: uuid.UUID, handler: Callable, queues: dict
) -> None:
    poison = json.dumps({**_event(org_id, 99), "record": {"requestId": "r", "score": 0.5}})
    bodies = [json.dumps(_event(org_id, n)) for n in range(9)]
    bodies.insert(4, poison)
    _send(queues["AttributionQueue"], bodies)
    mapping = Mapping(queues["AttributionQueue"], handler)

    first = mapping.receive()
    failed = mapping.invoke(first)
    mapping.acknowledge([m for m in first if m["MessageId"] not in failed])
    mapping.release([m for m in first if m["MessageId"] in failed])
    mapping.drain()

    assert len(first) == 10
    assert [m["Body"] for m in first if m["MessageId"] in failed] == [poison]
    assert _attribution_count(db, org_id) == 9
    assert _dead_letters(queues) == [poison]
    assert mapping.delivered[_record_id(poison)] == MAX_RECEIVE_COUNT


def test_a_crash_after_the_commit_and_before_the_ack_adds_no_duplicate(
    db: str, keys: KeyRing, org_id: uuid.UUID, handler: Callable, queues: dict
) -> None:
    events = [_event(org_id, n) for n in range(10)]
    _send(queues["AttributionQueue"], [json.dumps(e) for e in events])
    mapping = Mapping(queues["AttributionQueue"], handler)

    batch = mapping.receive()
    mapping.invoke(batch[:6])  # the environment dies six records into the batch ...
    mapping.release(batch)  # ... so nothing is acknowledged
    batch = mapping.receive()
    assert mapping.invoke(batch) == set()  # the whole batch again: committed and acknowledged
    mapping.release(batch)  # this time the acknowledgement is lost
    mapping.drain()

    seqs, record_ids, verifies = _chain_state(db, org_chain(org_id), keys)
    assert sorted(record_ids) == sorted(e["recordId"] for e in events)
    assert seqs == list(range(1, 11))
    assert verifies


def test_concurrent_writers_build_one_linear_chain_and_every_retrieval_is_accounted_for(
    db: str,
    keys: KeyRing,
    org_id: uuid.UUID,
    handler: Callable,
    queues: dict,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """K workers compete for the queue and crash before some acknowledgements; afterwards
    retrievals served = records + dead letters."""
    monkeypatch.setenv("KEYSTONE_ATTRIBUTION_QUEUE_URL", queues["AttributionQueue"].url)
    get_settings.cache_clear()
    served = [_event(org_id, n) for n in range(120)]
    for n, event in enumerate(served):
        publish_attribution(event)  # the retrieve function's own publishing code
        if n % 10 == 0:
            publish_attribution(event)  # a publisher retry: a second message, one record id
    broken = [{**_event(org_id, n), "record": {"requestId": "r", "n": 1.5}} for n in range(2)]
    for event in broken:
        publish_attribution(event)
    errors: list[BaseException] = []
    workers_count = 4

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        mapping = Mapping(queues["AttributionQueue"], handler)
        try:
            mapping.drain(crash_before_ack=lambda: rng.random() < 0.2)
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=worker, args=(i,)) for i in range(workers_count)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()
    # Workers stop at their first empty receive, which can race another worker's release; Lambda's
    # mapping never stops polling, so a last poller takes whatever is left.
    Mapping(queues["AttributionQueue"], handler).drain()

    assert errors == []
    seqs, record_ids, verifies = _chain_state(db, org_chain(org_id), keys)
    assert seqs == list(range(1, len(served) + 1))
    assert len(set(record_ids)) == len(record_ids)
    assert verifies
    dead = _dead_letters(queues)
    assert sorted(_record_id(body) for body in dead) == sorted(e["recordId"] for e in broken)
    assert len(served) + len(broken) == _attribution_count(db, org_id) + len(dead)
