"""The message of a 422 (errors.validation_message): the fields it names, never their values, a
field name the caller made up cut to a length a message can carry, and a name not shaped like
the API's fields (a pasted value) not repeated at all."""

from __future__ import annotations

import pytest

from context_ledger.errors import MAX_NAMED, UNSHOWN_NAME, validation_message


def test_each_error_names_its_field_and_problem_without_the_body_prefix() -> None:
    errors = [
        {"loc": ("body", "tokenBudget"), "msg": "Input should be greater than 0"},
        {"loc": ("body", "sourceKinds", 0), "msg": "Input should be 'codebase' or 'docs'"},
    ]

    assert validation_message(errors) == (
        "tokenBudget: Input should be greater than 0; "
        "sourceKinds.0: Input should be 'codebase' or 'docs'"
    )


def test_a_made_up_field_name_of_any_length_is_cut() -> None:
    name = "x" * 5000

    message = validation_message([{"loc": ("body", name), "msg": "Extra inputs are not permitted"}])

    assert message == f"{'x' * MAX_NAMED}…: Extra inputs are not permitted"


def test_at_most_five_errors_are_named() -> None:
    errors = [{"loc": ("body", f"f{n}"), "msg": "bad"} for n in range(9)]

    assert validation_message(errors).count(": bad") == 5


@pytest.mark.parametrize(
    "name",
    ["Ldap!Bind2023", "Tr0ub4dor&3", "root:RootHtmlPass99", "ACME-123456", "a b", "x.y", "é"],
)
def test_a_name_not_shaped_like_a_field_is_not_repeated(name: str) -> None:
    errors = [{"loc": ("body", name), "msg": "Extra inputs are not permitted"}]

    assert validation_message(errors) == f"{UNSHOWN_NAME}: Extra inputs are not permitted"


def test_field_names_and_positions_are_repeated() -> None:
    errors = [
        {"loc": ("body", "patterns", 3, "name"), "msg": "Field required"},
        {"loc": ("body", "max_per-level"), "msg": "Extra inputs are not permitted"},
    ]

    assert validation_message(errors) == (
        "patterns.3.name: Field required; max_per-level: Extra inputs are not permitted"
    )
