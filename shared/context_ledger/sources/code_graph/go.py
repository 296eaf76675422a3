"""Go: ``calls`` between the functions and methods of a snapshot, and the tests that exercise them.

A call is linked only when its target is certain enough: a function of the same package (or a
dot-imported one), ``pkg.Func`` of an imported package of the snapshot, or a method whose
receiver type is known from the enclosing receiver, a parameter, a composite literal, a
constructor's result type, a conversion, a type assertion or a struct field. When the receiver's
type is unknown, the call links to the package's only method of that name, and is skipped when
there are several. A receiver of a type outside the snapshot (``*testing.T``, ``sync.Mutex``) is
never linked.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from tree_sitter import Node

from context_ledger.sources.code_graph.go_index import (
    FOREIGN,
    GoDecl,
    GoFile,
    GoIndex,
    GoPackage,
    TypeRef,
    type_parameters,
)
from context_ledger.sources.code_graph.graph import CallGraph, Symbol
from context_ledger.sources.code_graph.syntax import field, fields, text, unwrap, walk
from context_ledger.sources.model import Document

_TEST_NAME = re.compile(r"^(Test|Benchmark|Fuzz|Example)(?![a-z])_?(.*)$")
_TESTING_PARAMETER = {"Test": "T", "Benchmark": "B", "Fuzz": "F", "Example": None}
_PARAMETERS = ("parameter_declaration", "variadic_parameter_declaration")


def go_call_graph(documents: Sequence[Document]) -> CallGraph:
    index = GoIndex(documents)
    graph = CallGraph()
    graph.support_paths.update(file.path for file in index.files if file.is_test)
    for package in index.packages.values():
        for decl in _declarations(package):
            caller = Symbol(decl.file.path, decl.symbol)
            resolver = _Resolver(index, decl.file, type_parameters(decl.node))
            for callee in resolver.callees(decl.node):
                graph.add_call(caller, Symbol(callee.file.path, callee.symbol))
            if _is_test(decl):
                graph.tests.add(caller)
                graph.named[caller].update(
                    Symbol(named.file.path, named.symbol) for named in _named_by(index, decl)
                )
    return graph


class _Resolver:
    """Resolves the calls of one declaration, learning the types of its local names on the way.

    Locals are flat per declaration (blocks and function literals included): a name bound twice to
    different types becomes unknown, which only ever turns a link into a skip.
    """

    def __init__(
        self,
        index: GoIndex,
        file: GoFile,
        type_params: frozenset[str] = frozenset(),
        resolving: set[tuple[str, str]] | None = None,
    ) -> None:
        self.index = index
        self.file = file
        self.type_params = type_params
        self.locals: dict[str, TypeRef | None] = {}
        self._resolving = resolving if resolving is not None else set()

    def callees(self, declaration: Node) -> Iterator[GoDecl]:
        for node in walk(declaration):
            kind = node.type
            if kind in _PARAMETERS:
                # A variadic ``xs ...T`` is a slice, whatever T is.
                declared = (
                    FOREIGN
                    if kind == "variadic_parameter_declaration"
                    else self.index.type_ref(field(node, "type"), self.file, self.type_params)
                )
                for name in fields(node, "name"):
                    self._bind(text(name), declared)
            elif kind == "short_var_declaration":
                self._bind_values(_list(field(node, "left")), _list(field(node, "right")))
            elif kind in ("var_spec", "const_spec"):
                self._bind_spec(node)
            elif kind in ("range_clause", "receive_statement") and _declares(node):
                for name in _list(field(node, "left")):
                    self._bind(text(name), None)
            elif kind == "type_switch_statement":
                for name in _list(field(node, "alias")):
                    self._bind(text(name), None)
            elif kind in ("call_expression", "type_conversion_expression"):
                yield from self._call_targets(node)

    def type_of(self, expr: Node | None) -> TypeRef | None:
        """The named type of an expression, or None when it cannot be told cheaply."""
        expr = unwrap(expr, "parenthesized_expression")
        if expr is None:
            return None
        kind = expr.type
        if kind == "identifier":
            name = text(expr)
            return self.locals[name] if name in self.locals else self._package_var_type(name)
        if kind == "unary_expression":
            operator = text(field(expr, "operator"))
            return self.type_of(field(expr, "operand")) if operator in ("&", "*") else None
        if kind in ("composite_literal", "type_assertion_expression"):
            return self.index.type_ref(field(expr, "type"), self.file, self.type_params)
        if kind in ("call_expression", "type_conversion_expression"):
            return self._call_type(expr)
        if kind == "selector_expression":
            operand = field(expr, "operand")
            if self._is_package(operand):
                imported = self._imported(operand)
                name = text(field(expr, "field"))
                return self._package_var_type(name, (imported,)) if imported else FOREIGN
            owner = self.type_of(operand)
            if owner is None:
                return None
            if owner.package is None:
                return FOREIGN
            return self.index.field_type(owner, text(field(expr, "field")))
        return None

    def _call_targets(self, call: Node) -> list[GoDecl]:
        if call.type == "type_conversion_expression":
            generic = field(call, "type")
            if generic is None or generic.type != "generic_type":
                return []
            return self._function_targets(field(generic, "type"))
        function = unwrap(field(call, "function"), "parenthesized_expression")
        if function is not None and function.type == "index_expression":
            function = field(function, "operand")
        return self._function_targets(function)

    def _function_targets(self, function: Node | None) -> list[GoDecl]:
        if function is None:
            return []
        if function.type in ("identifier", "type_identifier"):
            name = text(function)
            if name in self.locals:
                return []
            for package in self._scope_packages():
                found = self.index.visible(package.functions.get(name, []), self.file)
                if found:
                    return found
            return []
        if function.type in ("selector_expression", "qualified_type"):
            operand = field(function, "operand") or field(function, "package")
            name = text(field(function, "field") or field(function, "name"))
            imported = self._imported(operand)
            if imported is not None:
                return self.index.visible(imported.functions.get(name, []), self.file)
            if self._is_package(operand):
                return []
            owner = self.type_of(operand)
            if owner is None:
                return self._only_method(name)
            return self.index.method(owner, name, self.file)
        return []

    def _call_type(self, call: Node) -> TypeRef | None:
        targets = self._call_targets(call)
        if targets:
            return self.index.result_type(targets[0], 0)
        if call.type == "type_conversion_expression":
            return self.index.type_ref(field(call, "type"), self.file, self.type_params)
        function = unwrap(field(call, "function"), "parenthesized_expression")
        arguments = field(call, "arguments")
        if function is None:
            return None
        if text(function) == "new" and "new" not in self.locals and arguments is not None:
            allocated = arguments.named_children[0] if arguments.named_child_count == 1 else None
            if allocated is not None and allocated.type in ("identifier", "selector_expression"):
                return self._conversion_type(allocated)
            return self.index.type_ref(allocated, self.file, self.type_params)
        return self._conversion_type(function)

    def _conversion_type(self, function: Node) -> TypeRef | None:
        """The type ``T`` or ``pkg.T`` names when used as a value (``T(x)``, ``new(T)``)."""
        if function.type == "identifier":
            name = text(function)
            if name in self.locals:
                return None
            for package in self._scope_packages():
                if name in package.types:
                    return TypeRef(package.key, name)
        elif function.type == "selector_expression":
            imported = self._imported(field(function, "operand"))
            name = text(field(function, "field"))
            if imported is not None and name in imported.types:
                return TypeRef(imported.key, name)
        return None

    def _only_method(self, name: str) -> list[GoDecl]:
        decls = self.index.visible(self.file.package.method_decls(name), self.file)
        return decls if len({decl.symbol for decl in decls}) == 1 else []

    def _imported(self, operand: Node | None) -> GoPackage | None:
        """The snapshot package an operand names, if it names one."""
        if operand is None or not self._is_package(operand):
            return None
        return self.file.imports.get(text(operand))

    def _is_package(self, operand: Node | None) -> bool:
        """Whether an identifier names an import; one that names nothing else in scope must, even
        when the import's name cannot be told from its path (``go-sqlite3`` is ``sqlite3``)."""
        if operand is None or operand.type not in ("identifier", "package_identifier"):
            return False
        name = text(operand)
        if name in self.locals:
            return False
        if name in self.file.imports:
            return True
        return not any(
            name in package.variables or name in package.functions or name in package.types
            for package in self._scope_packages()
        )

    def _scope_packages(self) -> tuple[GoPackage, ...]:
        return (self.file.package, *self.file.dot_imports)

    def _package_var_type(
        self, name: str, packages: tuple[GoPackage, ...] | None = None
    ) -> TypeRef | None:
        for package in packages or self._scope_packages():
            specs = package.variables.get(name, [])
            key = (package.key, name)
            if len(specs) != 1 or key in self._resolving:
                continue
            self._resolving.add(key)
            try:
                file, spec = specs[0]
                resolver = _Resolver(self.index, file, resolving=self._resolving)
                return resolver._spec_types(spec).get(name)
            finally:
                self._resolving.discard(key)
        return None

    def _bind(self, name: str, type_: TypeRef | None) -> None:
        if name != "_":
            self.locals[name] = type_ if self.locals.get(name, type_) == type_ else None

    def _bind_values(self, names: list[Node], values: list[Node]) -> None:
        for name, type_ in zip(names, self._value_types(values, len(names)), strict=True):
            self._bind(text(name), type_)

    def _bind_spec(self, spec: Node) -> None:
        for name, type_ in self._spec_types(spec).items():
            self._bind(name, type_)

    def _spec_types(self, spec: Node) -> dict[str, TypeRef | None]:
        names = [text(name) for name in fields(spec, "name")]
        declared = field(spec, "type")
        if declared is not None:
            type_ = self.index.type_ref(declared, self.file, self.type_params)
            return dict.fromkeys(names, type_)
        types = self._value_types(_list(field(spec, "value")), len(names))
        return dict(zip(names, types, strict=True))

    def _value_types(self, values: list[Node], count: int) -> list[TypeRef | None]:
        if len(values) == count:
            return [self.type_of(value) for value in values]
        if len(values) == 1 and values[0].type in ("call_expression", "type_conversion_expression"):
            targets = self._call_targets(values[0])
            if targets:
                return [self.index.result_type(targets[0], i) for i in range(count)]
        if len(values) == 1:
            return [self.type_of(values[0]), *[None] * (count - 1)]
        return [None] * count


