"""The LlamaIndex retriever of the client package (extra ``[llamaindex]``) against the local
stack: scored nodes in rank order carrying path, lines, score, level and the attribution id, and
a prompt text that cites the chunk without its ids."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from api_support import run_coroutine
from llama_index.core.schema import MetadataMode

from context_ledger.auth.principal import SCOPE_CONTEXT_ADMIN
from context_ledger_client import ContextLedger, NotFoundError
from context_ledger_client.llamaindex import ContextLedgerRetriever

README = Path(__file__).resolve().parents[2] / "clients/python/README.md"
CODE = '''def authorise_refund(order, amount):
    """A refund is authorised when the amount is at most what was paid."""
    return amount <= order.paid and check_fraud(order)


def check_fraud(order):
    return order.score < 0.8
'''


def indexed_space(runtime, admin: str, folder: Path) -> str:
    (folder / "refunds.py").write_text(CODE)
    with ContextLedger(runtime.url, admin) as cl:
        team = cl.create_space("Payments", level="team")
        source = cl.create_source(team.id, "billing code", kind="codebase")
        cl.index_folder(source.id, folder)
    return team.id


def test_the_retriever_returns_scored_cited_nodes_sync_and_async(
    runtime, org, token, tmp_path
) -> None:
    admin = token(org, "root", SCOPE_CONTEXT_ADMIN)
    space_id = indexed_space(runtime, admin, tmp_path)
    retriever = ContextLedgerRetriever(
        base_url=runtime.url, token=admin, space_id=space_id, token_budget=1000
    )

    nodes = retriever.retrieve("authorise refund")
    again = run_coroutine(retriever.aretrieve("authorise refund"))

    top, related = nodes
    assert top.node.get_content().startswith("def authorise_refund")
    meta = top.node.metadata
    assert {k: meta[k] for k in ("path", "lines", "symbol", "level", "kind")} == {
        "path": "refunds.py",
        "lines": "1-3",
        "symbol": "authorise_refund",
        "level": "team",
        "kind": "codebase",
    }
    assert top.score == meta["score"] > 0
    assert meta["tokens"] > 0
    assert top.node.node_id == meta["chunk_id"]
    assert (related.node.metadata["symbol"], related.node.metadata["related_relation"]) == (
        "check_fraud",
        "calls",
    )
    assert related.node.metadata["related_to"] == top.node.node_id
    assert meta["attribution_id"] == related.node.metadata["attribution_id"]
    with ContextLedger(runtime.url, admin) as cl:
        record = cl.wait_for_attribution(meta["attribution_id"])
    assert record.request_id == meta["request_id"]
    assert [n.node.metadata["path"] for n in again] == ["refunds.py", "refunds.py"]
    assert again[0].node.metadata["attribution_id"] != meta["attribution_id"]  # its own record


def test_the_prompt_text_cites_the_chunk_and_leaves_the_ids_out(
    runtime, org, token, tmp_path
) -> None:
    admin = token(org, "root", SCOPE_CONTEXT_ADMIN)
    space_id = indexed_space(runtime, admin, tmp_path)
    retriever = ContextLedgerRetriever(base_url=runtime.url, token=admin, space_id=space_id)

    top = retriever.retrieve("authorise refund")[0].node
    prompt = top.get_content(metadata_mode=MetadataMode.LLM)

    header, text = prompt.split("\n\n", 1)
    assert header.splitlines() == [
        "path: refunds.py",
        "lines: 1-3",
        "symbol: authorise_refund",
        "language: python",
        "level: team",
        "kind: codebase",
    ]
    assert text.startswith("def authorise_refund")
    assert top.metadata["attribution_id"] not in prompt
    assert top.get_content(metadata_mode=MetadataMode.EMBED) == prompt


def test_a_space_the_caller_cannot_see_is_the_apis_not_found(runtime, org, token, tmp_path):
    space_id = indexed_space(runtime, token(org, "root", SCOPE_CONTEXT_ADMIN), tmp_path)
    outsider = ContextLedgerRetriever(
        base_url=runtime.url, token=token(org, "mallory"), space_id=space_id
    )

    with pytest.raises(NotFoundError) as refused:
        outsider.retrieve("authorise refund")

    assert refused.value.code == "context.space.not_found"


def test_the_readme_llamaindex_example_runs_as_written(runtime, org, token, tmp_path) -> None:
    example = README.read_text().split("## LlamaIndex", 1)[1].split("```python\n")[1]
    example = example.split("```", 1)[0]
    assert len([line for line in example.splitlines() if line.strip()]) <= 15
    admin = token(org, "root", SCOPE_CONTEXT_ADMIN)
    space_id = indexed_space(runtime, admin, tmp_path)
    env = {
        **os.environ,
        "CONTEXT_LEDGER_URL": runtime.url,
        "CONTEXT_LEDGER_TOKEN": admin,
        "SPACE_ID": space_id,
    }

    ran = subprocess.run(
        [sys.executable, "-c", example], env=env, capture_output=True, text=True, timeout=120
    )

    assert ran.returncode == 0, ran.stderr
    assert "refunds.py:1-3 authorise_refund team" in ran.stdout
    assert "attribution " in ran.stdout


def test_a_retriever_without_a_credential_is_refused_when_made() -> None:
    with pytest.raises(ValueError, match="bearer credential"):
        ContextLedgerRetriever(base_url="http://127.0.0.1:9", token="")
