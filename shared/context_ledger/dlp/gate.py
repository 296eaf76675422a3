"""The gate in front of the embeddings endpoint: the only way any text reaches it.

Every caller that wants source text or a query embedded opens a gate for its organisation
(:func:`open_gate`) and calls :meth:`EmbeddingGate.embed_source_texts` or
:meth:`EmbeddingGate.embed_query_text`; nothing else in the code base calls
``EmbeddingsClient.embed`` (``tests/unit/test_dlp_gate_only_path.py`` checks the source tree).

The rules (spec, "Embeddings"; docs/api.md, "DLP"), in the order they are applied:

1. no endpoint configured: nothing is sent (full-text only);
2. a source whose action is ``drop`` or ``block_source`` is never sent to any endpoint;
3. a confidential, restricted or regulated source is never sent to an **external** endpoint,
   whatever its action (the spec names confidential and restricted; regulated is held to the
   same rule because a policy may map it to ``redact``);
4. everything else, and the query text, is redacted with the organisation's rules first and only
   the redacted text is embedded;
5. a scan failure (a detector error or a timeout) raises :class:`DlpScanFailedError` before a
   single text of the call is sent: all texts are redacted first, then sent.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import psycopg

from context_ledger.dlp.classification import Classification
from context_ledger.dlp.policy import NEVER_EMBEDDED, DlpPolicy, load_policy
from context_ledger.dlp.redaction import CustomPattern, Redactor, ScanError
from context_ledger.embeddings.client import EmbeddingsClient
from context_ledger.embeddings.locality import locality
from context_ledger.errors import ServiceUnavailableError
from context_ledger.log import logger
from context_ledger.settings import Settings

#: Classifications never sent to an endpoint outside the deployment, whatever their action.
NEVER_EXTERNAL = frozenset(
    {Classification.CONFIDENTIAL, Classification.RESTRICTED, Classification.REGULATED}
)


class DlpScanFailedError(ServiceUnavailableError):
    """Redaction failed (a detector error or a timeout); nothing was sent or delivered."""

    code = "context.dlp.scan_failed"

    def __init__(self) -> None:
        super().__init__("the DLP scan failed; nothing was sent or delivered")


class Refusal(StrEnum):
    """Why a source's text is not sent (it stays searchable through full-text)."""

    NO_ENDPOINT = "no_endpoint"
    POLICY = "policy"
    EXTERNAL_ENDPOINT = "external_endpoint"


@functools.lru_cache(maxsize=64)
def redactor_for(patterns: tuple[CustomPattern, ...]) -> Redactor:
    """One compiled redactor per distinct set of custom patterns (organisations share them)."""
    return Redactor(patterns)


@dataclass(frozen=True)
class EmbeddingGate:
    """The embeddings endpoint as one organisation's policy lets its texts reach it."""

    client: EmbeddingsClient | None
    policy: DlpPolicy
    external: bool

    @property
    def model(self) -> str | None:
        return self.client.model if self.client else None

    def refusal(self, classification: Classification | str) -> Refusal | None:
        """Why texts of this classification may not be sent, or None when they may."""
        classification = Classification(classification)
        if self.client is None:
            return Refusal.NO_ENDPOINT
        if self.policy.action(classification) in NEVER_EMBEDDED:
            return Refusal.POLICY
        if self.external and classification in NEVER_EXTERNAL:
            return Refusal.EXTERNAL_ENDPOINT
        return None

    def embed_source_texts(
        self, *, classification: Classification | str, texts: Sequence[str]
    ) -> list[list[float]] | None:
        """Vectors of the redacted texts, or None when nothing of this source may be sent.

        None means "full-text only". Endpoint failures propagate as
        ``EmbeddingsUnavailableError``; a scan failure as :class:`DlpScanFailedError`.
        """
        if self.refusal(classification) is not None or self.client is None:
            return None
        if not texts:
            return []
        return self.client.embed(self._redacted(texts))

    def embed_query_text(self, text: str, *, within: float | None = None) -> list[float] | None:
        """The redacted query's vector; None without an endpoint or for a blank query.
        ``within``: seconds the whole call may take (EmbeddingsClient.embed)."""
        if self.client is None or not text.strip():
            return None
        return self.client.embed(self._redacted([text]), within=within)[0]

    def _redacted(self, texts: Sequence[str]) -> list[str]:
        redactor = redactor_for(self.policy.patterns)
        try:
            return [redactor.redact(text).text for text in texts]
        except ScanError as exc:
            # The error's message never holds the text; the log names the failure only.
            logger.error("DLP scan failed; nothing sent", extra={"problem": str(exc)})
            raise DlpScanFailedError() from None


def open_gate(
    conn: psycopg.Connection,
    *,
    org_id: uuid.UUID,
    client: EmbeddingsClient | None,
    settings: Settings,
    policy: DlpPolicy | None = None,
) -> EmbeddingGate:
    """The gate for one organisation: its policy (loaded unless the caller already holds it) and
    where the configured endpoint sits."""
    return EmbeddingGate(
        client=client,
        policy=policy if policy is not None else load_policy(conn, org_id=org_id),
        external=locality(settings) == "external",
    )
