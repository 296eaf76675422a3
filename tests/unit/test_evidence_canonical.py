"""Evidence records encode to RFC 8785 (JCS) canonical JSON, and only our value types encode."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from context_ledger.evidence.canonical import (
    CanonicalEncodingError,
    canonical_bytes,
    format_timestamp,
)


def test_keys_are_ordered_by_utf16_code_units_not_code_points() -> None:
    # RFC 8785 section 3.2.3: U+1F600 (UTF-16 D83D DE00) sorts before U+FB33.
    record = {
        "\u20ac": "Euro Sign",
        "\r": "Carriage Return",
        "\ufb33": "Hebrew Letter Dalet With Dagesh",
        "1": "One",
        "\U0001f600": "Emoji: Grinning Face",
        "\u0080": "Control",
        "\u00f6": "Latin Small Letter O With Diaeresis",
    }

    expected = (
        '{"\\r":"Carriage Return","1":"One","\u0080":"Control",'
        '"\u00f6":"Latin Small Letter O With Diaeresis","\u20ac":"Euro Sign",'
        '"\U0001f600":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}'
    )

    assert canonical_bytes(record) == expected.encode()


def test_strings_escape_only_quote_backslash_and_control_characters() -> None:
    # RFC 8785 section 3.2.2.2, the "string" member of the section 3.2.2 example.
    record = {"string": "\u20ac$\u000f\u000aA'\u0042\u0022\u005c\\\"/"}

    assert canonical_bytes(record) == '{"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'.encode()


def test_literals_and_nesting_encode_without_whitespace() -> None:
    record = {"literals": [None, True, False], "nested": {"b": [1, -2], "a": {}}, "empty": []}

    assert canonical_bytes(record) == (
        b'{"empty":[],"literals":[null,true,false],"nested":{"a":{},"b":[1,-2]}}'
    )


def test_the_encoding_does_not_depend_on_insertion_order() -> None:
    assert canonical_bytes({"b": 1, "a": {"y": 2, "x": 3}}) == canonical_bytes(
        {"a": {"x": 3, "y": 2}, "b": 1}
    )


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"score": 0.5}, r"\$\.score: float"),
        ({"list": [1, 2.0]}, r"\$\.list\[1\]: float"),
        ({"big": 2**53}, r"\$\.big: integer outside"),
        ({"small": -(2**53)}, r"\$\.small: integer outside"),
        ({"nested": {1: "x"}}, r"\$\.nested: object keys must be strings"),
        ({"tuple": (1, 2)}, r"\$\.tuple: tuple"),
        ({"when": datetime(2025, 1, 1, tzinfo=UTC)}, r"\$\.when: datetime"),
        ({"surrogate": "\ud800"}, "non-UTF-8"),
    ],
    ids=[
        "float",
        "float-in-list",
        "int-above-2^53",
        "int-below-2^53",
        "int-key",
        "tuple",
        "datetime",
        "lone-surrogate",
    ],
)
def test_values_outside_the_record_types_are_refused(record: dict, message: str) -> None:
    with pytest.raises(CanonicalEncodingError, match=message):
        canonical_bytes(record)


def test_the_largest_safe_integers_are_accepted() -> None:
    assert canonical_bytes({"n": [2**53 - 1, -(2**53 - 1)]}) == (
        b'{"n":[9007199254740991,-9007199254740991]}'
    )


def test_a_record_is_an_object() -> None:
    with pytest.raises(CanonicalEncodingError, match="JSON object"):
        canonical_bytes([1, 2])  # type: ignore[arg-type]


def test_timestamps_are_utc_iso8601_with_microseconds() -> None:
    paris = timezone(timedelta(hours=1))

    assert format_timestamp(datetime(2025, 1, 31, 10, 30, tzinfo=paris)) == (
        "2025-01-31T09:30:00.000000Z"
    )
    assert format_timestamp(datetime(2025, 1, 31, 9, 30, 0, 123456, tzinfo=UTC)) == (
        "2025-01-31T09:30:00.123456Z"
    )


def test_naive_timestamps_are_refused() -> None:
    with pytest.raises(CanonicalEncodingError, match="timezone-aware"):
        format_timestamp(datetime(2025, 1, 31, 9, 30))
