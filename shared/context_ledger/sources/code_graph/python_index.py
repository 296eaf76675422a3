"""The Python modules of a snapshot: module names from paths, top-level functions and classes, and
the module-level names bound by imports and assignments.

A module's name follows the packages (directories with ``__init__.py``) it sits in, so
``shared/context_ledger/sources/model.py`` is ``context_ledger.sources.model`` when ``shared/`` is
not a package. Imports that name no module that way are matched against the end of the path
(``sources.model``), which covers namespace packages and imports from the snapshot root
(``tests.factories``), when exactly one module's path ends so.
"""

from __future__ import annotations

import posixpath
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from tree_sitter import Node

from context_ledger.sources.code_graph.syntax import PYTHON, fields, parse, text, walk
from context_ledger.sources.code_graph.syntax import field as child
from context_ledger.sources.model import Document

_SCOPES = ("function_definition", "class_definition", "lambda")


@dataclass(frozen=True)
class ImportBinding:
    """``from module import name`` (``name`` set) or ``import module`` (``name`` None)."""

    module: str
    name: str | None = None


@dataclass(eq=False)
class PyClass:
    """A top-level class; ``node`` is its statement, decorators included, as for functions.

    ``nested`` classes are symbols of their own (``Outer.Inner``), methods included, as the
    chunker names them.
    """

    module: PyModule
    name: str
    node: Node
    methods: dict[str, Node] = field(default_factory=dict)
    method_kinds: dict[str, str] = field(default_factory=dict)
    nested: dict[str, Node] = field(default_factory=dict)


@dataclass(eq=False)
class PyModule:
    name: str
    path: str
    root: Node
    is_package: bool
    functions: dict[str, Node] = field(default_factory=dict)
    classes: dict[str, PyClass] = field(default_factory=dict)
    bindings: defaultdict[str, list[ImportBinding | Node]] = field(
        default_factory=lambda: defaultdict(list)
    )
    star_imports: list[str] = field(default_factory=list)
    imported_modules: list[str] = field(default_factory=list)

    @property
    def basename(self) -> str:
        return posixpath.basename(self.path)

    @property
    def is_test(self) -> bool:
        """pytest's default test files: ``test_*.py`` and ``*_test.py``."""
        return self.basename.startswith("test_") or self.basename.endswith("_test.py")

    @property
    def is_support(self) -> bool:
        """Where tests and their helpers live: test files, ``conftest.py``, and any module under a
        ``tests/`` or ``test/`` directory (``tests/factories.py``)."""
        directories = self.path.split("/")[:-1]
        return (
            self.is_test
            or self.basename == "conftest.py"
            or any(d in ("tests", "test") for d in directories)
        )

    def relative_base(self, level: int) -> str:
        """The package ``from .`` (level 1), ``from ..`` (level 2) ... refer to."""
        parts = self.name.split(".") if self.name else []
        keep = len(parts) - (level - 1 if self.is_package else level)
        return ".".join(parts[: max(keep, 0)])


class PyIndex:
    def __init__(self, documents: Sequence[Document]) -> None:
        package_dirs = {
            posixpath.dirname(doc.path)
            for doc in documents
            if posixpath.basename(doc.path) == "__init__.py"
        }
        self.modules: list[PyModule] = [_load(doc, package_dirs) for doc in documents]
        names: defaultdict[str, list[PyModule]] = defaultdict(list)
        for module in self.modules:
            names[module.name].append(module)
        self._by_name = {name: found[0] for name, found in names.items() if len(found) == 1}
        self._by_path_name = {_dotted(module.path): module for module in self.modules}
        self._packages = {
            ".".join(parts[start:end])
            for parts in (path_name.split(".") for path_name in self._by_path_name)
            for start in range(len(parts))
            for end in range(start + 1, len(parts))
        }
        self._lookups: dict[str, PyModule | None] = {}
        self._conftests = {
            posixpath.dirname(module.path): module
            for module in self.modules
            if module.basename == "conftest.py"
        }

    def module(self, name: str) -> PyModule | None:
        if name not in self._lookups:
            self._lookups[name] = self._module(name)
        return self._lookups[name]

    def _module(self, name: str) -> PyModule | None:
        found = self._by_name.get(name)
        if found is not None or "." not in name:
            return found
        matches = [
            module
            for path_name, module in self._by_path_name.items()
            if path_name == name or path_name.endswith("." + name)
        ]
        return matches[0] if len(matches) == 1 else None

    def is_package(self, name: str) -> bool:
        """Whether ``name`` may be a package holding some module, ``__init__.py`` or not
        (``import a.b`` then ``a.b.f()``): a run of directories in some module's path."""
        return name in self._packages

    def conftests(self, path: str) -> list[PyModule]:
        """The ``conftest.py`` modules a test file sees, nearest first."""
        found: list[PyModule] = []
        directory = posixpath.dirname(path)
        while True:
            if directory in self._conftests:
                found.append(self._conftests[directory])
            if not directory:
                return found
            directory = posixpath.dirname(directory)


