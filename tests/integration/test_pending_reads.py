"""Reads sent now and read later (db/pending.py) on a real connection, in and out of a
pipeline; and the policy and weights reads the retrieve use case sends that way."""

from __future__ import annotations

import psycopg
from psycopg.rows import dict_row

from context_ledger.auth.principal import SCOPE_CONTEXT_ADMIN, Principal
from context_ledger.db import connection
from context_ledger.db.pending import send
from context_ledger.dlp.classification import Classification
from context_ledger.dlp.policy import DlpAction, load_policy, pending_policy, replace_policy
from context_ledger.settings import load_settings
from context_ledger.spaces.service import create_organisation
from context_ledger.spaces.weights import effective_weights, pending_weights, replace_overrides


def _number(cursor: psycopg.Cursor) -> int:
    return cursor.fetchone()["n"]


def test_reads_sent_in_a_pipeline_come_back_in_any_order_after_a_later_statement(db) -> None:
    with psycopg.connect(db, row_factory=dict_row) as conn, conn.pipeline():
        first = send(conn, "SELECT %(n)s::int AS n", {"n": 1}, _number)
        second = send(conn, "SELECT %(n)s::int AS n", {"n": 2}, _number)
        later = conn.execute("SELECT 3 AS n").fetchone()["n"]
        assert (second.result(), later, first.result()) == (2, 3, 1)


def test_outside_a_pipeline_a_pending_read_is_an_ordinary_statement(db) -> None:
    with psycopg.connect(db, row_factory=dict_row) as conn:
        assert send(conn, "SELECT %(n)s::int AS n", {"n": 7}, _number).result() == 7


def test_pending_policy_and_weights_read_what_the_loaders_read(db) -> None:
    settings = load_settings()
    with connection() as conn:
        org = create_organisation(conn, name="Acme")
        admin = Principal(
            org_id=org.id, user_id="root", client_id="t", scopes=frozenset({SCOPE_CONTEXT_ADMIN})
        )
        replace_policy(conn, admin, actions={"confidential": "drop"}, patterns=())
        replace_overrides(conn, admin, overrides={"project": 2.5}, settings=settings)
    with connection() as conn, conn.pipeline():
        policy = pending_policy(conn, org_id=org.id)
        weights = pending_weights(conn, org.id, settings)
        assert policy.result() == load_policy(conn, org_id=org.id)
        assert weights.result() == effective_weights(conn, org.id, settings)
        assert weights.result()["project"] == 2.5
        assert policy.result().action(Classification.CONFIDENTIAL) is DlpAction.DROP
