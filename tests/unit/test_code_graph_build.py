"""``build_code_graph`` over whole snapshots: languages side by side, other documents ignored, and
many same-shaped packages that must never link to each other."""

from __future__ import annotations

import re
from pathlib import Path

from context_ledger.sources.code_graph import build_code_graph
from context_ledger.sources.model import Document, EdgeRelation, SymbolEdge

FIXTURES = Path(__file__).parents[1] / "fixtures" / "code_graph"


def load(root: Path, prefix: str = "") -> list[Document]:
    return [
        Document(path=prefix + path.relative_to(root).as_posix(), content=path.read_text())
        for path in sorted(root.rglob("*"))
        if path.suffix in (".go", ".mod", ".py")
    ]


def replicas(count: int) -> list[Document]:
    """``count`` copies of both fixtures, each its own Go module and Python package, all alike."""
    documents = []
    for i in range(count):
        documents += [
            Document(path=doc.path, content=doc.content.replace("example.com/shop", f"shop{i}"))
            for doc in load(FIXTURES / "go", f"go{i}/")
        ]
        documents += [
            Document(
                path=doc.path.replace("/shop/", f"/shop{i}/"),
                content=re.sub(r"\bshop\b", f"shop{i}", doc.content),
            )
            for doc in load(FIXTURES / "python", f"py{i}/")
        ]
    return documents


def test_go_and_python_graphs_are_built_side_by_side_and_other_documents_are_ignored() -> None:
    go = load(FIXTURES / "go", "services/")
    python = load(FIXTURES / "python", "tools/")
    readme = Document(path="README.md", content="# Shop\n\nCall `Authorise()` first.\n")

    together = build_code_graph([*go, readme, *python])

    assert together == sorted({*build_code_graph(go), *build_code_graph(python)}, key=_order)
    assert {e.relation for e in together} == {EdgeRelation.CALLS, EdgeRelation.TESTED_BY}


def test_a_document_without_a_known_extension_is_read_by_its_language() -> None:
    source = "package tool\n\nfunc Run() { helper() }\n\nfunc helper() {}\n"

    edges = build_code_graph([Document(path="tool/Toolfile", content=source, language="go")])

    assert [(e.from_symbol, e.to_symbol) for e in edges] == [("Run", "helper")]


def test_same_shaped_packages_never_link_to_each_other() -> None:
    single = build_code_graph(replicas(1))
    many = build_code_graph(replicas(20))

    assert len(many) == 20 * len(single)
    assert all(e.from_path.split("/")[0] == e.to_path.split("/")[0] for e in many)


def test_an_empty_snapshot_has_no_edges() -> None:
    assert build_code_graph([]) == []


def _order(edge: SymbolEdge) -> tuple[str, ...]:
    return (edge.relation, edge.from_path, edge.from_symbol, edge.to_path, edge.to_symbol)
