"""Redactor rules: typed placeholders, merging, idempotence, custom patterns, fail-closed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from context_ledger.dlp.detectors import Finding
from context_ledger.dlp.redaction import (
    MAX_CUSTOM_PATTERNS,
    CustomPattern,
    Redactor,
    ScanError,
    compile_custom_patterns,
)

SECRET_TEXT = "reach me at jane@example.org, key AKIAIOSFODNN7EXAMPLE"


def test_findings_become_typed_placeholders_and_are_counted() -> None:
    result = Redactor().redact(SECRET_TEXT + " or jo@example.org")
    assert result.text == (
        "reach me at [REDACTED:email], key [REDACTED:aws_access_key] or [REDACTED:email]"
    )
    assert dict(result.counts) == {"email": 2, "aws_access_key": 1}


def test_text_without_findings_is_returned_unchanged() -> None:
    text = "def add(a: int, b: int) -> int:\n    return a + b  # version 1.2.3\n"
    result = Redactor().redact(text)
    assert result.text == text
    assert dict(result.counts) == {}


def test_redacting_redacted_text_changes_nothing() -> None:
    once = Redactor([CustomPattern("ticket", r"TCK-\d+")]).redact(SECRET_TEXT + " TCK-42")
    twice = Redactor([CustomPattern("ticket", r"TCK-\d+")]).redact(once.text)
    assert twice.text == once.text
    assert dict(twice.counts) == {}


def test_placeholders_never_trigger_custom_patterns() -> None:
    redactor = Redactor([CustomPattern("shout", r"[A-Z]{4,}"), CustomPattern("colon", r":\w+")])
    result = redactor.redact("[REDACTED:email] and [REDACTED:custom_shout]")
    assert result.text == "[REDACTED:email] and [REDACTED:custom_shout]"


def test_overlapping_findings_merge_into_one_placeholder_of_the_most_specific_kind() -> None:
    # The card number overlaps a custom pattern and the high-entropy fallback sees nothing here.
    redactor = Redactor([CustomPattern("digits", r"1111 1111")])
    result = redactor.redact("pay 4111 1111 1111 1111 now")
    assert result.text == "pay [REDACTED:payment_card] now"
    assert dict(result.counts) == {"payment_card": 1}


def test_named_secret_wins_over_high_entropy_fallback() -> None:
    result = Redactor().redact('api_key = "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"')
    assert result.text == 'api_key = "[REDACTED:google_api_key]"'


def test_custom_pattern_is_redacted_with_its_name() -> None:
    result = Redactor([CustomPattern("employee_id", r"EMP-\d{6}")]).redact("by EMP-123456.")
    assert result.text == "by [REDACTED:custom_employee_id]."


@pytest.mark.parametrize(
    ("patterns", "message"),
    [
        ([CustomPattern("Bad", "x")], "a custom pattern's name must match"),
        ([CustomPattern("a" * 41, "x")], "must match"),
        ([CustomPattern("dup", "x"), CustomPattern("dup", "y")], "'dup' is defined twice"),
        ([CustomPattern("back", r"(a)\1")], "'back' is not a valid RE2 expression"),
        ([CustomPattern("look", r"(?<=a)b")], "'look' is not a valid RE2 expression"),
        ([CustomPattern("open", "(a")], "'open' is not a valid RE2 expression: missing )"),
        ([CustomPattern("empty", "a*")], "'empty' matches the empty string"),
        ([CustomPattern("blank", "")], "'blank' must be 1 to"),
        ([CustomPattern("long", "a" * 1001)], "'long' must be 1 to 1000"),
        ([CustomPattern("huge", "(?:a{1000}){1000}")], "'huge' is not a valid RE2"),
        ([CustomPattern(f"p{i}", "x") for i in range(MAX_CUSTOM_PATTERNS + 1)], "at most 50"),
    ],
)
def test_invalid_custom_patterns_are_refused_naming_the_pattern(
    patterns: list[CustomPattern], message: str
) -> None:
    with pytest.raises(ValueError, match=r"custom pattern|at most") as error:
        compile_custom_patterns(patterns)
    assert message in str(error.value)


def test_a_pattern_name_breaking_the_rule_is_not_repeated() -> None:
    """It can be anything pasted into the field, a password included."""
    with pytest.raises(ValueError, match="name must match") as raised:
        Redactor([CustomPattern("Hunter2Hunter!", "x")])

    assert "Hunter2" not in str(raised.value)


def test_hostile_custom_pattern_runs_in_linear_time() -> None:
    # Catastrophic for a backtracking engine (2^n), linear for RE2.
    redactor = Redactor([CustomPattern("evil", r"(a+)+$")])
    result = redactor.redact("a" * 5000 + "!")
    assert result.text == "a" * 5000 + "!"


class _Failing:
    kinds = ("boom",)
    gate = None

    def find(self, text: str) -> Iterator[Finding]:
        raise RuntimeError(f"cannot scan {text}")


def test_failing_detector_raises_scan_error_without_the_text() -> None:
    redactor = Redactor(detectors=[_Failing()])
    with pytest.raises(ScanError) as error:
        redactor.redact("top secret hunter2")
    assert "hunter2" not in str(error.value)
    assert error.value.__suppress_context__


def test_scan_past_its_deadline_raises_scan_error() -> None:
    ticks = iter(range(100))
    redactor = Redactor(deadline_seconds=3, clock=lambda: float(next(ticks)))
    with pytest.raises(ScanError, match="deadline"):
        redactor.redact(SECRET_TEXT)


def test_deadline_must_be_positive() -> None:
    with pytest.raises(ValueError, match="deadline_seconds"):
        Redactor(deadline_seconds=0)


class _OutOfMemorySet:
    """What RE2::Set answers when its automaton runs out of memory: no match at all."""

    def Match(self, text: str) -> None:  # named like re2.Set's
        return None


def test_failed_gate_set_runs_every_detector_instead_of_none() -> None:
    redactor = Redactor()
    redactor._gates = _OutOfMemorySet()  # type: ignore[assignment]
    assert redactor.redact(SECRET_TEXT).text == (
        "reach me at [REDACTED:email], key [REDACTED:aws_access_key]"
    )


def test_the_largest_allowed_set_of_custom_patterns_compiles_and_runs() -> None:
    patterns = [
        CustomPattern(f"p{i}", "(?:[a-z]{1,100}[0-9]{1,100}){1,4}" + "x" * 900)
        for i in range(MAX_CUSTOM_PATTERNS)
    ]
    assert Redactor(patterns).redact("").text == ""
