"""The docs hold together: every relative link and anchor resolves inside the repository, no doc
names a path outside it, the README stays a short first page, and the reference pages keep up
with the code they describe (every variable, every CLI command, every table).

The README's walk-through itself runs against a dev stack in
tests/integration/test_readme_walkthrough.py.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

from context_ledger.cli import build_parser
from context_ledger.local.cfn import load_yaml
from context_ledger.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README_MAX_LINES = 200


def _markdown_files() -> list[Path]:
    """The repository's own docs (fixtures under tests/ are test data, not docs)."""
    found = [*ROOT.glob("*.md"), *DOCS.rglob("*.md"), *(ROOT / "bench").rglob("*.md")]
    found += [*(ROOT / "clients").glob("*/README.md")]
    return sorted(set(found))


MARKDOWN = _markdown_files()


def _prose(text: str) -> str:
    """The text outside fenced code blocks (a fence's `#` lines are comments, not headings)."""
    kept, fence = [], None
    for line in text.splitlines():
        marker = re.match(r"^\s*(`{3,}|~{3,})", line)
        if marker and (fence is None or marker.group(1).startswith(fence)):
            fence = None if fence else marker.group(1)
            continue
        if fence is None:
            kept.append(line)
    return "\n".join(kept)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


@cache
def _anchors(path: Path) -> frozenset[str]:
    seen: dict[str, int] = {}
    anchors = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*$", _prose(path.read_text()), re.M):
        slug = _slug(heading)
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return frozenset(anchors)


def _links(path: Path) -> list[str]:
    """Targets of the Markdown links and images in the prose (not in code spans or fences)."""
    prose = re.sub(r"`[^`\n]*`", "", _prose(path.read_text()))
    return re.findall(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)", prose)


def _relative(target: str) -> bool:
    return not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I)  # http:, mailto:, ...


