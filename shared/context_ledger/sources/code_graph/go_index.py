"""The Go packages of a snapshot: files grouped by directory and package clause, their declarations,
imports resolved to other packages of the snapshot, and cheap type lookups over them.

A package is keyed by directory and package name, so ``package refunds`` and the external test
package ``package refunds_test`` in ``refunds/`` are two packages, the second importing the first.
Declarations in ``_test.go`` files are visible only to test files of the same directory, as in
``go test``.
"""

from __future__ import annotations

import posixpath
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from tree_sitter import Node

from context_ledger.sources.code_graph.syntax import GO, fields, parse, text, unwrap
from context_ledger.sources.code_graph.syntax import field as child
from context_ledger.sources.model import Document

TEST_FILE_SUFFIX = "_test.go"
_MODULE_DIRECTIVE = re.compile(r'^\s*module\s+"?([^\s"]+)"?', re.MULTILINE)


@dataclass(frozen=True)
class TypeRef:
    """A named type; ``package`` is None for a type outside the snapshot (builtin, standard library,
    another module), on which no method is ever resolved."""

    package: str | None
    name: str


FOREIGN = TypeRef(None, "")


@dataclass(eq=False)
class GoFile:
    path: str
    directory: str
    package_name: str
    root: Node
    is_test: bool
    import_specs: list[tuple[str | None, str]]
    imports: dict[str, GoPackage | None] = field(default_factory=dict)
    dot_imports: list[GoPackage] = field(default_factory=list)
    package: GoPackage = field(init=False)


@dataclass(eq=False)
class GoDecl:
    """A function or method declaration; ``symbol`` is ``Name`` or ``Recv.Name``."""

    symbol: str
    file: GoFile
    node: Node


