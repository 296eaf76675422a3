"""Retrieval limits of the spec, shared by the retrieve request and the capabilities endpoint."""

DEFAULT_TOKEN_BUDGET = 4096
MAX_TOKEN_BUDGET = 32000
DEFAULT_MAX_PER_LEVEL = 5
MAX_MAX_PER_LEVEL = 50
