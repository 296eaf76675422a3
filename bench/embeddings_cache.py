"""A disk cache in front of an embeddings *service* (the model behind the HTTP endpoint), for the
quality harness: a corpus embedded once is re-ingested in seconds. It sits on the server side of
the wire, so the service's DLP gate still sees every text the client sends (bench/quality.py).
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import time
from array import array
from pathlib import Path
from typing import Any

from context_ledger.embeddings.wire import Embedded


class CachedEmbeddings:
    """An embeddings service that keeps every vector it computed in a SQLite file, keyed by
    sha256(model, text), so a dataset embedded once re-ingests in seconds.

    Only the harness uses it, in front of the in-process MiniLM service (``--embeddings-cache``);
    vectors are stored as float32, which is what the model computes. ``prompt_tokens`` counts
    the tokens the model read, so the texts served from the file count none. ``model_seconds``
    is the time the model took over the ``misses`` (what a run without the file would pay).
    """

    def __init__(self, service: Any, model: str, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.service = service
        self.model = model
        self.hits = 0
        self.misses = 0
        self.model_seconds = 0.0
        self._lock = threading.Lock()  # the server answers requests on several threads
        self._db = sqlite3.connect(folder / "embeddings.sqlite3", check_same_thread=False)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vector BLOB NOT NULL)"
        )

    def _key(self, text: str, dimensions: int | None) -> str:
        digest = hashlib.sha256(f"{self.model}\0{dimensions}\0".encode())
        digest.update(text.encode("utf-8", "surrogatepass"))
        return digest.hexdigest()

    def embed(self, texts: Any, dimensions: int | None) -> Any:
        keys = [self._key(text, dimensions) for text in texts]
        stored: dict[str, bytes] = {}
        with self._lock:
            for start in range(0, len(keys), 500):  # under SQLite's limit on bound variables
                some = keys[start : start + 500]
                marks = ",".join("?" * len(some))
                query = f"SELECT key, vector FROM vectors WHERE key IN ({marks})"
                stored.update(self._db.execute(query, some).fetchall())
        missing = list(dict.fromkeys(k for k in keys if k not in stored))
        tokens = 0
        if missing:
            text_of = dict(zip(keys, texts, strict=True))
            started = time.perf_counter()
            computed = self.service.embed([text_of[k] for k in missing], dimensions)
            took = time.perf_counter() - started
            tokens = computed.prompt_tokens
            rows = [
                (key, array("f", vector).tobytes())
                for key, vector in zip(missing, computed.vectors, strict=True)
            ]
            with self._lock:
                self._db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?)", rows)
                self._db.commit()
            stored.update(rows)
        with self._lock:
            self.hits += len(keys) - len(missing)
            self.misses += len(missing)
            if missing:
                self.model_seconds += took
        vectors = [array("f", stored[key]).tolist() for key in keys]
        return Embedded(vectors, tokens)
