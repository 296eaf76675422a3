"""docs/deploy.md's path from a deployed, empty stack to a first retrieval, through the real
local edge: MigrateFunction invoked with the bootstrap sample (as ``aws lambda invoke`` does),
then the CLI's client commands with the admin key it answered."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from api_support import empty_database

from context_ledger.local.runtime import LocalRuntime

ROOT = Path(__file__).resolve().parents[2]
BOOTSTRAP = json.loads((ROOT / "events" / "migrate-bootstrap.json").read_text(encoding="utf-8"))
CL = str(Path(sys.executable).parent / "context-ledger")
HANDBOOK = """# Refunds

A refund is authorised when the amount is at most what the customer paid.
"""


def _cl(env: dict[str, str], *argv: str) -> str:
    """``context-ledger ARGV`` in a shell of its own; its stdout, or the test fails."""
    ran = subprocess.run(
        [CL, *argv], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert ran.returncode == 0, ran.stderr
    return ran.stdout


@pytest.fixture
def empty_stack(runtime: LocalRuntime, db: str) -> LocalRuntime:
    """The session's runtime over a database that holds no organisation (a stack just deployed)."""
    empty_database(db)
    return runtime


def test_the_bootstrap_key_takes_an_empty_stack_to_a_first_retrieval(
    empty_stack: LocalRuntime, tmp_path: Path
) -> None:
    answer = empty_stack.invoke("MigrateFunction", BOOTSTRAP)
    assert answer["status"] == "created", answer

    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("KEYSTONE_", "CONTEXT_LEDGER_", "AWS_ENDPOINT_URL"))
        and k != "DATABASE_URL"
    }
    env |= {
        "CONTEXT_LEDGER_HOME": str(tmp_path / "home"),
        "CONTEXT_LEDGER_URL": empty_stack.url,
        "CONTEXT_LEDGER_TOKEN": answer["adminApiKey"],
    }
    space = _cl(env, "space", "create", "Payments", "--level", "team").strip()
    space_id = space.removeprefix("SPACE_ID=")
    source = _cl(env, "source", "create", "handbook", "--space", space_id, "--kind", "docs")
    folder = tmp_path / "handbook"
    folder.mkdir()
    (folder / "refunds.md").write_text(HANDBOOK, encoding="utf-8")
    _cl(env, "ingest", str(folder), "--source", source.strip().removeprefix("SOURCE_ID="))
    query = "when is a refund authorised"
    found = json.loads(_cl(env, "search", query, "--space", space_id, "--json"))

    assert space.startswith("SPACE_ID=")
    assert [chunk["path"] for chunk in found["chunks"]] == ["refunds.md"]


def test_a_second_bootstrap_of_the_stack_is_refused(empty_stack: LocalRuntime) -> None:
    first = empty_stack.invoke("MigrateFunction", BOOTSTRAP)

    second = empty_stack.invoke("MigrateFunction", BOOTSTRAP)

    assert second["status"] == "refused"
    assert second["organisationId"] == first["organisationId"]


def test_an_event_that_is_neither_cloudformations_nor_a_bootstrap_is_told_so(
    empty_stack: LocalRuntime,
) -> None:
    answer = empty_stack.invoke("MigrateFunction", {"organisation": "Acme"})

    assert answer == {"status": "invalid", "message": '"action" must be "bootstrap"'}
