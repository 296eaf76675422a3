"""The lookup tables cannot be forged: a lookup serves only what the MAC-verified chain entry says,
and every verification (CLI, API, the scheduled job) reports the rows that disagree with it.

Each test edits a lookup row the way someone with write access to the database would, then asks
as the person the forgery is meant to serve.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from evidence_support import local_key_ring

from context_ledger.attribution.events import AttributionEvent
from context_ledger.attribution.index_check import check_lookup_rows
from context_ledger.attribution.links import link_response
from context_ledger.attribution.lookup import (
    AttributionNotFoundError,
    get_attribution,
    request_attributions,
)
from context_ledger.attribution.writer import write_attribution
from context_ledger.auth.principal import Principal
from context_ledger.cli import main
from context_ledger.db import connection
from context_ledger.evidence.chain import org_chain
from context_ledger.evidence.keys import KeyRing
from context_ledger.evidence.verify_job import verify_all_chains, verify_chain

KEY = "forgery-test-key-" + "f" * 32


@pytest.fixture
def keys(db: str, tmp_path, monkeypatch: pytest.MonkeyPatch) -> Iterator[KeyRing]:
    with local_key_ring(monkeypatch, database_url=db, home=str(tmp_path), key=KEY) as ring:
        yield ring


def _org(db: str, name: str) -> uuid.UUID:
    with psycopg.connect(db) as conn:
        return conn.execute(
            "INSERT INTO organisations (name) VALUES (%s) RETURNING id", (name,)
        ).fetchone()[0]


@pytest.fixture
def acme(db: str) -> uuid.UUID:
    return _org(db, "Acme")


@pytest.fixture
def globex(db: str) -> uuid.UUID:
    return _org(db, "Globex")


def _record(keys: KeyRing, org_id: uuid.UUID, user_id: str) -> AttributionEvent:
    event = AttributionEvent.model_validate(
        {
            "recordId": str(uuid.uuid4()),
            "category": "context_attribution",
            "orgId": str(org_id),
            "record": {
                "requestId": f"req_{uuid.uuid4().hex}",
                "attributionId": str(uuid.uuid4()),
                "userId": user_id,
            },
        }
    )
    with connection() as conn:
        write_attribution(conn, event=event, keys=keys)
    return event


def _person(org_id: uuid.UUID, user_id: str) -> Principal:
    return Principal(org_id=org_id, user_id=user_id, client_id=None)


def _edit(sql: str, params: tuple) -> None:
    with connection() as conn:
        conn.execute(sql, params)


def _problems(org_id: uuid.UUID) -> list[tuple[str, str]]:
    with connection() as conn:
        found = check_lookup_rows(conn, chain=org_chain(org_id))
    return [(p.table, p.problem) for p in found]


def test_a_row_given_another_owner_serves_no_one(keys, acme) -> None:
    event = _record(keys, acme, "alice")
    attribution_id = event.record.attribution_id
    _edit("UPDATE attributions SET user_id = 'bob' WHERE attribution_id = %s", (attribution_id,))

    for user in ("bob", "alice"):
        with connection() as conn, pytest.raises(AttributionNotFoundError):
            get_attribution(conn, _person(acme, user), attribution_id, keys=keys)
        with connection() as conn, pytest.raises(AttributionNotFoundError):
            request_attributions(conn, _person(acme, user), event.record.request_id, keys=keys)
    assert _problems(acme) == [("attributions", "the row's userId differs from the entry's")]


def test_a_row_pointing_at_another_organisations_entry_is_not_served(keys, acme, globex) -> None:
    ours = _record(keys, acme, "alice")
    theirs = _record(keys, globex, "alice")  # same user name in another tenant
    _edit(
        "UPDATE attributions AS a SET chain = t.chain, seq = t.seq FROM attributions AS t"
        " WHERE a.attribution_id = %s AND t.attribution_id = %s",
        (ours.record.attribution_id, theirs.record.attribution_id),
    )

    with connection() as conn, pytest.raises(AttributionNotFoundError):
        get_attribution(conn, _person(acme, "alice"), ours.record.attribution_id, keys=keys)
    # The moved row is reported where it now points, in the other organisation's chain.
    assert _problems(globex) == [("attributions", "the row's organisation does not own the chain")]


def test_a_row_moved_to_another_organisation_is_not_served_there(keys, acme, globex) -> None:
    ours = _record(keys, acme, "alice")
    _edit(
        "UPDATE attributions SET org_id = %s WHERE attribution_id = %s",
        (globex, ours.record.attribution_id),
    )

    with connection() as conn, pytest.raises(AttributionNotFoundError):
        get_attribution(conn, _person(globex, "alice"), ours.record.attribution_id, keys=keys)
    assert _problems(acme) == [("attributions", "the row's organisation does not own the chain")]


def test_a_forged_link_row_is_not_served_and_is_reported(keys, acme) -> None:
    event = _record(keys, acme, "alice")
    alice = _person(acme, "alice")
    with connection() as conn:
        link_response(
            conn, alice, attribution_id=event.record.attribution_id, response_id="real", keys=keys
        )
        link_response(
            conn, alice, attribution_id=event.record.attribution_id, response_id="kept", keys=keys
        )
    _edit("UPDATE attribution_links SET response_id = 'forged' WHERE response_id = 'real'", ())

    with connection() as conn:
        served = get_attribution(conn, alice, event.record.attribution_id, keys=keys)

    assert [link.response_id for link in served.links] == ["kept"]
    assert _problems(acme) == [
        ("attribution_links", "the row's responseId differs from the entry's")
    ]


def test_a_link_row_pointing_at_another_attributions_link_is_reported(keys, acme) -> None:
    first, second = _record(keys, acme, "alice"), _record(keys, acme, "alice")
    alice = _person(acme, "alice")
    with connection() as conn:
        link_response(
            conn, alice, attribution_id=first.record.attribution_id, response_id="r1", keys=keys
        )
    _edit(
        "INSERT INTO attribution_links (attribution_id, response_id, chain, seq)"
        " SELECT %s, response_id, chain, seq FROM attribution_links",
        (second.record.attribution_id,),
    )

    with connection() as conn:
        served = get_attribution(conn, alice, second.record.attribution_id, keys=keys)

    assert served.links == ()
    assert _problems(acme) == [("attribution_links", "the entry links another attribution")]


def test_an_untouched_chain_has_no_lookup_problems(keys, acme) -> None:
    event = _record(keys, acme, "alice")
    with connection() as conn:
        link_response(
            conn,
            _person(acme, "alice"),
            attribution_id=event.record.attribution_id,
            response_id="r",
            keys=keys,
        )

    assert _problems(acme) == []


def test_every_verification_reports_a_row_that_disagrees(keys, acme, capsys) -> None:
    event = _record(keys, acme, "alice")
    _edit(
        "UPDATE attributions SET user_id = 'mallory' WHERE attribution_id = %s",
        (event.record.attribution_id,),
    )

    with connection() as conn:
        verified = verify_chain(
            conn, chain=org_chain(acme), keys=keys, index_check=check_lookup_rows
        )
    daily = verify_all_chains(index_check=check_lookup_rows)
    # From the last verification on, the rows of verified entries are trusted like the entries.
    incremental = main(["verify", "--org", str(acme)])
    cli = main(["verify", "--org", str(acme), "--full"])
    out = capsys.readouterr().out

    assert verified.result.ok, "the chain itself is intact"
    assert (verified.ok, verified.first_bad_seq) == (False, 1)
    assert verified.reason.startswith("1 lookup rows disagree with their entries")
    assert daily["ok"] is False
    assert daily["failures"][0]["firstBadSeq"] == 1
    assert (incremental, cli) == (0, 1)
    assert f"attributions {event.record.attribution_id} (seq 1): the row's userId differs" in out


def test_linking_again_after_a_forged_link_row_is_idempotent_not_an_error(keys, acme) -> None:
    """The chain holds the link, its row was edited away: linking the same response again
    is the API's idempotent no-op (204), not a conflict raised to the caller (500)."""
    event = _record(keys, acme, "alice")
    alice = _person(acme, "alice")
    link = {"attribution_id": event.record.attribution_id, "response_id": "real", "keys": keys}
    with connection() as conn:
        assert link_response(conn, alice, **link) is True
    _edit("UPDATE attribution_links SET response_id = 'forged' WHERE response_id = 'real'", ())

    with connection() as conn:
        again = link_response(conn, alice, **link)

    assert again is False
    with connection() as conn:
        entries = conn.execute("SELECT count(*) AS n FROM evidence_chain").fetchone()["n"]
    assert entries == 2, "no second link entry"
    assert _problems(acme) == [
        ("attribution_links", "the row's responseId differs from the entry's")
    ]
