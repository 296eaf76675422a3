"""The template's SQS queues on a local SQS endpoint, and Lambda's event source mapping.

Queues are created dead-letter queues first, with the template's attributes and redrive policy.
Names the template does not fix get a per-runtime suffix, as CloudFormation generates unique names:
moto keeps one store per process, so two runtimes on one endpoint must not share a queue.

A :class:`QueuePoller` does what Lambda's poller does for one SQS event source: long-polls, gathers
up to ``BatchSize`` messages (within ``MaximumBatchingWindowInSeconds``), invokes the function with
an SQS event and deletes what succeeded. With ``ReportBatchItemFailures`` only the messages listed
in ``batchItemFailures`` stay; a function that raises leaves the whole batch, which comes back after
the visibility timeout. The redrive to the dead-letter queue after ``maxReceiveCount`` receives is
the SQS endpoint's job: moto implements it.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from context_ledger.local.events import sqs_record
from context_ledger.local.template import Function, Queue, SqsSource, Template

logger = logging.getLogger(__name__)

#: Long-poll wait: short, so that stopping a poller takes at most about this long.
POLL_WAIT_SECONDS = 1
#: Pause after an error talking to the endpoint, so a stopped endpoint does not spin the poller.
ERROR_PAUSE_SECONDS = 1.0


@dataclass
class DeliveryCounts:
    """What a poller received: messages, and how many of them were a second or later delivery
    (a failed message, or one whose batch outlasted the visibility timeout, comes back)."""

    received: int = 0
    redelivered: int = 0

    def add(self, messages: list[dict[str, Any]]) -> None:
        self.received += len(messages)
        self.redelivered += sum(
            int(m.get("Attributes", {}).get("ApproximateReceiveCount", "1")) > 1 for m in messages
        )


@dataclass(frozen=True)
class LocalQueue:
    logical_id: str
    name: str
    url: str
    arn: str


def create_queues(client: Any, template: Template, *, suffix: str) -> dict[str, LocalQueue]:
    """Create every queue of the template; returns them by logical id."""
    created: dict[str, LocalQueue] = {}
    for queue in template.queues_in_creation_order():
        name = queue.queue_name or _generated_name(queue, suffix)
        attributes = dict(queue.attributes)
        if queue.dead_letter_queue:
            dlq = created[queue.dead_letter_queue]
            attributes["RedrivePolicy"] = json.dumps(
                {"deadLetterTargetArn": dlq.arn, "maxReceiveCount": queue.max_receive_count}
            )
        url = client.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
        arn = client.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        created[queue.logical_id] = LocalQueue(queue.logical_id, name, url, arn)
        logger.info("queue %s: %s", queue.logical_id, url)
    return created


def delete_queues(client: Any, queues: Mapping[str, LocalQueue]) -> None:
    for queue in queues.values():
        try:
            client.delete_queue(QueueUrl=queue.url)
        except (BotoCoreError, ClientError) as exc:
            logger.warning("could not delete queue %s: %s", queue.name, exc)


def _generated_name(queue: Queue, suffix: str) -> str:
    name = f"local-{queue.logical_id}-{suffix}"
    return f"{name}.fifo" if queue.fifo else name


class QueuePoller:
    """Lambda's event source mapping for one SQS event source of one function."""

    def __init__(
        self,
        client: Any,
        *,
        function: Function,
        source: SqsSource,
        queue: LocalQueue,
        invoke: Callable[[str, Any], Any],
        region: str,
    ) -> None:
        self._client = client
        self._function = function
        self._source = source
        self._queue = queue
        self._invoke = invoke
        self._region = region
        #: updated by the poller's thread only; read by whoever reports on the queue
        self.counts = DeliveryCounts()
        self._stopping = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"sqs-{function.logical_id}-{source.event}", daemon=True
        )

    @property
    def queue(self) -> LocalQueue:
        return self._queue

    def start(self) -> None:
        self._thread.start()

    def request_stop(self) -> None:
        self._stopping.set()

    def join(self) -> None:
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                messages = self._next_batch()
                if messages:
                    self._process(messages)
            except (BotoCoreError, ClientError) as exc:
                if not self._stopping.is_set():
                    logger.warning("polling %s failed: %s", self._queue.name, exc)
                    self._stopping.wait(ERROR_PAUSE_SECONDS)

    def _receive(self, count: int, wait_seconds: int) -> list[dict[str, Any]]:
        response = self._client.receive_message(
            QueueUrl=self._queue.url,
            MaxNumberOfMessages=max(1, min(10, count)),
            WaitTimeSeconds=wait_seconds,
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        return response.get("Messages", [])

    def _next_batch(self) -> list[dict[str, Any]]:
        size = self._source.batch_size
        batch = self._receive(size, POLL_WAIT_SECONDS)
        if not batch or self._source.batching_window_seconds <= 0:
            return batch
        deadline = time.monotonic() + self._source.batching_window_seconds
        while len(batch) < size and not self._stopping.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            wait = min(POLL_WAIT_SECONDS, math.ceil(remaining))
            batch += self._receive(size - len(batch), wait)
        return batch

    def _process(self, messages: list[dict[str, Any]]) -> None:
        self.counts.add(messages)
        event = {
            "Records": [
                sqs_record(m, queue_arn=self._queue.arn, region=self._region) for m in messages
            ]
        }
        name = self._function.logical_id
        try:
            result = self._invoke(name, event)
        except Exception:
            logger.exception(
                "%s failed on %d messages from %s; they return after the visibility timeout",
                name,
                len(messages),
                self._queue.name,
            )
            return
        failed = self._failed_ids(result, {m["MessageId"] for m in messages})
        if failed is None:
            logger.error(
                "%s answered an invalid batchItemFailures; the batch of %d counts as failed",
                name,
                len(messages),
            )
            return
        if failed:
            logger.info("%s reported %d of %d messages as failed", name, len(failed), len(messages))
        self._delete([m for m in messages if m["MessageId"] not in failed])

    def _failed_ids(self, result: Any, batch_ids: set[str]) -> set[str] | None:
        """The ids to keep; None when the answer makes the whole batch a failure.

        Lambda's rules for ``ReportBatchItemFailures``: no answer or an empty list is a full
        success; an item without a valid ``itemIdentifier`` from the batch fails the batch.
        """
        if not self._source.report_item_failures or result is None:
            return set()
        if not isinstance(result, dict):
            return None
        items = result.get("batchItemFailures") or []
        if not isinstance(items, list):
            return None
        failed: set[str] = set()
        for item in items:
            identifier = item.get("itemIdentifier") if isinstance(item, dict) else None
            if not identifier or identifier not in batch_ids:
                return None
            failed.add(identifier)
        return failed

    def _delete(self, messages: list[dict[str, Any]]) -> None:
        for start in range(0, len(messages), 10):
            chunk = messages[start : start + 10]
            response = self._client.delete_message_batch(
                QueueUrl=self._queue.url,
                Entries=[
                    {"Id": str(index), "ReceiptHandle": m["ReceiptHandle"]}
                    for index, m in enumerate(chunk)
                ],
            )
            for failure in response.get("Failed", []):
                logger.warning("could not delete a message from %s: %s", self._queue.name, failure)
