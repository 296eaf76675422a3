"""The scheduled chain verification: checkpoints, incremental runs, tampering, the metric."""

from __future__ import annotations

import importlib.util
import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psycopg
import pytest
from evidence_support import key_ring_from_env
from psycopg.rows import dict_row

from context_ledger.evidence.chain import append, org_chain
from context_ledger.evidence.keys import KeyRing
from context_ledger.evidence.verify_job import verify_all_chains, verify_recent_chains

HANDLER = Path(__file__).parents[2] / "functions" / "chain_verify" / "app.py"
ORG_A = uuid.UUID("00000000-0000-4000-8000-00000000000a")
ORG_B = uuid.UUID("00000000-0000-4000-8000-00000000000b")

LAMBDA_CONTEXT = SimpleNamespace(
    function_name="ChainVerifyFunction",
    memory_limit_in_mb="256",
    invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:ChainVerifyFunction",
    aws_request_id="00000000-0000-4000-8000-000000000001",
)


@pytest.fixture
def keys(db: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[KeyRing]:
    """The service reads its HMAC key and checkpoint directory from the environment, as in
    local mode."""
    with key_ring_from_env(
        monkeypatch,
        KEYSTONE_EVIDENCE_HMAC_KEY="verify-job-test-key-" + "v" * 32,
        KEYSTONE_EVIDENCE_CHECKPOINT_DIR=str(tmp_path / "checkpoints"),
        KEYSTONE_EVIDENCE_HMAC_SECRET_ARN=None,
    ) as ring:
        yield ring


@pytest.fixture
def add(db: str, keys: KeyRing) -> Callable[[uuid.UUID, int], None]:
    def run(org_id: uuid.UUID, n: int) -> None:
        with psycopg.connect(db, row_factory=dict_row) as conn:
            for i in range(n):
                append(
                    conn,
                    chain=org_chain(org_id),
                    category="test",
                    record_id=uuid.uuid4(),
                    org_id=org_id,
                    record={"n": i},
                    keys=keys,
                )
                conn.commit()

    return run


@pytest.fixture
def handler() -> Callable[[dict, Any], dict]:
    spec = importlib.util.spec_from_file_location("chain_verify_app", HANDLER)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.handler


def _checkpoints(db: str) -> list[tuple[str, int]]:
    with psycopg.connect(db) as conn:
        return conn.execute(
            "SELECT chain, seq FROM evidence_checkpoints ORDER BY chain, seq"
        ).fetchall()


def _failure_metric(stdout: str) -> list[float]:
    """ChainVerifyFailures values from the EMF lines Powertools printed."""
    values = []
    for line in stdout.splitlines():
        if line.startswith("{") and '"_aws"' in line:
            document = json.loads(line)
            (directive,) = document["_aws"]["CloudWatchMetrics"]
            if directive["Namespace"] == "ContextLedger" and "ChainVerifyFailures" in document:
                value = document["ChainVerifyFailures"]  # Powertools writes a list of values
                values += value if isinstance(value, list) else [value]
    return values


def test_every_chain_is_verified_and_checkpointed_at_its_head(
    db: str, add: Callable, handler: Callable, capsys: pytest.CaptureFixture[str]
) -> None:
    add(ORG_A, 3)
    add(ORG_B, 2)

    summary = handler({}, LAMBDA_CONTEXT)

    assert summary == {"ok": True, "chains": 2, "checked": 5, "failures": []}
    assert sorted(_checkpoints(db)) == sorted([(org_chain(ORG_A), 3), (org_chain(ORG_B), 2)])
    assert _failure_metric(capsys.readouterr().out) == [0]


def test_the_daily_run_verifies_every_chain_from_seq_1(db: str, add: Callable) -> None:
    add(ORG_A, 3)
    verify_all_chains()
    add(ORG_A, 2)

    assert verify_all_chains()["checked"] == 5
    assert verify_all_chains()["checked"] == 5
    assert _checkpoints(db) == [(org_chain(ORG_A), 3), (org_chain(ORG_A), 5)]


def test_the_sweep_checks_only_entries_appended_since_the_last_verification_checkpoint(
    db: str, add: Callable, handler: Callable
) -> None:
    add(ORG_A, 3)
    assert handler({"scope": "recent"}, LAMBDA_CONTEXT)["checked"] == 3
    add(ORG_A, 2)

    assert handler({"scope": "recent"}, LAMBDA_CONTEXT)["checked"] == 2
    assert verify_recent_chains()["checked"] == 0
    assert _checkpoints(db) == [(org_chain(ORG_A), 3), (org_chain(ORG_A), 5)]


def test_the_sweep_skips_chains_without_recent_appends(db: str, add: Callable) -> None:
    add(ORG_A, 2)
    add(ORG_B, 1)
    with psycopg.connect(db, autocommit=True) as admin:
        admin.execute("ALTER TABLE evidence_chain DISABLE TRIGGER evidence_chain_no_update")
        admin.execute(
            "UPDATE evidence_chain SET created_at = created_at - interval '2 hours'"
            " WHERE chain = %s",
            (org_chain(ORG_B),),
        )
        admin.execute("ALTER TABLE evidence_chain ENABLE TRIGGER evidence_chain_no_update")

    summary = verify_recent_chains()

    # B's moved created_at breaks its envelope: only the daily full run would see it.
    assert (summary["chains"], summary["checked"]) == (1, 2)


def test_a_tampered_chain_is_reported_counted_and_not_checkpointed(
    db: str, add: Callable, handler: Callable, capsys: pytest.CaptureFixture[str]
) -> None:
    add(ORG_A, 3)
    add(ORG_B, 2)
    verify_all_chains()
    add(ORG_A, 3)
    with psycopg.connect(db, autocommit=True) as admin:
        admin.execute("ALTER TABLE evidence_chain DISABLE TRIGGER evidence_chain_no_update")
        admin.execute(
            "UPDATE evidence_chain SET record = set_byte(record, 5, get_byte(record, 5) # 1)"
            " WHERE chain = %s AND seq = 5",
            (org_chain(ORG_A),),
        )
        admin.execute("ALTER TABLE evidence_chain ENABLE TRIGGER evidence_chain_no_update")

    summary = handler({}, LAMBDA_CONTEXT)

    assert summary == {
        "ok": False,
        "chains": 2,
        "checked": 6,
        "failures": [
            {"chain": org_chain(ORG_A), "checked": 4, "firstBadSeq": 5, "reason": "mac mismatch"}
        ],
    }
    assert (org_chain(ORG_A), 6) not in _checkpoints(db)
    assert _failure_metric(capsys.readouterr().out) == [1]


def test_a_rewritten_checkpointed_entry_is_reported(db: str, add: Callable) -> None:
    add(ORG_A, 3)
    verify_all_chains()
    with psycopg.connect(db, autocommit=True) as admin:
        admin.execute("ALTER TABLE evidence_chain DISABLE TRIGGER evidence_chain_no_update")
        admin.execute("DELETE FROM evidence_chain WHERE seq = 3")
        admin.execute("ALTER TABLE evidence_chain ENABLE TRIGGER evidence_chain_no_update")

    (failure,) = verify_all_chains()["failures"]

    assert (failure["chain"], failure["firstBadSeq"]) == (org_chain(ORG_A), 3)


def test_a_chain_whose_head_row_vanished_is_still_verified(db: str, add: Callable) -> None:
    add(ORG_A, 2)
    verify_all_chains()
    with psycopg.connect(db, autocommit=True) as admin:
        admin.execute("DELETE FROM evidence_chain_heads")

    (failure,) = verify_all_chains()["failures"]

    assert failure["chain"] == org_chain(ORG_A)
    assert "no head" in failure["reason"]
