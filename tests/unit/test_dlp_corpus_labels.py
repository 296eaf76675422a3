"""Integrity of the independent DLP evaluation corpus (tests/fixtures/dlp_corpus/corpus.jsonl).

These tests check the file against its own label rules only; they do not run any detector.
"""

from __future__ import annotations

import json
import tomllib
from collections import Counter
from pathlib import Path
from xml.etree import ElementTree

import pytest

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "dlp_corpus" / "corpus.jsonl"

SOURCES = {
    "env", "yaml", "ini", "toml", "json", "ci_yaml", "shell_history", "notebook",
    "connection_string", "code", "log", "markdown", "dockerfile", "k8s", "terraform",
    "properties", "xml", "html", "email_thread", "chat", "csv",
}  # fmt: skip
POSITIVE_KINDS = {
    "password", "api_key", "token", "private_key", "connection_string", "cloud_key", "email",
    "phone", "card_number", "iban", "national_id",
}  # fmt: skip
GROUPS = ("positives", "negatives", "ambiguous")
MIN_POSITIVES = 300
MIN_NEGATIVES = 300
MIN_DOCUMENTS = 100


def _load() -> list[dict]:
    records = []
    for n, line in enumerate(CORPUS.read_text(encoding="utf-8").splitlines(), start=1):
        assert line.strip(), f"line {n} is blank"
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:  # pragma: no cover - the message is the point
            pytest.fail(f"line {n} does not parse: {exc}")
    return records


RECORDS = _load()


def _spans(text: str, value: str) -> list[tuple[int, int]]:
    out, start = [], 0
    while (i := text.find(value, start)) >= 0:
        out.append((i, i + len(value)))
        start = i + 1
    return out


def test_every_line_has_the_schema():
    for rec in RECORDS:
        assert set(rec) == {"id", "source", "text", *GROUPS}, rec.get("id")
        assert isinstance(rec["id"], str)
        assert isinstance(rec["text"], str)
        assert rec["text"].strip()
        assert rec["source"] in SOURCES, rec["id"]
        for group in GROUPS:
            assert isinstance(rec[group], list), (rec["id"], group)
            for item in rec[group]:
                assert set(item) == {"value", "kind"}, (rec["id"], item)
                assert isinstance(item["value"], str), (rec["id"], item)
                assert item["value"], (rec["id"], item)
                assert isinstance(item["kind"], str), (rec["id"], item)
                assert item["kind"], (rec["id"], item)


def test_ids_are_unique():
    dupes = [i for i, n in Counter(r["id"] for r in RECORDS).items() if n > 1]
    assert not dupes


def test_positive_kinds_are_the_coarse_set():
    kinds = {p["kind"] for r in RECORDS for p in r["positives"]}
    assert kinds <= POSITIVE_KINDS, kinds - POSITIVE_KINDS
    assert kinds == POSITIVE_KINDS, f"no example of {POSITIVE_KINDS - kinds}"


def test_every_value_occurs_verbatim_in_its_text():
    missing = [
        (r["id"], g, it["value"])
        for r in RECORDS
        for g in GROUPS
        for it in r[g]
        if it["value"] not in r["text"]
    ]
    assert not missing, missing[:10]


def test_no_value_carries_two_labels():
    clashes = []
    for r in RECORDS:
        seen: dict[str, str] = {}
        for g in GROUPS:
            for it in r[g]:
                if it["value"] in seen:
                    clashes.append((r["id"], it["value"], seen[it["value"]], g))
                seen[it["value"]] = g
    assert not clashes, clashes[:10]


def test_no_positive_overlaps_a_negative_or_ambiguous_value():
    overlaps = []
    for r in RECORDS:
        text = r["text"]
        pos = [(p["value"], _spans(text, p["value"])) for p in r["positives"]]
        others = [(o["value"], _spans(text, o["value"])) for o in r["negatives"] + r["ambiguous"]]
        for pv, ps in pos:
            for ov, os_ in others:
                if any(a0 < b1 and b0 < a1 for a0, a1 in ps for b0, b1 in os_):
                    overlaps.append((r["id"], pv, ov))
    assert not overlaps, overlaps[:10]


def test_minimum_counts_and_coverage():
    assert len(RECORDS) >= MIN_DOCUMENTS
    assert sum(len(r["positives"]) for r in RECORDS) >= MIN_POSITIVES
    assert sum(len(r["negatives"]) for r in RECORDS) >= MIN_NEGATIVES
    assert {r["source"] for r in RECORDS} == SOURCES
    ambiguous = sum(len(r["ambiguous"]) for r in RECORDS)
    assert ambiguous < 0.1 * sum(len(r["positives"]) for r in RECORDS), "keep ambiguous few"


def test_every_source_has_positives_and_negatives():
    pos = Counter(r["source"] for r in RECORDS for _ in r["positives"])
    neg = Counter(r["source"] for r in RECORDS for _ in r["negatives"])
    assert all(pos[s] >= 5 for s in SOURCES), pos
    assert all(neg[s] >= 5 for s in SOURCES), neg


def _luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        v = int(ch)
        if i % 2 == 1:
            v = v * 2 - 9 if v > 4 else v * 2
        total += v
    return total % 10 == 0


def test_card_numbers_are_luhn_valid_and_order_ids_are_not():
    for r in RECORDS:
        for p in r["positives"]:
            if p["kind"] == "card_number":
                digits = "".join(c for c in p["value"] if c.isdigit())
                assert 13 <= len(digits) <= 19, (r["id"], p["value"])
                assert _luhn_ok(digits), (r["id"], p["value"])
        for n in r["negatives"]:
            if n["kind"] == "order_id":
                assert not _luhn_ok(n["value"]), (r["id"], n["value"])


def test_ibans_have_valid_check_digits():
    for r in RECORDS:
        for p in r["positives"]:
            if p["kind"] == "iban":
                compact = p["value"].replace(" ", "")
                rearranged = compact[4:] + compact[:4]
                assert int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1, p["value"]


def test_private_keys_are_whole_pem_blocks_or_their_escaped_form():
    for r in RECORDS:
        for p in r["positives"]:
            v = p["value"]
            if p["kind"] == "private_key" and "BEGIN" in v:
                assert v.startswith("-----BEGIN "), (r["id"], v[:40])
                assert v.removesuffix("\\n").endswith("PRIVATE KEY-----"), (r["id"], v[-40:])


def test_structured_documents_parse():
    """Values were escaped the way each format needs, so the files still parse."""
    for r in RECORDS:
        text = r["text"]
        if r["source"] in ("json", "notebook", "terraform") and text.lstrip()[:1] == "{":
            json.loads(text)
        elif r["source"] == "toml":
            tomllib.loads(text)
        elif r["source"] == "xml":
            ElementTree.fromstring(text)  # noqa: S314 - our own fixture, not untrusted input


def test_yaml_documents_parse():
    yaml = pytest.importorskip("yaml")

    class Loader(yaml.SafeLoader):
        pass

    # CloudFormation (!Ref, !Sub) and Ansible (!vault) tags: accept any tag
    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
    for r in RECORDS:
        if r["source"] in ("yaml", "ci_yaml", "k8s"):
            list(yaml.load_all(r["text"], Loader=Loader))
