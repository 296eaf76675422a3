"""The DLP policy's vocabulary, defaults and validation, and what it withholds."""

from __future__ import annotations

import pytest

from context_ledger.dlp.classification import Classification
from context_ledger.dlp.policy import (
    DEFAULT_ACTIONS,
    DlpAction,
    DlpPolicy,
    parse_actions,
    parse_patterns,
    parse_withheld,
)
from context_ledger.errors import UNSHOWN_NAME, ValidationFailedError


def test_the_defaults_never_embed_confidential_restricted_or_regulated_content() -> None:
    assert DEFAULT_ACTIONS == {
        Classification.PUBLIC: DlpAction.REDACT,
        Classification.INTERNAL: DlpAction.REDACT,
        Classification.CONFIDENTIAL: DlpAction.DROP,
        Classification.RESTRICTED: DlpAction.DROP,
        Classification.REGULATED: DlpAction.BLOCK_SOURCE,
    }
    assert set(DEFAULT_ACTIONS) == set(Classification), "every classification has an action"


def test_a_policy_names_only_the_actions_that_differ_from_the_defaults() -> None:
    policy = DlpPolicy(actions=parse_actions({"internal": "allow", "public": "redact"}))

    assert policy.overrides == {"internal": "allow"}
    assert policy.action("internal") is DlpAction.ALLOW
    assert policy.action(Classification.CONFIDENTIAL) is DlpAction.DROP


def test_classifications_left_out_return_to_their_defaults() -> None:
    assert parse_actions({}) == dict(DEFAULT_ACTIONS)


@pytest.mark.parametrize(
    ("actions", "problem"),
    [
        ({"secret": "allow"}, "actions.secret: unknown classification"),
        ({"internal": "hide"}, "actions.internal: unknown action"),
        ({"internal": True}, "actions.internal: unknown action"),
        ({"internal": None}, "actions.internal: unknown action"),
        ({"internal": ["allow"]}, "actions.internal: unknown action"),
    ],
)
def test_unknown_classifications_and_actions_are_refused(actions: dict, problem: str) -> None:
    with pytest.raises(ValidationFailedError, match=problem):
        parse_actions(actions)


def test_an_unknown_classification_named_like_a_password_is_not_repeated() -> None:
    with pytest.raises(ValidationFailedError) as raised:
        parse_actions({"Hunter2Hunter!": "allow"})

    assert "Hunter2" not in raised.value.message
    assert raised.value.message.startswith(f"actions.{UNSHOWN_NAME}: unknown classification")


def test_every_problem_is_named_at_once() -> None:
    with pytest.raises(ValidationFailedError) as raised:
        parse_actions({"secret": "allow", "public": "nope"})

    assert "actions.secret" in raised.value.message
    assert "actions.public" in raised.value.message


def test_a_custom_pattern_that_re2_cannot_compile_is_refused_naming_it() -> None:
    with pytest.raises(ValidationFailedError, match=r"patterns: .*ticket"):
        parse_patterns([{"name": "ticket", "pattern": "(unclosed"}])


def test_a_backreference_pattern_is_refused_because_it_cannot_run_in_linear_time() -> None:
    with pytest.raises(ValidationFailedError, match="patterns:"):
        parse_patterns([{"name": "twice", "pattern": r"(a+)\1"}])


def test_valid_custom_patterns_are_kept_in_order() -> None:
    patterns = parse_patterns(
        [{"name": "ticket", "pattern": "TICKET-[0-9]+"}, {"name": "host", "pattern": r"h\d+"}]
    )

    assert [p.name for p in patterns] == ["ticket", "host"]


def test_withheld_classifications_are_parsed_and_nothing_is_withheld_by_default() -> None:
    assert DlpPolicy().withheld == frozenset()
    assert parse_withheld(["regulated", "restricted", "regulated"]) == {
        Classification.REGULATED,
        Classification.RESTRICTED,
    }


@pytest.mark.parametrize("raw", [["secret"], ["Regulated"], [1], [None]])
def test_an_unknown_withheld_classification_is_refused(raw: list) -> None:
    with pytest.raises(ValidationFailedError, match=r"withheld\[0\]: unknown classification"):
        parse_withheld(raw)
