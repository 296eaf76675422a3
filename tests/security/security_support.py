"""The authorisation matrix's world, callers and cell runner (kept out of conftest.py so the test
modules import them by name)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml
from api_support import bearer, wait_for_attribution

from context_ledger.auth.api_keys import create_api_key
from context_ledger.auth.local_keys import LocalKeys, issue_token
from context_ledger.auth.principal import SCOPE_AUDIT_READ, SCOPE_CONTEXT_ADMIN
from context_ledger.db import connection
from context_ledger.settings import get_settings
from context_ledger.spaces.service import Organisation, create_organisation

MATRIX_FILE = Path(__file__).with_name("authz_matrix.yaml")

#: Every caller kind a matrix operation must list, in the matrix's order.
CALLERS = (
    "anonymous",
    "bad_token",
    "expired_token",
    "other_org",
    "no_permission",
    "searcher",
    "space_admin",
    "context_admin",
    "auditor",
    "service",
    "api_key",
)

MEMORY_PROJECT = "billing"
SEARCH = "context:space:search"
ADMIN = "context:space:admin"


def load_matrix() -> dict[str, Any]:
    return yaml.safe_load(MATRIX_FILE.read_text(encoding="utf-8"))


#: The expected "code" of API Gateway's own answer to a request without a credential.
API_GATEWAY = "api-gateway"


@dataclass(frozen=True)
class Expected:
    status: int
    code: str | None

    @classmethod
    def parse(cls, text: str) -> Expected:
        status, _, code = str(text).partition(" ")
        return cls(int(status), code or None)


@dataclass(frozen=True)
class Cell:
    """One request by one caller and the answer it must get."""

    caller: str
    method: str
    path: str
    expected: Expected
    query: Mapping[str, str] = field(default_factory=dict)
    json: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    expect_headers: Mapping[str, str] = field(default_factory=dict)


def operation_cells(matrix: dict[str, Any]) -> Iterator[tuple[str, Cell]]:
    """(test id, cell) for every operation x caller of the matrix."""
    for operation, spec in matrix["operations"].items():
        method, path = operation.split(" ", 1)
        request = spec.get("request") or {}
        for caller, expected in spec["expect"].items():
            cell = Cell(
                caller=caller,
                method=method,
                path=request.get("path", path),
                expected=Expected.parse(expected),
                query=request.get("query") or {},
                json=request.get("json"),
            )
            yield f"{operation} | {caller}", cell


def case_cells(cases: list[dict[str, Any]]) -> Iterator[tuple[str, Cell]]:
    """(test id, cell) for the object-level and mass-assignment lists."""
    for case in cases:
        cell = Cell(
            caller=case["caller"],
            method=case["method"],
            path=case["path"],
            expected=Expected.parse(case["expect"]),
            query=case.get("query") or {},
            json=case.get("json"),
            headers=case.get("headers") or {},
            expect_headers=case.get("expect_headers") or {},
        )
        body = json.dumps(case.get("json") or case.get("query") or {}, sort_keys=True)
        yield f"{case['caller']} {case['method']} {case['path']} {body}", cell


TokenFor = Callable[..., str]


def token_maker(keys: LocalKeys) -> TokenFor:
    def make(org: Organisation, user: str, *scopes: str, service: bool = False, **kw: Any) -> str:
        settings = get_settings()
        return issue_token(
            keys,
            issuer=settings.auth_issuer,
            audience=settings.auth_audience,
            org_id=org.id,
            user_id=user,
            client_id="security-tests",
            scopes=frozenset(scopes),
            service=service,
            **kw,
        )

    return make


@dataclass
class World:
    """Two organisations' objects (Acme's as ``name``, Globex's as ``b_name``) and the callers."""

    ids: dict[str, str]
    callers: dict[str, dict[str, str]]
    #: Acme's context:admin, making the objects a cell consumes.
    maker: _Org
    #: Ids of each organisation's world: a 2xx answer to the other one must hold none of them.
    acme_ids: set[str]
    globex_ids: set[str]

    def foreign_ids(self, caller: str) -> set[str]:
        return self.acme_ids if caller == "other_org" else self.globex_ids


