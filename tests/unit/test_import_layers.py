"""The import rule (docs/architecture.md): the edge (HTTP, MCP, CLI, the local runtime) calls
the use cases, the use cases call the domain, everything stands on the floor (database,
settings, errors); nothing imports upward, and no two packages import each other, directly or
round a loop. Read from the code's own imports (the AST, lazy imports inside functions too), so
a new import that breaks the rule fails here, and a new package must be given its layer."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "shared" / "context_ledger"
BENCH = ROOT / "bench"

#: Top layer first. A package may import its own layer or any layer below.
LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    ("edge", frozenset({"cli", "mcp", "http", "local", "bootstrap"})),
    ("use cases", frozenset({"retrieval", "memory", "model_gateway", "attribution"})),
    (
        "domain",
        frozenset(
            {"search", "sources", "dlp", "spaces", "embeddings", "evidence", "auth"}
            | {"ratelimit", "text"}
        ),
    ),
    (
        "floor",
        frozenset({"db", "settings", "errors", "log", "tracing", "cooldown", "aws_secrets"}),
    ),
)
LAYER_OF = {package: index for index, (_, packages) in enumerate(LAYERS) for package in packages}


def imported_modules(path: Path) -> Iterator[str]:
    """Every absolute module an import statement in ``path`` names (``from x import y``: x)."""
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module


def package_of(module: str) -> str | None:
    """``context_ledger.search.fulltext`` -> ``search``; the package's own ``__init__`` -> None."""
    parts = module.split(".")
    return parts[1] if parts[0] == "context_ledger" and len(parts) > 1 else None


@cache
def package_imports() -> dict[str, set[str]]:
    """package -> the other packages its modules import."""
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE)
        if len(relative.parts) == 1 and relative.name == "__init__.py":
            continue
        source = relative.parts[0].removesuffix(".py")
        targets = graph.setdefault(source, set())
        for module in imported_modules(path):
            target = package_of(module)
            if target is not None and target != source:
                targets.add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def bench_imports() -> dict[str, set[str]]:
    """bench script -> the bench scripts it imports (they import each other by bare name)."""
    scripts = {path.stem for path in BENCH.glob("*.py")}
    return {
        path.stem: {m for m in imported_modules(path) if m in scripts and m != path.stem}
        for path in BENCH.glob("*.py")
    }


def test_every_package_has_a_layer() -> None:
    assert set(package_imports()) - set(LAYER_OF) == set()


@pytest.mark.parametrize("package", sorted(LAYER_OF))
def test_no_package_imports_a_layer_above_its_own(package: str) -> None:
    upward = {
        target
        for target in package_imports().get(package, set())
        if LAYER_OF.get(target, len(LAYERS)) < LAYER_OF[package]
    }
    assert upward == set(), f"{package} ({LAYERS[LAYER_OF[package]][0]}) imports upward"


def test_no_two_packages_import_each_other_even_round_a_loop() -> None:
    assert cycles(package_imports()) == []


def test_no_two_bench_scripts_import_each_other() -> None:
    assert cycles(bench_imports()) == []


def test_the_cycle_finder_finds_a_loop_of_three() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}

    assert cycles(graph) == [["a", "b", "c"]]
