"""What Python names and expressions refer to, as far as a snapshot tells without running it.

:class:`Resolver` answers module-level questions (a module's members, a class's bases, methods and
attributes, a function's return annotation) with caches shared by the whole snapshot;
:class:`Scope` tracks one symbol's local names and resolves its calls. Locals are flat per symbol
(nested functions, lambdas and comprehensions included): a name bound to two different things
becomes unknown.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from tree_sitter import Node

from context_ledger.sources.code_graph.python_index import (
    ImportBinding,
    PyClass,
    PyIndex,
    PyModule,
    definition_of,
    import_bindings,
)
from context_ledger.sources.code_graph.syntax import PYTHON, field, parse, text, walk

_OPTIONAL = ("Optional", "typing.Optional", "t.Optional")
_TARGETS = ("pattern_list", "tuple_pattern", "list_pattern", "tuple", "list", "list_splat_pattern")


@dataclass(frozen=True)
class ModuleValue:
    """A module, or a namespace package (``module`` None) some modules of the snapshot are under."""

    name: str
    module: PyModule | None


@dataclass(frozen=True)
class FunctionValue:
    """A top-level function (``f``) or a method (``Class.m``) of the snapshot."""

    module: PyModule
    qualname: str


@dataclass(frozen=True)
class ClassValue:
    cls: PyClass


@dataclass(frozen=True)
class InstanceValue:
    cls: PyClass


@dataclass(frozen=True)
class SuperValue:
    """``super()`` inside ``cls``: attribute lookups skip the class itself."""

    cls: PyClass


Value = ModuleValue | FunctionValue | ClassValue | InstanceValue | SuperValue


class Resolver:
    def __init__(self, index: PyIndex) -> None:
        self.index = index
        self._cache: dict[tuple[object, ...], Value | None] = {}
        self._pending: set[tuple[object, ...]] = set()
        self._mro: dict[PyClass, list[PyClass]] = {}
        self._attributes: dict[PyClass, dict[str, list[tuple[Scope, Node]]]] = {}

    def member(self, module: PyModule, name: str) -> Value | None:
        """What ``module.name`` is: a definition, an import (re-exports followed) or a submodule."""
        return self._cached(("member", module, name), lambda: self._member(module, name))

    def import_value(self, binding: ImportBinding) -> Value | None:
        if binding.name is None:
            return self.module_value(binding.module)
        source = self.index.module(binding.module)
        found = self.member(source, binding.name) if source is not None else None
        return found or self.module_value(f"{binding.module}.{binding.name}")

    def module_value(self, name: str) -> ModuleValue | None:
        module = self.index.module(name)
        if module is not None or self.index.is_package(name):
            return ModuleValue(name, module)
        return None

    def attribute(self, owner: Value | None, name: str) -> Value | None:
        if isinstance(owner, ModuleValue):
            found = self.member(owner.module, name) if owner.module is not None else None
            return found or self.module_value(f"{owner.name}.{name}")
        if isinstance(owner, ClassValue):
            return self.method(owner.cls, name)
        if isinstance(owner, InstanceValue):
            return self.method(owner.cls, name) or self.attribute_type(owner.cls, name)
        if isinstance(owner, SuperValue):
            return self.method(owner.cls, name, inherited_only=True)
        return None

    def method(self, cls: PyClass, name: str, *, inherited_only: bool = False) -> Value | None:
        for owner in self.mro(cls)[1 if inherited_only else 0 :]:
            if name in owner.methods:
                return FunctionValue(owner.module, f"{owner.name}.{name}")
        return None

    def mro(self, cls: PyClass) -> list[PyClass]:
        """The class and its bases within the snapshot, depth first, left to right."""
        if cls not in self._mro:
            self._mro[cls] = [cls]
            order = [cls]
            arguments = field(definition_of(cls.node), "superclasses")
            scope = Scope(self, cls.module)
            for base in arguments.named_children if arguments is not None else []:
                value = scope.value_of(base) if base.type != "keyword_argument" else None
                if isinstance(value, ClassValue):
                    order.extend(c for c in self.mro(value.cls) if c not in order)
            self._mro[cls] = order
        return self._mro[cls]

    def attribute_type(self, cls: PyClass, name: str) -> Value | None:
        """The class of ``instance.name``: from class-body annotations or assignments, or from
        ``self.name = ...`` in a method; unknown when they disagree."""
        for owner in self.mro(cls):
            found = self._cached(("attribute", owner, name), lambda o=owner: self._own(o, name))
            if found is not None:
                return found
        return None

    def returns(self, function: FunctionValue) -> Value | None:
        """What calling ``function`` returns, per its return annotation."""
        return self._cached(("returns", function), lambda: self._returns(function))

    def _member(self, module: PyModule, name: str) -> Value | None:
        if name in module.classes:
            return ClassValue(module.classes[name])
        if name in module.functions:
            return FunctionValue(module, name)
        scope = Scope(self, module)
        values = {scope.binding_value(binding) for binding in module.bindings.get(name, [])}
        values.discard(None)
        if len(values) == 1:
            return values.pop()
        for star in module.star_imports:
            source = self.index.module(star)
            found = self.member(source, name) if source is not None else None
            if found is not None:
                return found
        return self.module_value(f"{module.name}.{name}") if module.is_package else None

    def _own(self, cls: PyClass, name: str) -> Value | None:
        values = {scope.binding_value(node) for scope, node in self._assignments(cls).get(name, [])}
        values.discard(None)
        return values.pop() if len(values) == 1 else None

    def _assignments(self, cls: PyClass) -> dict[str, list[tuple[Scope, Node]]]:
        """Assignments to a class's attributes, with the scope their values are read in: class-body
        names, and ``self.name`` in its methods."""
        if cls in self._attributes:
            return self._attributes[cls]
        found: defaultdict[str, list[tuple[Scope, Node]]] = defaultdict(list)
        self._attributes[cls] = found
        body = field(definition_of(cls.node), "body")
        class_scope = Scope(self, cls.module)
        for statement in body.named_children if body is not None else []:
            assignment = statement.named_children[0] if statement.named_child_count else None
            if assignment is None or assignment.type != "assignment":
                continue
            left = field(assignment, "left")
            if left is not None and left.type == "identifier":
                found[text(left)].append((class_scope, assignment))
        for method, node in cls.methods.items():
            scope = Scope(self, cls.module, cls)
            self_name = scope.bind_parameters(definition_of(node), cls.method_kinds[method])
            if not self_name:
                continue
            for assignment in walk(node):
                left = field(assignment, "left") if assignment.type == "assignment" else None
                if left is not None and left.type == "attribute" and _names(left, self_name):
                    found[text(field(left, "attribute"))].append((scope, assignment))
        return found

    def _returns(self, function: FunctionValue) -> Value | None:
        module = function.module
        owner_name, _, method = function.qualname.rpartition(".")
        cls = module.classes.get(owner_name) if owner_name else None
        node = cls.methods.get(method) if cls is not None else module.functions.get(method)
        annotation = field(definition_of(node), "return_type") if node is not None else None
        return Scope(self, module, cls).annotation_value(annotation)

    def _cached(self, key: tuple[object, ...], compute: Callable[[], Value | None]) -> Value | None:
        """``compute()`` once per key; a key met again while computing (a cycle) is unknown."""
        if key in self._cache:
            return self._cache[key]
        if key in self._pending:
            return None
        self._pending.add(key)
        try:
            value = compute()
        finally:
            self._pending.discard(key)
        self._cache[key] = value
        return value


class Scope:
    """The local names of one symbol, and what its expressions and calls refer to."""

    def __init__(self, resolver: Resolver, module: PyModule, cls: PyClass | None = None) -> None:
        self.resolver = resolver
        self.module = module
        self.cls = cls
        self.locals: dict[str, Value | None] = {}

    def calls(self, node: Node, *, skip: set[int]) -> Iterator[Value]:
        """The resolved targets of the calls under ``node``, binding locals in source order.

        ``skip`` holds the ids of nodes not to enter (a class's methods, which are symbols of
        their own).
        """
        own = definition_of(node)
        for current in walk(node, prune=lambda n: n.id in skip):
            kind = current.type
            if current.id in skip:
                continue
            if kind == "function_definition":
                if current != own:
                    self.bind(text(field(current, "name")), None)
                kind_of_method = self._method_kind(current) if current == own else None
                self.bind_parameters(current, kind_of_method)
            elif kind == "lambda":
                self.bind_parameters(current, None)
            elif kind == "class_definition" and current != own:
                self.bind(text(field(current, "name")), None)
            elif kind == "assignment":
                self._bind_assignment(current)
            elif kind in ("for_statement", "for_in_clause"):
                self._bind_unknown(field(current, "left"))
            elif kind == "as_pattern":
                self._bind_unknown(field(current, "alias"))
            elif kind == "named_expression":
                self.bind(text(field(current, "name")), self.value_of(field(current, "value")))
            elif kind in ("import_statement", "import_from_statement"):
                for name, binding in import_bindings(self.module, current):
                    if name != "*":
                        self.bind(name, self.resolver.import_value(binding))
            elif kind == "call":
                target = self.value_of(field(current, "function"))
                if isinstance(target, FunctionValue | ClassValue):
                    yield target

    def value_of(self, expr: Node | None) -> Value | None:
        if expr is None:
            return None
        kind = expr.type
        if kind == "identifier":
            name = text(expr)
            if name in self.locals:
                return self.locals[name]
            return self.resolver.member(self.module, name)
        if kind == "attribute":
            owner = self.value_of(field(expr, "object"))
            return self.resolver.attribute(owner, text(field(expr, "attribute")))
        if kind == "call":
            return self._call_value(expr)
        if kind in ("parenthesized_expression", "await") and expr.named_child_count == 1:
            return self.value_of(expr.named_children[0])
        if kind == "assignment":
            return self.value_of(field(expr, "right"))
        return None

    def annotation_value(self, annotation: Node | None) -> Value | None:
        """The instance an annotation declares: ``Refunds``, ``mod.Refunds``, ``"Refunds"``,
        ``Refunds | None``, ``Optional[Refunds]``."""
        node = annotation
        if node is not None and node.type == "type" and node.named_child_count == 1:
            node = node.named_children[0]
        if node is None:
            return None
        if node.type == "string":
            content = next((c for c in node.named_children if c.type == "string_content"), None)
            parsed = parse(PYTHON, text(content)).named_children if content is not None else []
            if parsed and parsed[0].type == "expression_statement" and parsed[0].named_child_count:
                return self.annotation_value(parsed[0].named_children[0])
            return None
        if node.type == "binary_operator":
            sides = [
                side
                for side in (field(node, "left"), field(node, "right"))
                if side is not None and side.type != "none"
            ]
            return self.annotation_value(sides[0]) if len(sides) == 1 else None
        if node.type in ("generic_type", "subscript"):
            base = field(node, "value") or (node.named_children[0] if node.named_children else None)
            arguments = [c for c in node.named_children[1:] if c.type != "comment"]
            if text(base) in _OPTIONAL and len(arguments) == 1:
                argument = arguments[0]
                if argument.type == "type_parameter" and argument.named_child_count == 1:
                    argument = argument.named_children[0]
                return self.annotation_value(argument)
            return None
        value = self.value_of(node)
        return InstanceValue(value.cls) if isinstance(value, ClassValue) else None

    def binding_value(self, binding: ImportBinding | Node) -> Value | None:
        """What an import, or an assignment (annotated or not), binds its name to."""
        if isinstance(binding, ImportBinding):
            return self.resolver.import_value(binding)
        annotation = field(binding, "type")
        if annotation is not None:
            return self.annotation_value(annotation)
        return self.value_of(field(binding, "right"))

    def bind(self, name: str, value: Value | None) -> None:
        if name:
            self.locals[name] = value if self.locals.get(name, value) == value else None

    def bind_parameters(self, definition: Node, method_kind: str | None) -> str:
        """Binds a function's parameters; for a method (``method_kind`` ``""``, ``"classmethod"``
        or ``"staticmethod"``), the first one is the instance or the class. Returns the name of
        ``self`` (or ``cls``), if any."""
        parameters = field(definition, "parameters")
        first = ""
        for position, param in enumerate(parameters.named_children if parameters else []):
            name_node = field(param, "name") or param
            if name_node.type == "typed_parameter" and name_node.named_child_count:
                name_node = name_node.named_children[0]
            if name_node.type != "identifier":
                self._bind_unknown(name_node)
                continue
            name = text(name_node)
            value = self.annotation_value(field(param, "type"))
            if position == 0 and self.cls is not None and method_kind in ("", "classmethod"):
                value = InstanceValue(self.cls) if method_kind == "" else ClassValue(self.cls)
                first = name
            self.bind(name, value)
        return first

    def _method_kind(self, definition: Node) -> str | None:
        if self.cls is None:
            return None
        return self.cls.method_kinds.get(text(field(definition, "name")))

    def _call_value(self, call: Node) -> Value | None:
        function = field(call, "function")
        if function is not None and text(function) == "super" and "super" not in self.locals:
            return SuperValue(self.cls) if self.cls is not None else None
        callee = self.value_of(function)
        if isinstance(callee, ClassValue):
            return InstanceValue(callee.cls)
        if isinstance(callee, FunctionValue):
            return self.resolver.returns(callee)
        return None

    def _bind_assignment(self, assignment: Node) -> None:
        left = field(assignment, "left")
        if left is None:
            return
        if left.type == "identifier":
            self.bind(text(left), self.binding_value(assignment))
        elif left.type in _TARGETS:
            self._bind_unknown(left)

    def _bind_unknown(self, target: Node | None) -> None:
        """Binds every plain name in an unpacking target to an unknown value."""
        if target is None:
            return
        for node in walk(target, prune=lambda n: n.type in ("attribute", "subscript")):
            if node.type == "identifier":
                self.bind(text(node), None)


def _names(attribute: Node, owner: str) -> bool:
    """Whether ``attribute`` is ``owner.something``."""
    return text(field(attribute, "object")) == owner
