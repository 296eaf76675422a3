"""The DLP gate in front of a real (loopback) embeddings endpoint.

The proof is the stand-in server's request log: what it never received was never sent.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from context_ledger.dlp import redaction
from context_ledger.dlp.classification import Classification
from context_ledger.dlp.gate import DlpScanFailedError, EmbeddingGate, Refusal
from context_ledger.dlp.policy import DEFAULT_ACTIONS, DlpAction, DlpPolicy
from context_ledger.dlp.redaction import CustomPattern, ScanError
from context_ledger.embeddings.client import EmbeddingsClient
from context_ledger.local.embeddings_server import StandInEmbeddingsServer, serve_embeddings

AWS_KEY = "AKIAQ3EGRTW5NB7XKP2M"
TEXTS = [
    "Refunds above 500 EUR need a second approver.",
    f"Deploy with aws_access_key_id={AWS_KEY} and mail ops@example.com when done.",
]
PROTECTED = [Classification.CONFIDENTIAL, Classification.RESTRICTED, Classification.REGULATED]
OPEN = [Classification.PUBLIC, Classification.INTERNAL]
#: A policy that lets every classification be embedded (redacted): only locality holds some back.
PERMISSIVE = DlpPolicy(actions=dict.fromkeys(Classification, DlpAction.REDACT))


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


def received(stand_in: StandInEmbeddingsServer) -> list[str]:
    return [text for request in stand_in.requests for text in request.body["input"]]


DEFAULT_POLICY = DlpPolicy()


def gate(
    client: EmbeddingsClient | None, *, policy: DlpPolicy = DEFAULT_POLICY, external: bool = False
) -> EmbeddingGate:
    return EmbeddingGate(client=client, policy=policy, external=external)


@pytest.mark.parametrize("external", [False, True])
@pytest.mark.parametrize("classification", PROTECTED)
def test_with_the_default_policy_protected_sources_are_sent_nowhere(
    stand_in, client, classification: Classification, external: bool
) -> None:
    vectors = gate(client, external=external).embed_source_texts(
        classification=classification, texts=TEXTS
    )

    assert vectors is None
    assert stand_in.requests == []


@pytest.mark.parametrize("action", [DlpAction.DROP, DlpAction.BLOCK_SOURCE])
@pytest.mark.parametrize("classification", list(Classification))
def test_drop_and_block_source_are_never_sent_even_to_an_internal_endpoint(
    stand_in, client, classification: Classification, action: DlpAction
) -> None:
    policy = DlpPolicy(actions={**DEFAULT_ACTIONS, classification: action})

    assert gate(client, policy=policy).refusal(classification) is Refusal.POLICY
    assert (
        gate(client, policy=policy).embed_source_texts(classification=classification, texts=TEXTS)
        is None
    )
    assert stand_in.requests == []


@pytest.mark.parametrize("classification", PROTECTED)
def test_protected_sources_mapped_to_redact_never_reach_an_external_endpoint(
    stand_in, client, classification: Classification
) -> None:
    external = gate(client, policy=PERMISSIVE, external=True)

    assert external.refusal(classification) is Refusal.EXTERNAL_ENDPOINT
    assert external.embed_source_texts(classification=classification, texts=TEXTS) is None
    assert stand_in.requests == []


@pytest.mark.parametrize("classification", PROTECTED)
def test_protected_sources_mapped_to_redact_reach_an_internal_endpoint_redacted(
    stand_in, client, classification: Classification
) -> None:
    vectors = gate(client, policy=PERMISSIVE).embed_source_texts(
        classification=classification, texts=TEXTS
    )

    assert vectors is not None
    assert len(vectors) == 2
    sent = received(stand_in)
    assert sent[0] == TEXTS[0]
    assert AWS_KEY not in sent[1]
    assert "ops@example.com" not in sent[1]
    assert "[REDACTED:aws_access_key]" in sent[1]
    assert "[REDACTED:email]" in sent[1]


@pytest.mark.parametrize("external", [False, True])
@pytest.mark.parametrize("classification", OPEN)
@pytest.mark.parametrize("action", [DlpAction.ALLOW, DlpAction.REDACT])
def test_open_sources_are_embedded_only_redacted_whatever_their_action(
    stand_in, client, classification: Classification, action: DlpAction, external: bool
) -> None:
    policy = DlpPolicy(actions={**DEFAULT_ACTIONS, classification: action})

    vectors = gate(client, policy=policy, external=external).embed_source_texts(
        classification=classification, texts=TEXTS
    )

    assert vectors is not None
    assert len(vectors) == 2
    assert AWS_KEY not in " ".join(received(stand_in))


def test_the_organisations_custom_patterns_apply_before_embedding(stand_in, client) -> None:
    policy = DlpPolicy(patterns=(CustomPattern(name="ticket", pattern=r"TICKET-[0-9]{4}"),))

    gate(client, policy=policy).embed_source_texts(
        classification=Classification.INTERNAL, texts=["Fixed in TICKET-0042 yesterday."]
    )

    assert received(stand_in) == ["Fixed in [REDACTED:custom_ticket] yesterday."]


def test_the_query_text_is_redacted_before_it_is_embedded(stand_in, client) -> None:
    vector = gate(client).embed_query_text(f"which service uses {AWS_KEY}")

    assert vector is not None
    assert received(stand_in) == ["which service uses [REDACTED:aws_access_key]"]


def test_without_an_endpoint_or_with_a_blank_query_nothing_is_embedded(stand_in, client) -> None:
    no_endpoint = gate(None)

    assert no_endpoint.refusal(Classification.PUBLIC) is Refusal.NO_ENDPOINT
    assert no_endpoint.embed_source_texts(classification="public", texts=TEXTS) is None
    assert no_endpoint.embed_query_text("refunds") is None
    assert gate(client).embed_query_text("   ") is None
    assert stand_in.requests == []


def test_an_unknown_classification_is_refused_before_anything_is_sent(stand_in, client) -> None:
    with pytest.raises(ValueError, match="secret"):
        gate(client).embed_source_texts(classification="secret", texts=TEXTS)

    assert stand_in.requests == []


def test_a_failing_detector_stops_the_call_and_sends_nothing(
    stand_in, client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every text is redacted before the first is sent: a failure on the last sends none."""
    real = redaction.Redactor.redact

    def fail_on_the_last(self, text: str):
        if text == TEXTS[-1]:
            raise ScanError("detector crashed")
        return real(self, text)

    monkeypatch.setattr(redaction.Redactor, "redact", fail_on_the_last)

    with pytest.raises(DlpScanFailedError) as raised:
        gate(client).embed_source_texts(classification=Classification.PUBLIC, texts=TEXTS)

    assert stand_in.requests == []
    assert raised.value.status == 503
    assert raised.value.code == "context.dlp.scan_failed"
    assert AWS_KEY not in raised.value.message
