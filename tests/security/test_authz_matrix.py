"""Every cell of the authorisation matrix (authz_matrix.yaml) against the local runtime: each
operation of the OpenAPI document x each caller kind, then the object-level (BOLA) cases and the
mass-assignment cases. One world of two organisations serves every cell of the module."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from security_support import (
    CALLERS,
    Cell,
    World,
    case_cells,
    load_matrix,
    operation_cells,
    run_cell,
)

from context_ledger.http.openapi import openapi_document

MATRIX = load_matrix()


def _params(cells: Iterator[tuple[str, Cell]]) -> list:
    return [pytest.param(cell, id=name) for name, cell in cells]


def _documented_operations() -> set[str]:
    return {
        f"{method.upper()} {path}"
        for path, item in openapi_document()["paths"].items()
        for method in item
    }


def test_every_openapi_operation_is_in_the_matrix_and_nothing_else() -> None:
    listed = set(MATRIX["operations"])

    assert _documented_operations() - listed == set(), "operations missing from the matrix"
    assert listed - _documented_operations() == set(), "matrix operations the API does not serve"


@pytest.mark.parametrize("operation", sorted(MATRIX["operations"]))
def test_every_operation_lists_every_caller_kind(operation: str) -> None:
    assert sorted(MATRIX["operations"][operation]["expect"]) == sorted(CALLERS)


@pytest.mark.parametrize("cell", _params(operation_cells(MATRIX)))
def test_operation_x_caller(api: httpx.Client, world: World, cell: Cell) -> None:
    problems = run_cell(api, world, cell)

    assert not problems, "; ".join(problems)


@pytest.mark.parametrize("cell", _params(case_cells(MATRIX["object_level"])))
def test_another_organisations_object(api: httpx.Client, world: World, cell: Cell) -> None:
    problems = run_cell(api, world, cell)

    assert not problems, "; ".join(problems)


@pytest.mark.parametrize("cell", _params(case_cells(MATRIX["mass_assignment"])))
def test_mass_assignment(api: httpx.Client, world: World, cell: Cell) -> None:
    problems = run_cell(api, world, cell)

    assert not problems, "; ".join(problems)
