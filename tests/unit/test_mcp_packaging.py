"""The MCP function's packages (functions/mcp/requirements.txt, installed with --no-deps on top of
the shared layer) are exactly what the MCP SDK needs beyond the layer, for Lambda's Python 3.12
on Linux: nothing missing, nothing the layer already carries installed a second time.

Dependencies are read from the installed distributions' metadata (``make install`` installs both
files), following extras, with markers evaluated for Lambda rather than for this interpreter.
"""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
LAMBDA = {
    "python_version": "3.12",
    "python_full_version": "3.12.0",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
}


def requirements(path: Path) -> list[Requirement]:
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [Requirement(line) for line in lines if line]


def closure(roots: list[Requirement]) -> set[str]:
    """Every distribution ``roots`` need on Lambda, by canonical name."""
    needed: set[str] = set()
    pending = [(root.name, frozenset(root.extras)) for root in roots]
    seen: set[tuple[str, frozenset[str]]] = set()
    while pending:
        name, extras = pending.pop()
        if (canonicalize_name(name), extras) in seen:
            continue
        seen.add((canonicalize_name(name), extras))
        needed.add(canonicalize_name(name))
        for text in metadata.requires(name) or []:
            requirement = Requirement(text)
            applies = requirement.marker is None or any(
                requirement.marker.evaluate({**LAMBDA, "extra": extra}) for extra in {"", *extras}
            )
            if applies:
                pending.append((requirement.name, frozenset(requirement.extras)))
    return needed


LAYER = closure(requirements(ROOT / "shared/requirements.txt"))
FUNCTION = requirements(ROOT / "functions/mcp/requirements.txt")
PINNED = {canonicalize_name(r.name) for r in FUNCTION}


def test_the_function_adds_every_package_mcp_needs_beyond_the_layer() -> None:
    assert closure([Requirement("mcp")]) - LAYER == PINNED


def test_the_function_installs_no_package_of_the_layer_a_second_time() -> None:
    assert PINNED.isdisjoint(LAYER)


def test_every_package_of_the_function_is_pinned_to_the_installed_version() -> None:
    for requirement in FUNCTION:
        assert re.fullmatch(r"==[\w.]+", str(requirement.specifier)), requirement
        assert requirement.specifier.contains(metadata.version(requirement.name)), requirement


def test_the_client_package_the_makefile_copies_is_there() -> None:
    makefile = (ROOT / "functions/mcp/Makefile").read_text()
    (client,) = re.findall(r"^CLIENT := \$\(HERE\)(\S+)$", makefile, re.M)

    assert (ROOT / "functions/mcp" / client / "__init__.py").is_file()