class _Org:
    """Builds one organisation's objects through the API, as its context:admin."""

    def __init__(self, api: httpx.Client, org: Organisation, admin: dict[str, str]) -> None:
        self.api, self.org, self.admin = api, org, admin

    def call(self, method: str, path: str, expect: int, **kw: Any) -> httpx.Response:
        response = self.api.request(method, path, headers={**self.admin, **kw.pop("h", {})}, **kw)
        assert response.status_code == expect, f"{method} {path}: {response.text}"
        return response

    def space(self, name: str, level: str, parent: str | None = None) -> str:
        body = {"name": name, "level": level, **({"parentId": parent} if parent else {})}
        return self.call("POST", "/api/v1/context/spaces", 201, json=body).json()["id"]

    def grant(self, space: str, subject: str, permission: str) -> None:
        body = {"subject": subject, "permissions": [permission]}
        self.call("PUT", f"/api/v1/context/spaces/{space}/grants", 204, json=body)

    def source(self, space: str, *, published: bool = False) -> str:
        body = {"kind": "docs", "name": "Runbooks"}
        source = self.call("POST", f"/api/v1/context/spaces/{space}/sources", 201, json=body)
        source_id = source.json()["id"]
        if published:
            document = {"path": "refunds.md", "content": "# Refunds\n\nRefund approvals: two."}
            index = f"/api/v1/context/sources/{source_id}/index"
            self.call("PUT", index, 200, json={"documents": [document]})
        return source_id

    def build(self, space: str) -> tuple[str, str]:
        source = self.source(space)
        opened = self.call("POST", f"/api/v1/context/sources/{source}/index-versions", 201)
        return source, str(opened.json()["version"])

    def memory(self) -> str:
        body = {"content": "Refunds above 500 EUR need two approvals."}
        return self.call("POST", f"/api/context/{MEMORY_PROJECT}", 201, json=body).json()["id"]

    def memory_space(self) -> str:
        spaces = self.call("GET", "/api/v1/context/spaces", 200).json()["spaces"]
        return next(s["id"] for s in spaces if s["key"] == MEMORY_PROJECT)

    def retrieval(self, headers: dict[str, str], space: str) -> dict[str, str]:
        body = {"query": "refund approvals", "spaceId": space}
        response = self.api.post("/api/v1/context/retrieve", headers=headers, json=body)
        assert response.status_code == 200, response.text
        answer = response.json()
        assert answer["chunks"], "the world's retrieval found nothing"
        wait_for_attribution(answer["attributionId"])
        return answer

    def model_call(self, headers: dict[str, str]) -> str:
        body = {"model": "echo-1", "messages": [{"role": "user", "content": "refunds?"}]}
        response = self.api.post("/api/v1/models/chat/completions", headers=headers, json=body)
        assert response.status_code == 200, response.text
        return response.headers["x-keystone-gateway-request-id"]


#: Acme's grants, on its team space and on its memory project.
ACME_GRANTS = (("user:sam", SEARCH), ("user:indexer", SEARCH), ("user:ada", ADMIN))


def _objects(
    builder: _Org, retriever: dict[str, str], grants: tuple[tuple[str, str], ...] = ()
) -> dict[str, str]:
    """One organisation's objects; ``retriever`` makes its retrieval and its model call."""
    team = builder.space("Payments", "team")
    source = builder.source(team, published=True)
    memory = builder.memory()
    memory_space = builder.memory_space()
    for space in (team, memory_space):
        for subject, permission in grants:
            builder.grant(space, subject, permission)
    answer = builder.retrieval(retriever, team)
    return {
        "org": str(builder.org.id),
        "org_space": str(builder.org.space_id),
        "team": team,
        "source": source,
        "scratch_source": builder.source(team),
        "memory": memory,
        "memory_space": memory_space,
        "attribution": answer["attributionId"],
        "request": answer["requestId"],
        "gateway_call": builder.model_call(retriever),
    }


