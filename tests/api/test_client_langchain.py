"""The LangChain retriever of the client package (extra ``[langchain]``) against the local
stack: documents in rank order carrying path, lines, score, level and the attribution id."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from api_support import run_coroutine

from context_ledger.auth.principal import SCOPE_CONTEXT_ADMIN
from context_ledger_client import ContextLedger
from context_ledger_client.langchain import ContextLedgerRetriever

README = Path(__file__).resolve().parents[2] / "clients/python/README.md"
CODE = '''def authorise_refund(order, amount):
    """A refund is authorised when the amount is at most what was paid."""
    return amount <= order.paid and check_fraud(order)


def check_fraud(order):
    return order.score < 0.8
'''


def test_the_retriever_returns_cited_documents_sync_and_async(runtime, org, token, tmp_path):
    admin = token(org, "root", SCOPE_CONTEXT_ADMIN)
    (tmp_path / "refunds.py").write_text(CODE)
    with ContextLedger(runtime.url, admin) as cl:
        team = cl.create_space("Payments", level="team")
        source = cl.create_source(team.id, "billing code", kind="codebase")
        cl.index_folder(source.id, tmp_path)
    retriever = ContextLedgerRetriever(
        base_url=runtime.url, token=admin, space_id=team.id, token_budget=1000
    )

    documents = retriever.invoke("authorise refund")
    again = run_coroutine(retriever.ainvoke("authorise refund"))

    top, related = documents
    assert top.page_content.startswith("def authorise_refund")
    assert {k: top.metadata[k] for k in ("path", "lines", "symbol", "level", "kind")} == {
        "path": "refunds.py",
        "lines": "1-3",
        "symbol": "authorise_refund",
        "level": "team",
        "kind": "codebase",
    }
    assert top.metadata["score"] > 0
    assert top.metadata["tokens"] > 0
    assert top.metadata["related_to"] is None
    assert (related.metadata["symbol"], related.metadata["related_relation"]) == (
        "check_fraud",
        "calls",
    )
    assert related.metadata["related_to"] == top.id
    assert top.metadata["attribution_id"] == related.metadata["attribution_id"]
    with ContextLedger(runtime.url, admin) as cl:
        record = cl.wait_for_attribution(top.metadata["attribution_id"])
    assert record.request_id == top.metadata["request_id"]
    assert [d.metadata["path"] for d in again] == ["refunds.py", "refunds.py"]
    assert again[0].metadata["attribution_id"] != top.metadata["attribution_id"]  # its own record


def test_the_readme_langchain_example_runs_as_written(runtime, org, token, tmp_path) -> None:
    example = README.read_text().split("```python\n")[2].split("```", 1)[0]
    assert len([line for line in example.splitlines() if line.strip()]) <= 15
    admin = token(org, "root", SCOPE_CONTEXT_ADMIN)
    (tmp_path / "refunds.py").write_text(CODE)
    with ContextLedger(runtime.url, admin) as cl:
        team = cl.create_space("Payments", level="team")
        source = cl.create_source(team.id, "billing code", kind="codebase")
        cl.index_folder(source.id, tmp_path)
    env = {
        **os.environ,
        "CONTEXT_LEDGER_URL": runtime.url,
        "CONTEXT_LEDGER_TOKEN": admin,
        "SPACE_ID": team.id,
    }

    ran = subprocess.run(
        [sys.executable, "-c", example], env=env, capture_output=True, text=True, timeout=120
    )

    assert ran.returncode == 0, ran.stderr
    assert "refunds.py:1-3 authorise_refund team" in ran.stdout
