"""The code graph of one source snapshot: ``calls`` and ``tested_by`` edges between its symbols.

Symbols are named as the chunker names them: Go ``Name`` and ``Recv.Name``, Python ``name``,
``Class`` and ``Class.method``. ``called_by`` is ``calls`` read backwards and is not stored.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence

from context_ledger.sources.code_graph.go import go_call_graph
from context_ledger.sources.code_graph.graph import to_edges
from context_ledger.sources.code_graph.python import python_call_graph
from context_ledger.sources.model import Document, SymbolEdge

__all__ = ["GRAPH_LANGUAGES", "build_code_graph", "graph_language"]

# Languages build_code_graph reads; Go also reads go.mod files, whatever their language.
GRAPH_LANGUAGES = frozenset({"go", "python"})


def build_code_graph(documents: Sequence[Document]) -> list[SymbolEdge]:
    """Edges between the Go and Python symbols of ``documents`` (one source, one index version),
    deduplicated and in a stable order. Other documents are ignored; ``go.mod`` files tell Go
    import paths."""
    go = [doc for doc in documents if graph_language(doc) == "go"]
    python = [doc for doc in documents if graph_language(doc) == "python"]
    edges = to_edges(go_call_graph(go)) | to_edges(python_call_graph(python))
    return sorted(
        edges,
        key=lambda e: (e.relation, e.from_path, e.from_symbol, e.to_path, e.to_symbol),
    )


def graph_language(doc: Document) -> str | None:
    """The graph language a document feeds (``go.mod`` counts as Go), or None."""
    if doc.path.endswith(".go") or posixpath.basename(doc.path) == "go.mod":
        return "go"
    if doc.path.endswith(".py"):
        return "python"
    language = (doc.language or "").lower()
    return language if language in GRAPH_LANGUAGES else None