def _load(doc: Document, package_dirs: set[str]) -> PyModule:
    root = parse(PYTHON, doc.content)
    is_package = posixpath.basename(doc.path) == "__init__.py"
    module = PyModule(_module_name(doc.path, package_dirs), doc.path, root, is_package)
    for node in root.named_children:
        definition = _definition(node)
        if definition is None:
            continue
        name = text(child(definition, "name"))
        if definition.type == "function_definition":
            module.functions[name] = node
        else:
            module.classes[name] = _class(module, name, node)
    for node in walk(root, prune=lambda n: n.type in _SCOPES):
        if node.type == "import_statement":
            module.imported_modules.extend(_imported_names(node))
        if node.type in ("import_statement", "import_from_statement"):
            for name, binding in import_bindings(module, node):
                if name == "*":
                    module.star_imports.append(binding.module)
                else:
                    module.bindings[name].append(binding)
        elif node.type == "assignment":
            left = child(node, "left")
            if left is not None and left.type == "identifier":
                module.bindings[text(left)].append(node)
    return module


def import_bindings(module: PyModule, node: Node) -> list[tuple[str, ImportBinding]]:
    """The names an import statement binds, with what they refer to; ``*`` for a star import."""
    if node.type == "import_statement":
        found = []
        for name in fields(node, "name"):
            if name.type == "aliased_import":
                imported = text(child(name, "name"))
                found.append((text(child(name, "alias")), ImportBinding(imported)))
            else:  # import a.b.c binds a
                top = text(name).split(".")[0]
                found.append((top, ImportBinding(top)))
        return found
    source = child(node, "module_name")
    base = _absolute(module, source) if source is not None else ""
    if any(c.type == "wildcard_import" for c in node.named_children):
        return [("*", ImportBinding(base))]
    found = []
    for name in fields(node, "name"):
        imported = child(name, "name") if name.type == "aliased_import" else name
        alias = child(name, "alias") if name.type == "aliased_import" else name
        found.append((text(alias), ImportBinding(base, text(imported))))
    return found


def _imported_names(node: Node) -> list[str]:
    """The full module names of ``import a.b.c, d as e``: ``a.b.c`` and ``d``."""
    return [
        text(child(name, "name") if name.type == "aliased_import" else name)
        for name in fields(node, "name")
    ]


def decorator_names(node: Node) -> list[str]:
    """What a definition's decorators call or name: ``pytest.fixture`` for
    ``@pytest.fixture(scope="module")``."""
    if node.type != "decorated_definition":
        return []
    names = []
    for decorator in node.named_children:
        if decorator.type == "decorator" and decorator.named_child_count:
            expression = decorator.named_children[0]
            if expression.type == "call":
                expression = child(expression, "function") or expression
            names.append(text(expression))
    return names


def definition_of(node: Node) -> Node:
    """The ``def`` or ``class`` node of a possibly decorated definition."""
    if node.type == "decorated_definition":
        return child(node, "definition") or node
    return node


def _definition(node: Node) -> Node | None:
    definition = definition_of(node)
    return definition if definition.type in ("function_definition", "class_definition") else None


def _class(module: PyModule, name: str, node: Node) -> PyClass:
    cls = PyClass(module, name, node)
    body = child(definition_of(node), "body")
    for member in body.named_children if body is not None else []:
        definition = _definition(member)
        if definition is not None and definition.type == "class_definition":
            cls.nested[text(child(definition, "name"))] = member
        elif definition is not None:
            method = text(child(definition, "name"))
            cls.methods[method] = member
            decorators = decorator_names(member)
            kind = next((d for d in decorators if d in ("classmethod", "staticmethod")), "")
            cls.method_kinds[method] = kind
    return cls


def _absolute(module: PyModule, source: Node) -> str:
    if source.type != "relative_import":
        return text(source)
    prefix = next((c for c in source.named_children if c.type == "import_prefix"), None)
    dotted = next((c for c in source.named_children if c.type == "dotted_name"), None)
    base = module.relative_base(len(text(prefix)))
    rest = text(dotted)
    return f"{base}.{rest}" if base and rest else base or rest


def _module_name(path: str, package_dirs: set[str]) -> str:
    parts = path.removesuffix(".py").split("/")
    if parts[-1] == "__init__":
        parts.pop()
    start = max(len(parts) - 1, 0)
    while start > 0 and "/".join(parts[:start]) in package_dirs:
        start -= 1
    return ".".join(parts[start:])


def _dotted(path: str) -> str:
    return path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
