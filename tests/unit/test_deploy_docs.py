"""docs/deploy.md and the committed deploy files keep up with template.yaml: every parameter in
the guide's table, the required ones in its quick start, the test stack's answers valid for the
template, the bootstrap payload the sample event the tests invoke."""

from __future__ import annotations

import json
import re
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from context_ledger.local.cfn import load_yaml

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "deploy.md"
TEST_STACK = ROOT / "deploy" / "test-stack.parameters.yaml"
QUICK_START = "--parameter-overrides file://deploy/test-stack.parameters.yaml"


@cache
def _parameters() -> dict[str, dict[str, Any]]:
    return load_yaml(ROOT / "template.yaml")["Parameters"]


def _required() -> set[str]:
    return {name for name, spec in _parameters().items() if "Default" not in spec}


def _guide() -> str:
    return GUIDE.read_text(encoding="utf-8")


def _table() -> dict[str, str]:
    """The "## Parameters" table: each parameter its first cell names, with its row."""
    section = _guide().split("\n## Parameters\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return {name: row for row in rows for name in re.findall(r"`(\w+)`", row.split(" | ", 1)[0])}


@pytest.mark.parametrize("name", sorted(_parameters()))
def test_every_template_parameter_is_in_the_guides_table(name: str) -> None:
    assert name in _table(), f"docs/deploy.md's parameter table does not explain {name}"


def test_the_table_explains_no_parameter_the_template_lacks() -> None:
    assert set(_table()) <= set(_parameters())


def test_a_stack_needs_two_answers_and_the_quick_start_gives_them() -> None:
    command = next(block for block in _guide().split("```") if QUICK_START in block)
    given = set(re.findall(r"\b(\w+)=", command.split(QUICK_START, 1)[1]))

    assert _required() == {"VpcId", "SubnetIds"}
    assert given == _required()
    for name in _required():
        assert "Required." in _table()[name]


def _check(name: str, value: object) -> None:
    """What CloudFormation checks of a parameter's value, as SAM passes it (``str``)."""
    spec = _parameters()[name]
    text = str(value)
    if "AllowedValues" in spec:
        assert text in [str(v) for v in spec["AllowedValues"]], f"{name}={text}"
    if "AllowedPattern" in spec:
        assert re.fullmatch(spec["AllowedPattern"], text), f"{name}={text}"
    if spec["Type"] == "Number":
        assert (
            spec.get("MinValue", float("-inf")) <= float(text) <= spec.get("MaxValue", float("inf"))
        ), f"{name}={text}"


def test_the_test_stacks_answers_are_valid_values_of_template_parameters() -> None:
    answers = yaml.safe_load(TEST_STACK.read_text(encoding="utf-8"))

    assert set(answers) <= set(_parameters())
    assert not set(answers) & _required()  # those two are the command line's
    for name, value in answers.items():
        _check(name, value)
    # What makes it a test stack: it pauses when idle and can be deleted.
    assert answers["DatabaseMinCapacity"] == 0
    assert answers["ChainSweep"] == "disabled"
    assert answers["DeletionProtection"] == "false"


def test_the_samconfig_examples_name_only_template_parameters() -> None:
    environments = tomllib.loads((ROOT / "samconfig.toml").read_text(encoding="utf-8"))

    assert environments["test"]["global"]["parameters"]["stack_name"] == "context-ledger-test"
    assert "--config-env test" in _guide()
    for env in environments.values():
        if not isinstance(env, dict):
            continue  # version = 0.1
        overrides = env.get("deploy", {}).get("parameters", {}).get("parameter_overrides", "")
        for name, value in re.findall(r'(\w+)="([^"]*)"', overrides):
            assert name in _parameters(), name
            if "REPLACE" not in value:
                _check(name, value)


def test_the_guides_bootstrap_payload_is_the_sample_event() -> None:
    payload = re.search(r"--payload '(\{[^']*\})'", _guide())
    sample = json.loads((ROOT / "events" / "migrate-bootstrap.json").read_text(encoding="utf-8"))

    assert payload is not None
    assert json.loads(payload.group(1)) == sample
