"""Level-weight overrides: which levels and weights an organisation may set."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from context_ledger.errors import UNSHOWN_NAME, ValidationFailedError
from context_ledger.settings import DEFAULT_LEVEL_WEIGHTS
from context_ledger.spaces.levels import Level
from context_ledger.spaces.weights import LevelWeights, parse_overrides, parse_weight


def from_json(text: str) -> object:
    """A weight as the API receives it: parsed from the request's JSON."""
    return json.loads(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1.2345", Decimal("1.2345")),
        ("10", Decimal(10)),
        ("10.0", Decimal(10)),
        ("0.0001", Decimal("0.0001")),
        ("1e-4", Decimal("0.0001")),
        ("1.30000", Decimal("1.3")),
        ("3", Decimal(3)),
    ],
)
def test_a_weight_in_range_with_at_most_4_decimals_is_accepted(text, expected) -> None:
    assert parse_weight(from_json(text)) == expected


@pytest.mark.parametrize("text", ["1.23456", "0.00001", "9.99999", "1e-5", "1.00000001"])
def test_a_weight_with_more_than_4_decimals_is_refused(text) -> None:
    with pytest.raises(ValueError, match="at most 4 decimals"):
        parse_weight(from_json(text))


@pytest.mark.parametrize("text", ["0", "0.0", "-1", "-0.0001", "10.0001", "11", "1e300"])
def test_a_weight_outside_0_exclusive_to_10_inclusive_is_refused(text) -> None:
    with pytest.raises(ValueError, match=r"must be in \(0, 10\]"):
        parse_weight(from_json(text))


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity"])
def test_a_non_finite_weight_is_refused(text) -> None:
    with pytest.raises(ValueError, match=r"must be in \(0, 10\]"):
        parse_weight(from_json(text))


@pytest.mark.parametrize("text", ["true", "false", '"1.2"', "null", "[1.2]", '{"weight": 1.2}'])
def test_a_weight_that_is_not_a_number_is_refused(text) -> None:
    with pytest.raises(ValueError, match="must be a number"):
        parse_weight(from_json(text))


def test_a_decimal_weight_counts_its_exact_digits() -> None:
    assert parse_weight(Decimal("1.23450")) == Decimal("1.2345")
    with pytest.raises(ValueError, match="at most 4 decimals"):
        parse_weight(Decimal("1.00000000000000000000000000001"))


def test_overrides_may_name_every_level() -> None:
    overrides = {level.value: 1 for level in Level}

    assert parse_overrides(overrides) == {level: Decimal(1) for level in Level}
    assert set(parse_overrides(overrides)) == set(DEFAULT_LEVEL_WEIGHTS)


def test_empty_overrides_are_valid() -> None:
    assert parse_overrides({}) == {}


def test_an_unknown_level_is_refused_naming_the_field() -> None:
    with pytest.raises(ValidationFailedError) as raised:
        parse_overrides({"project": 1.3, "galaxy": 1.0})

    assert raised.value.code == "validation_failed"
    assert raised.value.message.startswith("overrides.galaxy: unknown level (one of: ")
    assert "business_unit" in raised.value.message


def test_an_unknown_level_named_like_a_password_is_not_repeated() -> None:
    with pytest.raises(ValidationFailedError) as raised:
        parse_overrides({"Summer2024!Muc": 1.3})

    assert "Summer2024" not in raised.value.message
    assert raised.value.message.startswith(f"overrides.{UNSHOWN_NAME}: unknown level")


def test_a_bad_weight_is_refused_naming_the_field() -> None:
    with pytest.raises(ValidationFailedError) as raised:
        parse_overrides({"project": 1.23456})

    assert raised.value.message == "overrides.project: must have at most 4 decimals"


def test_every_bad_field_is_named_up_to_five() -> None:
    raw = {"project": True, "team": "1", "group": 0, **{f"x{i}": 1 for i in range(5)}}

    with pytest.raises(ValidationFailedError) as raised:
        parse_overrides(raw)

    problems = raised.value.message.split("; ")
    assert len(problems) == 5
    assert problems[:3] == [
        "overrides.project: must be a number",
        "overrides.team: must be a number",
        "overrides.group: must be in (0, 10]",
    ]


def test_effective_weights_are_the_overrides_over_the_defaults() -> None:
    weights = LevelWeights(defaults={"project": 1.2, "team": 1.0}, overrides={"team": 0.5})

    assert weights.effective == {"project": 1.2, "team": 0.5}
