"""What a request is counted against, and the rate-limit settings (parsed once, refused at start
when invalid)."""

from __future__ import annotations

import uuid

import pytest

from context_ledger.auth.principal import AuthMethod, Principal
from context_ledger.ratelimit.buckets import (
    CREDENTIAL_BURST_SECONDS,
    Bucket,
    BucketKind,
    credential_key,
    organisation_key,
    request_buckets,
)
from context_ledger.settings import SettingsError, load_settings, parse_rate_limit_overrides

ORG = uuid.UUID("5f0c3a9e-8d2b-4c1e-9f6a-2b7d4e8c1a03")
OTHER_ORG = uuid.UUID("0d6f1b2a-3c4e-4f5a-8b9c-1d2e3f4a5b6c")
SETTINGS = load_settings()


def person(user: str = "alice", client: str = "editor", method=AuthMethod.JWT) -> Principal:
    return Principal(org_id=ORG, user_id=user, client_id=client, auth_method=method)


def kinds(buckets: list[Bucket]) -> list[BucketKind]:
    return [b.kind for b in buckets]


# --- the buckets of a request ----------------------------------------------------------------


def test_a_token_counts_against_its_organisation_only() -> None:
    buckets = request_buckets(person(), "eyJ.token", SETTINGS)

    assert kinds(buckets) == [BucketKind.ORGANISATION]
    assert buckets[0].key == organisation_key(ORG)
    assert buckets[0].per_minute == 6000


def test_an_api_key_counts_against_its_organisation_and_itself() -> None:
    api_key = person(method=AuthMethod.API_KEY)

    buckets = request_buckets(api_key, "ctxl_a", SETTINGS)
    other = request_buckets(api_key, "ctxl_b", SETTINGS)

    assert kinds(buckets) == [BucketKind.ORGANISATION, BucketKind.API_KEY]
    assert buckets[1].per_minute == 1200
    assert buckets[0].key == other[0].key  # one organisation
    assert buckets[1].key != other[1].key  # two keys


def test_the_memory_api_adds_the_credential_with_a_whole_minute_of_burst() -> None:
    buckets = request_buckets(person(), "eyJ.token", SETTINGS, credential_per_minute=600)

    assert kinds(buckets) == [BucketKind.ORGANISATION, BucketKind.CREDENTIAL]
    assert buckets[1].burst_seconds == CREDENTIAL_BURST_SECONDS


def test_every_bucket_of_a_request_has_its_own_key() -> None:
    api_key = person(method=AuthMethod.API_KEY)

    buckets = request_buckets(api_key, "ctxl_a", SETTINGS, credential_per_minute=600)

    assert len({b.key for b in buckets}) == 3


def test_a_zero_limit_has_no_bucket() -> None:
    settings = load_settings(
        KEYSTONE_RATE_LIMIT_ORG_PER_MINUTE="0", KEYSTONE_RATE_LIMIT_API_KEY_PER_MINUTE="0"
    )

    assert request_buckets(person(method=AuthMethod.API_KEY), "ctxl_a", settings) == []


def test_an_override_replaces_the_organisation_rate_for_that_organisation_only() -> None:
    settings = load_settings(KEYSTONE_RATE_LIMIT_ORG_OVERRIDES=f"{ORG}=60")
    elsewhere = Principal(org_id=OTHER_ORG, user_id="alice", client_id="editor")

    assert request_buckets(person(), "t", settings)[0].per_minute == 60
    assert request_buckets(elsewhere, "t", settings)[0].per_minute == 6000


def test_an_override_of_zero_lifts_the_organisation_limit() -> None:
    settings = load_settings(KEYSTONE_RATE_LIMIT_ORG_OVERRIDES=f"{ORG}=0")

    assert request_buckets(person(), "t", settings) == []


# --- the GCRA parameters ---------------------------------------------------------------------


def test_the_burst_admits_rate_times_burst_seconds_at_once() -> None:
    bucket = Bucket(BucketKind.ORGANISATION, b"k" * 32, per_minute=6000, burst_seconds=10)

    assert bucket.emission_seconds == pytest.approx(0.01)
    assert bucket.tolerance_seconds / bucket.emission_seconds == pytest.approx(1000)


def test_a_rate_slower_than_the_burst_still_admits_one_request() -> None:
    bucket = Bucket(BucketKind.ORGANISATION, b"k" * 32, per_minute=2, burst_seconds=10)

    assert bucket.tolerance_seconds == bucket.emission_seconds == 30


def test_a_request_of_cost_n_is_charged_n_emissions_within_a_tolerance_of_at_least_that() -> None:
    bucket = Bucket(BucketKind.API_KEY, b"k" * 32, per_minute=60, burst_seconds=10)

    assert bucket.charge(4) == (pytest.approx(4.0), 10)
    assert bucket.charge(2048) == (pytest.approx(2048.0), pytest.approx(2048.0))


# --- the memory API's credential key (its spec: per API key; tokens per user and client) -----


def test_every_token_of_one_user_and_client_shares_one_count() -> None:
    assert credential_key(person(), "token-1") == credential_key(person(), "token-2")


def test_another_user_or_client_counts_apart() -> None:
    keys = {
        credential_key(person(), "t"),
        credential_key(person(user="bob"), "t"),
        credential_key(person(client="cli"), "t"),
    }

    assert len(keys) == 3


def test_ids_with_separators_cannot_collide() -> None:
    assert credential_key(person(user="a:b", client="c"), "t") != credential_key(
        person(user="a", client="b:c"), "t"
    )


def test_each_api_key_counts_apart_even_for_one_user() -> None:
    api_key = AuthMethod.API_KEY

    assert credential_key(person(method=api_key), "ctxl_a") != credential_key(
        person(method=api_key), "ctxl_b"
    )


def test_keys_are_digests_not_credentials() -> None:
    buckets = request_buckets(
        person(method=AuthMethod.API_KEY), "ctxl_secret", SETTINGS, credential_per_minute=1
    )

    for bucket in buckets:
        assert len(bucket.key) == 32
        assert b"ctxl_secret" not in bucket.key


# --- the settings ----------------------------------------------------------------------------


def test_overrides_parse_into_rates_per_organisation() -> None:
    raw = f" {ORG}=120 , {OTHER_ORG}=0,"

    assert parse_rate_limit_overrides(raw) == {ORG: 120, OTHER_ORG: 0}
    assert parse_rate_limit_overrides("") == {}


@pytest.mark.parametrize(
    "raw",
    [
        "acme=100",
        f"{ORG}",
        f"{ORG}=",
        f"{ORG}=-1",
        f"{ORG}=1.5",
        f"{ORG}=ten",
        f"{ORG}=1,{ORG}=2",
    ],
)
def test_invalid_overrides_refuse_to_start_naming_the_variable(raw: str) -> None:
    with pytest.raises(SettingsError, match="KEYSTONE_RATE_LIMIT_ORG_OVERRIDES"):
        load_settings(KEYSTONE_RATE_LIMIT_ORG_OVERRIDES=raw)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("KEYSTONE_RATE_LIMIT_ORG_PER_MINUTE", "-1"),
        ("KEYSTONE_RATE_LIMIT_API_KEY_PER_MINUTE", "many"),
        ("KEYSTONE_RATE_LIMIT_BURST_SECONDS", "0"),
    ],
)
def test_invalid_limits_refuse_to_start_naming_the_variable(variable: str, value: str) -> None:
    with pytest.raises(SettingsError, match=variable):
        load_settings(**{variable: value})