def _declarations(package: GoPackage) -> Iterator[GoDecl]:
    for decls in package.functions.values():
        yield from decls
    for by_name in package.methods.values():
        for decls in by_name.values():
            yield from decls


def _is_test(decl: GoDecl) -> bool:
    """``TestXxx(t *testing.T)``, ``BenchmarkXxx(b *testing.B)``, ``FuzzXxx(f *testing.F)`` or
    ``ExampleXxx()`` in a ``_test.go`` file; ``TestMain`` sets tests up and is not one."""
    match = _TEST_NAME.match(decl.symbol)
    if not decl.file.is_test or decl.node.type != "function_declaration" or match is None:
        return False
    if decl.symbol == "TestMain":
        return False
    parameters = field(decl.node, "parameters")
    params = [p for p in parameters.named_children if p.type in _PARAMETERS] if parameters else []
    expected = _TESTING_PARAMETER[match.group(1)]
    if expected is None:
        return not params
    if len(params) != 1:
        return False
    declared = field(params[0], "type")
    pointee = declared.named_children[-1] if declared and declared.type == "pointer_type" else None
    return (
        pointee is not None
        and pointee.type == "qualified_type"
        and text(field(pointee, "name")) == expected
    )


def _named_by(index: GoIndex, test: GoDecl) -> list[GoDecl]:
    """What a test names: ``TestRefunds_Authorise`` → ``Refunds.Authorise``, ``TestAuthorise`` →
    ``Authorise`` (or ``authorise``, or the package's only method ``Authorise``); suffixes after
    another ``_`` (``TestAuthorise_declined``) are variants."""
    match = _TEST_NAME.match(test.symbol)
    package = index.primary_package(test.file.directory)
    parts = match.group(2).split("_") if match else []
    if package is None or not parts or not parts[0]:
        return []
    head = parts[0]
    if len(parts) > 1:
        methods = _production(package.methods.get(head, {}).get(parts[1], []))
        if methods:
            return methods
    for name in (head, head[0].lower() + head[1:]):
        functions = _production(package.functions.get(name, []))
        if functions:
            return functions
    methods = _production(package.method_decls(head))
    return methods if len({decl.symbol for decl in methods}) == 1 else []


def _production(decls: list[GoDecl]) -> list[GoDecl]:
    return [decl for decl in decls if not decl.file.is_test]


def _declares(node: Node) -> bool:
    return any(child.type == ":=" for child in node.children)


def _list(node: Node | None) -> list[Node]:
    if node is None:
        return []
    return node.named_children if node.type == "expression_list" else [node]
