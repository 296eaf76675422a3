"""OpenAI's embeddings wire format, served: one implementation for every server that speaks it.

``POST /v1/embeddings`` takes ``{"model", "input": str | [str], "encoding_format"?: "float" |
"base64", "dimensions"?}`` and answers ``{"object": "list", "data": [{"object": "embedding",
"index", "embedding"}], "model", "usage": {"prompt_tokens", "total_tokens"}}``; errors are OpenAI's
``{"error": {"message", "type", "param", "code"}}``. The embeddings function
(``http/embeddings.py``), the local stand-in server and the model gateway's stand-in provider all
answer through :func:`answer` / :func:`respond`, so what tests exercise locally is what a
deployment serves.

The vectors come from an :class:`EmbeddingsService` (``embeddings/serving.py``: the hashing
provider or all-MiniLM-L6-v2). No numpy here: the hashing path runs without it.
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

MAX_INPUTS = 2048  # OpenAI's limit per request

EncodingFormat = Literal["float", "base64"]


class InputError(ValueError):
    """The request breaks OpenAI's rules: 400 ``invalid_request_error`` naming ``param``."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class EmbeddingsRequest:
    """A validated request."""

    model: str
    texts: list[str]
    dimensions: int | None
    encoding_format: EncodingFormat


@dataclass(frozen=True)
class Embedded:
    """A service's answer: one vector per text, in order, and the tokens it read."""

    vectors: list[list[float]]
    prompt_tokens: int


class EmbeddingsService(Protocol):
    """What stands behind the endpoint."""

    def embed(self, texts: Sequence[str], dimensions: int | None) -> Embedded:
        """Vectors of ``dimensions`` (None: the service's own); InputError if it cannot."""
        ...


def error_body(
    message: str, *, kind: str, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    """OpenAI's error body."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def parse_request(body: Any) -> EmbeddingsRequest:
    """The request a decoded JSON body makes, or InputError."""
    if not isinstance(body, dict):
        raise InputError("The request body must be a JSON object.")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise InputError("you must provide a model parameter", "model")
    texts = body.get("input")
    if isinstance(texts, str):
        texts = [texts]
    if (
        not isinstance(texts, list)
        or not 1 <= len(texts) <= MAX_INPUTS
        or not all(isinstance(t, str) and t for t in texts)
    ):
        raise InputError(
            f"'input' must be a non-empty string or an array of 1 to {MAX_INPUTS} non-empty"
            " strings.",
            "input",
        )
    dimensions = body.get("dimensions")
    if dimensions is not None and (type(dimensions) is not int or dimensions < 1):
        raise InputError("'dimensions' must be a positive integer.", "dimensions")
    encoding = body.get("encoding_format", "float")
    if encoding not in ("float", "base64"):
        raise InputError("'encoding_format' must be 'float' or 'base64'.", "encoding_format")
    return EmbeddingsRequest(model, texts, dimensions, encoding)


def read_request(raw: bytes) -> EmbeddingsRequest:
    """The request in the raw bytes of a ``POST /v1/embeddings``, or InputError."""
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: nested too deep to parse
        raise InputError("We could not parse the JSON body of your request.") from None
    return parse_request(body)


def respond(body: Any, service: EmbeddingsService) -> dict[str, Any]:
    """OpenAI's answer to a decoded request body, or InputError."""
    return embed(parse_request(body), service)


def embed(request: EmbeddingsRequest, service: EmbeddingsService) -> dict[str, Any]:
    """OpenAI's answer to a validated request, or InputError (``dimensions`` the service
    cannot give)."""
    embedded = service.embed(request.texts, request.dimensions)
    return {
        "object": "list",
        "data": [
            {"object": "embedding", "index": i, "embedding": _encode(v, request.encoding_format)}
            for i, v in enumerate(embedded.vectors)
        ],
        "model": request.model,
        "usage": {"prompt_tokens": embedded.prompt_tokens, "total_tokens": embedded.prompt_tokens},
    }


def answer(raw: bytes, service: EmbeddingsService) -> tuple[int, dict[str, Any]]:
    """Status and body for the raw bytes of a ``POST /v1/embeddings``: never an exception."""
    try:
        return 200, embed(read_request(raw), service)
    except InputError as exc:
        return 400, input_error_body(exc)


def input_error_body(exc: InputError) -> dict[str, Any]:
    """OpenAI's 400 body for a request that breaks its rules."""
    return error_body(str(exc), kind="invalid_request_error", param=exc.param)


def _encode(vector: list[float], encoding: EncodingFormat) -> list[float] | str:
    if encoding == "float":
        return vector
    # OpenAI's base64: the vector's little-endian float32 bytes.
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
