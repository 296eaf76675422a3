"""Which files `context-ledger ingest` reads: .gitignore honoured, no binaries or big files."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from context_ledger.sources.walk import WalkReport, iter_text_files


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    files = {
        ".gitignore": "build/\n*.log\n",
        "README.md": "# Shop\n",
        "main.go": "package main\n",
        "debug.log": "noise\n",
        "build/out.txt": "generated\n",
        "pkg/.gitignore": "secret.txt\n",
        "pkg/secret.txt": "hidden\n",
        "pkg/lib.py": "def f():\n    return 1\n",
        "other/secret.txt": "kept: the nested .gitignore covers pkg/ only\n",
        "big.txt": "x" * 2_000,
        "latin1.txt": "caf\xe9",
    }
    for rel, content in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode("latin-1") if rel == "latin1.txt" else content.encode())
    (tmp_path / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00binary")
    return tmp_path


EXPECTED = [
    ".gitignore",
    "README.md",
    "main.go",
    "other/secret.txt",
    "pkg/.gitignore",
    "pkg/lib.py",
]


def test_a_folder_walk_honours_gitignore_files_and_skips_binaries_and_big_files(tree) -> None:
    report = WalkReport()

    found = [path for path, _ in iter_text_files(tree, max_bytes=1_000, report=report)]

    assert found == EXPECTED
    assert (report.binary, report.too_large) == (2, 1)
    assert sorted(report.skipped_paths) == ["big.txt", "latin1.txt", "logo.png"]


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_git_checkout_is_listed_by_git(tree) -> None:
    subprocess.run(["git", "init", "-q", str(tree)], check=True)
    (tree / ".git" / "info" / "exclude").write_text("main.go\n")

    found = [path for path, _ in iter_text_files(tree, max_bytes=1_000)]

    assert found == [p for p in EXPECTED if p != "main.go"]


def test_file_text_is_read_as_utf8(tree) -> None:
    texts = dict(iter_text_files(tree, max_bytes=1_000))

    assert texts["pkg/lib.py"] == "def f():\n    return 1\n"
