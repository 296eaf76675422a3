"""The canonical byte encoding of an evidence record: RFC 8785 (JSON Canonicalization Scheme).

The MAC covers these bytes, so the same record must always encode to the same bytes, whichever
process or library version produced it. Records hold only str, int, bool, None, lists and objects
with str keys. Floats are refused: their text form is where JSON encoders disagree, and nothing in
a record needs one. Timestamps are strings made by :func:`format_timestamp`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import rfc8785

#: JSON numbers are IEEE 754 doubles: integers beyond this lose precision in other readers.
MAX_SAFE_INTEGER = 2**53 - 1


class CanonicalEncodingError(ValueError):
    """A record holds a value the canonical encoding does not allow."""


def canonical_bytes(record: dict[str, Any]) -> bytes:
    """The RFC 8785 encoding of ``record`` (UTF-8, no whitespace, keys in UTF-16 order)."""
    if not isinstance(record, dict):
        raise CanonicalEncodingError("a record is a JSON object")
    _check(record, "$")
    try:
        return rfc8785.dumps(record)
    except rfc8785.CanonicalizationError as exc:  # lone surrogates in strings
        raise CanonicalEncodingError(str(exc)) from None


def format_timestamp(value: datetime) -> str:
    """ISO-8601 in UTC with microseconds, e.g. ``2025-01-31T09:30:00.000000Z``."""
    if value.tzinfo is None:
        raise CanonicalEncodingError("timestamps must be timezone-aware")
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _check(value: Any, path: str) -> None:
    """Refuse anything outside the record value types; ``path`` names the offending value."""
    if value is None or isinstance(value, bool | str):
        return
    if isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            raise CanonicalEncodingError(f"{path}: integer outside ±(2**53 - 1)")
        return
    if isinstance(value, list):
        for index, item in enumerate(value):
            _check(item, f"{path}[{index}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise CanonicalEncodingError(f"{path}: object keys must be strings")
            _check(item, f"{path}.{key}")
        return
    raise CanonicalEncodingError(f"{path}: {type(value).__name__} is not a record value type")