def _doc_id(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_the_docs_are_found() -> None:
    names = {_doc_id(p) for p in MARKDOWN}
    for name in ("api", "cli", "configuration", "architecture", "retrieval", "deploy", "mcp"):
        assert f"docs/{name}.md" in names
    assert {"README.md", "BENCHMARKS.md", "docs/decisions.md"} <= names


@pytest.mark.parametrize("doc", MARKDOWN, ids=_doc_id)
def test_every_relative_link_resolves_to_a_file_and_anchor_in_the_repository(doc: Path) -> None:
    broken = []
    for target in filter(_relative, _links(doc)):
        file, _, anchor = target.partition("#")
        resolved = (doc.parent / file).resolve() if file else doc
        if not resolved.is_relative_to(ROOT) or not resolved.exists():
            broken.append(f"{target}: no such file in the repository")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(f"{target}: no heading with that anchor")
    assert not broken, f"{_doc_id(doc)}: " + "; ".join(broken)


@pytest.mark.parametrize("doc", MARKDOWN, ids=_doc_id)
def test_no_doc_names_a_path_outside_the_repository(doc: Path) -> None:
    text = doc.read_text()
    outside = re.findall(r"\.\./shared\b|/work/\S*|\.\./\.\./\.\.", text)
    if doc.parent == ROOT:
        outside += re.findall(r"\]\(\.\./[^)]*\)", text)
    assert not outside, f"{_doc_id(doc)} names {outside}"


def test_the_readme_is_a_short_first_page() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"


def test_the_readme_indexes_every_doc() -> None:
    readme = (ROOT / "README.md").read_text()
    for doc in sorted(DOCS.glob("*.md")):
        assert f"](docs/{doc.name})" in readme, f"README.md's index lacks docs/{doc.name}"


# --- configuration.md: every variable the code and the template name ---------------------------


def _configuration_rows() -> dict[str, str]:
    """Each variable a row of docs/configuration.md's tables names in its first cell."""
    lines = (DOCS / "configuration.md").read_text().splitlines()
    table = [row for row in lines if row.startswith("| `")]
    return {
        name: row
        for row in table
        for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", row.split(" | ", 1)[0])
    }


def _template_variables() -> dict[str, object]:
    """Every variable template.yaml sets on a function, with its value (a ``Ref`` or a literal)."""
    template = load_yaml(ROOT / "template.yaml")
    found = dict(template["Globals"]["Function"]["Environment"]["Variables"])
    for resource in template["Resources"].values():
        if resource["Type"] == "AWS::Serverless::Function":
            found.update((resource["Properties"].get("Environment") or {}).get("Variables") or {})
    return found


def _settings_variables() -> list[str]:
    fields = Settings.model_fields.values()
    return sorted(str(field.validation_alias.choices[0]) for field in fields)


@pytest.mark.parametrize("name", _settings_variables())
def test_every_setting_is_a_row_of_the_configuration_table(name: str) -> None:
    assert name in _configuration_rows(), f"docs/configuration.md does not explain {name}"


@pytest.mark.parametrize("name", sorted(_template_variables()))
def test_every_variable_the_template_sets_is_a_row_naming_its_parameter(name: str) -> None:
    row = _configuration_rows().get(name)
    assert row is not None, f"docs/configuration.md does not explain {name}"
    value = _template_variables()[name]
    template = load_yaml(ROOT / "template.yaml")
    refs = re.findall(r"'Ref': '(\w+)'", repr(value))  # a parameter or one of the stack's resources
    for ref in refs:
        assert ref in template["Parameters"] or ref in template["Resources"]
        assert f"`{ref}`" in row.split(" | ")[2], f"{name}'s row does not name {ref}"
    if not refs:
        assert f"`{value}`" in row, f"{name}'s row does not give the template's value {value!r}"


def test_the_configuration_table_explains_no_variable_nothing_reads() -> None:
    source = "\n".join(p.read_text() for p in (ROOT / "shared" / "context_ledger").rglob("*.py"))
    source += (ROOT / "Makefile").read_text() + (ROOT / "scripts" / "demo.sh").read_text()
    read = set(_settings_variables()) | set(_template_variables())
    for name in _configuration_rows():
        assert name in read or re.search(rf"\b{name}\b", source), f"nothing reads {name}"


# --- api.md: every route of the template ------------------------------------------------------


def _template_routes() -> list[tuple[str, str]]:
    routes = set()
    for resource in load_yaml(ROOT / "template.yaml")["Resources"].values():
        if resource["Type"] != "AWS::Serverless::Function":
            continue
        for event in (resource["Properties"].get("Events") or {}).values():
            if event["Type"] == "HttpApi":
                routes.add((event["Properties"]["Method"].upper(), event["Properties"]["Path"]))
    return sorted(routes)


def _parameters_unnamed(path: str) -> str:
    return re.sub(r"\{[^}]*\}", "{}", path)  # the docs may name a parameter otherwise


@pytest.mark.parametrize(("method", "path"), _template_routes())
def test_every_route_is_a_row_of_the_api_reference(method: str, path: str) -> None:
    rows = re.findall(r"^\| `([A-Z]+)` \| `([^`?\[]+)", (DOCS / "api.md").read_text(), re.M)
    documented = {(m, _parameters_unnamed(p)) for m, p in rows}
    assert (method, _parameters_unnamed(path)) in documented, f"docs/api.md lacks {method} {path}"


# --- cli.md and architecture.md ----------------------------------------------------------------


def test_every_cli_command_is_in_the_cli_reference() -> None:
    parser = build_parser()
    [commands] = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    reference = (DOCS / "cli.md").read_text()
    for command in commands.choices:
        assert f"`context-ledger {command}" in reference, f"docs/cli.md lacks `{command}`"


def _tables_of_the_schema() -> set[str]:
    migrations = (ROOT / "shared" / "context_ledger" / "db" / "migrations").glob("*.sql")
    sql = "\n".join(path.read_text() for path in migrations)
    created = set(re.findall(r"CREATE TABLE (?:IF NOT EXISTS )?(\w+)", sql, re.I))
    dropped = set(re.findall(r"DROP TABLE (?:IF EXISTS )?(\w+)", sql, re.I))
    return created - dropped - {"text_rank_delta"}  # a trigger's temporary table


def _ownership_rows() -> dict[str, str]:
    guide = (DOCS / "architecture.md").read_text()
    section = guide.split("\n## Which module owns each table\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return {name: row for row in rows for name in re.findall(r"`(\w+)`", row.split(" | ", 1)[0])}


def test_the_architecture_names_an_owner_for_every_table_and_only_real_ones() -> None:
    assert set(_ownership_rows()) == _tables_of_the_schema()


@pytest.mark.parametrize("table", sorted(_tables_of_the_schema()))
def test_each_tables_owner_is_a_module_that_writes_it(table: str) -> None:
    owners = _ownership_rows()[table].split(" | ")[1]
    if "triggers on `chunks`" in owners:
        return
    modules = re.findall(r"`([\w/]+\.py)`", owners)
    assert modules, f"{table} has no owner module"
    package = ROOT / "shared" / "context_ledger"
    write = re.compile(rf"(INSERT INTO|UPDATE|DELETE FROM|COPY) {table}\b", re.I)
    for module in modules:
        assert write.search((package / module).read_text()), f"{module} does not write {table}"
