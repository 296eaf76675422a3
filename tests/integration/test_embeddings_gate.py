"""The DLP gate: protected classifications never reach an embeddings endpoint, others do.

The proof is the stand-in server's request log: what it never received was never sent.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from context_ledger.dlp.gate import embed_query_text, embed_source_texts
from context_ledger.embeddings.client import EmbeddingsClient
from context_ledger.embeddings.hashing import HashingEmbeddingProvider
from context_ledger.local.embeddings_server import StandInEmbeddingsServer, serve_embeddings
from context_ledger.sources.model import Classification

TEXTS = ["Refunds above 500 EUR need a second approver.", "The approver is the team lead."]


@pytest.fixture(scope="module")
def server() -> Iterator[StandInEmbeddingsServer]:
    with serve_embeddings(0, 32) as running:
        yield running


@pytest.fixture
def stand_in(server: StandInEmbeddingsServer) -> StandInEmbeddingsServer:
    server.reset()
    return server


@pytest.fixture
def client(stand_in: StandInEmbeddingsServer) -> Iterator[EmbeddingsClient]:
    client = EmbeddingsClient(stand_in.url, "stand-in")
    yield client
    client.close()


@pytest.mark.parametrize(
    "classification",
    [Classification.CONFIDENTIAL, Classification.RESTRICTED, Classification.REGULATED],
)
def test_protected_sources_are_never_sent_to_the_endpoint(
    stand_in: StandInEmbeddingsServer, client: EmbeddingsClient, classification: Classification
) -> None:
    vectors = embed_source_texts(classification=classification, texts=TEXTS, client=client)

    assert vectors is None
    assert stand_in.requests == []


@pytest.mark.parametrize("classification", [Classification.PUBLIC, Classification.INTERNAL])
def test_public_and_internal_sources_are_embedded(
    stand_in: StandInEmbeddingsServer, client: EmbeddingsClient, classification: Classification
) -> None:
    vectors = embed_source_texts(classification=classification, texts=TEXTS, client=client)

    assert vectors == HashingEmbeddingProvider(32).embed(TEXTS)
    assert [request.body["input"] for request in stand_in.requests] == [TEXTS]


def test_an_unknown_classification_is_refused_before_anything_is_sent(
    stand_in: StandInEmbeddingsServer, client: EmbeddingsClient
) -> None:
    with pytest.raises(ValueError, match="secret"):
        embed_source_texts(classification="secret", texts=TEXTS, client=client)  # type: ignore[arg-type]

    assert stand_in.requests == []


def test_without_a_client_nothing_is_embedded() -> None:
    assert (
        embed_source_texts(classification=Classification.PUBLIC, texts=TEXTS, client=None) is None
    )
    assert embed_query_text(text="refunds", client=None) is None


def test_the_query_text_is_embedded(
    stand_in: StandInEmbeddingsServer, client: EmbeddingsClient
) -> None:
    vector = embed_query_text(text="who approves refunds", client=client)

    assert vector == HashingEmbeddingProvider(32).embed_text("who approves refunds")
    assert [request.body["input"] for request in stand_in.requests] == [["who approves refunds"]]


def test_a_blank_query_sends_nothing(stand_in: StandInEmbeddingsServer, client: EmbeddingsClient):
    assert embed_query_text(text="  ", client=client) is None
    assert stand_in.requests == []
