"""Attribution links, the compliance-evidence listing and `context-ledger verify` on a real
PostgreSQL: the races and orderings the HTTP tests cannot provoke reliably."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from evidence_support import local_key_ring

from context_ledger.attribution.events import AttributionEvent
from context_ledger.attribution.links import link_response
from context_ledger.attribution.writer import write_attribution
from context_ledger.auth.principal import Principal
from context_ledger.cli import main
from context_ledger.db import connection
from context_ledger.evidence.chain import org_chain
from context_ledger.evidence.keys import KeyRing
from context_ledger.evidence.listing import list_evidence

KEY = "lookup-test-key-" + "k" * 32


@pytest.fixture
def keys(db: str, tmp_path, monkeypatch: pytest.MonkeyPatch) -> Iterator[KeyRing]:
    with local_key_ring(monkeypatch, database_url=db, home=str(tmp_path), key=KEY) as ring:
        yield ring


@pytest.fixture
def org_id(db: str) -> uuid.UUID:
    with psycopg.connect(db) as conn:
        return conn.execute(
            "INSERT INTO organisations (name) VALUES ('Acme') RETURNING id"
        ).fetchone()[0]


def attribution(org_id: uuid.UUID, user_id: str = "alice") -> AttributionEvent:
    return AttributionEvent.model_validate(
        {
            "recordId": str(uuid.uuid4()),
            "category": "context_attribution",
            "orgId": str(org_id),
            "record": {
                "requestId": f"req_{uuid.uuid4().hex}",
                "attributionId": str(uuid.uuid4()),
                "userId": user_id,
            },
        }
    )


def test_a_duplicate_link_racing_an_uncommitted_one_waits_and_adds_nothing(keys, org_id) -> None:
    event = attribution(org_id)
    with connection() as conn:
        write_attribution(conn, event=event, keys=keys)
    alice = Principal(org_id=org_id, user_id="alice", client_id=None)
    request = {
        "attribution_id": event.record.attribution_id,
        "response_id": "chatcmpl-1",
        "keys": keys,
    }
    outcomes: list[bool] = []

    def duplicate() -> None:
        with connection() as conn:
            outcomes.append(link_response(conn, alice, **request))

    racer = threading.Thread(target=duplicate)
    with connection() as first:
        assert link_response(first, alice, **request) is True
        racer.start()
        racer.join(timeout=1.0)
        assert racer.is_alive(), "the duplicate waits for the first link's transaction"
    racer.join()

    assert outcomes == [False]
    with connection() as conn:
        links = conn.execute("SELECT count(*) AS n FROM attribution_links").fetchone()["n"]
        entries = conn.execute("SELECT count(*) AS n FROM evidence_chain").fetchone()["n"]
    assert (links, entries) == (1, 2)


def test_entries_sharing_a_timestamp_page_without_loss_or_repeat(keys, org_id) -> None:
    # One transaction: now() is the same for every entry, so only seq orders them.
    with connection() as conn:
        for _ in range(5):
            write_attribution(conn, event=attribution(org_id), keys=keys)

    seen: list[int] = []
    after = None
    with connection() as conn:
        while True:
            page = list_evidence(conn, chain=org_chain(org_id), limit=2, after=after)
            seen += [entry.seq for entry in page.entries]
            if page.next_position is None:
                break
            after = page.next_position

    assert seen == [5, 4, 3, 2, 1]


def test_cli_verify_exits_0_on_clean_chains_and_1_when_one_is_tampered(
    keys, org_id, capsys
) -> None:
    with connection() as conn:
        write_attribution(conn, event=attribution(org_id), keys=keys)
        write_attribution(conn, event=attribution(org_id, "bob"), keys=keys)

    assert main(["verify"]) == 0
    assert f"org:{org_id}: ok, 2 entries checked" in capsys.readouterr().out

    with connection() as conn:
        conn.execute("ALTER TABLE evidence_chain DISABLE TRIGGER evidence_chain_no_update")
        conn.execute(
            "UPDATE evidence_chain SET record = convert_to(replace(convert_from(record, 'UTF8'),"
            " '\"bob\"', '\"eve\"'), 'UTF8') WHERE seq = 2"
        )
        conn.execute("ALTER TABLE evidence_chain ENABLE TRIGGER evidence_chain_no_update")

    assert main(["verify", "--org", str(org_id)]) == 0, "incremental: seq 2 is checkpointed"
    assert main(["verify", "--org", str(org_id), "--full"]) == 1
    out = capsys.readouterr().out
    assert f"org:{org_id}: FAILED at seq 2 (mac mismatch)" in out
    assert "1 chains verified, 1 failed" in out
