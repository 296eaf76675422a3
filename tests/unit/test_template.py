"""Rules the production template must keep (template.yaml at the repository root)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from context_ledger.local.cfn import Resolver
from context_ledger.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"
SERVERLESS_FUNCTION = "AWS::Serverless::Function"


class _CfnLoader(yaml.SafeLoader):
    """Reads CloudFormation short forms (!Ref x) as their long forms ({"Ref": "x"})."""


def _intrinsic(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    name = "Ref" if suffix == "Ref" else f"Fn::{suffix}"
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
        if suffix == "GetAtt":
            value = value.split(".", 1)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    return {name: value}


_CfnLoader.add_multi_constructor("!", _intrinsic)


@cache
def _template() -> dict[str, Any]:
    return yaml.load(TEMPLATE.read_text(encoding="utf-8"), Loader=_CfnLoader)  # noqa: S506


def _resources(kind: str | None = None) -> dict[str, dict[str, Any]]:
    resources = _template()["Resources"]
    return {k: v for k, v in resources.items() if kind is None or v["Type"] == kind}


def _function_props(logical_id: str) -> dict[str, Any]:
    """A function's properties with the Globals it inherits (scalars only; enough here)."""
    merged = dict(_template().get("Globals", {}).get("Function", {}))
    merged.update(_resources()[logical_id].get("Properties", {}))
    return merged


def _ref(value: Any) -> str | None:
    if isinstance(value, dict):
        if "Ref" in value:
            return value["Ref"]
        if "Fn::GetAtt" in value:
            return value["Fn::GetAtt"][0]
    return None


def _events(logical_id: str, kind: str) -> dict[str, dict[str, Any]]:
    events = _resources()[logical_id].get("Properties", {}).get("Events", {})
    return {name: e.get("Properties", {}) for name, e in events.items() if e["Type"] == kind}


FUNCTIONS = sorted(_resources(SERVERLESS_FUNCTION))


def test_the_expected_functions_are_declared() -> None:
    assert {
        "AuthorizerFunction",
        "SpacesFunction",
        "AttributionWriterFunction",
        "ChainVerifyFunction",
        "MigrateFunction",
    } <= set(FUNCTIONS)


@pytest.mark.parametrize("function", FUNCTIONS)
def test_every_function_runs_python_312_on_the_shared_layer(function: str) -> None:
    props = _function_props(function)
    assert props["Runtime"] == "python3.12"
    assert props["Architectures"] == ["x86_64"]  # sam build installs host (x86_64) wheels
    assert {"Ref": "SharedLayer"} in props["Layers"]
    assert props["Handler"] == "app.handler"


def test_the_shared_layer_is_built_from_shared() -> None:
    layer = _resources()["SharedLayer"]
    assert layer["Type"] == "AWS::Serverless::LayerVersion"
    assert layer["Properties"]["ContentUri"] == "shared/"
    assert layer["Properties"]["CompatibleRuntimes"] == ["python3.12"]
    assert layer["Metadata"]["BuildMethod"] == "python3.12"


@pytest.mark.parametrize("function", FUNCTIONS)
def test_every_code_uri_holds_an_app_py_with_a_handler(function: str) -> None:
    code_uri = _resources()[function]["Properties"]["CodeUri"]
    assert code_uri.startswith("functions/")
    assert code_uri.endswith("/")
    app = ROOT / code_uri / "app.py"
    assert app.is_file(), f"{function}: {app.relative_to(ROOT)} is missing"
    text = app.read_text(encoding="utf-8")
    assert re.search(r"^(handler\s*=|def handler\b|from \S+ import .*\bhandler\b)", text, re.M), (
        f"{app.relative_to(ROOT)} does not expose handler"
    )


