"""Property: planted secrets and personal data of every kind never survive redaction.

Documents are random prose and code lines with plants of random kinds inserted between them.
Hypothesis runs derandomized with a bounded number of examples, so CI sees the same cases.
"""

from __future__ import annotations

import random

from dlp_plants import DECOYS, PLANTS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context_ledger.dlp.redaction import Redactor

REDACTOR = Redactor()
DETERMINISTIC = settings(
    derandomize=True,
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

_FILLER = st.sampled_from(
    [
        "The refund flow retries twice before giving up.",
        "def handler(event, context):\n    return {'statusCode': 200}",
        "2026-01-01T10:00:00Z INFO request served in 12 ms",
        "timeout: 30\nretries: 3\nregion: eu-west-1",
        "| name | value |\n|---|---|",
        "  - run: make test",
        "",
        *DECOYS,
    ]
)


@st.composite
def documents(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A document and the secrets planted in it."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    parts: list[str] = []
    secrets: list[str] = []
    for kind in draw(st.lists(st.sampled_from(sorted(PLANTS)), min_size=1, max_size=6)):
        parts.extend(draw(st.lists(_FILLER, max_size=3)))
        text, secret = PLANTS[kind](rng)
        parts.append(text)
        secrets.append(secret)
    parts.extend(draw(st.lists(_FILLER, max_size=3)))
    return draw(st.sampled_from(["\n", " ", "\n\n"])).join(parts), secrets


@DETERMINISTIC
@given(documents())
def test_no_planted_secret_survives_redaction(document: tuple[str, list[str]]) -> None:
    text, secrets = document
    redacted = REDACTOR.redact(text).text
    assert [s for s in secrets if s in redacted] == []


@DETERMINISTIC
@given(documents())
def test_redaction_is_idempotent(document: tuple[str, list[str]]) -> None:
    once = REDACTOR.redact(document[0])
    twice = REDACTOR.redact(once.text)
    assert (twice.text, dict(twice.counts)) == (once.text, {})


@settings(derandomize=True, max_examples=len(PLANTS) * 3, deadline=None)
@given(st.sampled_from(sorted(PLANTS)), st.integers(0, 2**32))
def test_every_kind_is_found_with_its_own_placeholder(kind: str, seed: int) -> None:
    text, secret = PLANTS[kind](random.Random(seed))
    result = REDACTOR.redact(text)
    assert secret not in result.text
    assert f"[REDACTED:{kind}]" in result.text
