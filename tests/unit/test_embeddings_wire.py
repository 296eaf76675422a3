"""OpenAI's embeddings wire format as served: exact answers, and bad input is a 400, never a 500."""

from __future__ import annotations

import base64
import json
import struct

import pytest

from context_ledger.embeddings.hashing import HashingEmbeddingProvider
from context_ledger.embeddings.serving import MAX_HASHING_DIMENSIONS, HashingService
from context_ledger.embeddings.wire import MAX_INPUTS, answer

SERVICE = HashingService(16)


def _answer(body: object) -> tuple[int, dict]:
    return answer(json.dumps(body).encode(), SERVICE)


def test_an_answer_has_openais_exact_shape() -> None:
    status, body = _answer({"model": "m", "input": ["refund policy", "two words here"]})

    expected = HashingEmbeddingProvider(16).embed(["refund policy", "two words here"])
    assert status == 200
    assert body == {
        "object": "list",
        "data": [
            {"object": "embedding", "index": 0, "embedding": expected[0]},
            {"object": "embedding", "index": 1, "embedding": expected[1]},
        ],
        "model": "m",
        "usage": {"prompt_tokens": 5, "total_tokens": 5},
    }


def test_a_single_string_input_is_one_embedding() -> None:
    _, body = _answer({"model": "m", "input": "refunds"})

    assert [item["index"] for item in body["data"]] == [0]


def test_base64_is_little_endian_float32_at_the_requested_dimensions() -> None:
    body = {"model": "m", "input": "refunds", "encoding_format": "base64", "dimensions": 8}

    encoded = _answer(body)[1]["data"][0]["embedding"]

    decoded = struct.unpack("<8f", base64.b64decode(encoded))
    assert decoded == pytest.approx(HashingEmbeddingProvider(8).embed_text("refunds"), abs=1e-7)


def test_the_same_request_always_gets_the_same_vectors() -> None:
    request = {"model": "m", "input": ["Refunds, authorised!", "refunds authorised"]}

    first, second = _answer(request)[1], answer(json.dumps(request).encode(), HashingService(16))[1]

    assert first == second
    assert first["data"][0]["embedding"] == first["data"][1]["embedding"]


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"input": ["x"]}, "model"),
        ({"model": "", "input": ["x"]}, "model"),
        ({"model": 7, "input": ["x"]}, "model"),
        ({"model": "m"}, "input"),
        ({"model": "m", "input": []}, "input"),
        ({"model": "m", "input": [""]}, "input"),
        ({"model": "m", "input": ""}, "input"),
        ({"model": "m", "input": [[1, 2, 3]]}, "input"),  # token arrays are not served
        ({"model": "m", "input": {"text": "x"}}, "input"),
        ({"model": "m", "input": ["x"] * (MAX_INPUTS + 1)}, "input"),
        ({"model": "m", "input": ["x"], "dimensions": 0}, "dimensions"),
        ({"model": "m", "input": ["x"], "dimensions": "8"}, "dimensions"),
        ({"model": "m", "input": ["x"], "dimensions": 8.0}, "dimensions"),
        ({"model": "m", "input": ["x"], "dimensions": True}, "dimensions"),
        ({"model": "m", "input": ["x"], "dimensions": MAX_HASHING_DIMENSIONS + 1}, "dimensions"),
        ({"model": "m", "input": ["x"], "encoding_format": "int8"}, "encoding_format"),
    ],
)
def test_bad_input_is_a_400_naming_the_parameter(body: dict, param: str) -> None:
    status, answered = _answer(body)

    assert status == 400
    assert answered == {
        "error": {
            "message": answered["error"]["message"],
            "type": "invalid_request_error",
            "param": param,
            "code": None,
        }
    }


@pytest.mark.parametrize(
    "raw",
    [b"", b"{", b"\xff\xfe", b"null", b"[]", b'"text"', b"42", b"NaN", b'{"model": "m"'],
)
def test_a_body_that_is_no_json_object_is_a_400(raw: bytes) -> None:
    status, answered = answer(raw, SERVICE)

    assert status == 400
    assert answered["error"]["type"] == "invalid_request_error"
    assert answered["error"]["param"] is None
