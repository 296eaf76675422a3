"""The service's structured logger (Powertools), shared by every module.

Handlers bind the request id as the correlation id, so every line of a request carries it.
"""

from aws_lambda_powertools import Logger

logger = Logger()
