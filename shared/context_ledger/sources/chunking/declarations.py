"""Top-level declarations of a syntax tree: where each starts and ends, and the symbol it defines.

A declaration's rows include the comments (and, for TypeScript class members, decorators)
directly above it with no blank line between: Go doc comments, JSDoc, Python comment blocks.
Python decorators are part of the ``decorated_definition`` node already.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from tree_sitter import Node

# Sibling nodes that belong to the declaration right below them.
_LEADING = frozenset({"comment", "decorator"})
_TS_FUNCTION_VALUES = frozenset(
    {"arrow_function", "function_expression", "function", "generator_function"}
)
_TS_CLASSES = frozenset({"class_declaration", "abstract_class_declaration", "class"})
_TS_NAMED = frozenset(
    {
        "function_declaration",
        "generator_function_declaration",
        "function_signature",
        "interface_declaration",
        "type_alias_declaration",
        "enum_declaration",
    }
)
_TS_METHODS = frozenset({"method_definition", "method_signature", "abstract_method_signature"})
_PY_MEMBERS = frozenset({"function_definition", "class_definition", "decorated_definition"})


@dataclass(frozen=True)
class Declaration:
    """Rows (0-based, inclusive) and symbol of one declaration.

    ``members`` are a class's methods (and nested classes), used when the class is too big for
    one chunk.
    """

    first_row: int
    last_row: int
    symbol: str
    members: tuple[Declaration, ...] = ()


Classifier = Callable[[Node], list[Declaration]]


def find_declarations(root: Node, language: str) -> list[Declaration]:
    """Declarations among the root's children, in source order."""
    classify: Classifier = {
        "go": _go,
        "python": _python,
        "typescript": _typescript,
        "tsx": _typescript,
    }[language]
    return _collect(root.children, classify)


def _rows(node: Node) -> tuple[int, int]:
    """First and last row of a node; a node ending at column 0 ends on the row before."""
    first, last = node.start_point.row, node.end_point.row
    if last > first and node.end_point.column == 0:
        last -= 1
    return first, last


def _collect(nodes: Iterable[Node], classify: Classifier) -> list[Declaration]:
    """Declarations among sibling nodes, each extended upwards over its leading comments."""
    found: list[Declaration] = []
    lead: tuple[int, int] | None = None  # rows of the comment run right above the current node
    taken = -1  # last row of the previous non-comment sibling
    for node in nodes:
        first, last = _rows(node)
        if node.type in _LEADING:
            if lead is not None and first <= lead[1] + 1:
                lead = (lead[0], max(lead[1], last))
            elif first > taken:
                lead = (first, last)
            else:  # a comment trailing the previous statement on its last line
                lead = None
            continue
        declarations = classify(node)
        if declarations and lead is not None and lead[1] + 1 >= first:
            declarations[0] = replace(declarations[0], first_row=lead[0])
        found.extend(declarations)
        taken = max(taken, last)
        lead = None
    return found


def _name(node: Node) -> str | None:
    child = node.child_by_field_name("name")
    return _text(child) if child is not None else None


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", errors="replace")


def _single(node: Node, symbol: str | None, span: Node | None = None) -> list[Declaration]:
    if not symbol:
        return []
    first, last = _rows(span or node)
    return [Declaration(first, last, symbol)]


# Go


def _go(node: Node) -> list[Declaration]:
    if node.type == "function_declaration":
        return _single(node, _name(node))
    if node.type == "method_declaration":
        name = _name(node)
        receiver = node.child_by_field_name("receiver")
        owner = _go_receiver_type(receiver) if receiver is not None else None
        return _single(node, f"{owner}.{name}" if owner and name else name)
    if node.type == "type_declaration":
        return _go_types(node)
    return []


def _go_receiver_type(receiver: Node) -> str | None:
    """``Refunds`` for receivers ``(r *Refunds)``, ``(r Refunds[T])`` and ``(r *pkg.Refunds)``."""
    stack = list(reversed(receiver.named_children))
    while stack:
        node = stack.pop()
        if node.type == "type_identifier":
            return _text(node)
        if node.type not in ("type_arguments", "type_parameter_list"):
            stack.extend(reversed(node.named_children))
    return None


def _go_types(node: Node) -> list[Declaration]:
    """One declaration per type in a ``type (...)`` group, the group's rows shared out in order.

    The first type takes the group's doc comment and ``type (`` line, the last one its ``)``,
    and each type the comments above it.
    """
    named = [
        (spec, name)
        for spec in node.named_children
        if spec.type in ("type_spec", "type_alias") and (name := _name(spec))
    ]
    if not named:
        return []
    first, last = _rows(node)
    declarations: list[Declaration] = []
    start = first
    for index, (spec, name) in enumerate(named):
        end = last if index == len(named) - 1 else max(_rows(spec)[1], start)
        declarations.append(Declaration(start, end, name))
        start = end + 1
    return declarations


# Python


def _python(node: Node) -> list[Declaration]:
    definition = node
    if node.type == "decorated_definition":
        inner = node.child_by_field_name("definition")
        if inner is None:
            return []
        definition = inner
    if definition.type == "function_definition":
        return _single(definition, _name(definition), span=node)
    if definition.type == "class_definition":
        return _class(node, definition, _python_member)
    return []


def _python_member(node: Node) -> str | None:
    if node.type not in _PY_MEMBERS:
        return None
    if node.type == "decorated_definition":
        inner = node.child_by_field_name("definition")
        return _name(inner) if inner is not None else None
    return _name(node)


# TypeScript and TSX


def _typescript(node: Node, span: Node | None = None) -> list[Declaration]:
    span = span or node
    if node.type == "export_statement":
        inner = node.child_by_field_name("declaration") or node.child_by_field_name("value")
        return _typescript(inner, span) if inner is not None else []
    if node.type == "ambient_declaration":
        inner = next((child for child in node.named_children if child.type not in _LEADING), None)
        return _typescript(inner, span) if inner is not None else []
    if node.type in _TS_NAMED:
        return _single(node, _name(node), span)
    if node.type in _TS_CLASSES:
        return _class(span, node, _typescript_member, default="default")
    if node.type in ("lexical_declaration", "variable_declaration"):
        declarators = [c for c in node.named_children if c.type == "variable_declarator"]
        if len(declarators) == 1 and _is_function(declarators[0].child_by_field_name("value")):
            return _single(node, _name(declarators[0]), span)
        return []
    if node.type in _TS_FUNCTION_VALUES and span.type == "export_statement":
        # export default function () {...} / export default async () => ...
        return _single(node, _name(node) or "default", span)
    return []


def _typescript_member(node: Node) -> str | None:
    if node.type in _TS_METHODS:
        return _name(node)
    if node.type == "public_field_definition" and _is_function(node.child_by_field_name("value")):
        return _name(node)
    return None


def _is_function(value: Node | None) -> bool:
    return value is not None and value.type in _TS_FUNCTION_VALUES


# Classes (Python and TypeScript)


def _class(
    span: Node,
    definition: Node,
    member_name: Callable[[Node], str | None],
    default: str | None = None,
) -> list[Declaration]:
    name = _name(definition) or default
    if not name:
        return []
    body = definition.child_by_field_name("body")

    def classify(member: Node) -> list[Declaration]:
        member_symbol = member_name(member)
        return _single(member, f"{name}.{member_symbol}" if member_symbol else None)

    members = _collect(body.children, classify) if body is not None else []
    first, last = _rows(span)
    return [Declaration(first, last, name, tuple(members))]
