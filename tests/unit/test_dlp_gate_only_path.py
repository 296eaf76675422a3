"""The DLP gate is the only code that sends text to the embeddings client.

Read from the source tree: a module that gets hold of the client (imports ``EmbeddingsClient`` or
``get_embeddings_client``) may hand it on, but only ``dlp/gate.py`` calls a method that sends
(``embed``, or the client's private senders). A new call site elsewhere fails this test.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "shared" / "context_ledger"
CODE = [
    *PACKAGE.rglob("*.py"),
    *(ROOT / "functions").rglob("*.py"),
    *(ROOT / "bench").rglob("*.py"),
]
CLIENT_NAMES = {"EmbeddingsClient", "get_embeddings_client"}
SENDING_METHODS = {"embed", "_embed_batch", "_post"}
GATE = PACKAGE / "dlp" / "gate.py"
CLIENT_MODULE = PACKAGE / "embeddings" / "client.py"


def _imports_client(tree: ast.Module) -> bool:
    return any(
        isinstance(node, ast.ImportFrom) and any(a.name in CLIENT_NAMES for a in node.names)
        for node in ast.walk(tree)
    )


def _sending_calls(tree: ast.Module) -> list[int]:
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in SENDING_METHODS
    ]


def test_only_the_gate_sends_text_through_the_embeddings_client() -> None:
    offenders = {}
    holders = []
    for path in CODE:
        if path in (GATE, CLIENT_MODULE):
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        if _imports_client(tree):
            holders.append(path)
            if calls := _sending_calls(tree):
                offenders[str(path.relative_to(ROOT))] = calls

    assert holders, "the scan found the modules that hold the client"
    assert offenders == {}, "these modules call the embeddings client directly, not via the gate"


def test_the_gate_does_send_through_the_client() -> None:
    """The scan looks for the right thing: the gate's own calls are found by it."""
    assert _sending_calls(ast.parse(GATE.read_text()))
