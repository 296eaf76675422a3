"""Property, end to end through the gate: documents with planted secrets and personal data of every
kind are embedded through a real (loopback) endpoint, and none of the plants arrives there.

The plants and the document shape are those of the redaction property test (``dlp_plants``); here
the check is on what the stand-in endpoint received, for source texts and for queries alike.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from dlp_plants import PLANTS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context_ledger.dlp.classification import Classification
from context_ledger.dlp.gate import EmbeddingGate
from context_ledger.dlp.policy import DlpAction, DlpPolicy
from context_ledger.embeddings.client import EmbeddingsClient
from context_ledger.local.embeddings_server import StandInEmbeddingsServer, serve_embeddings

DETERMINISTIC = settings(
    derandomize=True,
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
#: Every classification embedded (redacted) into an internal endpoint: the most that is ever sent.
SEND_ALL = DlpPolicy(actions=dict.fromkeys(Classification, DlpAction.ALLOW))
FILLER = [
    "Refunds above 500 EUR need a second approver.",
    "func Authorise(ctx context.Context, r Refund) error {",
    "2026-01-01T10:00:00Z INFO request served in 12 ms",
    "retries: 3",
]


@pytest.fixture(scope="module")
def stand_in() -> Iterator[StandInEmbeddingsServer]:
    with serve_embeddings(0, 16) as running:
        yield running


@pytest.fixture(scope="module")
def gate(stand_in: StandInEmbeddingsServer) -> Iterator[EmbeddingGate]:
    client = EmbeddingsClient(stand_in.url, "stand-in")
    yield EmbeddingGate(client=client, policy=SEND_ALL, external=False)
    client.close()


@st.composite
def chunks(draw: st.DrawFn) -> tuple[list[str], list[str]]:
    """A few chunks, each with plants of random kinds among filler lines, and all the plants."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    texts, planted = [], []
    for _ in range(draw(st.integers(1, 4))):
        lines = []
        for kind in draw(st.lists(st.sampled_from(sorted(PLANTS)), min_size=1, max_size=4)):
            text, secret = PLANTS[kind](rng)
            lines += [draw(st.sampled_from(FILLER)), text]
            planted.append(secret)
        texts.append("\n".join(lines))
    return texts, planted


@DETERMINISTIC
@given(chunks())
def test_no_plant_reaches_the_endpoint_in_source_text_or_query(
    stand_in: StandInEmbeddingsServer, gate: EmbeddingGate, generated: tuple[list[str], list[str]]
) -> None:
    texts, planted = generated
    stand_in.reset()

    gate.embed_source_texts(classification=Classification.INTERNAL, texts=texts)
    gate.embed_query_text(" ".join(texts))

    received = "\n".join(t for request in stand_in.requests for t in request.body["input"])
    assert len(stand_in.requests) == 2, "both calls reached the endpoint"
    assert [p for p in planted if p in received] == []
