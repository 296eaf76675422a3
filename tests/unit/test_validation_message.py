"""The message of a 422 (errors.validation_message): the fields it names, never their values, and
a field name the caller made up cut to a length a message can carry."""

from __future__ import annotations

from context_ledger.errors import MAX_NAMED, validation_message


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
