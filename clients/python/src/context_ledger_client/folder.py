"""The files of a folder worth indexing, found with the standard library only.

A git checkout is listed by git itself (tracked, and untracked but not ignored), which honours
every .gitignore exactly as git does; any other folder is walked whole, less version-control
folders. (The server's own ``context-ledger ingest`` also applies .gitignore files in a plain
folder, with ``pathspec``; this package depends on httpx alone, and a re-implementation of
gitignore's matching rules would be a second, subtly different one.) Files the index API cannot
take are skipped and counted: a NUL byte in the first 8 KiB or content that is not UTF-8
(binary), over the size limit, unreadable, or a path that is not UTF-8 or over 1,024 characters.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_MAX_FILE_BYTES = 1_000_000
#: the index API's limit on a document's path
MAX_PATH_CHARS = 1024
_SNIFF_BYTES = 8192
_VCS_DIRS = frozenset({".git", ".hg", ".svn"})


@dataclass
class Skips:
    """Counts of skipped files by reason, filled in as the walk goes."""

    binary: int = 0
    too_large: int = 0
    unreadable: int = 0
    bad_name: int = 0
    paths: list[str] = field(default_factory=list)

    def add(self, reason: str, rel: str) -> None:
        setattr(self, reason, getattr(self, reason) + 1)
        self.paths.append(os.fsencode(rel).decode("utf-8", "backslashreplace"))


def list_files(root: Path) -> list[str]:
    """Relative paths (``/``-separated) of the candidate files below ``root``, sorted."""
    listed = _git_files(root)
    if listed is not None:
        return listed
    found: list[str] = []
    for directory, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _VCS_DIRS)
        rel_dir = Path(directory).relative_to(root)
        found.extend((rel_dir / name).as_posix() for name in files)
    return sorted(found)


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
    return sorted({os.fsdecode(p) for p in result.stdout.split(b"\0") if p})


def read_files(
    root: Path, paths: list[str], *, max_bytes: int, skips: Skips
) -> Iterator[tuple[str, str | None]]:
    """(path, text) for each of ``paths``; text None for a file skipped (and counted)."""
    for rel in paths:
        path = root / rel
        if path.is_symlink() or not path.is_file():
            yield rel, None
            continue
        reason, text = _read(path, rel, max_bytes)
        if text is None:
            skips.add(reason, rel)
        yield rel, text


def _read(path: Path, rel: str, max_bytes: int) -> tuple[str, str | None]:
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:  # a surrogate standing for a byte of a name that is not UTF-8
        return "bad_name", None
    if len(rel) > MAX_PATH_CHARS:
        return "bad_name", None
    try:
        if path.stat().st_size > max_bytes:
            return "too_large", None
        raw = path.read_bytes()
    except OSError:
        return "unreadable", None
    if b"\0" in raw[:_SNIFF_BYTES]:
        return "binary", None
    try:
        return "ok", raw.decode("utf-8")
    except UnicodeDecodeError:
        return "binary", None
