"""Find the files of a folder or git checkout worth indexing.

A git checkout is listed by git itself (tracked and untracked-but-not-ignored files), which honours
every .gitignore, .git/info/exclude and the global excludes exactly as git does. A plain folder is
walked with the .gitignore files found in it. Either way binaries (a NUL byte, or not UTF-8),
files over the size limit and files whose path the index API cannot take (not UTF-8, or over
1,024 characters) are skipped and counted; a skipped path is reported with its undecodable bytes
escaped (``bad\\xff.py``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pathspec

from context_ledger.sources.model import MAX_PATH_CHARS

DEFAULT_MAX_FILE_BYTES = 1_000_000
_SNIFF_BYTES = 8192
_ALWAYS_SKIPPED_DIRS = frozenset({".git", ".hg", ".svn"})


@dataclass
class WalkReport:
    """What the walk skipped, by reason."""

    binary: int = 0
    too_large: int = 0
    unreadable: int = 0
    #: a path that is not UTF-8 or is too long for the index API
    bad_name: int = 0
    #: every skipped path, and those skipped for their name, as printable_path gives them
    skipped_paths: list[str] = field(default_factory=list)
    bad_names: list[str] = field(default_factory=list)


def _git_files(root: Path) -> list[str] | None:
    if not (root / ".git").exists() or shutil.which("git") is None:
        return None
    result = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=False,
    )
    if result.returncode != 0:
        return None
    # Paths are bytes, as the file system holds them: decoded like os.walk's names (undecodable
    # bytes kept as surrogates, so the file can still be opened and its name reported).
    return sorted({os.fsdecode(p) for p in result.stdout.split(b"\0") if p})


def _walked_files(root: Path) -> list[str]:
    """Every file below ``root`` not excluded by a .gitignore on its way down."""
    found: list[str] = []
    specs: list[tuple[str, pathspec.GitIgnoreSpec]] = []
    for directory, dirs, files in os.walk(root):
        rel_dir = os.path.relpath(directory, root)
        rel_dir = "" if rel_dir == "." else rel_dir + "/"
        specs = [(base, spec) for base, spec in specs if rel_dir.startswith(base)]
        ignore_file = Path(directory) / ".gitignore"
        if ignore_file.is_file():
            lines = ignore_file.read_text(errors="replace").splitlines()
            specs.append((rel_dir, pathspec.GitIgnoreSpec.from_lines(lines)))
        dirs[:] = sorted(
            d
            for d in dirs
            if d not in _ALWAYS_SKIPPED_DIRS and not _ignored(specs, rel_dir + d + "/")
        )
        found.extend(rel_dir + f for f in sorted(files) if not _ignored(specs, rel_dir + f))
    return found


def _ignored(specs: list[tuple[str, pathspec.GitIgnoreSpec]], rel: str) -> bool:
    """Whether a .gitignore above ``rel`` (a directory ends in "/") excludes it. A name that is
    not UTF-8 is matched in its printable form (re2 takes no surrogates): ``*.py`` still
    matches ``bad\\xff.py``."""
    return any(spec.match_file(printable_path(rel[len(base) :])) for base, spec in specs)


def printable_path(rel: str) -> str:
    """``rel`` with the bytes that are not UTF-8 escaped (``bad\\xff.py``)."""
    return os.fsencode(rel).decode("utf-8", "backslashreplace")


def _indexable_name(rel: str) -> bool:
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:  # a surrogate standing for a byte that is not UTF-8
        return False
    return len(rel) <= MAX_PATH_CHARS


def read_text_file(path: Path, *, max_bytes: int) -> tuple[str | None, str]:
    """The file's text, or None and why it is skipped (``binary``, ``too_large``, ...)."""
    try:
        if path.stat().st_size > max_bytes:
            return None, "too_large"
        raw = path.read_bytes()
    except OSError:
        return None, "unreadable"
    if b"\0" in raw[:_SNIFF_BYTES]:
        return None, "binary"
    try:
        return raw.decode("utf-8"), "ok"
    except UnicodeDecodeError:
        return None, "binary"


def candidate_files(root: Path) -> list[str]:
    """The relative paths below ``root`` that git (or the .gitignore files) leaves in, in path
    order, not yet read: what :func:`iter_text_files` reads, and skips of."""
    paths = _git_files(root)
    return paths if paths is not None else _walked_files(root)


def iter_text_files(
    root: Path,
    *,
    max_bytes: int = DEFAULT_MAX_FILE_BYTES,
    report: WalkReport | None = None,
    paths: Sequence[str] | None = None,
) -> Iterator[tuple[str, str]]:
    """(relative path, text) for each indexable file below ``root``, in path order; of
    ``paths`` when given (:func:`candidate_files` of ``root``, listed already)."""
    report = report if report is not None else WalkReport()
    for rel in candidate_files(root) if paths is None else paths:
        path = root / rel
        if not path.is_file() or path.is_symlink():
            continue
        if not _indexable_name(rel):
            report.bad_name += 1
            report.bad_names.append(printable_path(rel))
            report.skipped_paths.append(printable_path(rel))
            continue
        text, reason = read_text_file(path, max_bytes=max_bytes)
        if text is None:
            setattr(report, reason, getattr(report, reason) + 1)
            report.skipped_paths.append(rel)
            continue
        yield rel, text