def test_globals_carry_the_shared_environment() -> None:
    variables = _template()["Globals"]["Function"]["Environment"]["Variables"]
    assert variables["KEYSTONE_ENVIRONMENT"] == "aws"
    assert variables["POWERTOOLS_SERVICE_NAME"] == "context-ledger"
    assert {
        "POWERTOOLS_LOG_LEVEL",
        "KEYSTONE_DATABASE_SECRET_ARN",
        "KEYSTONE_AUTH_JWKS_URL",
        "KEYSTONE_AUTH_ISSUER",
        "KEYSTONE_AUTH_AUDIENCE",
        "KEYSTONE_EVIDENCE_HMAC_SECRET_ARN",
        "KEYSTONE_EVIDENCE_KEY_ID",
        "KEYSTONE_ATTRIBUTION_QUEUE_URL",
        "KEYSTONE_CONTEXT_SEARCH_BACKEND",
        "KEYSTONE_CONTEXT_HNSW_EF_SEARCH",
        "KEYSTONE_CONTEXT_LEVEL_WEIGHTS",
        "KEYSTONE_CONTEXT_EMBEDDINGS_URL",
        "KEYSTONE_CONTEXT_EMBEDDINGS_MODEL",
        "KEYSTONE_CONTEXT_EMBEDDINGS_DIMENSIONS",
        "KEYSTONE_CONTEXT_EMBEDDINGS_INTERNAL_HOSTS",
        "KEYSTONE_MODELS_PROVIDER_URL",
        "KEYSTONE_MODELS_CONTEXT_LINK_WAIT_MS",
    } <= set(variables)
    # Secrets travel as ARNs, never as values.
    assert not {"KEYSTONE_EVIDENCE_HMAC_KEY", "DATABASE_URL"} & set(variables)


@pytest.mark.parametrize("function", FUNCTIONS)
def test_every_function_is_traced_with_xray(function: str) -> None:
    # Globals, not per function: a new function is traced too (tests/integration/test_tracing.py
    # checks that its handler is a subsegment).
    assert _template()["Globals"]["Function"]["Tracing"] == "Active"
    assert _function_props(function)["Tracing"] == "Active"


#: The deployment settings the spec names (retrieval-and-attribution.md); each is the
#: operator's to set, so each must be a template parameter reaching every function.
SPEC_VARIABLES = (
    "KEYSTONE_CONTEXT_SEARCH_BACKEND",
    "KEYSTONE_CONTEXT_LEVEL_WEIGHTS",
    "KEYSTONE_CONTEXT_EMBEDDINGS_URL",
    "KEYSTONE_CONTEXT_EMBEDDINGS_MODEL",
    "KEYSTONE_CONTEXT_EMBEDDINGS_DIMENSIONS",
    "KEYSTONE_CONTEXT_EMBEDDINGS_INTERNAL_HOSTS",
    "KEYSTONE_CONTEXT_EMBEDDINGS_EXTERNAL",
    "KEYSTONE_MODELS_CONTEXT_LINK_WAIT_MS",
)


@pytest.mark.parametrize("variable", SPEC_VARIABLES)
def test_every_setting_the_spec_names_is_a_deployment_parameter(variable: str) -> None:
    variables = _template()["Globals"]["Function"]["Environment"]["Variables"]
    assert variable in variables, f"{variable} cannot be set in a deployment"
    assert _ref(variables[variable]) in _template()["Parameters"]


