"""Chain verify: the daily schedule verifies every evidence chain in full, the minutely one
(``{"scope": "recent"}``) the chains appended to lately; both checkpoint what verified."""

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.typing import LambdaContext

from context_ledger.attribution.index_check import check_lookup_rows
from context_ledger.evidence.verify_job import (
    METRICS_NAMESPACE,
    verify_all_chains,
    verify_recent_chains,
)
from context_ledger.tracing import trace_handler

logger = Logger()
metrics = Metrics(namespace=METRICS_NAMESPACE)


@metrics.log_metrics
@logger.inject_lambda_context
@trace_handler
def handler(event: dict, context: LambdaContext) -> dict:
    if isinstance(event, dict) and event.get("scope") == "recent":
        return verify_recent_chains(metrics=metrics, index_check=check_lookup_rows)
    return verify_all_chains(metrics=metrics, index_check=check_lookup_rows)
