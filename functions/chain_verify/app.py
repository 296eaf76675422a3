"""Chain verify: the daily schedule verifies and checkpoints every evidence chain."""

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.typing import LambdaContext

from context_ledger.evidence.verify_job import METRICS_NAMESPACE, verify_all_chains

logger = Logger()
metrics = Metrics(namespace=METRICS_NAMESPACE)


@metrics.log_metrics
@logger.inject_lambda_context
def handler(event: dict, context: LambdaContext) -> dict:
    return verify_all_chains(metrics=metrics)
