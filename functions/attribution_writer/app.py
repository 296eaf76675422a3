"""Attribution writer: SQS batches of attribution events → evidence chain (partial failures)."""

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.typing import LambdaContext

from context_ledger.attribution.writer import record_handler
from context_ledger.tracing import trace_handler

logger = Logger()


@logger.inject_lambda_context
@trace_handler
def handler(event: dict, context: LambdaContext) -> dict:
    # A processor holds the batch it is processing, so each call gets its own: the local
    # runtime may run two batches of this function at once in one process.
    processor = BatchProcessor(event_type=EventType.SQS)
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
