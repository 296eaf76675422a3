"""MemoryReembedFunction: re-embeds memories whose vector is of another model than the configured
one, after a deploy that changes it and on the sweep schedule (memory/reembed_job.py)."""

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from context_ledger.memory.reembed_job import handle
from context_ledger.settings import get_settings
from context_ledger.tracing import trace_handler

logger = Logger()
get_settings()  # invalid configuration fails the cold start, naming the variable


@logger.inject_lambda_context
@trace_handler
def handler(event: dict, context: LambdaContext) -> dict:
    return handle(event, context)
