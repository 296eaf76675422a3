"""Identifier splitting and the text full-text search indexes."""

from __future__ import annotations

import pytest

from context_ledger.sources.chunking.identifiers import (
    search_text,
    split_identifiers,
    without_fragments,
)


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("parseRefund", ["parse", "refund"]),
        ("ParseRefund", ["parse", "refund"]),
        ("refund_policy", ["refund", "policy"]),
        ("kebab-case-name", ["kebab", "case", "name"]),
        ("MAX_RETRY_COUNT", ["max", "retry", "count"]),
        ("HTTPServerError", ["http", "server", "error"]),
        ("XMLHttpRequest", ["xml", "http", "request"]),
        ("userID", ["user", "id"]),
        ("URLsToFetch", ["urls", "to", "fetch"]),
        ("__init__", ["init"]),
        ("$scope", ["scope"]),
        ("os.path.exists", ["os", "path", "exists"]),
        ("self.refundPolicy.apply", ["self", "refund", "policy", "apply"]),
        ("größe_berechnen", ["größe", "berechnen"]),
    ],
)
def test_identifier_splits_at_case_and_separator_boundaries(text: str, parts: list[str]) -> None:
    assert split_identifiers(text) == parts


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("getURL2Path", ["get", "url2", "path"]),
        ("int64Value", ["int64", "value"]),
        ("sha256sum", ["sha256", "sum"]),
        ("HTTP2Server", ["http2", "server"]),
        ("x86_64", ["x86", "64"]),
    ],
)
def test_identifier_digits_stay_with_the_letters_before_them(text: str, parts: list[str]) -> None:
    assert split_identifiers(text) == parts


def test_numbers_are_not_identifiers() -> None:
    assert split_identifiers("404 1e5 0x1F 3.14") == []


def test_a_sentence_end_does_not_join_words() -> None:
    assert split_identifiers("Refunds end. Policies start") == [
        "refunds",
        "end",
        "policies",
        "start",
    ]


def test_identifiers_are_found_in_order_in_running_code() -> None:
    code = "if err := parseRefund(req.PaymentRef); err != nil {"
    assert split_identifiers(code) == [
        "if",
        "err",
        "parse",
        "refund",
        "req",
        "payment",
        "ref",
        "err",
        "nil",
    ]


def test_code_search_text_is_content_plus_identifier_parts() -> None:
    content = "func parseRefund(policy RefundPolicy) error"
    text = search_text(content, code=True)
    assert text.startswith(content + "\n")
    assert text.splitlines()[-1].split() == ["parse", "refund"]


def test_code_search_text_lists_each_part_once() -> None:
    content = "parseRefund(a)\n" * 10_000 + "authoriseRefund(b)\n"
    extra = search_text(content, code=True)[len(content) :].split()
    assert extra == ["parse", "refund", "authorise"]


def test_code_search_text_leaves_out_parts_already_present_as_words() -> None:
    content = "policy = RefundPolicy()"
    assert search_text(content, code=True).splitlines()[-1].split() == ["refund"]


def test_code_search_text_adds_the_parts_of_dotted_names() -> None:
    # PostgreSQL's parser reads "os.path.exists" as one host name: "exists" alone would not match.
    content = "if os.path.exists(path): return self.stream.write(path)"
    assert search_text(content, code=True).splitlines()[-1].split() == [
        "os",
        "exists",
        "self",
        "stream",
        "write",
    ]


def test_code_search_text_names_its_language() -> None:
    assert search_text("def refund(policy):", code=True, language="python") == (
        "def refund(policy):\npython"
    )
    assert (
        search_text("parseRefund()", code=True, language="go") == "parseRefund()\ngo\nparse refund"
    )


def test_code_search_text_of_a_declaration_ends_with_the_words_of_its_name() -> None:
    content = "def is_readable(filename):\n    return os.access(filename, os.R_OK)"
    text = search_text(content, code=True, language="python", symbol="is_readable")
    assert text.splitlines()[-3:] == ["python", "is readable os access r ok", "is readable"]


def test_plain_text_in_a_codebase_gets_no_language_name() -> None:
    assert search_text("requests>=2", code=True, language="text") == "requests>=2"


def test_code_without_compound_identifiers_is_indexed_as_it_is() -> None:
    assert search_text("return value", code=True) == "return value"


def test_prose_search_text_is_the_content() -> None:
    content = "Call parseRefund with the payment reference."
    assert search_text(content, code=False) == content
    assert search_text(content, code=False, language="markdown") == content


@pytest.mark.parametrize(
    ("text", "left"),
    [
        ("I'm sure I'd say", "I sure I say"),
        ("we're fine, you'll see, I've got it", "we fine, you see, I got it"),
        ("I\u2019M HERE", "I HERE"),  # a typographic apostrophe, upper case
        ("see e.g. this, i.e. that", "see this, that"),
        ("E.g. Heindel, L.E. in J. ACM", "Heindel, LE in J. ACM"),  # capitals: an acronym
        ("the U.S.A. (U.K.) and e.g, more", "the USA (UK) and , more"),
    ],
)
def test_contraction_tails_and_single_letter_abbreviations_are_not_words(
    text: str, left: str
) -> None:
    assert " ".join(without_fragments(text).split()) == left


@pytest.mark.parametrize(
    "text",
    [
        "vitamin D deficiency",  # a letter standing alone is a term
        "an injection of vitamin K. It helps",  # one letter and a dot: a sentence's end, too
        "by J. Smith",
        "the C language and R",
        "x.shape and os.path.exists",  # a dotted name starts with its letter
        "O'Brien and ma'am",  # a longer word after an apostrophe
        "a",
    ],
)
def test_standalone_letters_words_and_dotted_names_are_kept(text: str) -> None:
    assert without_fragments(text) == text


def test_search_text_leaves_out_fragments_of_prose_and_of_code() -> None:
    assert search_text("I'd like e.g. sorting", code=False).split() == ["I", "like", "sorting"]
    assert "d" not in search_text("# I'd sort it\nsort(x)", code=True).split()
