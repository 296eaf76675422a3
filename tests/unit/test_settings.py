"""Settings: every variable parsed once; invalid values name the variable."""

from __future__ import annotations

import pytest

from context_ledger.settings import (
    DEFAULT_HNSW_EF_SEARCH,
    DEFAULT_LEVEL_WEIGHTS,
    SearchBackend,
    SettingsError,
    load_settings,
    parse_level_weights,
    xray_tracing,
)


def test_defaults_need_no_environment() -> None:
    settings = load_settings()

    assert settings.search_backend is SearchBackend.EXACT
    assert settings.hnsw_ef_search == DEFAULT_HNSW_EF_SEARCH
    assert settings.models_context_link_wait_ms == 750
    assert settings.memory_max_candidates == 10_000
    assert settings.effective_level_weights == DEFAULT_LEVEL_WEIGHTS


def test_level_weights_override_the_defaults() -> None:
    settings = load_settings(KEYSTONE_CONTEXT_LEVEL_WEIGHTS="project=1.3, team=0.9")

    assert settings.effective_level_weights["project"] == 1.3
    assert settings.effective_level_weights["team"] == 0.9
    assert settings.effective_level_weights["department"] == 0.92


@pytest.mark.parametrize(
    "raw", ["project", "nowhere=1", "project=0", "project=10.5", "project=1.23456", "team=-1"]
)
def test_invalid_level_weights_refuse_to_start_naming_the_variable(raw: str) -> None:
    with pytest.raises(SettingsError, match="KEYSTONE_CONTEXT_LEVEL_WEIGHTS"):
        load_settings(KEYSTONE_CONTEXT_LEVEL_WEIGHTS=raw)


def test_weights_at_the_bounds_are_accepted() -> None:
    assert parse_level_weights("project=10,team=0.0001") == {"project": 10.0, "team": 0.0001}


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("KEYSTONE_CONTEXT_SEARCH_BACKEND", "faiss"),
        ("KEYSTONE_CONTEXT_HNSW_EF_SEARCH", "0"),
        ("KEYSTONE_CONTEXT_HNSW_EF_SEARCH", "1001"),
        ("KEYSTONE_MODELS_CONTEXT_LINK_WAIT_MS", "soon"),
        ("KEYSTONE_CONTEXT_EMBEDDINGS_DIMENSIONS", "0"),
        ("KEYSTONE_CONTEXT_EMBEDDINGS_URL", "not a url"),
        ("KEYSTONE_CONTEXT_EMBEDDINGS_EXTERNAL", "maybe"),
        ("VENKAI_RETRIEVAL_MAX_CANDIDATES", "0"),
        ("KEYSTONE_MCP_API_URL", "not a url"),
    ],
)
def test_an_invalid_value_names_its_variable(variable: str, value: str) -> None:
    with pytest.raises(SettingsError, match=variable):
        load_settings(**{variable: value})


def test_the_hnsw_candidate_list_size_is_pgvectors_range() -> None:
    assert load_settings(KEYSTONE_CONTEXT_HNSW_EF_SEARCH="1").hnsw_ef_search == 1
    assert load_settings(KEYSTONE_CONTEXT_HNSW_EF_SEARCH="1000").hnsw_ef_search == 1000


def test_aws_mode_requires_a_database_and_a_jwks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    with pytest.raises(SettingsError, match="DATABASE_URL or KEYSTONE_DATABASE_SECRET_ARN"):
        load_settings(KEYSTONE_ENVIRONMENT="aws")


AWS = {
    "KEYSTONE_ENVIRONMENT": "aws",
    "DATABASE_URL": "postgresql://db/x",
    "KEYSTONE_EVIDENCE_CHECKPOINT_BUCKET": "checkpoints",
}


def test_aws_mode_without_a_jwks_takes_api_keys_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KEYSTONE_AUTH_JWKS_URL", raising=False)

    assert load_settings(**AWS).jwks_url is None


def test_aws_mode_with_a_jwks_needs_its_issuer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KEYSTONE_AUTH_ISSUER", raising=False)
    jwks = {"KEYSTONE_AUTH_JWKS_URL": "https://idp.test/jwks.json"}
    issuer = {"KEYSTONE_AUTH_ISSUER": "https://idp.test/"}

    with pytest.raises(SettingsError, match="KEYSTONE_AUTH_ISSUER must be set"):
        load_settings(**AWS, **jwks)
    monkeypatch.setenv("KEYSTONE_AUTH_ISSUER", "")  # the template's empty default
    with pytest.raises(SettingsError, match="KEYSTONE_AUTH_ISSUER must be set"):
        load_settings(**AWS, **jwks)
    assert load_settings(**AWS, **jwks, **issuer).auth_issuer == "https://idp.test/"


def test_aws_mode_refuses_the_placeholder_hmac_key(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SettingsError, match="placeholder"):
        load_settings(
            **AWS,
            KEYSTONE_AUTH_JWKS_URL="https://idp.test/jwks.json",
            KEYSTONE_AUTH_ISSUER="https://idp.test/",
            KEYSTONE_EVIDENCE_HMAC_KEY="change-me",
        )


def test_empty_values_count_as_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEYSTONE_CONTEXT_EMBEDDINGS_URL", "")

    assert load_settings().embeddings_url is None


def test_internal_hosts_are_loopback_or_listed() -> None:
    settings = load_settings(KEYSTONE_CONTEXT_EMBEDDINGS_INTERNAL_HOSTS="embed.internal, 10.0.0.5")

    assert settings.is_internal_host("127.0.0.1")
    assert settings.is_internal_host("[::1]")
    assert settings.is_internal_host("localhost")
    assert settings.is_internal_host("EMBED.internal")
    assert settings.is_internal_host("10.0.0.5")
    assert not settings.is_internal_host("api.openai.com")


def test_an_embeddings_url_needs_a_model() -> None:
    with pytest.raises(SettingsError, match="KEYSTONE_CONTEXT_EMBEDDINGS_MODEL"):
        load_settings(KEYSTONE_CONTEXT_EMBEDDINGS_URL="http://127.0.0.1:8089/v1")


@pytest.mark.parametrize(
    ("variables", "traced"),
    [
        ({}, False),  # outside Lambda: the local runtime, tests, the CLI
        ({"LAMBDA_TASK_ROOT": "/var/task"}, True),
        ({"LAMBDA_TASK_ROOT": "/var/task", "POWERTOOLS_TRACE_DISABLED": "false"}, True),
        ({"LAMBDA_TASK_ROOT": "/var/task", "POWERTOOLS_TRACE_DISABLED": "true"}, False),
        ({"LAMBDA_TASK_ROOT": "/var/task", "POWERTOOLS_TRACE_DISABLED": "1"}, False),
        ({"LAMBDA_TASK_ROOT": "/var/task", "AWS_SAM_LOCAL": "true"}, False),
    ],
    ids=repr,
)
def test_xray_tracing_is_on_in_lambda_unless_turned_off(
    monkeypatch: pytest.MonkeyPatch, variables: dict[str, str], traced: bool
) -> None:
    for name in ("LAMBDA_TASK_ROOT", "POWERTOOLS_TRACE_DISABLED", "AWS_SAM_LOCAL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)

    assert xray_tracing() is traced
