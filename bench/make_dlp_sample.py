"""Build the labelled DLP sample: a mixed corpus with planted secrets, PII and decoys.

Writes ``bench/data/dlp/sample.jsonl``: one document per line, ``{"kind": "code|config|prose|log",
"text": ..., "labels": [{"kind", "start", "end"}]}``. Labels mark every planted secret or
personal datum; decoys (hashes, ids, versions, references, look-alike numbers) are unlabelled
and must not be flagged. Seeded, so the file is reproducible: ``python bench/make_dlp_sample.py``.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "unit"))

from dlp_plants import DECOYS, PLANTS  # noqa: E402

SAMPLE = ROOT / "bench" / "data" / "dlp" / "sample.jsonl"
DOCUMENTS = 360
SEED = 20261129

FILLER = {
    "code": [
        "def refund(order_id: str, amount: int) -> Refund:",
        "    if amount <= 0:\n        raise ValueError('amount must be positive')",
        "    return client.post(f'/orders/{order_id}/refunds', json={'amount': amount})",
        "func (s *Server) Handle(w http.ResponseWriter, r *http.Request) {",
        "const retries = 3; // see RFC 9110 section 15.6",
        "for i, chunk := range chunks {\n\tsum += len(chunk)\n}",
        "import { createHash } from 'node:crypto';",
    ],
    "config": [
        "region: eu-west-1\ntimeout: 30\nmemory_size: 1024",
        "[tool.ruff]\nline-length = 100",
        "LOG_LEVEL=info\nPORT=8080",
        '{"name": "billing", "version": "1.4.2", "private": true}',
        "image: public.ecr.aws/lambda/python:3.12",
    ],
    "prose": [
        "Refunds are authorised by the finance team within two working days.",
        "The migration moved 1,204 accounts on 2025-11-03 without downtime.",
        "Please read the runbook before paging the on-call engineer.",
        "Version 3.2 of the API deprecates the v1 endpoints; see the changelog.",
        "Our SLA is 99.9% monthly availability, measured at the load balancer.",
    ],
    "log": [
        "2026-01-01T10:00:00.123Z INFO request_id=3f2c9a served GET /health 200 in 3 ms",
        "2026-01-01T10:00:01.456Z WARN retrying upstream 10.0.3.17:443 attempt=2",
        "2026-01-01T10:00:02.789Z ERROR worker-7 crashed: exit status 137",
        "Jan 01 10:00:03 ip-172-31-5-9 sshd[2211]: Accepted publickey for deploy",
    ],
}


def build_document(rng: random.Random, kind: str) -> dict[str, object]:
    parts: list[str] = []
    labels: list[dict[str, object]] = []
    position = 0

    def add(text: str) -> None:
        nonlocal position
        parts.append(text)
        position += len(text) + 1  # the newline joining parts

    for _ in range(rng.randint(4, 12)):
        roll = rng.random()
        if roll < 0.25:
            plant_kind = rng.choice(sorted(PLANTS))
            text, secret = PLANTS[plant_kind](rng)
            start = position + text.index(secret)
            labels.append({"kind": plant_kind, "start": start, "end": start + len(secret)})
            add(text)
        elif roll < 0.4:
            add(rng.choice(DECOYS))
        else:
            add(rng.choice(FILLER[kind]))
    return {"kind": kind, "text": "\n".join(parts), "labels": labels}


def main() -> None:
    rng = random.Random(SEED)
    SAMPLE.parent.mkdir(parents=True, exist_ok=True)
    with SAMPLE.open("w") as out:
        for index in range(DOCUMENTS):
            kind = sorted(FILLER)[index % len(FILLER)]
            out.write(json.dumps(build_document(rng, kind)) + "\n")
    print(f"wrote {DOCUMENTS} documents, {SAMPLE.stat().st_size / 1024:.0f} KiB, to {SAMPLE}")


if __name__ == "__main__":
    main()
