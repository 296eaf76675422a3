"""Which files `context-ledger ingest` reads: .gitignore honoured, no binaries or big files."""

from __future__ import annotations

import os
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


def _create(root: Path, name: bytes) -> None:
    fd = os.open(os.path.join(os.fsencode(root), name), os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"print('hi')\n")
    os.close(fd)


@pytest.mark.parametrize("git", [False, True], ids=["folder", "git checkout"])
def test_a_file_whose_name_is_not_utf8_or_too_long_is_skipped_and_reported(tree, git) -> None:
    if git and shutil.which("git") is None:
        pytest.skip("git is not installed")
    _create(tree, b"bad\xff.py")
    _create(tree, b"ok\xc3\xa9.py")  # é: UTF-8, kept
    deep = tree.joinpath(*(letter * 200 for letter in "defghi"))  # 1,214 characters
    deep.mkdir(parents=True)
    (deep / "long.py").write_text("x = 1\n")
    if git:
        subprocess.run(["git", "init", "-q", str(tree)], check=True)
    report = WalkReport()

    found = [path for path, _ in iter_text_files(tree, max_bytes=1_000, report=report)]

    assert "oké.py" in found
    assert not any(p.startswith(("bad", "d" * 200)) for p in found)
    assert report.bad_name == 2
    assert sorted(report.bad_names) == [
        "bad\\xff.py",
        deep.relative_to(tree).as_posix() + "/long.py",
    ]
