"""Attribution events: what the writer accepts, and how a poison message is described."""

from __future__ import annotations

import json
import uuid

import pytest

from context_ledger.attribution.writer import InvalidAttributionEventError, parse_event

ORG_ID = "6f1c7c1e-0000-4000-8000-00000000000a"
ATTRIBUTION_ID = "A1B2C3D4-0000-4000-8000-000000000001"


def _body(**changes: object) -> dict:
    body = {
        "recordId": str(uuid.uuid4()),
        "category": "context_attribution",
        "orgId": ORG_ID,
        "record": {
            "requestId": "req-1",
            "attributionId": ATTRIBUTION_ID,
            "userId": "user-1",
            "lens": "code",
            "chunks": [{"chunkId": "c1", "sha256": "ab" * 32, "indexVersion": 3}],
        },
    }
    for path, value in changes.items():
        target = body
        *parents, name = path.split("__")
        for parent in parents:
            target = target[parent]
        if value is _REMOVE:
            del target[name]
        else:
            target[name] = value
    return body


_REMOVE = object()


def test_a_valid_event_keeps_extra_record_fields_and_normalises_uuids() -> None:
    event = parse_event(json.dumps(_body(record__spaceId=str(uuid.UUID(int=7)))))

    assert event.chain == f"org:{ORG_ID}"
    assert event.record_data() == {
        "requestId": "req-1",
        "attributionId": ATTRIBUTION_ID.lower(),
        "userId": "user-1",
        "spaceId": str(uuid.UUID(int=7)),
        "lens": "code",
        "chunks": [{"chunkId": "c1", "sha256": "ab" * 32, "indexVersion": 3}],
    }


def test_an_absent_space_id_is_not_recorded_as_null() -> None:
    assert "spaceId" not in parse_event(json.dumps(_body())).record_data()


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"category": "other"}, "category: literal_error"),
        ({"orgId": "not-a-uuid"}, "orgId: uuid_parsing"),
        ({"recordId": _REMOVE}, "recordId: missing"),
        ({"extra": 1}, "extra: extra_forbidden"),
        ({"record__requestId": ""}, "record.requestId: string_too_short"),
        ({"record__requestId": "r" * 129}, "record.requestId: string_too_long"),
        ({"record__requestId": 12}, "record.requestId: string_type"),
        ({"record__attributionId": _REMOVE}, "record.attributionId: missing"),
        ({"record__userId": _REMOVE}, "record.userId: missing"),
        ({"record__spaceId": "x"}, "record.spaceId: uuid_parsing"),
        ({"record__score": 0.93}, "body: value_error"),
        ({"record__chain": "main"}, "body: value_error"),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_invalid_events_are_refused_naming_the_problem(changes: dict, problem: str) -> None:
    with pytest.raises(InvalidAttributionEventError, match=problem):
        parse_event(json.dumps(_body(**changes)))


def test_a_body_that_is_not_json_is_refused() -> None:
    with pytest.raises(InvalidAttributionEventError, match="body: json_invalid"):
        parse_event("{not json")


def test_the_error_never_repeats_the_values_it_refused() -> None:
    secret = "confidential query text"

    with pytest.raises(InvalidAttributionEventError) as caught:
        parse_event(json.dumps(_body(record__requestId=secret * 10, record__score=1.5)))

    assert secret not in str(caught.value)
