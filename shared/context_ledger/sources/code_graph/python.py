"""Python: ``calls`` between the functions, classes and methods of a snapshot, and the pytest tests
that exercise them.

A call is linked when its target resolves to a symbol of the snapshot: a function or class of the
same module, an imported one (absolute or relative imports, re-exports followed), ``module.f()``,
``self.m()`` / ``cls.m()`` / ``super().m()`` through the class and its bases in the snapshot,
``Class()`` (linked to the class), ``Class.m()``, and ``x.m()`` where ``x``'s class is known from an
annotation, a constructor call, a return annotation or an attribute assigned in the class. Anything
else (builtins, third-party code, receivers whose class is unknown) is skipped, never guessed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from tree_sitter import Node

from context_ledger.sources.code_graph.graph import CallGraph, Symbol
from context_ledger.sources.code_graph.python_index import (
    ImportBinding,
    PyClass,
    PyIndex,
    PyModule,
    decorator_names,
    definition_of,
)
from context_ledger.sources.code_graph.python_values import (
    ClassValue,
    FunctionValue,
    InstanceValue,
    ModuleValue,
    Resolver,
    Scope,
    Value,
)
from context_ledger.sources.code_graph.syntax import field, text
from context_ledger.sources.model import Document


def python_call_graph(documents: Sequence[Document]) -> CallGraph:
    index = PyIndex(documents)
    resolver = Resolver(index)
    graph = CallGraph()
    for module in index.modules:
        if module.is_support:
            graph.support_paths.add(module.path)
        for name, node, cls in _symbols(module):
            caller = Symbol(module.path, name)
            for callee in _callees(resolver, module, node, cls):
                graph.add_call(caller, callee)
    for module in index.modules:
        if module.is_support:
            _add_tests(resolver, graph, module)
    return graph


def _symbols(module: PyModule) -> Iterator[tuple[str, Node, PyClass | None]]:
    for name, node in module.functions.items():
        yield name, node, None
    for cls in module.classes.values():
        yield cls.name, cls.node, cls
        for method, node in cls.methods.items():
            yield f"{cls.name}.{method}", node, cls
        for inner, node in cls.nested.items():
            yield f"{cls.name}.{inner}", node, None


def _callees(
    resolver: Resolver, module: PyModule, node: Node, cls: PyClass | None
) -> Iterator[Symbol]:
    scope = Scope(resolver, module, cls)
    members = {*cls.methods.values(), *cls.nested.values()} if cls and node == cls.node else ()
    for value in scope.calls(node, skip={member.id for member in members}):
        if isinstance(value, FunctionValue):
            yield Symbol(value.module.path, value.qualname)
        elif isinstance(value, ClassValue):
            yield Symbol(value.cls.module.path, value.cls.name)


def _add_tests(resolver: Resolver, graph: CallGraph, module: PyModule) -> None:
    """Tests of a test module or conftest, the fixtures they and its fixtures request, and what
    the tests name."""
    conftests = resolver.index.conftests(module.path)
    visible = [module, *(conftest for conftest in conftests if conftest is not module)]
    imported = _imported_modules(resolver, module) if module.is_test else []
    for name, node in module.functions.items():
        symbol = Symbol(module.path, name)
        is_test = module.is_test and name.startswith("test")
        if is_test or _is_fixture(node):
            graph.fixtures[symbol].update(_requested(visible, symbol, _parameters(node)))
        if is_test:
            graph.tests.add(symbol)
            graph.named[symbol].update(_named(imported, None, name))
    for cls in module.classes.values():
        if not module.is_test or not cls.name.startswith("Test") or "__init__" in cls.methods:
            continue
        for name, node in cls.methods.items():
            if name.startswith("test"):
                symbol = Symbol(module.path, f"{cls.name}.{name}")
                graph.tests.add(symbol)
                graph.fixtures[symbol].update(_requested(visible, symbol, _parameters(node)[1:]))
                graph.named[symbol].update(_named(imported, cls.name.removeprefix("Test"), name))


def _requested(visible: list[PyModule], requester: Symbol, parameters: list[str]) -> set[Symbol]:
    """The fixtures parameters request: the test module's own, else the nearest conftest's; a
    fixture requesting its own name gets the one it overrides."""
    found = set()
    for parameter in parameters:
        for module in visible:
            node = module.functions.get(parameter)
            symbol = Symbol(module.path, parameter)
            if node is not None and _is_fixture(node) and symbol != requester:
                found.add(symbol)
                break
    return found


def _is_fixture(node: Node) -> bool:
    return any(name.split(".")[-1] == "fixture" for name in decorator_names(node))


def _parameters(node: Node) -> list[str]:
    parameters = field(definition_of(node), "parameters")
    names = []
    for param in parameters.named_children if parameters is not None else []:
        name = field(param, "name") or param
        if name.type == "typed_parameter" and name.named_child_count:
            name = name.named_children[0]
        if name.type == "identifier":
            names.append(text(name))
    return names


def _imported_modules(resolver: Resolver, module: PyModule) -> list[PyModule]:
    """The modules of the snapshot a test module imports, or imports names from (where those names
    are defined, re-exports followed)."""
    found: dict[str, PyModule] = {}
    for name in module.imported_modules:
        imported = resolver.index.module(name)
        if imported is not None:
            found[imported.path] = imported
    for bindings in module.bindings.values():
        for binding in bindings:
            if isinstance(binding, ImportBinding):
                defining = _defining_module(resolver.import_value(binding))
                if defining is not None:
                    found[defining.path] = defining
    return [imported for imported in found.values() if not imported.is_support]


def _defining_module(value: Value | None) -> PyModule | None:
    if isinstance(value, ModuleValue | FunctionValue):
        return value.module
    if isinstance(value, ClassValue | InstanceValue):
        return value.cls.module
    return None


def _named(modules: list[PyModule], class_under_test: str | None, test_name: str) -> set[Symbol]:
    """What a test names, among the modules its file imports: ``test_authorise`` → the only
    ``authorise`` (function or method), ``TestRefunds.test_authorise`` → ``Refunds.authorise``."""
    target = test_name.removeprefix("test").lstrip("_")
    if not target:
        return set()
    symbols = [
        Symbol(module.path, qualname) for module in modules for qualname, _, _ in _symbols(module)
    ]
    if class_under_test:
        exact = {symbol for symbol in symbols if symbol.name == f"{class_under_test}.{target}"}
        if len(exact) == 1:
            return exact
    candidates = {symbol for symbol in symbols if symbol.name.rsplit(".", 1)[-1] == target}
    return candidates if len(candidates) == 1 else set()
