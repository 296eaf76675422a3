"""Code-graph test helpers: load a fixture tree, compare edges as path:symbol pairs."""

from __future__ import annotations

from pathlib import Path

from context_ledger.sources.model import Document, EdgeRelation, SymbolEdge

Pair = tuple[str, str]


def load(root: Path) -> list[Document]:
    return [
        Document(path=path.relative_to(root).as_posix(), content=path.read_text())
        for path in sorted(root.rglob("*"))
        if path.suffix in (".go", ".mod", ".py")
    ]


def pairs(edges: list[SymbolEdge], relation: EdgeRelation) -> set[Pair]:
    return {
        (f"{e.from_path}:{e.from_symbol}", f"{e.to_path}:{e.to_symbol}")
        for e in edges
        if e.relation == relation
    }
