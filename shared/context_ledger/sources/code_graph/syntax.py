"""Tree-sitter plumbing shared by the language analysers."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import tree_sitter_go
import tree_sitter_python
from tree_sitter import Language, Node, Parser

GO = Language(tree_sitter_go.language())
PYTHON = Language(tree_sitter_python.language())


def parse(language: Language, content: str) -> Node:
    """The syntax tree of ``content``; tree-sitter keeps going past syntax errors."""
    return Parser(language).parse(content.encode()).root_node


def text(node: Node | None) -> str:
    return node.text.decode() if node is not None and node.text is not None else ""


def walk(node: Node, *, prune: Callable[[Node], bool] | None = None) -> Iterator[Node]:
    """Named nodes under ``node`` (itself included) in source order.

    Iterative, because generated code nests deeply enough to exhaust Python's stack; named nodes
    only, which is a third of the work (punctuation and keywords are most nodes). The children of a
    node for which ``prune`` is true are not visited; the node itself is.
    """
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if prune is None or current is node or not prune(current):
            stack.extend(reversed(current.named_children))


def field(node: Node, name: str) -> Node | None:
    return node.child_by_field_name(name)


def fields(node: Node, name: str) -> list[Node]:
    return node.children_by_field_name(name)


def unwrap(node: Node | None, wrapper: str) -> Node | None:
    """``node`` without any number of enclosing ``wrapper`` nodes, e.g. parentheses."""
    while node is not None and node.type == wrapper and node.named_child_count == 1:
        node = node.named_children[0]
    return node