def build_world(api: httpx.Client, token: TokenFor, foreign_keys: LocalKeys) -> World:
    with connection() as conn:
        acme = create_organisation(conn, name="Acme")
        globex = create_organisation(conn, name="Globex")
        api_key = create_api_key(conn, org_id=acme.id, user_id="sam", name="laptop").key

    root = bearer(token(acme, "root", SCOPE_CONTEXT_ADMIN))
    searcher = bearer(token(acme, "sam"))
    acme_ids = _objects(_Org(api, acme, root), searcher, ACME_GRANTS)
    globex_root = bearer(token(globex, "gina", SCOPE_CONTEXT_ADMIN))
    globex_ids = _objects(_Org(api, globex, globex_root), globex_root)
    ids = {**acme_ids, **{f"b_{k}": v for k, v in globex_ids.items()}, "b_user": "gina"}

    foreign = token_maker(foreign_keys)
    callers = {
        "anonymous": {},
        "bad_token": bearer(foreign(acme, "root", SCOPE_CONTEXT_ADMIN)),
        "expired_token": bearer(token(acme, "root", SCOPE_CONTEXT_ADMIN, ttl_seconds=-3600)),
        "other_org": globex_root,
        "no_permission": bearer(token(acme, "nobody")),
        "searcher": searcher,
        "space_admin": bearer(token(acme, "ada")),
        "context_admin": root,
        "auditor": bearer(token(acme, "audrey", SCOPE_AUDIT_READ)),
        "service": bearer(token(acme, "indexer", service=True)),
        "api_key": bearer(api_key),
    }
    return World(
        ids=ids,
        callers=callers,
        maker=_Org(api, acme, root),
        acme_ids=set(acme_ids.values()),
        globex_ids=set(globex_ids.values()),
    )


class CellValues(dict):
    """The world's ids for one cell, plus objects made on first use for the cells that consume
    theirs (a deleted source, a published build)."""

    def __init__(self, world: World) -> None:
        super().__init__(world.ids)
        self.maker = world.maker

    def __missing__(self, key: str) -> str:
        team = self["team"]
        if key == "fresh_source":
            self[key] = self.maker.source(team)
        elif key in ("fresh_build_source", "fresh_build_version"):
            self["fresh_build_source"], self["fresh_build_version"] = self.maker.build(team)
        elif key == "fresh_memory":
            self[key] = self.maker.memory()
        else:
            raise KeyError(key)
        return self[key]


def fill(value: Any, values: CellValues) -> Any:
    """``value`` with every ``{placeholder}`` replaced, through lists and objects."""
    if isinstance(value, str):
        return value.format_map(values)
    if isinstance(value, list):
        return [fill(v, values) for v in value]
    if isinstance(value, dict):
        return {fill(k, values): fill(v, values) for k, v in value.items()}
    return value


def run_cell(api: httpx.Client, world: World, cell: Cell) -> list[str]:
    """Send the cell's request; the ways its answer differs from the expected one."""
    values = CellValues(world)
    response = api.request(
        cell.method,
        fill(cell.path, values),
        params=fill(dict(cell.query), values),
        json=fill(cell.json, values),
        headers={**world.callers[cell.caller], **fill(dict(cell.headers), values)},
    )
    problems = []
    code = _error_code(response)
    if (response.status_code, code if cell.expected.code else None) != (
        cell.expected.status,
        cell.expected.code,
    ):
        problems.append(
            f"expected {cell.expected.status} {cell.expected.code or ''}".rstrip()
            + f", got {response.status_code} {code or ''}: {response.text[:300]}"
        )
    if response.is_success:
        leaked = sorted(i for i in world.foreign_ids(cell.caller) if i in response.text)
        if leaked:
            problems.append(f"the answer holds the other organisation's ids {leaked}")
    for name, value in cell.expect_headers.items():
        if response.headers.get(name) != value:
            problems.append(
                f"header {name}: expected {value!r}, got {response.headers.get(name)!r}"
            )
    return problems


def _error_code(response: httpx.Response) -> str | None:
    """The error body's code; API_GATEWAY for API Gateway's own ``{"message": "Unauthorized"}``."""
    if response.is_success:
        return None
    try:
        body = response.json()
    except ValueError:
        return None
    if body == {"message": "Unauthorized"}:
        return API_GATEWAY
    try:
        return body["error"]["code"]
    except (KeyError, TypeError):
        return None