@dataclass(eq=False)
class GoPackage:
    key: str
    directory: str
    name: str
    files: list[GoFile] = field(default_factory=list)
    functions: defaultdict[str, list[GoDecl]] = field(default_factory=lambda: defaultdict(list))
    methods: defaultdict[str, defaultdict[str, list[GoDecl]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list))
    )
    types: defaultdict[str, list[tuple[GoFile, Node]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    variables: defaultdict[str, list[tuple[GoFile, Node]]] = field(
        default_factory=lambda: defaultdict(list)
    )

    def method_decls(self, name: str) -> list[GoDecl]:
        return [decl for by_name in self.methods.values() for decl in by_name.get(name, [])]


class GoIndex:
    def __init__(self, documents: Sequence[Document]) -> None:
        self.packages: dict[str, GoPackage] = {}
        self._modules = sorted(
            (
                (match.group(1), posixpath.dirname(doc.path))
                for doc in documents
                if posixpath.basename(doc.path) == "go.mod"
                and (match := _MODULE_DIRECTIVE.search(doc.content))
            ),
            key=lambda module: -len(module[0]),
        )
        for doc in documents:
            if posixpath.basename(doc.path) != "go.mod" and not _ignored(doc.path):
                self._add_file(doc)
        self._primary = self._primary_packages()
        for package in self.packages.values():
            for file in package.files:
                self._resolve_imports(file)
            for file in package.files:
                self._declare(file)

    @property
    def files(self) -> Iterable[GoFile]:
        return (file for package in self.packages.values() for file in package.files)

    def primary_package(self, directory: str) -> GoPackage | None:
        """The package a directory's import path names (not its external test package)."""
        return self._primary.get(directory)

    @staticmethod
    def visible(decls: Iterable[GoDecl], from_file: GoFile) -> list[GoDecl]:
        return [
            decl
            for decl in decls
            if not decl.file.is_test
            or (from_file.is_test and from_file.directory == decl.file.directory)
        ]

    def type_ref(
        self, node: Node | None, file: GoFile, type_params: frozenset[str] = frozenset()
    ) -> TypeRef | None:
        """The named type a type expression denotes; None for a type parameter (unknown)."""
        node = unwrap(node, "parenthesized_type")
        if node is None:
            return FOREIGN
        if node.type == "pointer_type":
            return self.type_ref(node.named_children[-1], file, type_params)
        if node.type == "generic_type":
            return self.type_ref(child(node, "type"), file, type_params)
        if node.type == "type_identifier":
            name = text(node)
            if name in type_params:
                return None
            for package in (file.package, *file.dot_imports):
                if name in package.types:
                    return TypeRef(package.key, name)
            return TypeRef(None, name)
        if node.type == "qualified_type":
            target = file.imports.get(text(child(node, "package")))
            name = text(child(node, "name"))
            return TypeRef(target.key if target else None, name)
        return FOREIGN

    def method(self, owner: TypeRef, name: str, from_file: GoFile) -> list[GoDecl]:
        """The declarations of ``owner.name``, promoted through embedded fields and aliases."""
        return self._method(owner, name, from_file, set())

    def field_type(self, owner: TypeRef, name: str) -> TypeRef | None:
        return self._field_type(owner, name, set())

    def result_type(self, decl: GoDecl, index: int) -> TypeRef | None:
        result = child(decl.node, "result")
        if result is None:
            return None
        if result.type == "parameter_list":
            types = [
                child(param, "type")
                for param in result.named_children
                if param.type == "parameter_declaration"
                for _ in range(max(1, len(fields(param, "name"))))
            ]
            node = types[index] if index < len(types) else None
        else:
            node = result if index == 0 else None
        return self.type_ref(node, decl.file, type_parameters(decl.node)) if node else None

    def _method(
        self, owner: TypeRef, name: str, from_file: GoFile, seen: set[TypeRef]
    ) -> list[GoDecl]:
        package = self.packages.get(owner.package or "")
        if package is None or owner in seen:
            return []
        seen.add(owner)
        own = self.visible(package.methods.get(owner.name, {}).get(name, []), from_file)
        if own:
            return own
        promoted = [
            found
            for inner in self._embedded(package, owner.name)
            if (found := self._method(inner, name, from_file, seen))
        ]
        return promoted[0] if len(promoted) == 1 else []

    def _field_type(self, owner: TypeRef, name: str, seen: set[TypeRef]) -> TypeRef | None:
        package = self.packages.get(owner.package or "")
        if package is None or owner in seen:
            return None
        seen.add(owner)
        for file, spec in package.types.get(owner.name, []):
            for declaration in _struct_fields(spec):
                names = [text(node) for node in fields(declaration, "name")]
                type_node = child(declaration, "type")
                if name in names or (not names and _base_type_name(type_node) == name):
                    return self.type_ref(type_node, file, type_parameters(spec))
        promoted = {
            found
            for inner in self._embedded(package, owner.name)
            if (found := self._field_type(inner, name, seen)) is not None
        }
        return promoted.pop() if len(promoted) == 1 else None

    def _embedded(self, package: GoPackage, type_name: str) -> list[TypeRef]:
        """Types whose methods ``type_name`` has too: embedded fields, or the target of an alias."""
        found: list[TypeRef] = []
        for file, spec in package.types.get(type_name, []):
            if spec.type == "type_alias":
                found.append(self.type_ref(child(spec, "type"), file) or FOREIGN)
            for declaration in _struct_fields(spec):
                if not fields(declaration, "name"):
                    found.append(self.type_ref(child(declaration, "type"), file) or FOREIGN)
        return found

    def _add_file(self, doc: Document) -> None:
        root = parse(GO, doc.content)
        clause = next((node for node in root.named_children if node.type == "package_clause"), None)
        if clause is None or clause.named_child_count == 0:
            return
        directory = posixpath.dirname(doc.path)
        name = text(clause.named_children[0])
        file = GoFile(
            path=doc.path,
            directory=directory,
            package_name=name,
            root=root,
            is_test=doc.path.endswith(TEST_FILE_SUFFIX),
            import_specs=_import_specs(root),
        )
        key = f"{directory}#{name}"
        package = self.packages.setdefault(key, GoPackage(key=key, directory=directory, name=name))
        package.files.append(file)
        file.package = package

    def _primary_packages(self) -> dict[str, GoPackage]:
        by_directory: defaultdict[str, list[GoPackage]] = defaultdict(list)
        for package in self.packages.values():
            if not (package.name.endswith("_test") and all(f.is_test for f in package.files)):
                by_directory[package.directory].append(package)
        return {
            directory: max(candidates, key=lambda p: sum(not f.is_test for f in p.files))
            for directory, candidates in by_directory.items()
        }

    def _resolve_imports(self, file: GoFile) -> None:
        for alias, import_path in file.import_specs:
            directory = self._import_directory(import_path)
            target = self._primary.get(directory) if directory is not None else None
            if alias == ".":
                if target is not None:
                    file.dot_imports.append(target)
            elif alias != "_":
                file.imports[alias or (target.name if target else _default_name(import_path))] = (
                    target
                )

    def _import_directory(self, import_path: str) -> str | None:
        """The snapshot directory of an import path.

        With ``go.mod`` files, their module paths (and ``vendor/``) decide; an import under no
        module of the snapshot is a dependency. Without one, the longest directory the path ends
        with, if only one is that long; standard-library paths (``errors``) never match.
        """
        for module, module_dir in self._modules:
            if import_path == module or import_path.startswith(module + "/"):
                rest = import_path[len(module) :].lstrip("/")
                directory = posixpath.normpath(posixpath.join(module_dir, rest))
                return "" if directory == "." else directory
        if self._modules:
            vendored = (posixpath.join(d, "vendor", import_path) for _, d in self._modules)
            return next((d for d in vendored if d in self._primary), None)
        if "/" not in import_path and "." not in import_path:
            return None
        matches = [
            directory
            for directory in self._primary
            if directory and (import_path == directory or import_path.endswith("/" + directory))
        ]
        longest = max((len(directory) for directory in matches), default=0)
        best = [directory for directory in matches if len(directory) == longest]
        return best[0] if len(best) == 1 else None

    def _declare(self, file: GoFile) -> None:
        package = file.package
        for node in file.root.named_children:
            if node.type == "function_declaration":
                name = text(child(node, "name"))
                package.functions[name].append(GoDecl(name, file, node))
            elif node.type == "method_declaration":
                receiver = receiver_type_name(node)
                name = text(child(node, "name"))
                if receiver:
                    decl = GoDecl(f"{receiver}.{name}", file, node)
                    package.methods[receiver][name].append(decl)
            elif node.type == "type_declaration":
                for spec in node.named_children:
                    if spec.type in ("type_spec", "type_alias"):
                        package.types[text(child(spec, "name"))].append((file, spec))
            elif node.type in ("var_declaration", "const_declaration"):
                for spec in _specs(node):
                    for name_node in fields(spec, "name"):
                        package.variables[text(name_node)].append((file, spec))


def _ignored(path: str) -> bool:
    """Whether the go tool skips a file: under ``testdata/`` or a directory starting with ``.``
    or ``_``."""
    return any(
        d == "testdata" or d.startswith((".", "_")) for d in posixpath.dirname(path).split("/")
    )


def receiver_type_name(method: Node) -> str:
    """``Refunds`` for ``func (r *Refunds[T]) ...``: no pointer, no type parameters."""
    receiver = child(method, "receiver")
    params = (
        [p for p in receiver.named_children if p.type == "parameter_declaration"]
        if receiver
        else []
    )
    return _base_type_name(child(params[0], "type")) if params else ""


def type_parameters(node: Node) -> frozenset[str]:
    """Type parameter names in scope of a declaration, a type spec or a generic method receiver."""
    names = {
        text(name)
        for params in fields(node, "type_parameters")
        for declaration in params.named_children
        for name in fields(declaration, "name")
    }
    receiver = child(node, "receiver")
    if receiver is not None:
        for param in receiver.named_children:
            receiver_type = unwrap(child(param, "type"), "parenthesized_type")
            if receiver_type is not None and receiver_type.type == "pointer_type":
                receiver_type = receiver_type.named_children[-1]
            arguments = child(receiver_type, "type_arguments") if receiver_type else None
            if arguments is not None:
                names.update(text(arg) for arg in arguments.named_children)
    return frozenset(names)


def _base_type_name(node: Node | None) -> str:
    node = unwrap(node, "parenthesized_type")
    while node is not None and node.type in ("pointer_type", "generic_type", "qualified_type"):
        node = (
            node.named_children[-1]
            if node.type == "pointer_type"
            else child(node, "type" if node.type == "generic_type" else "name")
        )
    return text(node) if node is not None and node.type == "type_identifier" else ""


def _struct_fields(spec: Node) -> list[Node]:
    struct = child(spec, "type") if spec.type == "type_spec" else None
    if struct is None or struct.type != "struct_type":
        return []
    return [
        declaration
        for body in struct.named_children
        if body.type == "field_declaration_list"
        for declaration in body.named_children
        if declaration.type == "field_declaration"
    ]


def _specs(declaration: Node) -> list[Node]:
    specs: list[Node] = []
    for node in declaration.named_children:
        if node.type in ("var_spec", "const_spec"):
            specs.append(node)
        elif node.type == "var_spec_list":
            specs.extend(spec for spec in node.named_children if spec.type == "var_spec")
    return specs


def _import_specs(root: Node) -> list[tuple[str | None, str]]:
    specs: list[tuple[str | None, str]] = []
    for declaration in root.named_children:
        if declaration.type != "import_declaration":
            continue
        for node in declaration.named_children:
            nodes = node.named_children if node.type == "import_spec_list" else [node]
            for spec in nodes:
                if spec.type == "import_spec":
                    alias = child(spec, "name")
                    path = text(child(spec, "path")).strip('"`')
                    specs.append((text(alias) if alias is not None else None, path))
    return specs


def _default_name(import_path: str) -> str:
    """A package's usual name from its import path (``gopkg.in/yaml.v3`` → ``yaml``).

    Only a guess for packages outside the snapshot; resolution treats any identifier that is not a
    local, a package-level name or a known import as a foreign package anyway.
    """
    parts = import_path.split("/")
    last = parts[-2] if len(parts) > 1 and re.fullmatch(r"v\d+", parts[-1]) else parts[-1]
    return re.sub(r"\.v\d+$", "", last).removeprefix("go-")
