"""One owner per table (docs/architecture.md): every statement that writes ``chunks`` or
``index_versions`` is in ``sources/store.py``, and every other module (the indexer, source
re-embedding, the memory API) calls its functions. The migrations (SQL files, not read here)
create the tables. Read from the string constants of the package's code (f-string parts too,
docstrings left out), so a new module that writes either table fails here."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "shared" / "context_ledger"
OWNER = PACKAGE / "sources" / "store.py"
TABLES = ("chunks", "index_versions")

#: A statement writing one of the tables (``COPY chunks FROM`` included).
WRITE = re.compile(
    rf"\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM|COPY|TRUNCATE(?:\s+TABLE)?)\s+({'|'.join(TABLES)})\b",
    re.IGNORECASE,
)

DEFINITIONS = (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def _docstrings(tree: ast.Module) -> set[int]:
    """The ids of the module's, classes' and functions' docstring nodes."""
    owners = [tree, *(node for node in ast.walk(tree) if isinstance(node, DEFINITIONS))]
    return {
        id(owner.body[0].value)
        for owner in owners
        if owner.body
        and isinstance(owner.body[0], ast.Expr)
        and isinstance(owner.body[0].value, ast.Constant)
    }


def strings(path: Path) -> Iterator[str]:
    """Every string constant of ``path`` but its docstrings."""
    tree = ast.parse(path.read_text(), filename=str(path))
    skipped = _docstrings(tree)
    for node in ast.walk(tree):
        text = node.value if isinstance(node, ast.Constant) else None
        if isinstance(text, str) and id(node) not in skipped:
            yield text


def writes(path: Path) -> set[str]:
    """The tables of ``TABLES`` that a statement in ``path`` writes."""
    return {match.lower() for text in strings(path) for match in WRITE.findall(text)}


def test_only_sources_store_writes_chunks_and_index_versions() -> None:
    writers = {
        str(path.relative_to(PACKAGE)): sorted(tables)
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != OWNER and (tables := writes(path))
    }
    assert writers == {}, "write chunks and index_versions through sources/store.py's functions"


def test_the_owner_holds_the_writes() -> None:
    """The check above finds what it looks for: the owner's own statements."""
    assert writes(OWNER) == set(TABLES)


def test_a_write_inside_a_common_table_expression_counts(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        '"""Docstrings may say: UPDATE chunks."""\n'
        'Q = f"""WITH v AS (\n    update  index_versions v SET x = 1\n) SELECT {1}"""\n'
    )

    assert writes(module) == {"index_versions"}
