"""Language names from paths, and the tree-sitter grammars of the languages chunked by syntax."""

from __future__ import annotations

from functools import cache
from pathlib import PurePosixPath

import tree_sitter_go
import tree_sitter_python
import tree_sitter_typescript
from tree_sitter import Language, Parser

# Languages chunked at function, method and type boundaries.
CODE_LANGUAGES = frozenset({"go", "python", "typescript", "tsx"})
# Languages chunked as prose (headings and paragraphs) wherever they appear.
PROSE_LANGUAGES = frozenset({"markdown", "restructuredtext", "asciidoc"})
# Plain text: prose in documents, lines in a codebase (requirements.txt, CMakeLists.txt).
TEXT_LANGUAGE = "text"

_EXTENSIONS = {
    ".go": "go",
    ".py": "python",
    ".pyi": "python",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".java": "java",
    ".kt": "kotlin",
    ".kts": "kotlin",
    ".scala": "scala",
    ".rs": "rust",
    ".rb": "ruby",
    ".php": "php",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".hpp": "cpp",
    ".cs": "csharp",
    ".swift": "swift",
    ".lua": "lua",
    ".sql": "sql",
    ".sh": "shell",
    ".bash": "shell",
    ".zsh": "shell",
    ".ps1": "powershell",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".json": "json",
    ".toml": "toml",
    ".ini": "ini",
    ".xml": "xml",
    ".html": "html",
    ".htm": "html",
    ".css": "css",
    ".scss": "scss",
    ".proto": "protobuf",
    ".graphql": "graphql",
    ".tf": "hcl",
    ".md": "markdown",
    ".markdown": "markdown",
    ".mdx": "markdown",
    ".rst": "restructuredtext",
    ".adoc": "asciidoc",
    ".txt": TEXT_LANGUAGE,
}
_FILE_NAMES = {
    "dockerfile": "dockerfile",
    "makefile": "makefile",
    "gnumakefile": "makefile",
}
# Spellings a client may send in Document.language for the languages handled specially.
_ALIASES = {
    "golang": "go",
    "py": "python",
    "python3": "python",
    "ts": "typescript",
    "md": "markdown",
}


def detect_language(path: str) -> str | None:
    """Language of a file from its name (``service.go`` → ``go``); None when unknown."""
    name = PurePosixPath(path.replace("\\", "/")).name.lower()
    if name in _FILE_NAMES:
        return _FILE_NAMES[name]
    return _EXTENSIONS.get(PurePosixPath(name).suffix)


def normalise_language(language: str | None) -> str | None:
    """A client-supplied language name in our spelling (``Golang`` → ``go``)."""
    if not language or not language.strip():
        return None
    name = language.strip().lower()
    return _ALIASES.get(name, name)


def parser_for(language: str) -> Parser:
    """A new parser for one of CODE_LANGUAGES (parsers are cheap and not shared across threads)."""
    return Parser(_grammar(language))


@cache
def _grammar(language: str) -> Language:
    grammars = {
        "go": tree_sitter_go.language,
        "python": tree_sitter_python.language,
        "typescript": tree_sitter_typescript.language_typescript,
        "tsx": tree_sitter_typescript.language_tsx,
    }
    return Language(grammars[language]())