@pytest.mark.parametrize(("value", "external"), [("", None), ("true", True), ("false", False)])
def test_every_value_of_the_embeddings_locality_parameter_is_a_setting(
    value: str, external: bool | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    variables = _template()["Globals"]["Function"]["Environment"]["Variables"]
    parameter = _template()["Parameters"][_ref(variables["KEYSTONE_CONTEXT_EMBEDDINGS_EXTERNAL"])]
    assert parameter["Default"] == ""
    assert value in parameter["AllowedValues"]
    monkeypatch.setenv("KEYSTONE_CONTEXT_EMBEDDINGS_EXTERNAL", value)

    assert Settings().embeddings_external is external


def test_the_attribution_writer_consumes_the_queue_safely() -> None:
    (sqs,) = _events("AttributionWriterFunction", "SQS").values()
    assert sqs["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert sqs["BatchSize"] == 10
    queue = _resources()[_ref(sqs["Queue"])]
    timeout = _function_props("AttributionWriterFunction")["Timeout"]
    assert queue["Properties"]["VisibilityTimeout"] >= 6 * timeout

    redrive = queue["Properties"]["RedrivePolicy"]
    assert 1 <= redrive["maxReceiveCount"] <= 10
    dlq_id = _ref(redrive["deadLetterTargetArn"])
    dlq = _resources()[dlq_id]
    assert dlq["Type"] == "AWS::SQS::Queue"
    assert dlq["Properties"]["MessageRetentionPeriod"] == 14 * 24 * 3600
    alarms = [
        a["Properties"]
        for a in _resources("AWS::CloudWatch::Alarm").values()
        if any(_ref(d["Value"]) == dlq_id for d in a["Properties"].get("Dimensions", []))
    ]
    assert alarms, "no alarm watches the dead-letter queue"
    assert alarms[0]["MetricName"] == "ApproximateNumberOfMessagesVisible"


@pytest.mark.parametrize("function", ["AttributionWriterFunction", "ChainVerifyFunction"])
def test_chain_functions_may_read_every_hmac_key_version(function: str) -> None:
    policies = _resources()[function]["Properties"]["Policies"]
    statements = [st for p in policies if "Statement" in p for st in p["Statement"]]
    hmac = [st for st in statements if st["Resource"] == {"Ref": "EvidenceHmacSecret"}]
    assert hmac, f"{function} cannot read the HMAC secret"
    assert set(hmac[0]["Action"]) == {
        "secretsmanager:GetSecretValue",
        "secretsmanager:ListSecretVersionIds",  # old keys verify old entries
    }
    database = [p for p in policies if "AWSSecretsManagerGetSecretValuePolicy" in p]
    assert len(database) == 1


def test_chain_verification_runs_daily() -> None:
    schedules = {
        **_events("ChainVerifyFunction", "ScheduleV2"),
        **_events("ChainVerifyFunction", "Schedule"),
    }
    expressions = [s["ScheduleExpression"] for s in schedules.values()]
    assert "rate(1 day)" in expressions


def test_every_http_route_is_on_the_api_behind_the_default_authorizer() -> None:
    api = _resources()["HttpApi"]["Properties"]
    assert api["Auth"]["DefaultAuthorizer"] == "KeystoneAuthorizer"
    authorizer = api["Auth"]["Authorizers"]["KeystoneAuthorizer"]
    assert _ref(authorizer["FunctionArn"]) == "AuthorizerFunction"
    assert authorizer["AuthorizerPayloadFormatVersion"] == "2.0"
    assert authorizer["EnableSimpleResponses"] is True

    routes = []
    for function in FUNCTIONS:
        for name, event in _events(function, "HttpApi").items():
            assert event.get("ApiId") == {"Ref": "HttpApi"}, f"{function}.{name} has no ApiId"
            assert "Auth" not in event, f"{function}.{name} overrides the default authorizer"
            # the memory API's paths are the spec's: /api/context/{project_id}[...]; the MCP
            # server's is the issue's, /mcp
            path = event["Path"]
            assert path.startswith(("/api/v1/", "/api/context/")) or path == "/mcp", name
            routes.append((event["Method"].upper(), event["Path"]))
    assert len(routes) == len(set(routes)), "a route is declared twice"
    assert ("POST", "/api/v1/context/spaces") in routes


def test_a_jwks_without_its_issuer_is_refused_at_deploy_time() -> None:
    """Empty JwksUrl is an API-keys-only stack; a JWKS without the issuer its tokens carry
    would refuse every token, so the change set fails instead (a template rule)."""
    parameters = _template()["Parameters"]
    assert parameters["JwksUrl"]["Default"] == parameters["JwtIssuer"]["Default"] == ""
    rule = _template()["Rules"]["IssuerWithJwks"]
    assert rule["RuleCondition"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": "JwksUrl"}, ""]}]}
    [assertion] = rule["Assertions"]
    assert assertion["Assert"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": "JwtIssuer"}, ""]}]}


@pytest.mark.parametrize(("sweep", "state"), [("enabled", "ENABLED"), ("disabled", "DISABLED")])
def test_the_minutely_sweep_runs_unless_chain_sweep_is_disabled(sweep: str, state: str) -> None:
    resolver = Resolver(parameters={"ChainSweep": sweep}, conditions=_template()["Conditions"])
    schedules = _events("ChainVerifyFunction", "ScheduleV2")

    assert resolver.resolve(schedules["Minutely"]["State"]) == state
    assert "State" not in schedules["Daily"]  # the daily full run runs whatever the sweep
    assert _template()["Parameters"]["ChainSweep"]["Default"] == "enabled"


def test_the_bootstrap_function_is_a_stack_output() -> None:
    assert _template()["Outputs"]["MigrateFunctionName"]["Value"] == {"Ref": "MigrateFunction"}


def test_the_mcp_server_serves_mcp_with_no_secret_and_the_api_url_parameter() -> None:
    routes = {(e["Method"], e["Path"]) for e in _events("McpFunction", "HttpApi").values()}
    props = _resources()["McpFunction"]["Properties"]
    variables = props["Environment"]["Variables"]

    assert routes == {("POST", "/mcp"), ("GET", "/mcp"), ("DELETE", "/mcp")}
    # Every call it makes is the API's, with the caller's credential: it reads nothing itself.
    assert "Policies" not in props
    assert _ref(variables["KEYSTONE_MCP_API_URL"]) == "McpApiUrl"
    assert _template()["Parameters"]["McpApiUrl"]["Default"] == ""
    # Its packages beyond the layer, and the client package outside its folder (Makefile).
    assert _resources()["McpFunction"]["Metadata"]["BuildMethod"] == "makefile"
    assert (ROOT / props["CodeUri"] / "Makefile").read_text().count("build-McpFunction:") == 1


def test_the_authorizer_is_not_itself_routed() -> None:
    assert not _events("AuthorizerFunction", "HttpApi")


def test_migrations_run_on_deploy_before_the_code_that_needs_them() -> None:
    migrations = _resources()["DatabaseMigrations"]
    assert migrations["Type"] == "Custom::DatabaseMigrations"
    assert _ref(migrations["Properties"]["ServiceToken"]) == "MigrateFunction"
    assert "Version" in migrations["Properties"]
    for function in FUNCTIONS:
        if function != "MigrateFunction":
            depends = _resources()[function].get("DependsOn", [])
            assert "DatabaseMigrations" in ([depends] if isinstance(depends, str) else depends), (
                f"{function} may go live before its schema exists"
            )


def test_an_existing_database_replaces_the_created_one() -> None:
    for logical_id in ("DatabaseCluster", "DatabaseInstance", "DatabaseSecret"):
        assert _resources()[logical_id]["Condition"] == "CreateDatabase"
    cluster = _resources()["DatabaseCluster"]
    assert cluster["DeletionPolicy"] == "Snapshot"
    assert cluster["Properties"]["StorageEncrypted"] is True
    assert _resources()["EvidenceHmacSecret"]["DeletionPolicy"] == "Retain"


def _cfn_lint() -> str:
    sibling = Path(sys.executable).with_name("cfn-lint")
    found = str(sibling) if sibling.exists() else shutil.which("cfn-lint")
    if found is None:
        pytest.fail("cfn-lint is not installed (pip install -e '.[dev]')")
    return found


def test_cfn_lint_passes() -> None:
    result = subprocess.run(
        [_cfn_lint(), "--", str(TEMPLATE)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
